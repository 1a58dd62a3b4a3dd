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
stats AS (
    -- Summed per GPU before the join (joining every gap to its GPU first built a hash table
    -- of all gaps: 0.35 operator-s at 5M kernels).
    SELECT pid, device_id, count(*) AS gap_count, sum(duration_ns) AS gap_ns,
        quantile_disc(duration_ns, 0.5) AS p50_ns, quantile_disc(duration_ns, 0.99) AS p99_ns,
        max(duration_ns) AS max_ns
    FROM gpu_segment
    WHERE idle
    GROUP BY pid, device_id
)
SELECT
    g.pid,
    g.device_id,
    coalesce(x.gap_count, 0) AS gap_count,
    coalesce(x.gap_ns, 0)::BIGINT AS gap_ns,
    x.p50_ns,
    x.p99_ns,
    x.max_ns
FROM gpus AS g
LEFT JOIN stats AS x ON x.pid = g.pid AND x.device_id = g.device_id
ORDER BY g.pid, g.device_id
