-- graph_node_origin: for each kernel replayed from a CUDA graph, where its node was created
--
-- Materialised (CREATE TABLE) when the trace is opened: the NVTX projection reads it.
-- Under --cuda-graph-trace=node a replayed kernel carries the graphNodeId of its node in the
-- executable graph. nsys records the host-side creation of every node in CUDA_GRAPH_NODE_EVENTS
-- (schema 2.x: CUDA_GRAPH_EVENTS): a node made by cloning or instantiating another points to it
-- by originalGraphNodeId. Following those links back to a node that points nowhere gives the
-- node created during stream capture, on the capturing thread, inside the NVTX ranges that were
-- open around the captured call - the kernel's "virtual launch" for layer attribution (as
-- TensorRT-LLM's layer-wise benchmark parser does; see docs/export-format.md). Node ids are
-- taken per process; when a node has several events, its first one is its creation. Kernels
-- whose chain does not reach a recorded creation are left out (they keep their cudaGraphLaunch).
--
-- Reads: CUDA_GRAPH_EVENTS, CUDA_GRAPH_NODE_EVENTS, kernel
--
-- Columns:
--   kernel_id         BIGINT    kernel_id in the kernel view
--   pid               BIGINT    process id
--   device_id         BIGINT    nsys GPU id the kernel ran on
--   origin_node_id    BIGINT    the captured node the kernel's node was cloned from
--   origin_tid        BIGINT    nsys global thread id that created it
--   origin_start_ns   BIGINT    creation event start
--   origin_end_ns     BIGINT    creation event end
CREATE TABLE graph_node_origin AS
WITH RECURSIVE node_events AS (
    SELECT globalTid, graphNodeId, originalGraphNodeId, start, "end"
    FROM CUDA_GRAPH_NODE_EVENTS
    UNION ALL
    SELECT globalTid, graphNodeId, originalGraphNodeId, start, "end"
    FROM CUDA_GRAPH_EVENTS
    WHERE graphNodeId IS NOT NULL
),
nodes AS (
    SELECT (globalTid >> 24) & 16777215 AS pid, graphNodeId AS node_id,
        min(originalGraphNodeId) AS original_id,
        arg_min(globalTid, start) AS global_tid,
        min(start) AS start_ns,
        arg_min(coalesce("end", start), start) AS end_ns
    FROM node_events
    WHERE globalTid IS NOT NULL
    GROUP BY ALL
),
used AS (
    SELECT DISTINCT pid, graph_node_id AS node_id FROM kernel WHERE graph_node_id IS NOT NULL
),
chain AS (
    -- From each node a kernel ran as, one hop per link back; at most 16 hops (a link cycle in a
    -- damaged export ends there instead of running forever).
    SELECT n.pid, n.node_id AS leaf_id, n.node_id, n.original_id, 0 AS hops
    FROM nodes AS n
    JOIN used AS u ON u.pid = n.pid AND u.node_id = n.node_id
    UNION ALL
    SELECT c.pid, c.leaf_id, n.node_id, n.original_id, c.hops + 1
    FROM chain AS c
    JOIN nodes AS n ON n.pid = c.pid AND n.node_id = c.original_id
    WHERE c.hops < 16
),
roots AS (
    SELECT pid, leaf_id, arg_max(node_id, hops) AS root_id, bool_or(original_id IS NULL) AS whole
    FROM chain
    GROUP BY pid, leaf_id
)
SELECT k.kernel_id, k.pid, k.device_id, r.root_id AS origin_node_id, n.global_tid AS origin_tid,
    n.start_ns AS origin_start_ns, n.end_ns AS origin_end_ns
FROM kernel AS k
JOIN roots AS r ON r.pid = k.pid AND r.leaf_id = k.graph_node_id
JOIN nodes AS n ON n.pid = r.pid AND n.node_id = r.root_id
WHERE r.whole
