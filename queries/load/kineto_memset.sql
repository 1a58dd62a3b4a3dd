-- kineto_memset: Kineto's gpu_memset events as CUPTI memset rows
--
-- Reads: kineto_gpu_event
-- Writes: CUPTI_ACTIVITY_KIND_MEMSET
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (file_row, "start", "end", deviceId, streamId, correlationId,
    globalPid, bytes)
SELECT g.event_index, g.start, g."end", g.device_id, g.stream_id, g.correlation_id, g.global_pid,
    TRY_CAST(g.args->>'bytes' AS BIGINT)
FROM kineto_gpu_event AS g
WHERE g.cat = 'gpu_memset'
