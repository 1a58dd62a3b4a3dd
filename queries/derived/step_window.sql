-- step_window: each step's GPU window on each GPU: first start to last end of its activities
--
-- A step is an NVTX range of role `step`; its window on a GPU spans the activities it contains
-- (activity_step: those launched during the step by any thread of its process). `step_ordinal`
-- numbers a GPU's steps by window start from 1, so the k-th step can be matched across GPUs.
-- Materialised (CREATE TABLE) when the trace is opened: the step breakdown and the timeline
-- read it. It keeps the step's counts of what it holds too (the step breakdown's), so the
-- placement of every activity (the activity_step view) is computed once and not stored.
-- On a GPU whose analysis starts after a wait for a late-starting rank (late_start_wait), a
-- step whose activities all ended by then (each a row of no time at the cut, the activity
-- view) is no step of that GPU; one that runs across the cut starts there.
--
-- Reads: activity_step, late_start_wait
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   range_id       BIGINT    the step's NVTX range
--   name           VARCHAR   step label, e.g. ProfilerStep#12 or step 3
--   step_index     BIGINT    the number in the label
--   step_ordinal   BIGINT    1 = the GPU's first step
--   start_ns       BIGINT    window start
--   end_ns         BIGINT    window end
--   activity_count BIGINT    activities the step holds on this GPU
--   kernel_count   BIGINT    of those, kernels
--   comm_kernel_count BIGINT  of those, communication kernels
--   comm_sum_ns    BIGINT    their summed durations (each at least 0)
CREATE TABLE step_window AS
WITH windows AS (
    SELECT a.pid, a.device_id, a.range_id, any_value(a.label) AS name,
        any_value(a.label_index) AS step_index,
        min(a.start_ns) AS start_ns, max(greatest(a.end_ns, a.start_ns)) AS end_ns,
        count(*) AS activity_count,
        count(*) FILTER (a.source = 'kernel') AS kernel_count,
        count(*) FILTER (a.class = 'comm') AS comm_kernel_count,
        coalesce(sum(greatest(a.end_ns - a.start_ns, 0)) FILTER (a.class = 'comm'), 0)::BIGINT
            AS comm_sum_ns
    FROM activity_step AS a
    GROUP BY a.pid, a.device_id, a.range_id
),
cut AS (SELECT DISTINCT pid, device_id, cut_ns FROM late_start_wait)
SELECT w.pid, w.device_id, w.range_id, w.name, w.step_index,
    row_number() OVER (PARTITION BY w.pid, w.device_id ORDER BY w.start_ns, w.range_id)
        AS step_ordinal,
    w.start_ns, w.end_ns, w.activity_count, w.kernel_count, w.comm_kernel_count, w.comm_sum_ns
FROM windows AS w
LEFT JOIN cut AS c ON c.pid = w.pid AND c.device_id = w.device_id
WHERE c.cut_ns IS NULL OR w.end_ns > c.cut_ns
