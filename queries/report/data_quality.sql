-- data_quality: the rows the analysis left out, and the rows it counts with a caveat
--
-- `skipped`: skipped_row (rows the load could not type, GPU rows the base views leave out).
-- `kept`: rows counted but not as they claim: kernels with no name at all (kernel_name),
-- counted as compute (class other); GPU rows that end before they start, counted with no
-- time (docs/metrics.md); kernels with no correlation id, counted with no launch (so in no
-- NVTX range); rows a loader kept with a value taken from elsewhere (load_kept; a GPU list
-- renumbered to the rows' device ids, gpu_list_match); a metadata value read as JSON that is
-- not JSON, ignored (gpu_hardware); kernels and copies on a device that the GPU list neither
-- holds nor matches (gpu_device), counted on a GPU of their own that has no listed name or
-- properties. On a GPU whose first collective waited seconds for a late-starting rank
-- (late_start_wait): that kernel, and the activities that ended before it did, left out of the
-- times (the activity view clips them to the GPU's analysed window). Kernels with a duration
-- that cannot be (stream_overlap's `impossible`: past the next kernel on their stream),
-- counted once in every time.
--
-- Reads: META_DATA_EXPORT, gpu_device, graph_launch, kernel, late_start_wait, load_kept,
--   memcpy, skipped_row, stream_overlap
--
-- Columns:
--   kind     VARCHAR   skipped or kept
--   source   VARCHAR   raw table the rows come from, e.g. CUPTI_ACTIVITY_KIND_KERNEL
--   reason   VARCHAR   why they were skipped, or the caveat
--   count    BIGINT    how many rows
WITH cut AS (SELECT DISTINCT pid, device_id, cut_ns FROM late_start_wait),
before_cut AS (
    -- The activities of such a GPU that ended by its cut, the waits aside.
    SELECT 'CUPTI_ACTIVITY_KIND_KERNEL' AS source, k.kernel_id AS id, k.pid, k.device_id,
        k.end_ns
    FROM kernel AS k
    WHERE k.kernel_id NOT IN (SELECT kernel_id FROM late_start_wait)
    UNION ALL
    SELECT 'CUPTI_ACTIVITY_KIND_' || upper(source), memcpy_id, pid, device_id, end_ns
    FROM memcpy
    UNION ALL
    SELECT 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE', graph_launch_id, pid, device_id, end_ns
    FROM graph_launch
)
SELECT kind, source, reason, count
FROM (
    SELECT 'skipped' AS kind, source, reason, count FROM skipped_row
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_KERNEL', 'no name: counted as compute', count(*)
    FROM kernel
    WHERE unnamed
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_KERNEL', 'end before start: counted, with no time',
        count(*)
    FROM kernel
    WHERE end_ns < start_ns
    UNION ALL
    -- No launch joins it, so no NVTX range (step, layer, op) holds it.
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_KERNEL', 'no correlation id: counted, with no launch',
        count(*)
    FROM kernel
    WHERE correlation_id IS NULL
    UNION ALL
    SELECT 'kept', source, reason, count FROM load_kept
    UNION ALL
    -- The one metadata value read as JSON (gpu_hardware): one that does not parse is absent.
    SELECT 'kept', 'META_DATA_EXPORT', 'text that is not JSON: ignored', count(*)
    FROM META_DATA_EXPORT
    WHERE name = 'NSYSREPORT_SIMULATION' AND NOT json_valid(value)
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_' || upper(source),
        'end before start: counted, with no time', count(*)
    FROM memcpy
    WHERE end_ns < start_ns
    GROUP BY source
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_KERNEL',
        'a device the GPU list does not hold: counted, with no GPU properties', count(*)
    FROM kernel
    WHERE device_id IN (SELECT device_id FROM gpu_device WHERE verdict = 'unmatched')
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_' || upper(source),
        'a device the GPU list does not hold: counted, with no GPU properties', count(*)
    FROM memcpy
    WHERE device_id IN (SELECT device_id FROM gpu_device WHERE verdict = 'unmatched')
    GROUP BY source
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_KERNEL',
        'a wait for a late-starting rank: left out of the times', count(*)
    FROM late_start_wait
    UNION ALL
    SELECT 'kept', b.source, 'an end before a late-starting rank arrived: left out of the times',
        count(*)
    FROM before_cut AS b
    JOIN cut AS c ON c.pid = b.pid AND c.device_id = b.device_id
    WHERE b.end_ns <= c.cut_ns
    GROUP BY b.source
    UNION ALL
    SELECT 'kept', 'CUPTI_ACTIVITY_KIND_KERNEL',
        'a duration that cannot be (past the next kernel on its stream): counted once', count(*)
    FROM stream_overlap
    WHERE kind = 'impossible'
)
WHERE count > 0
ORDER BY kind DESC, source, reason
