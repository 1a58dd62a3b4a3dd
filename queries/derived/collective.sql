-- collective: one row per communication kernel, with the collective op it implements
--
-- The op comes from, in order: the innermost PyTorch `nccl:<op>` range around its launch (a
-- SendRecv kernel can implement an all-to-all), the innermost NCCL API range (ncclAllReduce,
-- ncclSend, ...), else the kernel name. Ops are normalised to AllReduce, AllGather,
-- ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv, Barrier or Generic. Message bytes come
-- from the NCCL range's payload (for a PyTorch profiler trace: the kernel's `In msg nelems` x
-- its dtype's size, kineto_nccl_range), else from --comm-bytes OP=BYTES, else are NULL.
-- `ordinal` numbers a GPU's instances of one op by start time, to match instances across GPUs.
--
-- The group size (ranks of the communicator the kernel ran on; bus bandwidth's n) comes from,
-- in order of trust: what the trace records at the kernel (comm_group_launch: a PyTorch
-- profiler trace's `Group size`, `Process Group Ranks` or its process group's pg_size:
-- torch_group_size, torch_pg_ranks, torch_pg_config); the job's size (comm_world.world_size:
-- world_size) when the trace lists no more than one process group, so that every collective
-- runs on the whole job; else, when the trace holds the whole job (comm_world.partial is
-- false), the number of GPUs in the trace that ran the op, if two or more (gpus_in_trace).
-- Otherwise it is unknown (NULL): a trace of some of the job's ranks cannot count the others,
-- and a "collective" on one GPU of unknown group is not a group of one. Ahead of every rule but
-- the kernel's own record: NCCL's extended payload of the NCCL API range around the launch
-- (nccl_payload, an export made with --include-blobs=true) names the communicator (its
-- commHash), whose rank count its init call recorded (nccl_payload), source `nccl_payload`.
-- The channel is the kernel's communicator as this GPU sees it: the process group the trace
-- names (`process group NAME`), else the NCCL communicator its payload names (`NCCL
-- communicator 0x...`, the same on every rank), else its stream (`stream N`: NCCL runs each communicator's
-- kernels on a stream of their own, and PyTorch gives each process group one per device). A
-- kernel the trace records no group for, on a stream whose other kernels all name one process
-- group, is on that group's channel (channel_source `stream of process group`: the real MI300
-- trace's five warm-up kernels without args). Its group size stays what the rules above give.
-- comm_channel tells which GPUs' channels form one communicator. `layer` is here for the
-- per-layer collective analyses, which each joined activity_range again before (5M kernels:
-- 1.6 s for the three, against about 0.4 s more here). Materialised (CREATE TABLE) when the
-- trace is opened: the collective analyses read it. `late_start` marks a GPU's first
-- collective that spun for seconds waiting for a late-starting rank (late_start_wait): it keeps
-- its place among the instances (the k-th instance is the k-th on every rank), but no straggler
-- match, collective or communicator statistic counts it.
--
-- Reads: activity_range, comm_bytes_option, comm_group_launch, comm_world, kernel,
--   late_start_wait, nccl_payload
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   kernel_id      BIGINT    the kernel's kernel_id
--   start_ns       BIGINT    kernel start
--   end_ns         BIGINT    kernel end
--   duration_ns    BIGINT    kernel duration (0 when end <= start)
--   op             VARCHAR   normalised collective op
--   op_source      VARCHAR   torch_collective, nccl_collective or kernel
--   message_bytes  BIGINT    message size in bytes, NULL when unknown
--   ordinal        BIGINT    1 = this GPU's first instance of this op
--   group_size     BIGINT    ranks in the kernel's communicator, NULL when unknown
--   group_source   VARCHAR   where group_size comes from (above), NULL when it is unknown
--   comm_group     VARCHAR   the process group's name as the trace records it, else NULL
--   stream_id      BIGINT    the kernel's stream
--   channel        VARCHAR   `process group NAME` (comm_group, else its stream's), or `stream N`
--   channel_source VARCHAR   trace metadata, nccl payload, stream of process group, or stream
--   comm_ranks     VARCHAR   the process group's global ranks ("0,1"), as recorded, else NULL
--   comm_desc      VARCHAR   the process group's description, as recorded, else NULL
--   layer          VARCHAR   the label of the innermost layer range around its launch
--                            (activity_range), NULL outside layers
--   late_start     BOOLEAN   a wait for a late-starting rank (late_start_wait)
CREATE TABLE collective AS
WITH named AS (
    SELECT k.pid, k.device_id, k.kernel_id, k.start_ns, k.end_ns,
        greatest(k.end_ns - k.start_ns, 0) AS duration_ns, k.global_pid, k.correlation_id,
        k.stream_id,
        t.label AS torch_label, n.label AS nccl_label, n.payload AS nccl_bytes,
        n.range_id AS nccl_range_id, k.name,
        l.label AS layer
    FROM kernel AS k
    LEFT JOIN activity_range AS t
        ON t.source = 'kernel' AND t.activity_id = k.kernel_id AND t.role = 'torch_collective'
    LEFT JOIN activity_range AS n
        ON n.source = 'kernel' AND n.activity_id = k.kernel_id AND n.role = 'nccl_collective'
    LEFT JOIN activity_range AS l
        ON l.source = 'kernel' AND l.activity_id = k.kernel_id AND l.role = 'layer'
    WHERE k.class = 'comm'
),
resolved AS (
    SELECT *,
        coalesce(torch_label, nccl_label, name) AS op_text,
        CASE WHEN torch_label IS NOT NULL THEN 'torch_collective'
            WHEN nccl_label IS NOT NULL THEN 'nccl_collective' ELSE 'kernel' END AS op_source
    FROM named
),
ops AS (
    -- Normalise each distinct text once: a trace has millions of kernels but few names.
    SELECT op_text,
        CASE
            WHEN regexp_matches(op_text, '(?i)all_?to_?all|deep_ep|dpsk::ep') THEN 'AllToAll'
            WHEN regexp_matches(op_text, '(?i)all_?gather') THEN 'AllGather'
            WHEN regexp_matches(op_text, '(?i)reduce_?scatter') THEN 'ReduceScatter'
            WHEN regexp_matches(op_text, '(?i)all_?reduce|cross_device_reduce') THEN 'AllReduce'
            WHEN regexp_matches(op_text, '(?i)broadcast|bcast') THEN 'Broadcast'
            WHEN regexp_matches(op_text, '(?i)send|recv') THEN 'SendRecv'
            WHEN regexp_matches(op_text, '(?i)barrier') THEN 'Barrier'
            WHEN regexp_matches(op_text, '(?i)reduce') THEN 'Reduce'
            ELSE 'Generic'
        END AS op
    FROM (SELECT DISTINCT op_text FROM resolved)
),
normalised AS (
    SELECT r.*, o.op FROM resolved AS r JOIN ops AS o ON o.op_text = r.op_text
),
op_gpus AS (
    SELECT op, count(DISTINCT (pid, device_id)) AS gpus FROM normalised GROUP BY op
),
launch_group AS (
    -- One row per launch: the kernels of one graph launch share its correlation id.
    SELECT DISTINCT ON (globalPid, correlationId) *
    FROM comm_group_launch
    ORDER BY globalPid, correlationId, group_size DESC NULLS LAST, group_source, comm_group
),
payload_comm AS (
    -- Each communicator NCCL's payloads name, with the rank count its init calls recorded.
    SELECT comm_hash, max(nranks) AS nranks FROM nccl_payload GROUP BY comm_hash
),
payload_range AS (
    SELECT p.range_id, p.comm_hash, c.nranks
    FROM nccl_payload AS p
    JOIN payload_comm AS c ON c.comm_hash = p.comm_hash
),
sized AS (
    SELECT x.*, l.comm_group, l.comm_ranks, l.comm_desc, pr.comm_hash,
        CASE WHEN l.group_size IS NOT NULL THEN l.group_size
            WHEN pr.nranks IS NOT NULL THEN pr.nranks
            WHEN w.world_size IS NOT NULL AND coalesce(w.process_groups, 1) = 1
                THEN w.world_size
            WHEN NOT w.partial AND g.gpus >= 2 THEN g.gpus END AS group_size,
        CASE WHEN l.group_size IS NOT NULL THEN l.group_source
            WHEN pr.nranks IS NOT NULL THEN 'nccl_payload'
            WHEN w.world_size IS NOT NULL AND coalesce(w.process_groups, 1) = 1
                THEN 'world_size'
            WHEN NOT w.partial AND g.gpus >= 2 THEN 'gpus_in_trace' END AS group_source
    FROM normalised AS x
    JOIN op_gpus AS g ON g.op = x.op
    CROSS JOIN comm_world AS w
    LEFT JOIN launch_group AS l ON l.globalPid = x.global_pid AND l.correlationId = x.correlation_id
    LEFT JOIN payload_range AS pr ON pr.range_id = x.nccl_range_id
),
stream_group AS (
    -- the one process group a stream's kernels name, where they name exactly one
    SELECT pid, device_id, stream_id, min(comm_group) AS comm_group
    FROM sized
    WHERE comm_group IS NOT NULL
    GROUP BY ALL
    HAVING count(DISTINCT comm_group) = 1
),
ordinals AS (
    -- The window sorts only what it needs; the row's other columns join back by kernel_id
    -- (5M kernels: the window over every column cost 1.05 operator-s).
    SELECT kernel_id,
        row_number() OVER (PARTITION BY pid, device_id, op ORDER BY start_ns, kernel_id)
            AS ordinal
    FROM normalised
)
SELECT x.pid, x.device_id, x.kernel_id, x.start_ns, x.end_ns, x.duration_ns, x.op, x.op_source,
    coalesce(x.nccl_bytes, o.bytes) AS message_bytes, n.ordinal,
    x.group_size, x.group_source, x.comm_group, x.stream_id,
    CASE WHEN x.comm_group IS NOT NULL THEN 'process group ' || x.comm_group
        WHEN x.comm_hash IS NOT NULL THEN 'NCCL communicator ' || x.comm_hash
        WHEN sg.comm_group IS NOT NULL THEN 'process group ' || sg.comm_group
        ELSE 'stream ' || coalesce(x.stream_id::VARCHAR, '?') END AS channel,
    CASE WHEN x.comm_group IS NOT NULL THEN 'trace metadata'
        WHEN x.comm_hash IS NOT NULL THEN 'nccl payload'
        WHEN sg.comm_group IS NOT NULL THEN 'stream of process group'
        ELSE 'stream' END AS channel_source,
    x.comm_ranks, x.comm_desc, x.layer, w.kernel_id IS NOT NULL AS late_start
FROM sized AS x
JOIN ordinals AS n ON n.kernel_id = x.kernel_id
LEFT JOIN comm_bytes_option AS o ON o.op = x.op
LEFT JOIN stream_group AS sg
    ON sg.pid = x.pid AND sg.device_id = x.device_id AND sg.stream_id = x.stream_id
LEFT JOIN late_start_wait AS w ON w.kernel_id = x.kernel_id
