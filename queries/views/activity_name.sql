-- activity_name: every GPU activity's name, by (source, activity_id)
--
-- The names of kernels, copies and memsets, and CUDA graph launches traced as a whole, side by
-- side and nothing else: a query joins it on both keys, so DuckDB hashes the few rows it needs
-- (gap_top's gap ends, a Perfetto window's activities). Three left joins, each with a constant
-- on the activity's side (`a.source = 'kernel' AND ...`), were planned as nested loops when
-- few rows were expected: 13.6 s for a 10 ms Perfetto window at 1M kernels, 26.6 s for
-- gap_top --top 1000. No join to `activity` here: joined first to every activity, names cost
-- a 1M-kernel report over 120 s in an earlier attempt.
--
-- Reads: graph_launch, kernel, memcpy
--
-- Columns:
--   source        VARCHAR   kernel, memcpy, memset or graph (as in activity)
--   activity_id   BIGINT    activity_id in the activity view
--   name          VARCHAR   kernel name, copy kind, or graph launch name
CREATE VIEW activity_name AS
SELECT 'kernel' AS source, kernel_id AS activity_id, name FROM kernel
UNION ALL
SELECT source, memcpy_id, name FROM memcpy
UNION ALL
SELECT 'graph', graph_launch_id, name FROM graph_launch
