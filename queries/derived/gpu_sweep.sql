-- gpu_sweep: each GPU's timeline cut into segments by every activity start and end (packed)
--
-- Materialised (CREATE TABLE) when the trace is opened; the gpu_segment view unpacks it, and
-- every breakdown, gap, step and layer analysis reads that. Built by the interval engine
-- (nsysreport.engine, step `sweep`) from the rows this SELECT gives, one GPU at a time: one
-- sort of the activities' start (+delta) and end (-delta) events by (time, delta,
-- activity_key) and one sweep give, for every stretch between consecutive events, how many
-- activities of each class are running. The six counters are packed in one integer (`packed`),
-- which the gpu_counter macros read apart: at 1M kernels, 8 columns of 1.8M rows instead of 16.
-- Events at the same instant come in that order: the zero-length segments between them are
-- dropped, and the counts after the last of them are exact. Ends sort before starts so that
-- touching activities leave a zero-length segment, not a gap. Activities with end <= start
-- carry no time and are left out. The segments tile [first start, last end].
-- (In SQL, as a window over the events, this table cost 2.9 s at 5M kernels.)
--
-- Engine: sweep
-- Reads: activity
--
-- Params:
--   $gpus        BIGINT[] -   the batch's GPUs, as gpu_key(pid, device_id)
--
-- Columns:
--   pid              BIGINT    process id
--   device_id        BIGINT    nsys GPU id
--   seq              BIGINT    position in the GPU's sweep (increases with start_ns)
--   start_ns         BIGINT    segment start
--   end_ns           BIGINT    segment end
--   packed           BIGINT    activities running, by class, in 10-bit fields: compute, gemm,
--                              attention, comm, memcpy, graph (lowest first)
--   before_key       BIGINT    activity whose event opens the segment: activity_id * 4 +
--                              source (0 kernel, 1 memcpy, 2 memset, 3 graph)
--   after_key        BIGINT    activity whose event closes the segment, encoded the same way
SELECT pid, device_id, start_ns, end_ns,
    -- One sortable integer per activity (activity_id is unique within its source).
    activity_id * 4
        + CASE source WHEN 'kernel' THEN 0 WHEN 'memcpy' THEN 1 WHEN 'memset' THEN 2 ELSE 3 END
        AS activity_key,
    -- Counters in 10-bit fields: compute, gemm, attention, comm, memcpy, graph (every
    -- activity is one of compute, comm, memcpy or graph, so n_all is their sum); six fields
    -- fill 60 of BIGINT's 63 bits. A GPU runs far fewer than 1024 activities of one class at
    -- once: at most 128 concurrent kernels, a few copy engines, a few graph launches.
    CASE WHEN class NOT IN ('comm', 'memcpy', 'graph') THEN 1 ELSE 0 END
    + CASE WHEN class = 'gemm' THEN 1024 ELSE 0 END
    + CASE WHEN class = 'attention' THEN 1048576 ELSE 0 END
    + CASE WHEN class = 'comm' THEN 1073741824 ELSE 0 END
    + CASE WHEN class = 'memcpy' THEN 1099511627776 ELSE 0 END
    + CASE WHEN class = 'graph' THEN 1125899906842624 ELSE 0 END AS delta
FROM activity
WHERE list_contains($gpus, gpu_key(pid, device_id)) AND end_ns > start_ns
