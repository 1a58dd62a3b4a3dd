-- compute_step: per GPU, step and operator shape, the calls and the GPU time of their kernels
--
-- The calls of compute_op, each placed in the step whose GPU window (step_window) holds the
-- start of its kernels' first kernel; calls outside every step window are left out. The
-- step's FLOPs are what its calls' shapes give (nsysreport.flops): its model FLOPs
-- utilisation divides them by the step's time.
--
-- Reads: op_call, op_kernel, step_window
--
-- Columns:
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   step_ordinal  BIGINT    1 = the GPU's first step (step_window)
--   op            VARCHAR   operator name
--   dims          VARCHAR   its input shapes as recorded (JSON text)
--   types         VARCHAR   its input dtypes (JSON text), NULL if not recorded
--   concrete      VARCHAR   its scalar inputs (JSON text), NULL if not recorded
--   calls         BIGINT    calls in the step
--   time_ns       BIGINT    summed durations of their kernels (communication aside)
WITH calls AS (
    SELECT call_id, pid, device_id, min(start_ns) AS start_ns, sum(duration_ns) AS time_ns
    FROM op_kernel
    GROUP BY call_id, pid, device_id
),
placed AS (
    SELECT c.*, w.step_ordinal, w.end_ns AS step_end_ns
    FROM calls AS c
    ASOF JOIN step_window AS w
        ON w.pid = c.pid AND w.device_id = c.device_id AND c.start_ns >= w.start_ns
)
SELECT p.pid, p.device_id, p.step_ordinal, o.name AS op, o.dims, o.types, o.concrete,
    count(*) AS calls, sum(p.time_ns)::BIGINT AS time_ns
FROM placed AS p
JOIN op_call AS o ON o.row_id = p.call_id
WHERE p.start_ns <= p.step_end_ns
GROUP BY ALL
ORDER BY p.pid, p.device_id, p.step_ordinal, op, o.dims, o.types NULLS LAST,
    o.concrete NULLS LAST
