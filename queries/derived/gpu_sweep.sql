-- gpu_sweep: each GPU's timeline cut into segments by every activity start and end (packed)
--
-- Materialised (CREATE TABLE) when the trace is opened; the gpu_segment view unpacks it, and
-- every breakdown, gap, step and layer analysis reads that. The sweep is the most expensive
-- step of the analysis, and its table the largest: the counters stay packed in one integer
-- (`packed`), which the view reads apart with a few bit operations (at 1M kernels: 8 columns
-- of 1.8M rows instead of 16).
--
-- One sorted sweep per GPU over +1/-1 events gives, for every stretch between consecutive
-- events, how many activities of each class are running; the six counters are packed in one
-- integer so that one running sum does the work of six. Events at the same instant may come
-- in any order: the zero-length segments between them are dropped, and the counts after the
-- last of them are exact. Ends sort before starts so that touching activities leave a
-- zero-length segment, not a gap. Activities with end <= start carry no time and are left
-- out. The segments tile [first start, last end].
--
-- nsys's own pauses (PROFILER_OVERHEAD: buffer flushes, instrumentation, on a host thread of
-- the process) are a seventh field, one bit (bit 60): each process's windows, merged where
-- they overlap (so at most one is open at a time) and clipped to each of its GPUs' span (so the
-- span is the activities' alone), open on every GPU of the process. A segment with nothing
-- running but that bit is profiler overhead, neither busy nor idle (gpu_counter.sql); its
-- events' keys are negative (-1 - the window's number), so they name no activity.
--
-- Reads: PROFILER_OVERHEAD, activity
--
-- Columns:
--   pid              BIGINT    process id
--   device_id        BIGINT    nsys GPU id
--   seq              BIGINT    position in the GPU's sweep (increases with start_ns)
--   start_ns         BIGINT    segment start
--   end_ns           BIGINT    segment end
--   packed           BIGINT    activities running, by class, in 10-bit fields: compute, gemm,
--                              attention, comm, memcpy, graph (lowest first); bit 60 set:
--                              (a profiler overhead window is open)
--   before_key       BIGINT    activity whose event opens the segment: activity_id * 4 +
--                              source (0 kernel, 1 memcpy, 2 memset, 3 graph); negative:
--                              (a profiler overhead window)
--   after_key        BIGINT    activity whose event closes the segment, encoded the same way
CREATE TABLE gpu_sweep AS
WITH timed AS (
    SELECT pid, device_id, start_ns, end_ns,
        -- One sortable integer per activity (activity_id is unique within its source).
        activity_id * 4
            + CASE source WHEN 'kernel' THEN 0 WHEN 'memcpy' THEN 1 WHEN 'memset' THEN 2 ELSE 3 END
            AS activity_key,
        -- Counters in 10-bit fields: compute, gemm, attention, comm, memcpy, graph (every
        -- activity is one of compute, comm, memcpy or graph, so n_all is their sum); six fields
        -- fill 60 of BIGINT's 63 bits. A GPU runs far fewer than 1024 activities of one class at
        -- once: at most 128 concurrent kernels, a few copy engines, a few graph launches.
        -- (A HUGEINT sum with 12-bit fields cost 0.17-0.23 s for this table at 200k kernels,
        -- against 0.10-0.11 s for five fields or six 10-bit fields in a BIGINT.)
        CASE WHEN class NOT IN ('comm', 'memcpy', 'graph') THEN 1 ELSE 0 END
        + CASE WHEN class = 'gemm' THEN 1024 ELSE 0 END
        + CASE WHEN class = 'attention' THEN 1048576 ELSE 0 END
        + CASE WHEN class = 'comm' THEN 1073741824 ELSE 0 END
        + CASE WHEN class = 'memcpy' THEN 1099511627776 ELSE 0 END
        + CASE WHEN class = 'graph' THEN 1125899906842624 ELSE 0 END AS delta
    FROM activity
    WHERE end_ns > start_ns
),
overhead_rows AS (
    SELECT (globalTid >> 24) & 16777215 AS pid, start, "end",
        -- A new window starts where no earlier one of the process is still open.
        CASE WHEN start > max("end") OVER (
            PARTITION BY (globalTid >> 24) & 16777215 ORDER BY start, "end"
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) THEN 1 ELSE 0 END AS opens
    FROM PROFILER_OVERHEAD
    WHERE globalTid IS NOT NULL AND "end" > start
),
overhead_numbered AS (
    SELECT pid, start, "end",
        (sum(opens) OVER (PARTITION BY pid ORDER BY start, "end" ROWS UNBOUNDED PRECEDING))::BIGINT
            AS window_no
    FROM overhead_rows
),
overhead AS (
    SELECT pid, window_no, min(start) AS start_ns, max("end") AS end_ns
    FROM overhead_numbered
    GROUP BY pid, window_no
),
extent AS (
    SELECT pid, device_id, min(start_ns) AS first_ns, max(end_ns) AS last_ns
    FROM timed
    GROUP BY pid, device_id
),
overhead_on_gpu AS (
    SELECT e.pid, e.device_id, greatest(o.start_ns, e.first_ns) AS start_ns,
        least(o.end_ns, e.last_ns) AS end_ns,
        1152921504606846976 AS delta,  -- bit 60
        -1 - o.window_no AS activity_key
    FROM overhead AS o
    JOIN extent AS e ON e.pid = o.pid
    WHERE least(o.end_ns, e.last_ns) > greatest(o.start_ns, e.first_ns)
),
events AS (
    SELECT pid, device_id, start_ns AS t, delta, activity_key FROM timed
    UNION ALL
    SELECT pid, device_id, end_ns, -delta, activity_key FROM timed
    UNION ALL
    SELECT pid, device_id, start_ns, delta, activity_key FROM overhead_on_gpu
    UNION ALL
    SELECT pid, device_id, end_ns, -delta, activity_key FROM overhead_on_gpu
),
swept AS (
    -- Ends (negative deltas) sort before starts at the same instant.
    SELECT pid, device_id, t, activity_key,
        row_number() OVER w AS seq,
        sum(delta) OVER w AS packed,
        lead(t) OVER w AS next_t,
        lead(activity_key) OVER w AS next_key
    FROM events
    WINDOW w AS (
        PARTITION BY pid, device_id ORDER BY t, delta, activity_key ROWS UNBOUNDED PRECEDING
    )
)
SELECT pid, device_id, seq, t AS start_ns, next_t AS end_ns, packed::BIGINT AS packed,
    activity_key AS before_key, next_key AS after_key
FROM swept
WHERE next_t > t
