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
-- Reads: activity
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
events AS (
    SELECT pid, device_id, start_ns AS t, delta, activity_key FROM timed
    UNION ALL
    SELECT pid, device_id, end_ns, -delta, activity_key FROM timed
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
