-- kineto_nccl_range: an NCCL-API-like NVTX range around each NCCL kernel's launch
--
-- An NCCL kernel with collective metadata (args "Collective name", "In msg nelems", "dtype")
-- gets a range around its launching call, named as NCCL's API (ncclAllReduce, ...), whose
-- payload is the message size, as nsys records NCCL's own NVTX ranges. A range made here is no
-- event of the file: its file_row numbers it after every event's index.
--
-- Reads: kineto_event, kineto_host
-- Writes: NVTX_EVENTS
INSERT INTO NVTX_EVENTS (file_row, "start", "end", eventType, globalTid, text, uint64Value)
WITH meta AS (
    SELECT event_index, TRY_CAST(args->>'correlation' AS BIGINT) AS correlation,
        regexp_replace(lower(args->>'Collective name'), '[^a-z]', '', 'g') AS op,
        TRY_CAST(args->>'In msg nelems' AS BIGINT) AS nelems,
        lower(args->>'dtype') AS dtype
    FROM kineto_event
    WHERE cat = 'kernel' AND (args->>'Collective name') IS NOT NULL
),
named AS (
    SELECT *,
        CASE WHEN op LIKE 'allreduce%' THEN 'ncclAllReduce'
            WHEN op LIKE 'allgather%' THEN 'ncclAllGather'
            WHEN op LIKE 'reducescatter%' THEN 'ncclReduceScatter'
            WHEN op LIKE 'alltoall%' THEN 'ncclAllToAll'
            WHEN op LIKE 'broadcast%' THEN 'ncclBroadcast'
            WHEN op LIKE 'reduce%' THEN 'ncclReduce'
            WHEN op LIKE 'send%' THEN 'ncclSend'
            WHEN op LIKE 'recv%' THEN 'ncclRecv' END AS text,
        CASE WHEN dtype IN ('double', 'long', 'int64', 'complexfloat') THEN 8
            WHEN dtype IN ('float', 'int', 'int32', 'complexhalf') THEN 4
            WHEN dtype IN ('half', 'bfloat16', 'short', 'int16') THEN 2
            WHEN dtype IN ('byte', 'char', 'bool', 'int8', 'uint8') OR dtype LIKE 'float8%'
                THEN 1
            WHEN dtype = 'complexdouble' THEN 16 END AS dtype_bytes
    FROM meta
)
SELECT (SELECT max(event_index) FROM kineto_event)
        + row_number() OVER (ORDER BY n.event_index, l.event_index),
    l.start, TRY_CAST(l.start::HUGEINT + greatest(coalesce(l.dur, 0), 0) AS BIGINT), 59,
    (1::BIGINT << 48) | ((l.pid & 16777215) << 24) | (l.tid & 16777215), n.text,
    TRY_CAST(n.nelems::HUGEINT * n.dtype_bytes AS BIGINT)  -- NULL past BIGINT: no size
FROM named AS n
JOIN kineto_event AS l
    ON l.cat IN ('cuda_runtime', 'cuda_driver')
    AND TRY_CAST(l.args->>'correlation' AS BIGINT) = n.correlation
    AND l.pid = (SELECT pid FROM kineto_host)
WHERE n.text IS NOT NULL
