-- kernel_top: the kernels (and copies) that take the most GPU time, per class, over all GPUs
--
-- Time here is the sum of durations (as nsys's cuda_gpu_kern_sum reports it), so kernels that
-- overlap each other both count. pct_of_class is the share of the class's summed time.
-- Activities with end <= start count as instances with zero time. Reads per-GPU totals
-- (kernel_gpu_total), so a report over many files ranks their concatenation the same way.
--
-- Reads: kernel_gpu_total
--
-- Params:
--   $top   INTEGER   10   names kept per class
--
-- Columns:
--   class          VARCHAR   comm, attention, gemm, other or memcpy
--   name           VARCHAR   demangled kernel name, or [CUDA memcpy <kind>]
--   name_rank      BIGINT    1 = most time within the class
--   instances      BIGINT    how many times it ran
--   gpus           BIGINT    on how many GPUs
--   total_ns       BIGINT    sum of durations
--   mean_ns        DOUBLE    mean duration
--   max_ns         BIGINT    longest instance
--   pct_of_class   DOUBLE    share of the class's summed time, 0-100
WITH by_name AS (
    SELECT class, name,
        sum(instances)::BIGINT AS instances,
        count(*) AS gpus,
        sum(total_ns)::BIGINT AS total_ns,
        sum(total_ns)::DOUBLE / sum(instances) AS mean_ns,
        max(max_ns) AS max_ns
    FROM kernel_gpu_total
    GROUP BY class, name
),
ranked AS (
    SELECT *,
        row_number() OVER (PARTITION BY class ORDER BY total_ns DESC, name) AS name_rank,
        100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY class), 0) AS pct_of_class
    FROM by_name
)
SELECT class, name, name_rank, instances, gpus, total_ns, mean_ns, max_ns, pct_of_class
FROM ranked
WHERE name_rank <= $top
ORDER BY class, name_rank
