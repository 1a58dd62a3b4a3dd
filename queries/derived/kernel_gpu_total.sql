-- kernel_gpu_total: per GPU, each kernel name's (and copy kind's) instances and summed time
--
-- Materialised (CREATE TABLE) when the trace is opened: it is small (GPUs x kernel names),
-- and a report with another --top ranks it again without grouping every kernel by name (5M
-- kernels: 0.4 s each time as a view). What kernel_top ranks. A report over several files
-- stacks each file's rows (a stand-in GPU id per file's GPU, nsysreport.report_builder) and
-- runs the same kernel_top over them, so one definition serves one file and many. Activities
-- with end <= start count as instances with zero time. On a GPU whose analysis starts after a
-- wait for a late-starting rank (late_start_wait), each counts only its time after the cut,
-- as the activity view clips it: the wait's seconds are no kernel time.
--
-- Reads: kernel, late_start_wait, memcpy
--
-- Columns:
--   pid         BIGINT    process id
--   device_id   BIGINT    nsys GPU id
--   class       VARCHAR   comm, attention, gemm, other or memcpy
--   name        VARCHAR   demangled kernel name, or [CUDA memcpy <kind>]
--   instances   BIGINT    how many times it ran on this GPU
--   total_ns    BIGINT    sum of durations
--   max_ns      BIGINT    longest instance
CREATE TABLE kernel_gpu_total AS
WITH recorded AS (
    SELECT class, name, pid, device_id, start_ns, end_ns FROM kernel
    UNION ALL
    SELECT 'memcpy', name, pid, device_id, start_ns, end_ns FROM memcpy
),
cut AS (SELECT DISTINCT pid, device_id, cut_ns FROM late_start_wait),
items AS (
    -- greatest() passes over a NULL cut: a GPU without a wait keeps its times.
    SELECT r.class, r.name, r.pid, r.device_id,
        greatest(r.end_ns - greatest(r.start_ns, c.cut_ns), 0) AS duration_ns
    FROM recorded AS r
    LEFT JOIN cut AS c ON c.pid = r.pid AND c.device_id = r.device_id
)
SELECT pid, device_id, class, name, count(*) AS instances, sum(duration_ns)::BIGINT AS total_ns,
    max(duration_ns) AS max_ns
FROM items
GROUP BY pid, device_id, class, name
