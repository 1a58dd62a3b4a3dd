-- kineto_comm_group: the process group of each NCCL kernel, and the job's size, from the trace
--
-- PyTorch's profiler writes a collective's process group on its NCCL kernel's args (as on the
-- record_param_comms CPU op): `Group size`, `Process Group Ranks` (a list, as text: "[0, 1]")
-- and `Process Group Name` ("0" for the default group); its top-level distributedInfo holds
-- `world_size` and, from about PyTorch 2.2, `pg_config`, the job's process groups (pg_name,
-- pg_size, ranks). A kernel's group size is, in order: `Group size` (torch_group_size), the
-- length of `Process Group Ranks` (torch_pg_ranks), the pg_size of the pg_config entry its
-- `Process Group Name` names (torch_pg_config). A size below 1, or a list that is empty (the
-- profiler's `wait` op writes `[]`), says nothing. comm_group is the process group's name;
-- comm_ranks its global ranks, comma-separated in the order listed (`Process Group Ranks`,
-- else the pg_config entry's `ranks`), comm_desc its description (`Process Group
-- Description`, else the entry's `pg_desc`: "default_pg", or what the job named it).
-- job_world keeps world_size and the number of pg_config entries (NULL without pg_config):
-- collective falls back on world_size only when the job has a single process group.
--
-- Reads: kineto_doc, kineto_gpu_event
-- Writes: comm_group_launch, job_world
INSERT INTO comm_group_launch (
    globalPid, correlationId, group_size, group_source, comm_group, comm_ranks, comm_desc
)
WITH config AS (
    SELECT unnest(from_json(distributedInfo->'pg_config', '["json"]')) AS pg
    FROM kineto_doc
    WHERE json_type((distributedInfo->'pg_config')) = 'ARRAY'
),
groups AS (
    SELECT pg->>'pg_name' AS pg_name, max(TRY_CAST(pg->>'pg_size' AS BIGINT)) AS pg_size,
        any_value(array_to_string(TRY_CAST(pg->'ranks' AS BIGINT[]), ',')) AS pg_ranks,
        any_value(pg->>'pg_desc') AS pg_desc
    FROM config
    WHERE TRY_CAST((pg->>'pg_size') AS BIGINT) >= 1
    GROUP BY ALL
),
args AS (
    SELECT global_pid, correlation_id,
        TRY_CAST(args->>'Group size' AS BIGINT) AS group_size,
        len(TRY_CAST(args->>'Process Group Ranks' AS BIGINT[])) AS ranks_listed,
        array_to_string(TRY_CAST(args->>'Process Group Ranks' AS BIGINT[]), ',') AS ranks_text,
        args->>'Process Group Name' AS pg_name,
        args->>'Process Group Description' AS pg_desc
    FROM kineto_gpu_event
    WHERE cat = 'kernel' AND correlation_id IS NOT NULL
        AND ((args->>'Group size') IS NOT NULL OR (args->>'Process Group Ranks') IS NOT NULL
            OR (args->>'Process Group Name') IS NOT NULL)
),
sized AS (
    SELECT a.global_pid, a.correlation_id, a.pg_name,
        CASE WHEN a.ranks_listed >= 1 THEN a.ranks_text ELSE g.pg_ranks END AS comm_ranks,
        coalesce(a.pg_desc, g.pg_desc) AS comm_desc,
        CASE WHEN a.group_size >= 1 THEN a.group_size
            WHEN a.ranks_listed >= 1 THEN a.ranks_listed
            ELSE g.pg_size END AS group_size,
        CASE WHEN a.group_size >= 1 THEN 'torch_group_size'
            WHEN a.ranks_listed >= 1 THEN 'torch_pg_ranks'
            WHEN g.pg_size IS NOT NULL THEN 'torch_pg_config' END AS group_source
    FROM args AS a
    LEFT JOIN groups AS g ON g.pg_name = a.pg_name
)
SELECT global_pid, correlation_id, group_size, group_source, pg_name, comm_ranks, comm_desc
FROM sized
WHERE group_size IS NOT NULL OR pg_name IS NOT NULL;

INSERT INTO job_world (world_size, process_groups, source)
SELECT TRY_CAST(distributedInfo->>'world_size' AS BIGINT),
    CASE WHEN json_type(distributedInfo->'pg_config') = 'ARRAY'
        THEN json_array_length(distributedInfo->'pg_config') END,
    'distributedInfo.world_size'
FROM kineto_doc
WHERE TRY_CAST(distributedInfo->>'world_size' AS BIGINT) >= 1
