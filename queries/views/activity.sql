-- activity: every GPU activity (kernel, memcpy, memset) with its one class
--
-- The unit of the interval algebra in docs/metrics.md. `activity_id` is unique only together with
-- `source`. Memcpys and memsets are class `memcpy`. A CUDA graph launch traced as a whole
-- (--cuda-graph-trace=graph) is one activity of source and class `graph`: busy GPU time whose
-- contents are unknown.
--
-- Reads: graph_launch, kernel, memcpy
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
