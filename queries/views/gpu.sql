-- gpu: each GPU of the trace, keyed (pid, device_id), with its rank, host and GPU name
--
-- One process driving one GPU is a rank. The rank is the MPI rank of the process when the
-- export has MPI_RANKS, else the position of (pid, device_id) in sorted order. Host from
-- TARGET_INFO_SYSTEM_ENV (Hostname); GPU name from TARGET_INFO_GPU, absent in some exports.
--
-- Reads: MPI_RANKS, TARGET_INFO_GPU, TARGET_INFO_SYSTEM_ENV, activity
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   rank         BIGINT    rank number
--   host         VARCHAR   host name, NULL when the export does not say
--   gpu_name     VARCHAR   GPU model, NULL when the export does not say
CREATE VIEW gpu AS
WITH keys AS (SELECT DISTINCT pid, device_id FROM activity),
mpi AS (
    SELECT (globalTid >> 24) & 16777215 AS pid, min(rank) AS rank
    FROM MPI_RANKS
    GROUP BY ALL
),
host AS (SELECT min(value) AS host FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'),
gpu_name AS (SELECT id, min(name) AS name FROM TARGET_INFO_GPU GROUP BY id)
SELECT
    k.pid,
    k.device_id,
    coalesce(m.rank, row_number() OVER (ORDER BY k.pid, k.device_id) - 1) AS rank,
    (SELECT host FROM host) AS host,
    g.name AS gpu_name
FROM keys AS k
LEFT JOIN mpi AS m ON m.pid = k.pid
LEFT JOIN gpu_name AS g ON g.id = k.device_id
