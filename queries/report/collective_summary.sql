-- collective_summary: per GPU and collective op: count, latency percentiles, exposed time, bandwidth
--
-- total_ns sums kernel durations; exposed_ns is the union of the op's kernels minus the union
-- of all compute on the GPU. When message sizes are known (NCCL NVTX payloads or
-- --comm-bytes), algorithm bandwidth is bytes / kernel time and bus bandwidth scales it by
-- 2(n-1)/n for all-reduce and (n-1)/n for all-gather and reduce-scatter (NCCL's
-- convention), n being the number of GPUs in the trace that ran the op.
--
-- Reads: collective, grouped_island
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   op             VARCHAR   collective op
--   count          BIGINT    kernels
--   total_ns       BIGINT    sum of durations
--   mean_ns        DOUBLE    mean duration
--   p50_ns         BIGINT    median duration
--   p99_ns         BIGINT    99th percentile duration
--   max_ns         BIGINT    longest
--   exposed_ns     BIGINT    union of the op's kernels minus all compute on the GPU
--   group_gpus     BIGINT    GPUs in the trace that ran this op
--   total_bytes    BIGINT    sum of message sizes, NULL when unknown
--   algbw_gbps     DOUBLE    algorithm bandwidth, GB/s (bytes per ns)
--   busbw_gbps     DOUBLE    bus bandwidth, GB/s
WITH stats AS (
    SELECT pid, device_id, op,
        count(*) AS count,
        sum(duration_ns)::BIGINT AS total_ns,
        avg(duration_ns) AS mean_ns,
        quantile_disc(duration_ns, 0.5) AS p50_ns,
        quantile_disc(duration_ns, 0.99) AS p99_ns,
        max(duration_ns) AS max_ns,
        sum(message_bytes)::BIGINT AS total_bytes,
        sum(duration_ns) FILTER (message_bytes IS NOT NULL) AS timed_ns
    FROM collective
    GROUP BY pid, device_id, op
),
groups AS (SELECT op, count(*) AS group_gpus FROM stats GROUP BY op),
exposed AS (
    SELECT pid, device_id, group_key AS op, sum(exposed_ns)::BIGINT AS exposed_ns
    FROM grouped_island
    WHERE grouping = 'op'
    GROUP BY pid, device_id, group_key
)
SELECT s.pid, s.device_id, s.op, s.count, s.total_ns, s.mean_ns, s.p50_ns, s.p99_ns, s.max_ns,
    coalesce(e.exposed_ns, 0)::BIGINT AS exposed_ns,
    g.group_gpus,
    s.total_bytes,
    s.total_bytes / nullif(s.timed_ns, 0) AS algbw_gbps,
    s.total_bytes / nullif(s.timed_ns, 0) * CASE
        WHEN s.op = 'AllReduce' THEN 2.0 * (g.group_gpus - 1) / g.group_gpus
        WHEN s.op IN ('AllGather', 'ReduceScatter') THEN 1.0 * (g.group_gpus - 1) / g.group_gpus
        ELSE 1.0 END AS busbw_gbps
FROM stats AS s
JOIN groups AS g ON g.op = s.op
LEFT JOIN exposed AS e ON e.pid = s.pid AND e.device_id = s.device_id AND e.op = s.op
ORDER BY s.pid, s.device_id, s.total_ns DESC, s.op
