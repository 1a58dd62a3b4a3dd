-- step_breakdown: per step and GPU, the step time and its full time breakdown
--
-- A step's window on a GPU runs from the first start to the last end of the activities it
-- launched (step_window). Every metric is METRICS.md's, over all of the GPU's activity clipped
-- to that window (work launched earlier that runs into the step counts too), read from
-- gpu_segment's running totals at the window's two ends. Counts are of the activities the
-- step launched. compute + exposed comm + exposed memcpy + idle = step_time_ns.
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
--   comm_sum_ns          BIGINT    sum of durations of the comm kernels the step launched
--   exposed_comm_ns      BIGINT    comm union minus compute union
--   overlapped_comm_ns   BIGINT    comm_ns - exposed_comm_ns
--   overlap_pct          DOUBLE    100 * overlapped_comm_ns / comm_ns
--   memcpy_ns            BIGINT    union of memcpys and memsets
--   exposed_memcpy_ns    BIGINT    copies with neither compute nor comm running
--   kernel_count         BIGINT    kernels the step launched on this GPU
--   comm_kernel_count    BIGINT    communication kernels among them
WITH ends AS (
    SELECT pid, device_id, range_id, start_ns AS t, -1 AS sign FROM step_window
    UNION ALL
    SELECT pid, device_id, range_id, end_ns, 1 FROM step_window
),
at_ends AS (
    SELECT e.pid, e.device_id, e.range_id, e.sign, s.*,
        least(e.t, s.end_ns) - s.start_ns AS into_segment
    FROM ends AS e
    ASOF LEFT JOIN gpu_segment AS s
        ON s.pid = e.pid AND s.device_id = e.device_id AND s.start_ns <= e.t
),
totals AS (
    SELECT pid, device_id, range_id,
        sum(sign * coalesce(busy_before_ns + (n_all > 0)::BIGINT * into_segment, 0)) AS busy,
        sum(sign * coalesce(compute_before_ns + (n_compute > 0)::BIGINT * into_segment, 0))
            AS compute,
        sum(sign * coalesce(gemm_before_ns + (n_gemm > 0)::BIGINT * into_segment, 0)) AS gemm,
        sum(sign * coalesce(attention_before_ns + (n_attention > 0)::BIGINT * into_segment, 0))
            AS attention,
        sum(sign * coalesce(comm_before_ns + (n_comm > 0)::BIGINT * into_segment, 0)) AS comm,
        sum(sign * coalesce(exposed_comm_before_ns
            + (n_comm > 0 AND n_compute = 0)::BIGINT * into_segment, 0)) AS exposed_comm,
        sum(sign * coalesce(memcpy_before_ns + (n_memcpy > 0)::BIGINT * into_segment, 0))
            AS memcpy,
        sum(sign * coalesce(exposed_memcpy_before_ns
            + (n_memcpy > 0 AND n_compute = 0 AND n_comm = 0)::BIGINT * into_segment, 0))
            AS exposed_memcpy
    FROM at_ends
    GROUP BY pid, device_id, range_id
),
launched AS (
    SELECT a.pid, a.device_id, ar.range_id,
        count(*) FILTER (a.source = 'kernel') AS kernel_count,
        count(*) FILTER (a.class = 'comm') AS comm_kernel_count,
        coalesce(sum(greatest(a.end_ns - a.start_ns, 0)) FILTER (a.class = 'comm'), 0)
            AS comm_sum_ns
    FROM activity_range AS ar
    JOIN activity AS a ON a.source = ar.source AND a.activity_id = ar.activity_id
    WHERE ar.role = 'step'
    GROUP BY a.pid, a.device_id, ar.range_id
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
    l.comm_sum_ns::BIGINT AS comm_sum_ns,
    t.exposed_comm::BIGINT AS exposed_comm_ns,
    (t.comm - t.exposed_comm)::BIGINT AS overlapped_comm_ns,
    CASE WHEN t.comm > 0 THEN 100.0 * (t.comm - t.exposed_comm) / t.comm END AS overlap_pct,
    t.memcpy::BIGINT AS memcpy_ns,
    t.exposed_memcpy::BIGINT AS exposed_memcpy_ns,
    l.kernel_count,
    l.comm_kernel_count
FROM step_window AS w
JOIN totals AS t ON t.pid = w.pid AND t.device_id = w.device_id AND t.range_id = w.range_id
JOIN launched AS l ON l.pid = w.pid AND l.device_id = w.device_id AND l.range_id = w.range_id
ORDER BY w.pid, w.device_id, w.step_ordinal
