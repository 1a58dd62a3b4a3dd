-- comm_world: how many ranks the job has as far as the trace tells, and whether it holds them all
--
-- Collective bus bandwidth needs the size of the communicator, which a trace of some of a
-- job's ranks cannot count from its own GPUs. The job's size (world_size) is what the trace
-- records: a PyTorch profiler trace's distributedInfo.world_size (job_world), else a
-- launcher's size variable in the environment nsys recorded (WORLD_SIZE, OMPI_COMM_WORLD_SIZE,
-- SLURM_NTASKS, PMI_SIZE, MV2_COMM_WORLD_SIZE; the largest when several processes were
-- recorded). ranks_seen is the fewest ranks the job can have given the ranks the trace names:
-- the highest MPI_RANKS rank (distributedInfo.rank for a PyTorch profiler trace) or captured
-- rank variable (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK, PMIX_RANK,
-- MV2_COMM_WORLD_RANK, as nsysreport.ranks reads them) plus one. The capture is partial when
-- the job has more ranks (world_size or ranks_seen, the larger) than the trace has GPUs: one rank's
-- file of an 8-rank job. One row. Materialised (CREATE TABLE) when the trace is opened.
--
-- Reads: META_DATA_CAPTURE, MPI_RANKS, gpu, job_world
--
-- Columns:
--   gpus            BIGINT    GPUs in the trace
--   world_size      BIGINT    ranks of the job as the trace records them, NULL when it does not
--   world_source    VARCHAR   where world_size comes from, NULL when it is unknown
--   process_groups  BIGINT    process groups the trace lists (pg_config), NULL when it does not
--   ranks_seen      BIGINT    highest rank the trace names plus one, NULL when it names none
--   partial         BOOLEAN   the job has more ranks than the trace has GPUs
CREATE TABLE comm_world AS
WITH env AS (
    SELECT regexp_extract(value, '^(\w+)="?(\d+)"?$', 1) AS variable,
        TRY_CAST(regexp_extract(value, '^(\w+)="?(\d+)"?$', 2) AS BIGINT) AS number
    FROM META_DATA_CAPTURE
    WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE'
        AND regexp_full_match(value, '\w+="?\d+"?')
),
env_size AS (
    -- Of variables giving the same size (torchrun under SLURM records WORLD_SIZE and
    -- SLURM_NTASKS), the first of this list names it, whatever order the file lists them in.
    SELECT max(e.number) AS world_size, arg_max(e.variable, (e.number, -v.priority)) AS variable
    FROM env AS e
    JOIN (
        VALUES ('WORLD_SIZE', 1), ('OMPI_COMM_WORLD_SIZE', 2), ('SLURM_NTASKS', 3),
            ('PMI_SIZE', 4), ('MV2_COMM_WORLD_SIZE', 5)
    ) AS v(variable, priority) ON v.variable = e.variable
    WHERE e.number >= 1
),
recorded AS (
    SELECT max(world_size) AS world_size, max(process_groups) AS process_groups,
        arg_max(source, world_size) AS source
    FROM job_world
),
seen AS (
    SELECT max(r) + 1 AS ranks_seen
    FROM (
        SELECT rank AS r FROM MPI_RANKS
        UNION ALL
        SELECT number FROM env
        WHERE variable IN (
            'RANK', 'OMPI_COMM_WORLD_RANK', 'SLURM_PROCID', 'PMI_RANK', 'PMIX_RANK',
            'MV2_COMM_WORLD_RANK'
        )
    )
    -- MPI's ranks are C ints: a larger number (RANK=9223372036854775807) names no rank, and
    -- one more than it would overflow.
    WHERE r BETWEEN 0 AND 2147483646
),
known AS (
    SELECT (SELECT count(*) FROM gpu) AS gpus,
        coalesce(c.world_size, e.world_size) AS world_size,
        CASE WHEN c.world_size IS NOT NULL THEN c.source
            WHEN e.world_size IS NOT NULL THEN e.variable || ' in the capture environment'
        END AS world_source,
        c.process_groups,
        s.ranks_seen
    FROM recorded AS c CROSS JOIN env_size AS e CROSS JOIN seen AS s
)
SELECT gpus, world_size, world_source, process_groups, ranks_seen,
    greatest(coalesce(world_size, 0), coalesce(ranks_seen, 0)) > gpus AS partial
FROM known
