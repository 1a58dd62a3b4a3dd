-- kineto_kernel: Kineto's kernel events as CUPTI kernel rows, named through kineto_string
--
-- A kernel without a name keeps the placeholder name (no string id: kernel_name's).
--
-- Reads: kineto_gpu_event, kineto_string
-- Writes: CUPTI_ACTIVITY_KIND_KERNEL
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (file_row, "start", "end", deviceId, streamId, correlationId,
    globalPid, contextId, demangledName, shortName)
SELECT g.event_index, g.start, g."end", g.device_id, g.stream_id, g.correlation_id, g.global_pid,
    TRY_CAST(g.args->>'context' AS BIGINT), s.id, s.id
FROM kineto_gpu_event AS g LEFT JOIN kineto_string AS s ON s.name = g.name
WHERE g.cat = 'kernel'
