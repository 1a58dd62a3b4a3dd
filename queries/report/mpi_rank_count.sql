-- mpi_rank_count: how many MPI_RANKS rows the trace holds; no row when it holds none
--
-- Any row at all means the gpu view's ranks are MPI ranks (or, for a PyTorch profiler trace,
-- its distributedInfo.rank), which nsysreport.ranks trusts before any other evidence.
--
-- Reads: MPI_RANKS
--
-- Columns:
--   mpi_rank_rows   BIGINT    rows of MPI_RANKS (one per thread that MPI numbered)
SELECT count(*) AS mpi_rank_rows
FROM MPI_RANKS
HAVING count(*) > 0
ORDER BY mpi_rank_rows
