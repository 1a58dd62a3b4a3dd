-- comm_channel: which communicator each GPU's communication channel belongs to, and from what
--
-- A channel is collective.channel: the process group the trace names at the kernel, else the
-- kernel's stream. A communicator is the set of channels, one per member GPU, that run the
-- same collectives. Where the trace names the process group (a PyTorch profiler trace), the
-- channels of that name are one communicator (comm_source `trace metadata`); likewise where
-- NCCL's payloads name the communicator (commHash, the same on every rank: `nccl payload`).
-- Otherwise a
-- channel's communicator is found from its instances (comm_match: the channels on other GPUs
-- whose instances end with its own; comm_source `matched instances`). A channel that matches no other (one GPU in the file, or
-- a capture that cut its instances apart) is a communicator of its own, known only by its
-- stream (comm_source `stream`); its other members are not in this trace.
-- communicator names the communicator once for all its members: the process group, else the
-- channel with its member GPUs (`stream 31 @ 1000:0,1004:4`; nsysreport.sections.communicators
-- names them by rank for the report). The group size is collective's (the trace's record
-- first), except where collective could only count the GPUs of the trace that ran the op
-- (gpus_in_trace, or unknown) and the channel's members were matched in a trace of the whole
-- job (comm_world.partial false): then it is the member count (`matched instances`), the
-- communicator's own size rather than that of everyone running the op. A channel whose kernels
-- carry several sizes takes the one of its most trusted source (the trace's record, then the
-- world size, then a count), the largest among equals. Materialised (CREATE TABLE) when the trace is opened.
--
-- Reads: collective, comm_match, comm_world
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   channel        VARCHAR   collective.channel
--   communicator   VARCHAR   the communicator's id in this trace (above)
--   comm_source    VARCHAR   trace metadata, nccl payload, matched instances or stream
--   member_gpus    BIGINT    the communicator's GPUs in this trace (1: only this one)
--   members        VARCHAR   those GPUs as pid:device_id, comma-separated, in order
--   comm_ranks     VARCHAR   the process group's global ranks as recorded ("0,1"), else NULL
--   comm_desc      VARCHAR   the process group's description as recorded, else NULL
--   group_size     BIGINT    ranks in the communicator as collective sizes it (most kernels)
--   group_source   VARCHAR   where group_size comes from (collective.group_source), else NULL
CREATE TABLE comm_channel AS
WITH channels AS (
    SELECT pid, device_id, channel,
        CASE WHEN channel LIKE 'process group %' THEN channel[15:]
            WHEN channel LIKE 'NCCL communicator %' THEN channel END AS comm_group,
        CASE WHEN channel LIKE 'NCCL communicator %' THEN 'nccl payload'
            ELSE 'trace metadata' END AS named_by,
        any_value(comm_ranks) AS comm_ranks, any_value(comm_desc) AS comm_desc,
        -- the size its most trusted kernels carry (the trace's own record first)
        arg_max(group_size, (trust, group_size)) AS group_size,
        arg_max(group_source, (trust, group_size)) AS group_source
    FROM (
        SELECT *, CASE WHEN group_source LIKE 'torch%' OR group_source = 'nccl_payload' THEN 3
            WHEN group_source = 'world_size'
            THEN 2 WHEN group_source IS NOT NULL THEN 1 ELSE 0 END AS trust
        FROM collective
    )
    GROUP BY pid, device_id, channel
),
named AS (
    SELECT comm_group,
        string_agg(pid || ':' || device_id, ',' ORDER BY pid, device_id) AS members,
        count(*) AS member_gpus
    FROM (SELECT DISTINCT comm_group, pid, device_id FROM channels WHERE comm_group IS NOT NULL)
    GROUP BY comm_group
)
SELECT c.pid, c.device_id, c.channel,
    CASE WHEN c.comm_group IS NOT NULL THEN c.channel
        ELSE c.channel || ' @ ' || m.members END AS communicator,
    CASE WHEN c.comm_group IS NOT NULL THEN c.named_by
        WHEN m.member_gpus > 1 THEN 'matched instances'
        ELSE 'stream' END AS comm_source,
    coalesce(n.member_gpus, m.member_gpus) AS member_gpus,
    coalesce(n.members, m.members) AS members,
    c.comm_ranks, c.comm_desc,
    CASE WHEN m.member_gpus > 1 AND NOT w.partial AND coalesce(c.group_source, 'gpus_in_trace')
        = 'gpus_in_trace' THEN m.member_gpus ELSE c.group_size END AS group_size,
    CASE WHEN m.member_gpus > 1 AND NOT w.partial AND coalesce(c.group_source, 'gpus_in_trace')
        = 'gpus_in_trace' THEN 'matched instances' ELSE c.group_source END AS group_source
FROM channels AS c
CROSS JOIN comm_world AS w
LEFT JOIN named AS n ON n.comm_group = c.comm_group
LEFT JOIN comm_match AS m ON m.pid = c.pid AND m.device_id = c.device_id AND m.channel = c.channel
