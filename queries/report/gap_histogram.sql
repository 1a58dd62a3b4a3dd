-- gap_histogram: per-GPU idle gaps counted in five length buckets, <10us to >=10ms
--
-- Every GPU gets all five buckets (zero when empty), in bucket order, so tables and charts
-- line up across GPUs. A bucket holds gaps with lower_ns <= length < upper_ns.
--
-- Reads: gpu_segment
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   bucket       VARCHAR   <10us, 10-100us, 100us-1ms, 1-10ms, >=10ms
--   lower_ns     BIGINT    smallest length in the bucket
--   upper_ns     BIGINT    first length above the bucket (NULL for the last)
--   gap_count    BIGINT    gaps in the bucket
--   gap_ns       BIGINT    their total length
WITH buckets(bucket, lower_ns, upper_ns) AS (
    VALUES ('<10us', 0, 10000), ('10-100us', 10000, 100000), ('100us-1ms', 100000, 1000000),
        ('1-10ms', 1000000, 10000000), ('>=10ms', 10000000, NULL)
),
gpus AS (SELECT DISTINCT pid, device_id FROM gpu_segment),
gaps AS (SELECT pid, device_id, duration_ns FROM gpu_segment WHERE idle)
SELECT
    g.pid,
    g.device_id,
    b.bucket,
    b.lower_ns::BIGINT AS lower_ns,
    b.upper_ns::BIGINT AS upper_ns,
    count(x.duration_ns) AS gap_count,
    coalesce(sum(x.duration_ns), 0)::BIGINT AS gap_ns
FROM gpus AS g
CROSS JOIN buckets AS b
LEFT JOIN gaps AS x
    ON x.pid = g.pid AND x.device_id = g.device_id
    AND x.duration_ns >= b.lower_ns AND (b.upper_ns IS NULL OR x.duration_ns < b.upper_ns)
GROUP BY g.pid, g.device_id, b.bucket, b.lower_ns, b.upper_ns
ORDER BY g.pid, g.device_id, b.lower_ns
