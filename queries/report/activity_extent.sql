-- activity_extent: the first activity start and the last activity end over all GPUs
--
-- Where the timeline's offsets count from, when its window is a step or a chosen range:
-- activity_middle without the sort that finds its middle window. It takes no parameter, so a
-- cached trace keeps its row, and a run with another --top or --timeline-step reads it
-- instead of scanning every activity again. Activities with end <= start carry no time and are
-- left out; no row without a timed activity.
--
-- Reads: activity
--
-- Columns:
--   first_ns          BIGINT    first activity start over all GPUs
--   last_ns           BIGINT    last activity end over all GPUs
--   activity_count    BIGINT    activities with end > start
SELECT min(start_ns)::BIGINT AS first_ns, max(end_ns)::BIGINT AS last_ns,
    count(*)::BIGINT AS activity_count
FROM activity
WHERE end_ns > start_ns
HAVING count(*) > 0
ORDER BY first_ns  -- one row at most
