-- kineto_kernel: Kineto's kernel events as CUPTI kernel rows, named through kineto_string
--
-- A kernel without a name keeps the placeholder name (no string id: kernel_name's). A kernel
-- replayed from a CUDA or HIP graph shares its correlation id with the `cudaGraphLaunch` or
-- `hipGraphLaunch` call that replayed it (vLLM's and SGLang's decode: one launch, hundreds of
-- kernels, none with an External id): its graphId is that correlation id, one per replay, as
-- nsys 2026 marks a replayed kernel with its graph (docs/export-format.md).
--
-- Reads: kineto_event, kineto_gpu_event, kineto_string
-- Writes: CUPTI_ACTIVITY_KIND_KERNEL
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (file_row, "start", "end", deviceId, streamId, correlationId,
    globalPid, contextId, demangledName, shortName, graphId)
WITH graph_launch_call AS (
    SELECT DISTINCT TRY_CAST(args->>'correlation' AS BIGINT) AS correlation_id
    FROM kineto_event
    WHERE cat IN ('cuda_runtime', 'cuda_driver') AND regexp_matches(name, '(?i)graph_?launch')
)
SELECT g.event_index, g.start, g."end", g.device_id, g.stream_id, g.correlation_id, g.global_pid,
    TRY_CAST(g.args->>'context' AS BIGINT), s.id, s.id,
    CASE WHEN l.correlation_id IS NOT NULL THEN g.correlation_id END
FROM kineto_gpu_event AS g
LEFT JOIN kineto_string AS s ON s.name = g.name
LEFT JOIN graph_launch_call AS l ON l.correlation_id = g.correlation_id
WHERE g.cat = 'kernel'
