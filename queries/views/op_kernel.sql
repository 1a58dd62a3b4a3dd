-- op_kernel: the kernels each operator call's FLOPs are counted on
--
-- A kernel belongs to the innermost op_call around its launch on the launching thread
-- (activity_range, role op); communication kernels are left out. A call with another op_call
-- nested inside it on its thread (aten::matmul around aten::bmm, scaled_dot_product_attention
-- around _scaled_dot_product_flash_attention) has its FLOPs counted once, on the kernels of the
-- innermost call, which has the formula for the same work: its own kernels outside that child
-- (the copies aten::matmul makes to lay out its inputs) are no call's here, so they carry no
-- FLOPs.
--
-- Reads: activity_range, kernel, op_parent
--
-- Columns:
--   call_id       BIGINT    the op_call's row_id
--   kernel_id     BIGINT    kernel_id in the kernel view
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   name          VARCHAR   kernel name
--   class         VARCHAR   kernel class: gemm, attention or other
--   duration_ns   BIGINT    its duration, 0 when it ends before it starts
--   start_ns      BIGINT    GPU start
CREATE VIEW op_kernel AS
SELECT r.range_id AS call_id, k.kernel_id, k.pid, k.device_id, k.name, k.class,
    greatest(k.duration_ns, 0) AS duration_ns, k.start_ns
FROM activity_range AS r
JOIN kernel AS k ON r.source = 'kernel' AND r.activity_id = k.kernel_id
ANTI JOIN op_parent AS p ON p.row_id = r.range_id
WHERE r.role = 'op' AND k.class <> 'comm'
