-- activity: every GPU activity (kernel, memcpy, memset) with its one class
--
-- The unit of the interval algebra in docs/metrics.md. `activity_id` is unique only together with
-- `source`. Memcpys and memsets are class `memcpy`. A CUDA graph launch traced as a whole
-- (--cuda-graph-trace=graph) is one activity of source and class `graph`: busy GPU time whose
-- contents are unknown. On a GPU whose first collective waited seconds for a late-starting
-- rank (late_start_wait), every activity is clipped to the GPU's analysed window, which starts
-- when that wait ended (`cut_ns`): one that ends by then becomes a row of no time at the cut
-- (it still counts), one that runs across it keeps its part after it. Every time of the report
-- reads this view, so none holds the wait; the kernel and collective tables keep the times as
-- recorded (the collective instances still match across ranks).
--
-- Reads: graph_launch, kernel, late_start_wait, memcpy
--
-- Columns:
--   source           VARCHAR   kernel, memcpy, memset or graph
--   activity_id      BIGINT    kernel_id, memcpy_id or graph_launch_id
--   pid              BIGINT    process id
--   global_pid       BIGINT    nsys global process id
--   device_id        BIGINT    nsys GPU id
--   stream_id        BIGINT    CUPTI stream id
--   correlation_id   BIGINT    joins the launching API call within the process
--   start_ns         BIGINT    GPU start
--   end_ns           BIGINT    GPU end
--   class            VARCHAR   comm, attention, gemm, other, memcpy or graph
CREATE VIEW activity AS
WITH recorded AS (
    SELECT 'kernel' AS source, kernel_id AS activity_id, pid, global_pid, device_id, stream_id,
        correlation_id, start_ns, end_ns, class
    FROM kernel
    UNION ALL
    SELECT source, memcpy_id, pid, global_pid, device_id, stream_id, correlation_id, start_ns,
        end_ns, 'memcpy'
    FROM memcpy
    UNION ALL
    SELECT 'graph', graph_launch_id, pid, global_pid, device_id, stream_id, correlation_id,
        start_ns, end_ns, 'graph'
    FROM graph_launch
),
cut AS (SELECT DISTINCT pid, device_id, cut_ns FROM late_start_wait)
SELECT a.source, a.activity_id, a.pid, a.global_pid, a.device_id, a.stream_id,
    a.correlation_id,
    -- greatest() passes over a NULL: a GPU without a wait keeps its times.
    greatest(a.start_ns, c.cut_ns) AS start_ns, greatest(a.end_ns, c.cut_ns) AS end_ns, a.class
FROM recorded AS a
LEFT JOIN cut AS c ON c.pid = a.pid AND c.device_id = a.device_id
