-- kineto_mpi_rank: the job's rank (distributedInfo.rank) as the host process's MPI rank
--
-- The gpu view reads a process's rank from MPI_RANKS, keyed by a globalTid of the process.
--
-- Reads: kineto_doc, kineto_host
-- Writes: MPI_RANKS
INSERT INTO MPI_RANKS (globalTid, rank)
SELECT h.gpid | (h.pid & 16777215), TRY_CAST(d.distributedInfo->>'rank' AS BIGINT)
FROM kineto_doc AS d CROSS JOIN kineto_host AS h
WHERE TRY_CAST(d.distributedInfo->>'rank' AS BIGINT) IS NOT NULL
