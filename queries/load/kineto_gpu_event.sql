-- kineto_gpu_event: a GPU event's columns in nsys's terms, shared by kernels, memcpys, memsets
--
-- Its end is start + dur as the trace says: missing (NULL, as is an end beyond BIGINT) or
-- before the start, the views treat it as they do nsys rows. Device and stream come from args,
-- else from Kineto's pid and tid; every GPU event belongs to the host process (kineto_host).
-- A view: each insert reads its own category.
--
-- Reads: kineto_event, kineto_host
-- Writes: kineto_gpu_event
CREATE TEMP VIEW kineto_gpu_event AS
SELECT e.event_index, e.cat, e.name, e.args,
    e.start,
    TRY_CAST(e.start::HUGEINT + e.dur AS BIGINT) AS "end",
    coalesce(TRY_CAST(e.args->>'device' AS BIGINT), e.pid) AS device_id,
    coalesce(TRY_CAST(e.args->>'stream' AS BIGINT), e.tid) AS stream_id,
    TRY_CAST(e.args->>'correlation' AS BIGINT) AS correlation_id,
    (SELECT gpid FROM kineto_host) AS global_pid
FROM kineto_event AS e
WHERE e.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
