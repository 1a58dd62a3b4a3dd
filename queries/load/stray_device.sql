-- stray_device: the stray devices beside the GPU list, for the refusal of a trace of strays only
--
-- A trace whose every kernel ran on a stray device (gpu_list_match) has no kernel to report
-- (no_usable_kernel); the refusal says which devices those are, what the list holds and why
-- they are strays, so that it is true of the file it names: all have under a tenth of the
-- busiest device's rows (`few`), or the list numbers other rows' devices as they do. One row.
--
-- Reads: TARGET_INFO_GPU, gpu_device
SELECT
    (SELECT string_agg(device_id::VARCHAR, ', ' ORDER BY device_id)
        FROM gpu_device WHERE verdict = 'stray') AS strays,
    (SELECT sum(row_count)::BIGINT FROM gpu_device WHERE verdict = 'stray') AS stray_rows,
    (SELECT string_agg(id::VARCHAR, ', ' ORDER BY id)
        FROM (SELECT DISTINCT id FROM TARGET_INFO_GPU WHERE id IS NOT NULL)) AS listed,
    (SELECT arg_max(device_id, row_count) FROM gpu_device) AS busiest,
    (SELECT max(row_count) FROM gpu_device) AS busiest_rows,
    (SELECT bool_and(row_count * 10 < (SELECT max(row_count) FROM gpu_device))
        FROM gpu_device WHERE verdict = 'stray') AS few
