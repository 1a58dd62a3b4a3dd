-- compute_op: per GPU, layer and operator shape, the calls and the GPU time of their kernels
--
-- A kernel belongs to the innermost operator call whose shapes the trace records (op_call)
-- around its launch on the launching thread; a call with another such call nested inside it
-- counts its FLOPs on the innermost one's kernels alone (op_kernel). A call's time is the
-- summed durations of its kernels, communication kernels aside (a copy the call makes counts:
-- it is part of what the call cost); its kernel is the one with the most of that time (ties:
-- the first launched), which names its kernel family and places the call in a layer (the
-- layer range around that kernel's launch). nsysreport.flops turns each shape into FLOPs.
--
-- Reads: activity_range, op_call, op_kernel
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   layer        VARCHAR   layer label, NULL outside layers
--   op           VARCHAR   operator name, e.g. aten::mm
--   dims         VARCHAR   its input shapes as recorded (JSON text)
--   types        VARCHAR   its input dtypes as recorded (JSON text), NULL if not recorded
--   concrete     VARCHAR   its scalar inputs as recorded (JSON text), NULL if not recorded
--   source       VARCHAR   profiler or nvtx: where the shapes come from
--   kernel       VARCHAR   the kernel with most of each call's time
--   class        VARCHAR   that kernel's class: gemm, attention or other
--   calls        BIGINT    calls with at least one kernel
--   kernels      BIGINT    their kernels
--   time_ns      BIGINT    summed durations of those kernels
WITH calls AS (
    SELECT call_id, pid, device_id, count(*) AS kernels, sum(duration_ns) AS time_ns,
        first(name ORDER BY duration_ns DESC, start_ns, kernel_id) AS kernel,
        first(class ORDER BY duration_ns DESC, start_ns, kernel_id) AS class,
        first(kernel_id ORDER BY duration_ns DESC, start_ns, kernel_id) AS main_id
    FROM op_kernel
    GROUP BY call_id, pid, device_id
)
SELECT c.pid, c.device_id, l.label AS layer, o.name AS op, o.dims, o.types, o.concrete, o.source,
    c.kernel, c.class, count(*) AS calls, sum(c.kernels)::BIGINT AS kernels,
    sum(c.time_ns)::BIGINT AS time_ns
FROM calls AS c
JOIN op_call AS o ON o.row_id = c.call_id
LEFT JOIN activity_range AS l
    ON l.role = 'layer' AND l.source = 'kernel' AND l.activity_id = c.main_id
GROUP BY ALL
ORDER BY c.pid, c.device_id, layer NULLS LAST, op, o.dims, o.types NULLS LAST,
    o.concrete NULLS LAST, o.source, c.kernel, c.class
