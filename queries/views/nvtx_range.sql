-- nvtx_range: NVTX push/pop and start/end ranges that start and end on one thread
--
-- Event types 59/60 (and NVTXT 70/71). Ranges that never ended (NULL end) or ended on another
-- thread cannot contain launches on one thread and are left out, as NVIDIA's projection does.
-- Names are coalesce(StringIds[textId], text); domain names come from the DomainCreate rows
-- (event type 75) of the same process, else `domain <id>`; domain 0 is the default domain.
-- The payload is the message size NCCL's extended payload records (nccl_payload, decoded at
-- load from an export made with --include-blobs=true), else the row's integer payload.
--
-- Reads: NVTX_EVENTS, StringIds, nccl_payload
--
-- Columns:
--   range_id         BIGINT    the row's file_row in NVTX_EVENTS
--   pid              BIGINT    process id
--   tid              BIGINT    thread id
--   global_tid       BIGINT    nsys global thread id
--   start_ns         BIGINT    range start
--   end_ns           BIGINT    range end
--   name             VARCHAR   range text
--   domain_id        BIGINT    NVTX domain id (0 = default)
--   domain           VARCHAR   domain name, NULL for the default domain
--   payload          BIGINT    NCCL's message bytes (nccl_payload), else the integer payload
--                              (uint64Value or int64Value), if any
CREATE VIEW nvtx_range AS
WITH domains AS (
    SELECT
        (d.globalTid >> 24) & 16777215 AS pid,
        d.domainId AS domain_id,
        arg_min(coalesce(s.value, d.text), d.start) AS domain
    FROM NVTX_EVENTS AS d
    LEFT JOIN (SELECT id, min(value) AS value FROM StringIds GROUP BY id) AS s
        ON s.id = d.textId
    WHERE d.eventType = 75
    GROUP BY ALL
)
SELECT
    e.file_row AS range_id,
    (e.globalTid >> 24) & 16777215 AS pid,
    e.globalTid & 16777215 AS tid,
    e.globalTid AS global_tid,
    e.start AS start_ns,
    e."end" AS end_ns,
    coalesce(s.value, e.text) AS name,
    coalesce(e.domainId, 0) AS domain_id,
    CASE WHEN coalesce(e.domainId, 0) <> 0
        THEN coalesce(d.domain, 'domain ' || e.domainId) END AS domain,
    coalesce(p.message_bytes, e.uint64Value, e.int64Value) AS payload
FROM NVTX_EVENTS AS e
LEFT JOIN nccl_payload AS p ON p.range_id = e.file_row
-- An id listed twice reads as its smallest value (kernel_name): no range counted twice.
LEFT JOIN (SELECT id, min(value) AS value FROM StringIds GROUP BY id) AS s
    ON s.id = e.textId
LEFT JOIN domains AS d
    ON d.pid = (e.globalTid >> 24) & 16777215 AND d.domain_id = e.domainId
WHERE e.eventType IN (59, 60, 70, 71)
    AND e."end" IS NOT NULL
    AND (e.endGlobalTid IS NULL OR e.endGlobalTid = e.globalTid)
