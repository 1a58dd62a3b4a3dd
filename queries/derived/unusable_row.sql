-- unusable_row: each kernel, memcpy, memset and graph launch row the analysis cannot use, and why
--
-- Materialised (CREATE TABLE) when the trace is opened. The base views (kernel, memcpy) leave
-- out exactly these rows (graph_launch too) and skipped_row counts them: the predicate is written once, here.
-- Reasons, the first that applies: `no start time`, `no end time`, `no device id`,
-- `no process id`, `no stream id` (NULL where a time, a GPU or its lane is needed);
-- `negative time`; `device id out of range` (CUPTI's device ids are 32-bit unsigned: -5 or
-- INT64_MAX is no GPU, and would report a phantom one); `not a process id`: a globalPid that
-- is negative or has thread bits (the low 24) set, which no export writes
-- (docs/export-format.md, "Processes") and no launch joins;
-- `device not in the trace`: a stray device id (gpu_device, made by queries/load/
-- gpu_list_match.sql): one that the export's GPU list (TARGET_INFO_GPU) does not hold, and
-- whose rows are too few for a GPU (or one GPU more than the list holds): such rows would
-- otherwise become a GPU of their own and shift the rank labels of the real ones (an unlisted
-- device with the rows of a GPU is one the list numbers otherwise, or does not describe, and
-- is kept); `process not in the trace`: likewise, a globalPid that the
-- export's process list (PROCESSES) does not hold, where it holds any; `time outside the
-- capture`: a row that starts or ends more than
-- the capture's length D from the median start of the GPU rows, or lasts longer than D. Every
-- row of a capture lies inside it, so no two rows are more than D apart and none is more than D
-- from the median (a bound on both sides, whatever the rows' time base). D is
-- ANALYSIS_DETAILS.duration; the export's startTime and stopTime are not used, because real
-- exports put rows before startTime (perlmutter-cloverleaf: every kernel 1.2-1.6 s before it)
-- or on another clock (rtx3080_tiny_2026.1: startTime 515,396 s, kernels at 1.5 s;
-- docs/export-format.md). Without a duration (a PyTorch profiler trace) no bound is exact: D is
-- the largest of the extent of the host's rows (CUDA API calls and NVTX/annotation ranges,
-- which launch and wait for the GPU rows), 20 median absolute deviations of the GPU rows'
-- starts (GPU work queued far behind its launches; a few wild rows cannot move it) and 10 s,
-- and a long row is not suspect by its length alone; `duplicate row`: identical to
-- another row of its table (start, end, device, stream, correlation id, process, and the
-- name ids or bytes), whose first copy is kept. Rows with end <= start are usable: they count
-- (kernel_count) but carry no time, as docs/metrics.md says; data_quality notes the ones that end
-- before they start.
-- A new GPU table adds its rows to `gpu_rows`.
--
-- Reads: ANALYSIS_DETAILS, CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_KERNEL,
--   CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
--   NVTX_EVENTS, PROCESSES, gpu_device
--
-- Columns:
--   source   VARCHAR   raw table: CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET or _GRAPH_TRACE
--   row_id   BIGINT    the row's file_row in that table (its rowid in the SQLite file)
--   reason   VARCHAR   why the row is left out
CREATE TABLE unusable_row AS
WITH gpu_rows AS NOT MATERIALIZED (
    SELECT 'CUPTI_ACTIVITY_KIND_KERNEL' AS source, file_row AS row_id, start, "end", deviceId,
        streamId, correlationId, globalPid, demangledName AS what, shortName AS what_2,
        mangledName AS what_3
    FROM CUPTI_ACTIVITY_KIND_KERNEL
    UNION ALL
    SELECT 'CUPTI_ACTIVITY_KIND_MEMCPY', file_row, start, "end", deviceId, streamId,
        correlationId, globalPid, bytes, copyKind, NULL
    FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL
    SELECT 'CUPTI_ACTIVITY_KIND_MEMSET', file_row, start, "end", deviceId, streamId,
        correlationId, globalPid, bytes, NULL, NULL
    FROM CUPTI_ACTIVITY_KIND_MEMSET
    UNION ALL
    SELECT 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE', file_row, start, "end", deviceId, streamId,
        correlationId, globalPid, graphId, graphExecId, NULL
    FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE
),
host AS (
    -- The host's rows: every GPU row follows a CUDA API call; ranges mark the host's work.
    SELECT min(start) AS first, max(greatest(start, "end")) AS last
    FROM (
        SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME
        UNION ALL
        SELECT start, "end" FROM NVTX_EVENTS
    )
    WHERE start >= 0
),
limits AS (
    -- As BIGINT, clamped: the checks below then compare plain integers and cannot overflow.
    SELECT least(span, 9223372036854775807)::BIGINT AS span, exact,
        greatest(median_start - span, -9223372036854775808)::BIGINT AS lowest_time,
        least(median_start + span, 9223372036854775807)::BIGINT AS highest_time
    FROM (
        SELECT
            coalesce(
                (SELECT max(duration)::HUGEINT FROM ANALYSIS_DETAILS WHERE duration > 0),
                greatest(
                    (SELECT (last - first)::HUGEINT FROM host WHERE last > first),
                    (SELECT (20 * mad(start))::HUGEINT FROM gpu_rows WHERE start >= 0),
                    10000000000
                )
            ) AS span,
            (SELECT max(duration) FROM ANALYSIS_DETAILS WHERE duration > 0) IS NOT NULL AS exact,
            -- Of the starts that can be times: a negative one is skipped for that anyway.
            (SELECT quantile_disc(start, 0.5) FROM gpu_rows WHERE start >= 0)::HUGEINT
                AS median_start
    )
),
strays AS (SELECT device_id FROM gpu_device WHERE verdict = 'stray'),
processes AS (SELECT DISTINCT globalPid FROM PROCESSES WHERE globalPid IS NOT NULL),
checked AS NOT MATERIALIZED (
    SELECT g.source, g.row_id, CASE
        WHEN g.start IS NULL THEN 'no start time'
        WHEN g."end" IS NULL THEN 'no end time'
        WHEN g.deviceId IS NULL THEN 'no device id'
        WHEN g.globalPid IS NULL THEN 'no process id'
        WHEN g.streamId IS NULL THEN 'no stream id'
        WHEN g.start < 0 OR g."end" < 0 THEN 'negative time'
        WHEN g.deviceId NOT BETWEEN 0 AND 4294967295 THEN 'device id out of range'
        WHEN g.globalPid < 0 OR g.globalPid & 16777215 <> 0 THEN 'not a process id'
        WHEN g.deviceId IN (SELECT device_id FROM strays) THEN 'device not in the trace'
        WHEN g.globalPid NOT IN (SELECT globalPid FROM processes)
            AND EXISTS (SELECT 1 FROM processes)
            THEN 'process not in the trace'
        -- Both are >= 0 here, so end - start cannot overflow.
        WHEN (l.exact AND g."end" - g.start > l.span)
            OR least(g.start, g."end") < l.lowest_time
            OR greatest(g.start, g."end") > l.highest_time
            THEN 'time outside the capture'
    END AS reason,
        -- Duplicates are found by one hash of the row (one 64-bit key groups fast), then
        -- confirmed column by column: a hash collision is never taken for a duplicate.
        hash(
            g.source, g.start, g."end", g.deviceId, g.streamId, g.correlationId, g.globalPid,
            g.what, g.what_2, g.what_3
        ) AS row_hash
    FROM gpu_rows AS g, limits AS l
),
suspects AS (
    -- Rows identical to another have the same reason: only usable rows get here.
    SELECT g.*
    FROM gpu_rows AS g
    WHERE hash(
            g.source, g.start, g."end", g.deviceId, g.streamId, g.correlationId, g.globalPid,
            g.what, g.what_2, g.what_3
        ) IN (
            SELECT row_hash FROM checked WHERE reason IS NULL
            GROUP BY row_hash HAVING count(*) > 1
        )
),
copies AS (
    SELECT source, start, "end", deviceId, streamId, correlationId, globalPid, what, what_2,
        what_3, min(row_id) AS kept
    FROM suspects
    GROUP BY ALL
    HAVING count(*) > 1
)
SELECT source, row_id, reason FROM checked WHERE reason IS NOT NULL
UNION ALL
SELECT u.source, u.row_id, 'duplicate row'
FROM suspects AS u
JOIN copies AS c
    ON c.source = u.source AND c.start = u.start AND c."end" = u."end"
    AND c.deviceId = u.deviceId AND c.globalPid = u.globalPid
    AND c.streamId IS NOT DISTINCT FROM u.streamId
    AND c.correlationId IS NOT DISTINCT FROM u.correlationId
    AND c.what IS NOT DISTINCT FROM u.what AND c.what_2 IS NOT DISTINCT FROM u.what_2
    AND c.what_3 IS NOT DISTINCT FROM u.what_3
WHERE u.row_id <> c.kept
