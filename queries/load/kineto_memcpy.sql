-- kineto_memcpy: Kineto's gpu_memcpy events as CUPTI memcpy rows, the kinds read from the name
--
-- copyKind in nsys's numbering (ENUM_CUDA_MEMCPY_OPER): 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH,
-- 10 PtoP, 0 unknown. Kineto names a copy `Memcpy HtoD (Pinned -> Device)`: the source and
-- destination memory kinds in parentheses (libkineto's memcpyName), which become srcKind and
-- dstKind in nsys's numbering (ENUM_CUDA_MEM_KIND: 0 Pageable, 1 Pinned, 2 Device, 3 Array,
-- 4 Managed, 5 Device Static, 6 Managed Static, 7 Unknown); NULL when the name has none
-- (docs/export-format.md, "Pinned and pageable copies").
--
-- Reads: kineto_gpu_event
-- Writes: CUPTI_ACTIVITY_KIND_MEMCPY
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (file_row, "start", "end", deviceId, streamId, correlationId,
    globalPid, bytes, copyKind, srcKind, dstKind)
WITH mem_kind(id, label) AS (
    VALUES (0, 'Pageable'), (0, 'Pagable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array'),
        (4, 'Managed'), (5, 'Device Static'), (6, 'Managed Static'), (7, 'Unknown')
),
copies AS (
    SELECT g.*,
        regexp_extract(g.name, '\(([A-Za-z ]+) -> ([A-Za-z ]+)\)', 1) AS src_label,
        regexp_extract(g.name, '\(([A-Za-z ]+) -> ([A-Za-z ]+)\)', 2) AS dst_label
    FROM kineto_gpu_event AS g
    WHERE g.cat = 'gpu_memcpy'
)
SELECT g.event_index, g.start, g."end", g.device_id, g.stream_id, g.correlation_id, g.global_pid,
    TRY_CAST(g.args->>'bytes' AS BIGINT),
    CASE WHEN g.name LIKE '%HtoD%' THEN 1 WHEN g.name LIKE '%DtoH%' THEN 2
        WHEN g.name LIKE '%DtoD%' THEN 8 WHEN g.name LIKE '%HtoH%' THEN 9
        WHEN g.name LIKE '%PtoP%' THEN 10 ELSE 0 END,
    s.id, d.id
FROM copies AS g
LEFT JOIN mem_kind AS s ON s.label = g.src_label
LEFT JOIN mem_kind AS d ON d.label = g.dst_label
ORDER BY g.event_index
