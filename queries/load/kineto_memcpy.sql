-- kineto_memcpy: Kineto's gpu_memcpy events as CUPTI memcpy rows, the kind read from the name
--
-- copyKind in nsys's numbering (ENUM_CUDA_MEMCPY_OPER): 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH,
-- 10 PtoP, 0 unknown.
--
-- Reads: kineto_gpu_event
-- Writes: CUPTI_ACTIVITY_KIND_MEMCPY
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (file_row, "start", "end", deviceId, streamId, correlationId,
    globalPid, bytes, copyKind)
SELECT g.event_index, g.start, g."end", g.device_id, g.stream_id, g.correlation_id, g.global_pid,
    TRY_CAST(g.args->>'bytes' AS BIGINT),
    CASE WHEN g.name LIKE '%HtoD%' THEN 1 WHEN g.name LIKE '%DtoH%' THEN 2
        WHEN g.name LIKE '%DtoD%' THEN 8 WHEN g.name LIKE '%HtoH%' THEN 9
        WHEN g.name LIKE '%PtoP%' THEN 10 ELSE 0 END
FROM kineto_gpu_event AS g
WHERE g.cat = 'gpu_memcpy'
