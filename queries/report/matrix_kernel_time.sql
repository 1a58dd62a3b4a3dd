-- matrix_kernel_time: the summed time of every GEMM and attention kernel, over all GPUs
--
-- What the Compute efficiency section's coverage divides by: the share of matrix-kernel time
-- whose FLOPs the recorded shapes give. Summed durations (kernel_gpu_total), as the calls'
-- time is, so the two compare like for like. No row without such kernels.
--
-- Reads: kernel_gpu_total
--
-- Columns:
--   total_ns   BIGINT    summed durations of the gemm and attention kernels
SELECT sum(total_ns)::BIGINT AS total_ns
FROM kernel_gpu_total
WHERE class IN ('gemm', 'attention')
HAVING count(*) > 0
ORDER BY total_ns  -- one row at most
