-- data_path_stage: per GPU and data-path stage (copies by kind, each collective op): calls,
-- bytes, time, exposed time and an alpha-beta fit of time against bytes
--
-- A copy's stage is memcpy's `stage` (h2d, d2h, d2d, p2p, h2h, memset); a collective's is its
-- op. `bytes` sums the calls whose size is known (every copy; a collective's message size from
-- NCCL's NVTX payload, PyTorch's metadata or --comm-bytes), NULL when no call's is; `timed_ns`
-- is those calls' time, the denominator of achieved bandwidth. exposed_ns is the union of the
-- stage's intervals that nothing else covers (grouped_island: a copy not under any kernel, a
-- collective not under compute). The fit is least squares of duration on bytes over the calls
-- with a size and a duration (fit_alpha_ns = per-call cost, fit_ns_per_byte = its inverse
-- bandwidth; fit_r2 how well the line explains the durations), NULL unless their sizes differ.
-- time_median_bytes is the size at the middle of the sized calls' time: the smallest size such
-- that the calls of that size or smaller take half of it or more (a count median would let many
-- tiny copies hide one long, large one). pageable_bytes and pinned_bytes split a copy stage's
-- bytes by the host memory they read or write (memcpy's host_memory), NULL for collectives.
-- nsysreport/sections/data_path.py
-- turns these into bandwidth, ceiling, utilisation and bound (docs/metrics.md, "Data path").
--
-- Reads: collective, grouped_island, memcpy
--
-- Columns:
--   pid               BIGINT    process id
--   device_id         BIGINT    nsys GPU id
--   kind              VARCHAR   copy or collective
--   stage             VARCHAR   h2d, d2h, d2d, p2p, h2h, memset, unknown, or a collective op
--   count             BIGINT    calls
--   sized             BIGINT    calls whose bytes are known
--   bytes             BIGINT    sum of the known sizes, NULL when none is known
--   time_ns           BIGINT    sum of durations
--   timed_ns          BIGINT    sum of durations of the calls whose bytes are known
--   exposed_ns        BIGINT    union of the stage's intervals that nothing else covers
--   sizes             BIGINT    distinct sizes among the calls
--   min_bytes         BIGINT    smallest size
--   max_bytes         BIGINT    largest size
--   time_median_bytes BIGINT    the size at the middle of the sized calls' time
--   pageable_bytes    BIGINT    copies: bytes to or from pageable host memory (NULL: collective)
--   pinned_bytes      BIGINT    copies: bytes to or from pinned host memory (NULL: collective)
--   fit_alpha_ns      DOUBLE    least-squares intercept: ns per call
--   fit_ns_per_byte   DOUBLE    least-squares slope: ns per byte
--   fit_r2            DOUBLE    the share of the durations' variance the line explains
WITH calls AS (
    SELECT pid, device_id, 'copy' AS kind, stage, bytes,
        greatest(end_ns - start_ns, 0) AS duration_ns, host_memory
    FROM memcpy
    UNION ALL
    SELECT pid, device_id, 'collective', op, message_bytes, duration_ns, NULL
    FROM collective
    WHERE NOT late_start  -- a wait for a late-starting rank moves no bytes in its seconds
),
time_sorted AS (
    -- Each sized call with the time of the calls of its size or smaller before it (ties in any
    -- order: the size where half the time is reached is the same).
    SELECT pid, device_id, kind, stage, bytes,
        sum(duration_ns) OVER (PARTITION BY pid, device_id, kind, stage ORDER BY bytes
            ROWS UNBOUNDED PRECEDING) AS time_upto,
        sum(duration_ns) OVER (PARTITION BY pid, device_id, kind, stage) AS time_all
    FROM calls
    WHERE bytes IS NOT NULL
),
time_median AS (
    SELECT pid, device_id, kind, stage, min(bytes) FILTER (2 * time_upto >= time_all)
        AS time_median_bytes
    FROM time_sorted
    GROUP BY ALL
),
stats AS (
    SELECT pid, device_id, kind, stage,
        count(*) AS count,
        count(bytes) AS sized,
        sum(bytes)::BIGINT AS bytes,
        sum(duration_ns)::BIGINT AS time_ns,
        coalesce(sum(duration_ns) FILTER (bytes IS NOT NULL), 0)::BIGINT AS timed_ns,
        count(DISTINCT bytes) AS sizes,
        min(bytes) AS min_bytes,
        max(bytes) AS max_bytes,
        CASE WHEN kind = 'copy' THEN coalesce(sum(bytes) FILTER (host_memory = 'pageable'), 0)
            END::BIGINT AS pageable_bytes,
        CASE WHEN kind = 'copy' THEN coalesce(sum(bytes) FILTER (host_memory = 'pinned'), 0)
            END::BIGINT AS pinned_bytes,
        count(DISTINCT bytes) FILTER (duration_ns > 0) AS fit_sizes,
        -- The least-squares sums, exact (HUGEINT): DuckDB's regr_* sum doubles in whatever
        -- order its threads meet the rows, so their last digits changed from one load to the
        -- next (a Parquet and a SQLite load of one capture disagreed in the 15th digit).
        count(bytes) FILTER (duration_ns > 0)::HUGEINT AS n,
        sum(bytes::HUGEINT) FILTER (duration_ns > 0) AS sx,
        sum(duration_ns::HUGEINT) FILTER (duration_ns > 0 AND bytes IS NOT NULL) AS sy,
        sum(bytes::HUGEINT * duration_ns) FILTER (duration_ns > 0) AS sxy,
        sum(bytes::HUGEINT * bytes) FILTER (duration_ns > 0) AS sxx,
        sum(duration_ns::HUGEINT * duration_ns) FILTER (duration_ns > 0 AND bytes IS NOT NULL)
            AS syy
    FROM calls
    GROUP BY pid, device_id, kind, stage
),
fitted AS (
    -- NULL, not NaN, when the sizes do not vary: there is no line to fit. With
    -- dx = n·Σx² − (Σx)², dy = n·Σy² − (Σy)², c = n·Σxy − Σx·Σy (all exact):
    -- slope = c / dx, intercept = (Σy·Σx² − Σx·Σxy) / dx, r² = c² / (dx·dy) (1 when dy = 0).
    SELECT *,
        CASE WHEN fit_sizes > 1 THEN (sy * sxx - sx * sxy)::DOUBLE / (n * sxx - sx * sx)::DOUBLE
            END AS fit_alpha_ns,
        CASE WHEN fit_sizes > 1 THEN (n * sxy - sx * sy)::DOUBLE / (n * sxx - sx * sx)::DOUBLE
            END AS fit_ns_per_byte,
        CASE WHEN fit_sizes > 1 AND n * syy - sy * sy = 0 THEN 1.0
            WHEN fit_sizes > 1 THEN ((n * sxy - sx * sy)::DOUBLE / (n * sxx - sx * sx)::DOUBLE)
                * ((n * sxy - sx * sy)::DOUBLE / (n * syy - sy * sy)::DOUBLE) END AS fit_r2
    FROM stats
),
exposed AS (
    SELECT pid, device_id, CASE grouping WHEN 'copy' THEN 'copy' ELSE 'collective' END AS kind,
        group_key AS stage, sum(exposed_ns)::BIGINT AS exposed_ns
    FROM grouped_island
    WHERE grouping IN ('copy', 'op')
    GROUP BY ALL
)
SELECT s.pid, s.device_id, s.kind, s.stage, s.count, s.sized, s.bytes, s.time_ns, s.timed_ns,
    coalesce(e.exposed_ns, 0)::BIGINT AS exposed_ns,
    s.sizes, s.min_bytes, s.max_bytes, m.time_median_bytes, s.pageable_bytes, s.pinned_bytes,
    s.fit_alpha_ns, s.fit_ns_per_byte, s.fit_r2
FROM fitted AS s
LEFT JOIN exposed AS e
    ON e.pid = s.pid AND e.device_id = s.device_id AND e.kind = s.kind AND e.stage = s.stage
LEFT JOIN time_median AS m
    ON m.pid = s.pid AND m.device_id = s.device_id AND m.kind = s.kind AND m.stage = s.stage
ORDER BY s.pid, s.device_id, s.kind DESC, s.time_ns DESC, s.stage
