-- activity_name: every GPU activity's name and launch, by (source, activity_id)
--
-- The names of kernels, copies and memsets, and CUDA graph launches traced as a whole, side by
-- side with what finds their launch: a query joins it on both keys, so DuckDB hashes the few
-- rows it needs (gap_top's gap ends, a Perfetto window's activities). A query that needs
-- nothing else of those activities reads them here alone, not also from `activity`: each of
-- the two views scans every kernel and joins its name (gap_top at 5M kernels: 0.15 s each).
-- Three left joins, each with a constant on the activity's side (`a.source = 'kernel' AND
-- ...`), were planned as nested loops when few rows were expected: 13.6 s for a 10 ms
-- Perfetto window at 1M kernels, 26.6 s for gap_top --top 1000. No join to `activity` here:
-- joined first to every activity, names cost a 1M-kernel report over 120 s in an earlier
-- attempt.
--
-- Reads: graph_launch, kernel, memcpy
--
-- Columns:
--   source           VARCHAR   kernel, memcpy, memset or graph (as in activity)
--   activity_id      BIGINT    activity_id in the activity view
--   name             VARCHAR   kernel name, copy kind, or graph launch name
--   class            VARCHAR   as in activity
--   global_pid       BIGINT    nsys global process id
--   correlation_id   BIGINT    joins the launching API call within the process
CREATE VIEW activity_name AS
SELECT 'kernel' AS source, kernel_id AS activity_id, name, class, global_pid, correlation_id
FROM kernel
UNION ALL
SELECT source, memcpy_id, name, 'memcpy', global_pid, correlation_id FROM memcpy
UNION ALL
SELECT 'graph', graph_launch_id, name, 'graph', global_pid, correlation_id FROM graph_launch
