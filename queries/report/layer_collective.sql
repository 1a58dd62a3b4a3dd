-- layer_collective: per GPU and collective op, how many of its calls run inside layer ranges
-- and per layer occurrence (Megatron-style tensor parallelism: 2 all-reduces per layer)
--
-- A call belongs to the innermost layer range containing its launch (activity_range). The
-- layer occurrences are counted as layer_summary counts them: every range of a layer with GPU
-- work, and every CUDA graph replay of it (graph_node_origin) as an occurrence of its own.
--
-- Reads: activity, activity_range, collective, graph_node_origin
--
-- Columns:
--   pid                 BIGINT    process id
--   device_id           BIGINT    nsys GPU id
--   op                  VARCHAR   collective op
--   in_layers           BIGINT    the op's calls launched inside a layer range
--   layer_occurrences   BIGINT    layer occurrences on the GPU (all layers)
--   sized               BIGINT    of the calls in layers, those whose message size is known
--   mean_bytes          DOUBLE    their mean message size, NULL when none is known
WITH members AS (
    SELECT a.pid, a.device_id, a.source, a.activity_id, ar.range_id,
        CASE WHEN o.kernel_id IS NULL THEN -1 ELSE a.correlation_id END AS replay
    FROM activity AS a
    JOIN activity_range AS ar
        ON ar.source = a.source AND ar.activity_id = a.activity_id AND ar.role = 'layer'
    LEFT JOIN graph_node_origin AS o ON a.source = 'kernel' AND o.kernel_id = a.activity_id
),
occurrences AS (
    SELECT pid, device_id, count(DISTINCT (range_id, replay)) AS layer_occurrences
    FROM members
    GROUP BY pid, device_id
),
ops AS (
    SELECT m.pid, m.device_id, c.op, count(*) AS in_layers, count(c.message_bytes) AS sized,
        avg(c.message_bytes) AS mean_bytes
    FROM members AS m
    JOIN collective AS c ON m.source = 'kernel' AND c.kernel_id = m.activity_id
    GROUP BY m.pid, m.device_id, c.op
)
SELECT o.pid, o.device_id, o.op, o.in_layers, n.layer_occurrences, o.sized, o.mean_bytes
FROM ops AS o
JOIN occurrences AS n ON n.pid = o.pid AND n.device_id = o.device_id
ORDER BY o.pid, o.device_id, o.op
