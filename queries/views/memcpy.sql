-- memcpy: one row per CUDA memcpy or memset, with its copy kind and bytes
--
-- Memsets are included with copy_kind `memset`, as NVIDIA's reports label them. Copy-kind
-- labels come from ENUM_CUDA_MEMCPY_OPER when the export has it (schema 3.x), else from the
-- same fixed list (schema 2.x exports have no enum tables); an id listed twice reads as its
-- smallest label (as StringIds in kernel_name), so no copy is counted twice. Rows the analysis
-- cannot use (unusable_row) are left out and counted in skipped_row. `stage` is the data-path
-- stage the copy uses (docs/metrics.md, "Data path"): the path its bytes take, so a copy to or
-- from a CUDA array counts as the device side, and a unified-memory migration as the direction
-- it moves. `host_memory` is the kind of host memory the copy reads or writes, from srcKind and
-- dstKind in ENUM_CUDA_MEM_KIND's numbering (0 Pageable, 1 Pinned, 2 Device, ...: the same ids in
-- every nsys export read, docs/export-format.md, "Pinned and pageable copies"): pageable when
-- either side is pageable, pinned when either is pinned, else NULL (no host side, or not known).
--
-- Reads: CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, ENUM_CUDA_MEMCPY_OPER,
--   unusable_row
--
-- Columns:
--   memcpy_id        BIGINT    the row's file_row in its source table
--   source           VARCHAR   memcpy or memset
--   pid              BIGINT    process id
--   global_pid       BIGINT    nsys global process id
--   device_id        BIGINT    nsys GPU id
--   stream_id        BIGINT    CUPTI stream id
--   correlation_id   BIGINT    joins the launching API call within the process
--   start_ns         BIGINT    GPU start
--   end_ns           BIGINT    GPU end
--   duration_ns      BIGINT    end_ns - start_ns
--   bytes            BIGINT    bytes copied or set
--   copy_kind        VARCHAR   Host-to-Device, Device-to-Host, Peer-to-Peer, ..., or memset
--   name             VARCHAR   [CUDA memcpy <kind>] or [CUDA memset]
--   stage            VARCHAR   h2d, d2h, d2d, p2p, h2h, memset or unknown
--   host_memory      VARCHAR   pageable, pinned, or NULL (no host side, or its kind unknown)
CREATE VIEW memcpy AS
WITH fallback_kind(id, label) AS (
    VALUES (0, 'Unknown'), (1, 'Host-to-Device'), (2, 'Device-to-Host'), (3, 'Host-to-Array'),
        (4, 'Array-to-Host'), (5, 'Array-to-Array'), (6, 'Array-to-Device'),
        (7, 'Device-to-Array'), (8, 'Device-to-Device'), (9, 'Host-to-Host'),
        (10, 'Peer-to-Peer'), (11, 'Unified Host-to-Device'), (12, 'Unified Device-to-Host'),
        (13, 'Unified Device-to-Device')
),
copies AS (
    SELECT
        m.file_row AS memcpy_id,
        'memcpy' AS source,
        m.globalPid,
        m.deviceId,
        m.streamId,
        m.correlationId,
        m.start,
        m."end",
        m.bytes,
        coalesce(e.label, f.label, 'Unknown') AS copy_kind,
        CASE WHEN 0 IN (m.srcKind, m.dstKind) THEN 'pageable'
            WHEN 1 IN (m.srcKind, m.dstKind) THEN 'pinned' END AS host_memory
    FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
    LEFT JOIN (SELECT id, min(label) AS label FROM ENUM_CUDA_MEMCPY_OPER GROUP BY id) AS e
        ON e.id = m.copyKind
    LEFT JOIN fallback_kind AS f ON f.id = m.copyKind
    WHERE m.file_row NOT IN (
        SELECT row_id FROM unusable_row WHERE source = 'CUPTI_ACTIVITY_KIND_MEMCPY'
    )
    UNION ALL
    SELECT file_row, 'memset', globalPid, deviceId, streamId, correlationId, start, "end", bytes,
        'memset', NULL
    FROM CUPTI_ACTIVITY_KIND_MEMSET
    WHERE file_row NOT IN (
        SELECT row_id FROM unusable_row WHERE source = 'CUPTI_ACTIVITY_KIND_MEMSET'
    )
)
SELECT
    memcpy_id,
    source,
    (globalPid >> 24) & 16777215 AS pid,
    globalPid AS global_pid,
    deviceId AS device_id,
    streamId AS stream_id,
    correlationId AS correlation_id,
    start AS start_ns,
    "end" AS end_ns,
    "end" - start AS duration_ns,
    bytes,
    copy_kind,
    CASE WHEN source = 'memset' THEN '[CUDA memset]' ELSE '[CUDA memcpy ' || copy_kind || ']' END
        AS name,
    CASE
        WHEN source = 'memset' THEN 'memset'
        WHEN copy_kind IN ('Host-to-Device', 'Host-to-Array', 'Unified Host-to-Device') THEN 'h2d'
        WHEN copy_kind IN ('Device-to-Host', 'Array-to-Host', 'Unified Device-to-Host') THEN 'd2h'
        WHEN copy_kind IN ('Device-to-Device', 'Array-to-Array', 'Array-to-Device',
            'Device-to-Array', 'Unified Device-to-Device') THEN 'd2d'
        WHEN copy_kind = 'Peer-to-Peer' THEN 'p2p'
        WHEN copy_kind = 'Host-to-Host' THEN 'h2h'
        ELSE 'unknown'
    END AS stage,
    host_memory
FROM copies
