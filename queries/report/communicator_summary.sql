-- communicator_summary: per GPU and communicator: its collectives, time, exposed time, bandwidth
--
-- One row per GPU and communication channel (collective.channel: the process group the trace
-- names, else the stream), with the communicator comm_channel finds for it and where from.
-- total_ns sums kernel durations; exposed_ns is the union of the channel's kernels minus the
-- union of all compute on the GPU (grouped_island, grouping `comm`): collectives of two
-- communicators running at once, with no compute under them, are exposed in both. Bus
-- bandwidth is the bytes' bus traffic over the kernel time of the kernels with a size: each
-- kernel's bytes x 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
-- all-to-all, x 1 otherwise, with n the communicator's group size (comm_channel.group_size);
-- NULL when no size is known, or n is and an op needs it. in_layer counts the kernels launched
-- inside a layer range (the role heuristics of nsysreport.sections.communicators read it).
-- A wait for a late-starting rank (collective.late_start) counts in none of these.
--
-- Reads: collective, comm_channel, grouped_island
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   channel        VARCHAR   collective.channel
--   communicator   VARCHAR   comm_channel.communicator
--   comm_source    VARCHAR   trace metadata, nccl payload, matched instances or stream
--   member_gpus    BIGINT    the communicator's GPUs in this trace
--   members        VARCHAR   those GPUs as pid:device_id, comma-separated
--   comm_ranks     VARCHAR   the process group's global ranks as recorded, else NULL
--   comm_desc      VARCHAR   the process group's description as recorded, else NULL
--   group_size     BIGINT    ranks in the communicator, NULL when unknown
--   group_source   VARCHAR   where group_size comes from, NULL when unknown
--   streams        VARCHAR   the channel's stream ids, comma-separated
--   ops            VARCHAR   its collective ops, most time first, comma-separated
--   count          BIGINT    kernels
--   total_ns       BIGINT    sum of durations
--   comm_ns        BIGINT    union of its kernels
--   exposed_ns     BIGINT    union of its kernels minus all compute on the GPU
--   total_bytes    BIGINT    sum of message sizes, NULL when none is known
--   algbw_gbps     DOUBLE    algorithm bandwidth, GB/s: bytes over the time of the sized kernels
--   busbw_gbps     DOUBLE    bus bandwidth, GB/s, NULL when sizes or the group size are unknown
--   in_layer       BIGINT    kernels launched inside a layer range
WITH kernels AS (
    SELECT c.*,
        c.message_bytes * CASE
            WHEN c.op = 'AllReduce' THEN 2.0 * (g.group_size - 1) / g.group_size
            WHEN c.op IN ('AllGather', 'ReduceScatter', 'AllToAll')
                THEN 1.0 * (g.group_size - 1) / g.group_size
            ELSE 1.0 END AS bus_bytes
    FROM collective AS c
    JOIN comm_channel AS g
        ON g.pid = c.pid AND g.device_id = c.device_id AND g.channel = c.channel
    WHERE NOT c.late_start
),
per_op AS (
    SELECT pid, device_id, channel, op, sum(duration_ns) AS op_ns
    FROM kernels
    GROUP BY ALL
),
stats AS (
    SELECT pid, device_id, channel,
        string_agg(DISTINCT stream_id::VARCHAR, ',' ORDER BY stream_id::VARCHAR) AS streams,
        count(*) AS count,
        sum(duration_ns)::BIGINT AS total_ns,
        sum(message_bytes)::BIGINT AS total_bytes,
        sum(bus_bytes) AS bus_bytes,
        sum(duration_ns) FILTER (message_bytes IS NOT NULL) AS timed_ns,
        count(*) FILTER (layer IS NOT NULL) AS in_layer,
        bool_or(message_bytes IS NOT NULL AND bus_bytes IS NULL) AS size_needed
    FROM kernels
    GROUP BY ALL
),
ops AS (
    SELECT pid, device_id, channel, string_agg(op, ',' ORDER BY op_ns DESC, op) AS ops
    FROM per_op
    GROUP BY ALL
),
exposed AS (
    SELECT pid, device_id, group_key AS channel, sum(duration_ns)::BIGINT AS comm_ns,
        sum(exposed_ns)::BIGINT AS exposed_ns
    FROM grouped_island
    WHERE grouping = 'comm'
    GROUP BY ALL
)
SELECT s.pid, s.device_id, s.channel, g.communicator, g.comm_source, g.member_gpus, g.members,
    g.comm_ranks, g.comm_desc, g.group_size, g.group_source, s.streams, o.ops, s.count,
    s.total_ns, coalesce(e.comm_ns, 0)::BIGINT AS comm_ns,
    coalesce(e.exposed_ns, 0)::BIGINT AS exposed_ns, s.total_bytes,
    s.total_bytes / nullif(s.timed_ns, 0) AS algbw_gbps,
    CASE WHEN NOT s.size_needed THEN s.bus_bytes / nullif(s.timed_ns, 0) END AS busbw_gbps,
    s.in_layer
FROM stats AS s
JOIN comm_channel AS g ON g.pid = s.pid AND g.device_id = s.device_id AND g.channel = s.channel
JOIN ops AS o ON o.pid = s.pid AND o.device_id = s.device_id AND o.channel = s.channel
LEFT JOIN exposed AS e ON e.pid = s.pid AND e.device_id = s.device_id AND e.channel = s.channel
ORDER BY s.pid, s.device_id, s.total_ns DESC, s.channel
