-- collective_instances: each GPU's collective kernels, numbered per op, to match across files
--
-- The k-th instance of an op on one GPU is the k-th on every other GPU of the job: across the
-- files of a multi-file run, instances matched by (op, ordinal) line up the files' clocks
-- (nsysreport.align) and find the stragglers (straggler_gpu, run by nsysreport.report_builder).
--
-- Reads: collective
--
-- Columns:
--   op          VARCHAR   normalised collective op
--   ordinal     BIGINT    1 = this GPU's first instance of this op
--   pid         BIGINT    process id
--   device_id   BIGINT    nsys GPU id
--   start_ns    BIGINT    kernel start
--   end_ns      BIGINT    kernel end
--   late_start  BOOLEAN   a wait for a late-starting rank (collective.late_start)
SELECT op, ordinal, pid, device_id, start_ns, end_ns, late_start
FROM collective
ORDER BY pid, device_id, op, ordinal
