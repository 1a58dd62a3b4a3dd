-- step_breakdown: per step and GPU, the step time and its full time breakdown
--
-- A step's window on a GPU runs from the first start to the last end of the activities it
-- contains (step_window; activity_step: launched during the step by any thread of its
-- process). Every metric is docs/metrics.md's, over all of the GPU's activity clipped to that
-- window (work launched earlier that runs into the step counts too): the gpu_segment rows
-- overlapping the window, clipped to it. Counts are of the activities the step contains.
-- compute + exposed comm + exposed memcpy + graph opaque + profiler overhead + idle =
-- step_time_ns (graph opaque: CUDA graph launches traced as a whole, where no kernel or copy is
-- known; profiler overhead: nothing running while nsys pauses the process, gpu_sweep).
--
-- Reads: gpu_segment, step_window, step_window_bin
--
-- Columns:
--   pid                  BIGINT    process id
--   device_id            BIGINT    nsys GPU id
--   name                 VARCHAR   step label
--   step_index           BIGINT    the number in the label
--   step_ordinal         BIGINT    1 = the GPU's first step
--   start_ns             BIGINT    window start
--   end_ns               BIGINT    window end
--   step_time_ns         BIGINT    end_ns - start_ns
--   busy_ns              BIGINT    union of all activity in the window
--   idle_ns              BIGINT    step_time_ns - busy_ns - profiler_overhead_ns
--   profiler_overhead_ns BIGINT    nothing running, a profiler overhead window open
--   compute_ns           BIGINT    union of compute kernels
--   gemm_ns              BIGINT    union of GEMM kernels
--   attention_ns         BIGINT    union of attention kernels
--   comm_ns              BIGINT    union of communication kernels
--   comm_sum_ns          BIGINT    sum of durations of the comm kernels the step contains
--   exposed_comm_ns      BIGINT    comm union minus compute union
--   overlapped_comm_ns   BIGINT    comm_ns - exposed_comm_ns
--   overlap_pct          DOUBLE    100 * overlapped_comm_ns / comm_ns
--   memcpy_ns            BIGINT    union of memcpys and memsets
--   exposed_memcpy_ns    BIGINT    copies with neither compute nor comm running
--   graph_ns             BIGINT    union of CUDA graph launches traced as a whole
--   graph_opaque_ns      BIGINT    graph union minus (compute + comm + memcpy unions)
--   kernel_count         BIGINT    kernels the step contains on this GPU
--   comm_kernel_count    BIGINT    communication kernels among them
WITH width AS (SELECT DISTINCT pid, device_id, width FROM step_window_bin),
busy AS NOT MATERIALIZED (
    -- Only segments that are not idle count: every sum below is of time something runs or
    -- the profiler pauses (idle is the rest).
    SELECT s.*, b.width, s.start_ns // b.width AS first_bin, (s.end_ns - 1) // b.width AS last_bin
    FROM gpu_segment AS s
    JOIN width AS b ON b.pid = s.pid AND b.device_id = s.device_id
    WHERE NOT s.idle
),
segment_bin AS (
    -- Each segment in the bins it spans: segments and windows (step_window_bin) meet in a
    -- shared bin, a hash join on the few windows, no sort of the segments. Most segments lie
    -- in one bin: they take it without a list (unnesting a list per row cost 1.0 of 1.7
    -- operator-s at 5M kernels).
    SELECT * EXCLUDE (first_bin, last_bin), first_bin AS bin FROM busy
    WHERE first_bin = last_bin
    UNION ALL
    SELECT * EXCLUDE (first_bin, last_bin), unnest(time_bins(start_ns, end_ns, width)) AS bin
    FROM busy
    WHERE first_bin < last_bin
),
clipped AS (
    -- Each overlapping segment and window once: in the bin where their overlap starts.
    SELECT w.pid, w.device_id, w.range_id, s.packed,
        least(s.end_ns, w.end_ns) - greatest(s.start_ns, w.start_ns) AS part_ns
    FROM segment_bin AS s
    JOIN step_window_bin AS w ON w.pid = s.pid AND w.device_id = s.device_id AND w.bin = s.bin
    WHERE s.start_ns < w.end_ns AND s.end_ns > w.start_ns
        AND s.bin = greatest(s.start_ns, w.start_ns) // s.width
),
states AS (
    -- The time of each window in each state of the counters (a few per window), read apart
    -- below: the parts' sums then run over those rows, not over every clipped segment (5M
    -- kernels: 2.06 s -> 1.28 s).
    SELECT pid, device_id, range_id, packed, sum(part_ns) AS part_ns
    FROM clipped
    WHERE part_ns > 0
    GROUP BY pid, device_id, range_id, packed
),
counted AS (
    SELECT pid, device_id, range_id, packed, part_ns, n_all(packed) AS n_all,
        n_compute(packed) AS n_compute, n_gemm(packed) AS n_gemm,
        n_attention(packed) AS n_attention, n_comm(packed) AS n_comm,
        n_memcpy(packed) AS n_memcpy, n_graph(packed) AS n_graph
    FROM states
),
totals AS (
    SELECT pid, device_id, range_id,
        coalesce(sum(part_ns) FILTER (n_all > 0), 0) AS busy,
        coalesce(sum(part_ns) FILTER (n_compute > 0), 0) AS compute,
        coalesce(sum(part_ns) FILTER (n_gemm > 0), 0) AS gemm,
        coalesce(sum(part_ns) FILTER (n_attention > 0), 0) AS attention,
        coalesce(sum(part_ns) FILTER (n_comm > 0), 0) AS comm,
        coalesce(sum(part_ns) FILTER (exposed_comm(packed)), 0) AS exposed_comm,
        coalesce(sum(part_ns) FILTER (n_memcpy > 0), 0) AS memcpy,
        coalesce(sum(part_ns) FILTER (exposed_memcpy(packed)), 0) AS exposed_memcpy,
        coalesce(sum(part_ns) FILTER (n_graph > 0), 0) AS graph,
        coalesce(sum(part_ns) FILTER (graph_opaque(packed)), 0) AS graph_opaque,
        coalesce(sum(part_ns) FILTER (profiler_overhead(packed)), 0) AS profiler_overhead
    FROM counted
    GROUP BY pid, device_id, range_id
)
SELECT
    w.pid,
    w.device_id,
    w.name,
    w.step_index,
    w.step_ordinal,
    w.start_ns,
    w.end_ns,
    w.end_ns - w.start_ns AS step_time_ns,
    t.busy::BIGINT AS busy_ns,
    (w.end_ns - w.start_ns - t.busy - t.profiler_overhead)::BIGINT AS idle_ns,
    t.profiler_overhead::BIGINT AS profiler_overhead_ns,
    t.compute::BIGINT AS compute_ns,
    t.gemm::BIGINT AS gemm_ns,
    t.attention::BIGINT AS attention_ns,
    t.comm::BIGINT AS comm_ns,
    w.comm_sum_ns::BIGINT AS comm_sum_ns,
    t.exposed_comm::BIGINT AS exposed_comm_ns,
    (t.comm - t.exposed_comm)::BIGINT AS overlapped_comm_ns,
    CASE WHEN t.comm > 0 THEN 100.0 * (t.comm - t.exposed_comm) / t.comm END AS overlap_pct,
    t.memcpy::BIGINT AS memcpy_ns,
    t.exposed_memcpy::BIGINT AS exposed_memcpy_ns,
    t.graph::BIGINT AS graph_ns,
    t.graph_opaque::BIGINT AS graph_opaque_ns,
    w.kernel_count,
    w.comm_kernel_count
FROM step_window AS w
JOIN totals AS t ON t.pid = w.pid AND t.device_id = w.device_id AND t.range_id = w.range_id
ORDER BY w.pid, w.device_id, w.step_ordinal
