-- gpu_segment: each GPU's timeline cut into segments by every activity start and end
--
-- Materialised (CREATE TABLE) when the trace is opened: every breakdown, gap, step and layer
-- analysis reads it, and the sweep is the most expensive step of the analysis.
--
-- One sorted sweep per GPU over +1/-1 events gives, for every stretch between consecutive
-- events, how many activities of each class are running. Every union and difference in
-- METRICS.md is then a sum of segment lengths under a predicate, e.g.
--   busy = n_all > 0;  exposed comm = n_comm > 0 AND n_compute = 0;  gap = n_all = 0.
-- Events at the same instant may come in any order: the zero-length segments between them
-- are dropped, and the counts after the last of them are exact. Ends sort before starts so
-- that touching activities leave a zero-length segment, not a gap. Activities with
-- end <= start carry no time and are left out. The segments tile [first start, last end].
-- The *_before_ns columns accumulate each predicate's time over the earlier segments of the
-- GPU, so the time under a predicate inside any window [a, b) is a difference of two lookups
-- (ASOF on start_ns): before + (b - start_ns if the predicate holds at b) minus the same at a.
--
-- Columns:
--   pid              BIGINT    process id
--   device_id        BIGINT    nsys GPU id
--   start_ns         BIGINT    segment start
--   end_ns           BIGINT    segment end
--   duration_ns      BIGINT    end_ns - start_ns (always > 0)
--   n_all            BIGINT    activities running
--   n_compute        BIGINT    compute kernels running (gemm, attention, other)
--   n_gemm           BIGINT    GEMM kernels running
--   n_attention      BIGINT    attention kernels running
--   n_comm           BIGINT    communication kernels running
--   n_memcpy         BIGINT    memcpys and memsets running
--   before_source    VARCHAR   source of the activity whose event opens the segment
--   before_id        BIGINT    its activity_id
--   after_source     VARCHAR   source of the activity whose event closes the segment
--   after_id         BIGINT    its activity_id
--   busy_before_ns             BIGINT    time with n_all > 0 before start_ns
--   compute_before_ns          BIGINT    time with n_compute > 0 before start_ns
--   gemm_before_ns             BIGINT    time with n_gemm > 0 before start_ns
--   attention_before_ns        BIGINT    time with n_attention > 0 before start_ns
--   comm_before_ns             BIGINT    time with n_comm > 0 before start_ns
--   exposed_comm_before_ns     BIGINT    time with comm but no compute before start_ns
--   memcpy_before_ns           BIGINT    time with n_memcpy > 0 before start_ns
--   exposed_memcpy_before_ns   BIGINT    time with copies only before start_ns
CREATE TABLE gpu_segment AS
WITH timed AS (
    SELECT pid, device_id, start_ns, end_ns, source, activity_id,
        (class NOT IN ('comm', 'memcpy'))::BIGINT AS is_compute,
        (class = 'gemm')::BIGINT AS is_gemm,
        (class = 'attention')::BIGINT AS is_attention,
        (class = 'comm')::BIGINT AS is_comm,
        (class = 'memcpy')::BIGINT AS is_memcpy
    FROM activity
    WHERE end_ns > start_ns
),
events AS (
    SELECT pid, device_id, start_ns AS t, 1 AS d, source, activity_id, is_compute, is_gemm,
        is_attention, is_comm, is_memcpy
    FROM timed
    UNION ALL
    SELECT pid, device_id, end_ns, -1, source, activity_id, -is_compute, -is_gemm,
        -is_attention, -is_comm, -is_memcpy
    FROM timed
),
swept AS (
    SELECT pid, device_id, t, source, activity_id,
        sum(d) OVER w AS n_all,
        sum(is_compute) OVER w AS n_compute,
        sum(is_gemm) OVER w AS n_gemm,
        sum(is_attention) OVER w AS n_attention,
        sum(is_comm) OVER w AS n_comm,
        sum(is_memcpy) OVER w AS n_memcpy,
        lead(t) OVER w AS next_t,
        lead(source) OVER w AS next_source,
        lead(activity_id) OVER w AS next_id
    FROM events
    WINDOW w AS (
        PARTITION BY pid, device_id ORDER BY t, d, source, activity_id
        ROWS UNBOUNDED PRECEDING
    )
),
segments AS (
    SELECT pid, device_id, t AS start_ns, next_t AS end_ns, next_t - t AS duration_ns,
        n_all::BIGINT AS n_all, n_compute::BIGINT AS n_compute, n_gemm::BIGINT AS n_gemm,
        n_attention::BIGINT AS n_attention, n_comm::BIGINT AS n_comm,
        n_memcpy::BIGINT AS n_memcpy,
        source AS before_source, activity_id AS before_id,
        next_source AS after_source, next_id AS after_id
    FROM swept
    WHERE next_t > t
)
SELECT *,
    coalesce(sum(CASE WHEN n_all > 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS busy_before_ns,
    coalesce(sum(CASE WHEN n_compute > 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS compute_before_ns,
    coalesce(sum(CASE WHEN n_gemm > 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS gemm_before_ns,
    coalesce(sum(CASE WHEN n_attention > 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS attention_before_ns,
    coalesce(sum(CASE WHEN n_comm > 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS comm_before_ns,
    coalesce(sum(CASE WHEN n_comm > 0 AND n_compute = 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS exposed_comm_before_ns,
    coalesce(sum(CASE WHEN n_memcpy > 0 THEN duration_ns END) OVER c, 0)::BIGINT
        AS memcpy_before_ns,
    coalesce(sum(
        CASE WHEN n_memcpy > 0 AND n_compute = 0 AND n_comm = 0 THEN duration_ns END
    ) OVER c, 0)::BIGINT AS exposed_memcpy_before_ns
FROM segments
WINDOW c AS (
    PARTITION BY pid, device_id ORDER BY start_ns
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
)
