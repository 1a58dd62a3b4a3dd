-- collective_summary: per GPU and collective op: count, latency percentiles, exposed time, bandwidth
--
-- total_ns sums kernel durations; exposed_ns is the union of the op's kernels minus the union
-- of all compute on the GPU. When message sizes are known (NCCL NVTX payloads, a PyTorch
-- profiler trace's message sizes, or --comm-bytes), algorithm bandwidth is bytes / kernel time
-- and bus bandwidth scales it by 2(n-1)/n for all-reduce and (n-1)/n for all-gather,
-- reduce-scatter and all-to-all (NCCL's convention, as nccl-tests reports it), n being the group size: the ranks of the communicator,
-- as collective derives it per kernel (group_source says from what), or the kernel's
-- communicator's where the trace could only count GPUs and comm_channel's matched members say
-- otherwise (the communicators section gives each communicator its own n). A GPU's kernels of one
-- op normally agree; when they do not, the size most of them carry is taken (a tie: the
-- larger), and group_source is the source most of those kernels name (a tie: the first by
-- name). Kernels of unknown size do not vote; when none has a size, group_gpus is NULL and so
-- is the bus bandwidth of all-reduce, all-gather, reduce-scatter and all-to-all (every other op's factor
-- is 1 whatever n is: its bus bandwidth is the algorithm bandwidth). A first collective that
-- waited for a late-starting rank (collective.late_start) is no instance of its op here: its
-- length is how far apart the ranks started, not a transfer.
--
-- Reads: collective, comm_channel, grouped_island
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
--   group_gpus     BIGINT    group size: ranks of the op's communicator, NULL when unknown
--   group_source   VARCHAR   where group_gpus comes from (collective.group_source), or NULL
--   total_bytes    BIGINT    sum of message sizes, NULL when unknown
--   algbw_gbps     DOUBLE    algorithm bandwidth, GB/s (bytes per ns)
--   busbw_gbps     DOUBLE    bus bandwidth, GB/s, NULL when sizes or the group size are unknown
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
    WHERE NOT late_start
    GROUP BY pid, device_id, op
),
sized AS (
    -- the communicator's own size where the trace could only count the GPUs running the op
    -- and matched instances tell a different one (comm_channel: TP and DP groups of one job)
    SELECT c.pid, c.device_id, c.op,
        CASE WHEN g.group_source = 'matched instances' AND g.group_size <> c.group_size
            THEN g.group_size ELSE c.group_size END AS group_size,
        CASE WHEN g.group_source = 'matched instances' AND g.group_size <> c.group_size
            THEN g.group_source ELSE c.group_source END AS group_source
    FROM collective AS c
    JOIN comm_channel AS g
        ON g.pid = c.pid AND g.device_id = c.device_id AND g.channel = c.channel
),
votes AS (
    SELECT pid, device_id, op, group_size, group_source, count(*) AS kernels
    FROM sized
    WHERE group_size IS NOT NULL
    GROUP BY ALL
),
sizes AS (
    SELECT pid, device_id, op, group_size, sum(kernels) AS kernels
    FROM votes
    GROUP BY ALL
),
chosen AS (
    SELECT DISTINCT ON (pid, device_id, op) pid, device_id, op, group_size AS group_gpus
    FROM sizes
    ORDER BY pid, device_id, op, kernels DESC, group_size DESC
),
source AS (
    SELECT DISTINCT ON (v.pid, v.device_id, v.op) v.pid, v.device_id, v.op, v.group_source
    FROM votes AS v
    JOIN chosen AS c
        ON c.pid = v.pid AND c.device_id = v.device_id AND c.op = v.op
        AND c.group_gpus = v.group_size
    ORDER BY v.pid, v.device_id, v.op, v.kernels DESC, v.group_source
),
exposed AS (
    SELECT pid, device_id, group_key AS op, sum(exposed_ns)::BIGINT AS exposed_ns
    FROM grouped_island
    WHERE grouping = 'op'
    GROUP BY pid, device_id, group_key
)
SELECT s.pid, s.device_id, s.op, s.count, s.total_ns, s.mean_ns, s.p50_ns, s.p99_ns, s.max_ns,
    coalesce(e.exposed_ns, 0)::BIGINT AS exposed_ns,
    c.group_gpus,
    g.group_source,
    s.total_bytes,
    s.total_bytes / nullif(s.timed_ns, 0) AS algbw_gbps,
    s.total_bytes / nullif(s.timed_ns, 0) * CASE
        WHEN s.op = 'AllReduce' THEN 2.0 * (c.group_gpus - 1) / c.group_gpus
        WHEN s.op IN ('AllGather', 'ReduceScatter', 'AllToAll')
            THEN 1.0 * (c.group_gpus - 1) / c.group_gpus
        ELSE 1.0 END AS busbw_gbps
FROM stats AS s
LEFT JOIN chosen AS c ON c.pid = s.pid AND c.device_id = s.device_id AND c.op = s.op
LEFT JOIN source AS g ON g.pid = s.pid AND g.device_id = s.device_id AND g.op = s.op
LEFT JOIN exposed AS e ON e.pid = s.pid AND e.device_id = s.device_id AND e.op = s.op
ORDER BY s.pid, s.device_id, s.total_ns DESC, s.op
