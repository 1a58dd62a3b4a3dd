-- step_breakdown: per step and GPU, the step time and its full time breakdown
--
-- A step's window on a GPU runs from the first start to the last end of the activities it
-- contains (step_window; activity_step: launched during the step by any thread of its
-- process). Every metric is docs/metrics.md's, over all of the GPU's activity clipped to that
-- window (work launched earlier that runs into the step counts too): the interval engine's
-- breakdown of the window (window_breakdown, scope `step`). A window with no busy time is left
-- out. Counts are of the activities the step contains.
-- compute + exposed comm + exposed memcpy + graph opaque + idle = step_time_ns (graph
-- opaque: CUDA graph launches traced as a whole, where no kernel or copy is known).
--
-- Reads: step_window, window_breakdown
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
--   idle_ns              BIGINT    step_time_ns - busy_ns
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
WITH totals AS (
    SELECT pid, device_id, window_id AS range_id, busy_ns AS busy, compute_ns AS compute,
        gemm_ns AS gemm, attention_ns AS attention, comm_ns AS comm,
        exposed_comm_ns AS exposed_comm, memcpy_ns AS memcpy, exposed_memcpy_ns AS exposed_memcpy,
        graph_ns AS graph, graph_opaque_ns AS graph_opaque
    FROM window_breakdown
    WHERE scope = 'step' AND busy_ns > 0
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
    (w.end_ns - w.start_ns - t.busy)::BIGINT AS idle_ns,
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
