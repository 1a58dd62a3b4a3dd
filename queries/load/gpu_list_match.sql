-- gpu_list_match: the GPU list matched to the device ids the GPU rows carry, renumbered if need be
--
-- A trace's GPU list (nsys: TARGET_INFO_GPU; a PyTorch profiler trace: deviceProperties) and
-- its GPU rows (kernels, copies, memsets, graph launches) need not number the GPUs alike: the
-- profiler numbers the GPUs its process sees from 0, while the rows of a ROCm trace taken with
-- one GPU visible carry the tracer's own number for it (2, 9: docs/export-format.md, "GPU
-- list"). The evidence decides, device by device (gpu_device):
-- - `listed`: the list holds the id.
-- - `stray`: an id the list does not hold, whose rows are damaged rows rather than a GPU: left
--   out (unusable_row: `device not in the trace`), so that no rank label shifts. It has under
--   a tenth of the rows of the busiest device; or the list holds some rows' ids (it numbers
--   the GPUs as the rows do) and it has fewer rows than every listed device with rows, or
--   counting it would make more GPUs than the list holds (such a list holds every GPU the
--   process could use). A list that none of the rows' ids are in, with exactly as many ids as
--   the rows have devices, has no stray: it numbers the same GPUs otherwise, one to one.
-- - `renumbered`: the devices that are no strays are exactly as many as the list's ids, and
--   the list lacks some of them: it numbers the same GPUs otherwise. The two are matched in
--   ascending order (the order CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES give when their
--   ids ascend) and the list's entry takes the rows' id: the GPU keeps its listed name and
--   properties (peaks) and is shown by the id every row of it carries. load_kept notes it.
-- - `unmatched`: any other unlisted id (fewer such GPUs than the list has unused entries): a
--   GPU all the same, that the list does not describe (no name, no properties); data_quality
--   notes its rows.
-- - `no list`: the trace lists no GPU; nothing to match.
--
-- Reads: CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_KERNEL,
--   CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, TARGET_INFO_GPU, gpu_device
-- Writes: gpu_device, TARGET_INFO_GPU, load_kept
INSERT INTO gpu_device
WITH used AS (
    SELECT deviceId AS device_id, count(*) AS row_count
    FROM (
        SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL
        UNION ALL
        SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY
        UNION ALL
        SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMSET
        UNION ALL
        SELECT deviceId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE
    )
    -- An id outside CUPTI's 32 bits is no GPU, whatever the list says (unusable_row).
    WHERE deviceId BETWEEN 0 AND 4294967295
    GROUP BY deviceId
),
listed AS (
    SELECT id, row_number() OVER (ORDER BY id) AS place
    FROM (SELECT DISTINCT id FROM TARGET_INFO_GPU WHERE id IS NOT NULL)
),
facts AS (
    SELECT (SELECT count(*) FROM listed) AS listed_ids,
        (SELECT count(*) FROM used) AS devices,
        EXISTS (SELECT 1 FROM used WHERE device_id IN (SELECT id FROM listed)) AS some_listed,
        (SELECT max(row_count) FROM used) AS busiest,
        -- The least busy listed device's rows; 0 when no listed device has any.
        coalesce(
            (SELECT min(row_count) FROM used WHERE device_id IN (SELECT id FROM listed)), 0
        ) AS least_listed
),
few AS (
    SELECT u.device_id, u.row_count, u.device_id IN (SELECT id FROM listed) AS is_listed,
        f.listed_ids > 0 AND u.device_id NOT IN (SELECT id FROM listed)
            AND (u.row_count * 10 < f.busiest OR u.row_count < f.least_listed)
            AND (f.some_listed OR f.devices <> f.listed_ids) AS is_few
    FROM used AS u, facts AS f
),
judged AS (
    SELECT w.device_id, w.row_count, w.is_listed,
        w.is_few OR (
            NOT w.is_listed AND f.some_listed
            AND (SELECT count(*) FROM few WHERE NOT is_few) > f.listed_ids
        ) AS stray
    FROM few AS w, facts AS f
),
gpus AS (
    SELECT device_id, row_number() OVER (ORDER BY device_id) AS place
    FROM judged
    WHERE NOT stray
),
matched AS (
    SELECT g.device_id, l.id AS listed_id
    FROM gpus AS g
    JOIN listed AS l USING (place)
    WHERE (SELECT count(*) FROM gpus) = (SELECT count(*) FROM listed)
        AND EXISTS (SELECT 1 FROM gpus WHERE device_id NOT IN (SELECT id FROM listed))
)
SELECT j.device_id, j.row_count,
    coalesce(m.listed_id, CASE WHEN j.is_listed THEN j.device_id END) AS listed_id,
    CASE
        WHEN NOT EXISTS (SELECT 1 FROM listed) THEN 'no list'
        WHEN m.listed_id <> j.device_id THEN 'renumbered'
        WHEN j.is_listed OR m.listed_id IS NOT NULL THEN 'listed'
        WHEN j.stray THEN 'stray'
        ELSE 'unmatched'
    END AS verdict
FROM judged AS j
LEFT JOIN matched AS m USING (device_id)
ORDER BY j.device_id;
-- One statement renames every entry at once: a list 0, 1 matched to rows on 1, 2 becomes 1, 2.
UPDATE TARGET_INFO_GPU SET id = d.device_id
FROM gpu_device AS d
WHERE d.verdict = 'renumbered' AND TARGET_INFO_GPU.id = d.listed_id;
INSERT INTO load_kept
SELECT 'TARGET_INFO_GPU',
    'another id than its activities carry ('
        || string_agg(listed_id::VARCHAR, ', ' ORDER BY listed_id)
        || ' in the list; '
        || string_agg(device_id::VARCHAR, ', ' ORDER BY listed_id)
        || ' on the activities): renumbered to theirs',
    count(*)
FROM gpu_device
WHERE verdict = 'renumbered'
HAVING count(*) > 0
