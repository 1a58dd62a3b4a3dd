-- gap_summary: per-GPU idle gaps: count, total, median, p99 and longest
--
-- A gap is a maximal stretch inside [first start, last end] of a GPU where none of its
-- activities runs; leading and trailing time is not a gap, so gap_ns equals idle_ns of
-- gpu_breakdown. Percentiles are discrete (an actual gap length). GPUs without gaps have
-- count 0 and NULL percentiles.
--
-- Reads: gpu_segment
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   gap_count    BIGINT    number of gaps
--   gap_ns       BIGINT    sum of gap lengths
--   p50_ns       BIGINT    median gap length
--   p99_ns       BIGINT    99th percentile gap length
--   max_ns       BIGINT    longest gap
WITH gpus AS (SELECT DISTINCT pid, device_id FROM gpu_segment),
gaps AS (SELECT pid, device_id, duration_ns FROM gpu_segment WHERE n_all = 0)
SELECT
    g.pid,
    g.device_id,
    count(x.duration_ns) AS gap_count,
    coalesce(sum(x.duration_ns), 0)::BIGINT AS gap_ns,
    quantile_disc(x.duration_ns, 0.5) AS p50_ns,
    quantile_disc(x.duration_ns, 0.99) AS p99_ns,
    max(x.duration_ns) AS max_ns
FROM gpus AS g
LEFT JOIN gaps AS x ON x.pid = g.pid AND x.device_id = g.device_id
GROUP BY g.pid, g.device_id
ORDER BY g.pid, g.device_id
