-- gpu_rank: each GPU of the trace with the rank, host and GPU name the report labels it by
--
-- The gpu view's rows in (pid, device_id) order: the report model keys its sections by this
-- pair, and nsysreport.ranks reads the ranks a file claims for its GPUs from it.
--
-- Reads: gpu
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   rank         BIGINT    MPI rank of the process, else the GPU's position in sorted order
--   host         VARCHAR   host name, NULL when the export does not say
--   gpu_name     VARCHAR   GPU model, NULL when the export does not say
SELECT pid, device_id, rank, host, gpu_name
FROM gpu
ORDER BY pid, device_id
