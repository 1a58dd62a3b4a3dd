-- gpu_segment: each GPU's timeline cut into segments by every activity start and end
--
-- Materialised (CREATE TABLE) when the trace is opened: every breakdown, gap, step and layer
-- analysis reads it, and the sweep is the most expensive step of the analysis.
--
-- One sorted sweep per GPU over +1/-1 events gives, for every stretch between consecutive
-- events, how many activities of each class are running; the seven counters are packed in one
-- integer so that one running sum does the work of seven. Every union and difference in
-- docs/metrics.md is then a sum of segment lengths under a predicate, e.g.
--   busy = n_all > 0;  exposed comm = n_comm > 0 AND n_compute = 0;  gap = n_all = 0.
-- Events at the same instant may come in any order: the zero-length segments between them
-- are dropped, and the counts after the last of them are exact. Ends sort before starts so
-- that touching activities leave a zero-length segment, not a gap. Activities with
-- end <= start carry no time and are left out. The segments tile [first start, last end].
-- `seq` numbers a GPU's segments in time order (with holes where zero-length segments were
-- dropped), so the segments inside any window [a, b) are the seq range between the segments
-- containing a and b: two ASOF lookups and an equality join instead of a range join.
--
-- Reads: activity
--
-- Columns:
--   pid              BIGINT    process id
--   device_id        BIGINT    nsys GPU id
--   seq              BIGINT    position in the GPU's sweep (increases with start_ns)
--   start_ns         BIGINT    segment start
--   end_ns           BIGINT    segment end
--   duration_ns      BIGINT    end_ns - start_ns (always > 0)
--   n_all            BIGINT    activities running
--   n_compute        BIGINT    compute kernels running (gemm, attention, other)
--   n_gemm           BIGINT    GEMM kernels running
--   n_attention      BIGINT    attention kernels running
--   n_comm           BIGINT    communication kernels running
--   n_memcpy         BIGINT    memcpys and memsets running
--   n_graph          BIGINT    CUDA graph launches traced as a whole running
--   before_key       BIGINT    activity whose event opens the segment: activity_id * 4 +
--                              source (0 kernel, 1 memcpy, 2 memset, 3 graph)
--   after_key        BIGINT    activity whose event closes the segment, encoded the same way
CREATE TABLE gpu_segment AS
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
SELECT pid, device_id, seq, t AS start_ns, next_t AS end_ns, next_t - t AS duration_ns,
    ((packed & 1023) + ((packed >> 30) & 1023) + ((packed >> 40) & 1023)
        + ((packed >> 50) & 1023))::BIGINT AS n_all,
    (packed & 1023)::BIGINT AS n_compute,
    ((packed >> 10) & 1023)::BIGINT AS n_gemm,
    ((packed >> 20) & 1023)::BIGINT AS n_attention,
    ((packed >> 30) & 1023)::BIGINT AS n_comm,
    ((packed >> 40) & 1023)::BIGINT AS n_memcpy,
    ((packed >> 50) & 1023)::BIGINT AS n_graph,
    activity_key AS before_key,
    next_key AS after_key
FROM swept
WHERE next_t > t
