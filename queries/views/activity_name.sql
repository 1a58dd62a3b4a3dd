-- activity_name: every GPU activity with the name the report shows for it
--
-- The activity view's columns and the name from the activity's own table: the kernel's
-- demangled name, [CUDA memcpy <kind>], [CUDA memset] or the graph launch's. A view: a query
-- that needs names for a few activities (the ends of gaps, a window) joins it by key, and
-- pays for no other name.
--
-- Reads: activity, graph_launch, kernel, memcpy
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
--   name             VARCHAR   kernel name, [CUDA memcpy <kind>], [CUDA memset] or the graph's
CREATE VIEW activity_name AS
SELECT a.*, coalesce(k.name, m.name, g.name) AS name
FROM activity AS a
LEFT JOIN kernel AS k ON a.source = 'kernel' AND k.kernel_id = a.activity_id
LEFT JOIN memcpy AS m ON a.source = m.source AND m.memcpy_id = a.activity_id
LEFT JOIN graph_launch AS g ON a.source = 'graph' AND g.graph_launch_id = a.activity_id
