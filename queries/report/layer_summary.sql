-- layer_summary: per GPU and layer: kernels, compute, GEMM, comm and exposed comm, GPU time
--
-- An activity belongs to the innermost layer range containing its launch; the rest are
-- `(outside layers)` (occurrences 0, gpu_time_ns NULL). Unions are over that layer's kernels;
-- exposed_comm_ns is the layer's comm union minus the union of ALL compute on the GPU, so an
-- all-reduce hidden behind the next layer's GEMM counts as hidden. gpu_time_ns sums, over the
-- layer's occurrences, the window from its first activity start to its last activity end.
-- Rows are ranked within each GPU by exposed communication, most first. A kernel replayed from a
-- CUDA graph belongs to the layer range open when its node was captured (graph_node_origin), so
-- one range covers every replay of the graph: each replay (cudaGraphLaunch) of a range is an
-- occurrence of its own, as NVIDIA's nvtx_gpu_proj_trace keeps one projected range per launch.
--
-- Reads: activity, activity_range, graph_node_origin, grouped_island, nvtx_role_range
--
-- Columns:
--   pid               BIGINT    process id
--   device_id         BIGINT    nsys GPU id
--   layer             VARCHAR   layer label, or (outside layers)
--   layer_index       BIGINT    the number in the label (for natural order), NULL outside
--   occurrences       BIGINT    ranges of this layer (each graph replay: one) with GPU work
--   kernel_count      BIGINT    kernels launched inside the layer
--   compute_ns        BIGINT    union of the layer's compute kernels
--   gemm_ns           BIGINT    union of the layer's GEMM kernels
--   comm_ns           BIGINT    union of the layer's communication kernels
--   exposed_comm_ns   BIGINT    layer comm union minus all compute on the GPU
--   exposed_memcpy_ns BIGINT    layer copy union minus all compute and comm on the GPU
--   gpu_time_ns       BIGINT    sum over occurrences of the projected window length
--   exposed_rank      BIGINT    1 = the GPU's layer with the most exposed communication
WITH members AS (
    SELECT a.pid, a.device_id, a.source, a.start_ns, a.end_ns, ar.range_id,
        -- the graph launch a replayed kernel ran in (-1: launched in the range itself)
        CASE WHEN o.kernel_id IS NULL THEN -1 ELSE a.correlation_id END AS replay
    FROM activity AS a
    LEFT JOIN activity_range AS ar
        ON ar.source = a.source AND ar.activity_id = a.activity_id AND ar.role = 'layer'
    LEFT JOIN graph_node_origin AS o ON a.source = 'kernel' AND o.kernel_id = a.activity_id
),
occurrences AS (
    -- One row per layer occurrence (range and replay; outside layers: no range), which one
    -- hash aggregate over the activities gives, on integer keys alone; the per-layer figures
    -- then sum these few rows. (5M kernels: a count(DISTINCT) over the activities cost a
    -- second pass, 0.35 operator-s; the label among the keys made the query 1.57 s, 1.00 s
    -- with the label joined to the occurrences.)
    SELECT pid, device_id, range_id, replay,
        count(*) FILTER (source = 'kernel') AS kernel_count,
        max(greatest(end_ns, start_ns)) - min(start_ns) AS window_ns
    FROM members
    GROUP BY pid, device_id, range_id, replay
),
windows AS (
    -- Each occurrence's layer: its range's label (a range's label and label_index are its
    -- own, so they join the few occurrences, not every activity).
    SELECT o.*, coalesce(r.label, '(outside layers)') AS layer, r.label_index AS layer_index
    FROM occurrences AS o
    LEFT JOIN nvtx_role_range AS r ON r.range_id = o.range_id AND r.role = 'layer'
),
counts AS (
    SELECT pid, device_id, layer, min(layer_index) AS layer_index,
        count(*) FILTER (range_id IS NOT NULL) AS occurrences,
        sum(kernel_count)::BIGINT AS kernel_count,
        sum(window_ns) FILTER (range_id IS NOT NULL)::BIGINT AS gpu_time_ns
    FROM windows
    GROUP BY pid, device_id, layer
),
unions AS (
    SELECT pid, device_id, group_key AS layer,
        sum(duration_ns) FILTER (part = 'compute') AS compute_ns,
        sum(duration_ns) FILTER (part = 'gemm') AS gemm_ns,
        sum(duration_ns) FILTER (part = 'comm') AS comm_ns,
        sum(exposed_ns) FILTER (part = 'comm') AS exposed_comm_ns,
        sum(exposed_ns) FILTER (part = 'memcpy') AS exposed_memcpy_ns
    FROM grouped_island
    WHERE grouping = 'layer'
    GROUP BY pid, device_id, group_key
),
joined AS (
    SELECT c.pid, c.device_id, c.layer, c.layer_index, c.occurrences, c.kernel_count,
        coalesce(u.compute_ns, 0)::BIGINT AS compute_ns,
        coalesce(u.gemm_ns, 0)::BIGINT AS gemm_ns,
        coalesce(u.comm_ns, 0)::BIGINT AS comm_ns,
        coalesce(u.exposed_comm_ns, 0)::BIGINT AS exposed_comm_ns,
        coalesce(u.exposed_memcpy_ns, 0)::BIGINT AS exposed_memcpy_ns,
        c.gpu_time_ns
    FROM counts AS c
    LEFT JOIN unions AS u ON u.pid = c.pid AND u.device_id = c.device_id AND u.layer = c.layer
    WHERE c.kernel_count > 0
)
SELECT *, row_number() OVER (
    PARTITION BY pid, device_id ORDER BY exposed_comm_ns DESC, layer_index NULLS LAST, layer
) AS exposed_rank
FROM joined
ORDER BY pid, device_id, exposed_rank
