-- gpu_breakdown: per-GPU time breakdown; compute + exposed comm + exposed memcpy + graph opaque
-- + profiler overhead + idle = span
--
-- Definitions are docs/metrics.md's interval algebra: every *_ns is the length of a union of
-- intervals (not a sum) unless the name ends in _sum_ns. Exposed communication is comm time
-- during which no compute kernel runs on the same GPU, on any stream; exposed memcpy is copy
-- time with neither compute nor comm running. overlap_pct is NULL when there is no comm. A CUDA
-- graph launch traced as a whole (class graph) is busy time of unknown content: graph_opaque_ns
-- is the part of it that no kernel or copy covers, the breakdown's fifth part. Graph time hides
-- no communication: exposed comm and memcpy do not look at it. Time with nothing running while
-- nsys pauses the process for itself (PROFILER_OVERHEAD, gpu_sweep) is profiler_overhead_ns,
-- the sixth part: neither busy nor idle, and never a gap.
--
-- Reads: activity, gpu_segment, kernel
--
-- Columns:
--   pid                  BIGINT    process id
--   device_id            BIGINT    nsys GPU id
--   first_start_ns       BIGINT    first activity start
--   last_end_ns          BIGINT    last activity end
--   span_ns              BIGINT    last_end_ns - first_start_ns
--   busy_ns              BIGINT    union of all activities
--   idle_ns              BIGINT    span_ns - busy_ns - profiler_overhead_ns
--   profiler_overhead_ns BIGINT    nothing running, a profiler overhead window open
--   compute_ns           BIGINT    union of compute kernels (gemm, attention, other)
--   gemm_ns              BIGINT    union of GEMM kernels
--   attention_ns         BIGINT    union of attention kernels
--   comm_ns              BIGINT    union of communication kernels
--   comm_sum_ns          BIGINT    sum of communication kernel durations
--   exposed_comm_ns      BIGINT    comm union minus compute union
--   overlapped_comm_ns   BIGINT    comm_ns - exposed_comm_ns
--   overlap_pct          DOUBLE    100 * overlapped_comm_ns / comm_ns
--   memcpy_ns            BIGINT    union of memcpys and memsets
--   exposed_memcpy_ns    BIGINT    memcpy union minus (compute union + comm union)
--   kernel_count         BIGINT    kernels, including those with end <= start
--   comm_kernel_count    BIGINT    communication kernels
--   memcpy_count         BIGINT    memcpys and memsets
--   graph_ns             BIGINT    union of CUDA graph launches traced as a whole
--   graph_opaque_ns      BIGINT    graph union minus (compute + comm + memcpy unions)
--   graph_launches       BIGINT    CUDA graph launches traced as a whole
--   graph_kernel_count   BIGINT    kernels replayed from a CUDA graph (graphNodeId set)
WITH states AS (
    -- Each GPU's time in each state of the counters (a few), read apart below: the parts'
    -- sums then run over those rows, not over every segment (5M kernels: 0.18 s, 0.6 s so).
    SELECT pid, device_id, packed, min(start_ns) AS first_start_ns, max(end_ns) AS last_end_ns,
        sum(duration_ns) AS duration_ns
    FROM gpu_segment
    GROUP BY pid, device_id, packed
),
counted AS (
    SELECT *, packed = 0 AS idle, n_compute(packed) AS n_compute, n_gemm(packed) AS n_gemm,
        n_attention(packed) AS n_attention, n_comm(packed) AS n_comm,
        n_memcpy(packed) AS n_memcpy, n_graph(packed) AS n_graph
    FROM states
),
seg AS (
    SELECT pid, device_id,
        min(first_start_ns) AS first_start_ns,
        max(last_end_ns) AS last_end_ns,
        sum(duration_ns) FILTER (n_compute + n_comm + n_memcpy + n_graph > 0) AS busy_ns,
        sum(duration_ns) FILTER (idle) AS idle_ns,
        sum(duration_ns) FILTER (profiler_overhead(packed)) AS profiler_overhead_ns,
        sum(duration_ns) FILTER (n_compute > 0) AS compute_ns,
        sum(duration_ns) FILTER (n_gemm > 0) AS gemm_ns,
        sum(duration_ns) FILTER (n_attention > 0) AS attention_ns,
        sum(duration_ns) FILTER (n_comm > 0) AS comm_ns,
        sum(duration_ns) FILTER (exposed_comm(packed)) AS exposed_comm_ns,
        sum(duration_ns) FILTER (n_memcpy > 0) AS memcpy_ns,
        sum(duration_ns) FILTER (exposed_memcpy(packed)) AS exposed_memcpy_ns,
        sum(duration_ns) FILTER (n_graph > 0) AS graph_ns,
        sum(duration_ns) FILTER (graph_opaque(packed)) AS graph_opaque_ns
    FROM counted
    GROUP BY pid, device_id
),
counts AS (
    SELECT pid, device_id,
        count(*) FILTER (source = 'kernel') AS kernel_count,
        count(*) FILTER (class = 'comm') AS comm_kernel_count,
        count(*) FILTER (class = 'memcpy') AS memcpy_count,
        count(*) FILTER (class = 'graph') AS graph_launches,
        sum(end_ns - start_ns) FILTER (class = 'comm' AND end_ns > start_ns) AS comm_sum_ns
    FROM activity
    GROUP BY pid, device_id
),
graph_kernels AS (
    SELECT pid, device_id, count(*) AS graph_kernel_count
    FROM kernel
    WHERE graph_node_id IS NOT NULL OR graph_id IS NOT NULL
    GROUP BY pid, device_id
)
SELECT
    c.pid,
    c.device_id,
    s.first_start_ns,
    s.last_end_ns,
    coalesce(s.last_end_ns - s.first_start_ns, 0)::BIGINT AS span_ns,
    coalesce(s.busy_ns, 0)::BIGINT AS busy_ns,
    coalesce(s.idle_ns, 0)::BIGINT AS idle_ns,
    coalesce(s.profiler_overhead_ns, 0)::BIGINT AS profiler_overhead_ns,
    coalesce(s.compute_ns, 0)::BIGINT AS compute_ns,
    coalesce(s.gemm_ns, 0)::BIGINT AS gemm_ns,
    coalesce(s.attention_ns, 0)::BIGINT AS attention_ns,
    coalesce(s.comm_ns, 0)::BIGINT AS comm_ns,
    coalesce(c.comm_sum_ns, 0)::BIGINT AS comm_sum_ns,
    coalesce(s.exposed_comm_ns, 0)::BIGINT AS exposed_comm_ns,
    (coalesce(s.comm_ns, 0) - coalesce(s.exposed_comm_ns, 0))::BIGINT AS overlapped_comm_ns,
    CASE WHEN coalesce(s.comm_ns, 0) > 0
        THEN 100.0 * (s.comm_ns - coalesce(s.exposed_comm_ns, 0)) / s.comm_ns END
        AS overlap_pct,
    coalesce(s.memcpy_ns, 0)::BIGINT AS memcpy_ns,
    coalesce(s.exposed_memcpy_ns, 0)::BIGINT AS exposed_memcpy_ns,
    c.kernel_count,
    c.comm_kernel_count,
    c.memcpy_count,
    coalesce(s.graph_ns, 0)::BIGINT AS graph_ns,
    coalesce(s.graph_opaque_ns, 0)::BIGINT AS graph_opaque_ns,
    c.graph_launches,
    coalesce(k.graph_kernel_count, 0)::BIGINT AS graph_kernel_count
FROM counts AS c
LEFT JOIN seg AS s ON s.pid = c.pid AND s.device_id = c.device_id
LEFT JOIN graph_kernels AS k ON k.pid = c.pid AND k.device_id = c.device_id
ORDER BY c.pid, c.device_id
