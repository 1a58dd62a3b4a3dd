-- activity_middle: a window in the middle of the trace that holds about $activities activities
--
-- The timeline's window when the trace has no steps: it starts at the start of the activity
-- that sorts ($count - $activities) / 2 by start time, over all GPUs, and ends at the start of
-- the one $activities later, so it holds about that many whatever the trace's size. A trace with
-- no more than $activities activities gets its whole span. Activities with end <= start carry no
-- time and are left out. `first_ns` is where offsets in the report count from.
--
-- Reads: activity
--
-- Params:
--   $activities   BIGINT   1200   activities the window should hold
--
-- Columns:
--   first_ns          BIGINT    first activity start over all GPUs
--   last_ns           BIGINT    last activity end over all GPUs
--   activity_count    BIGINT    activities with end > start
--   start_ns          BIGINT    window start
--   end_ns            BIGINT    window end
WITH timed AS (
    SELECT start_ns, end_ns FROM activity WHERE end_ns > start_ns
),
totals AS (
    SELECT min(start_ns) AS first_ns, max(end_ns) AS last_ns, count(*) AS activity_count
    FROM timed
),
bounds AS (
    SELECT (activity_count - $activities) // 2 AS lo, (activity_count + $activities) // 2 AS hi
    FROM totals
),
ordered AS (
    SELECT start_ns, row_number() OVER (ORDER BY start_ns) - 1 AS position
    FROM timed
    WHERE (SELECT activity_count FROM totals) > $activities
)
SELECT t.first_ns::BIGINT AS first_ns, t.last_ns::BIGINT AS last_ns,
    t.activity_count::BIGINT AS activity_count,
    coalesce((SELECT min(start_ns) FROM ordered, bounds WHERE position = lo), t.first_ns)::BIGINT
        AS start_ns,
    coalesce((SELECT min(start_ns) FROM ordered, bounds WHERE position = hi), t.last_ns)::BIGINT
        AS end_ns
FROM totals AS t
WHERE t.activity_count > 0
ORDER BY start_ns
