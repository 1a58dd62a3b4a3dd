-- sync_wait: the GPU work each synchronising call waited for, as far as the export says
--
-- A call of sync_call returns once some GPU work is done; which work, its name says
-- (SYNCHRONIZATION's syncType does not: releases write different values for one call,
-- docs/export-format.md "Synchronisation and events"):
--   a synchronous copy (cudaMemcpy, ...)  its own copy (`own`: the activities with its
--                                         correlation id), which follows its stream's work
--   cudaEventSynchronize                  the work submitted to the stream the event was last
--                                         recorded on before the call, before the record
--                                         (CUPTI_ACTIVITY_KIND_CUDA_EVENT: the stream, and the
--                                         record call by its correlation id)
--   cudaStreamSynchronize                 the work submitted to its stream before the call
--                                         (SYNCHRONIZATION's streamId)
--   cudaDeviceSynchronize                 the work submitted to its device before the call:
--                                         its process's (SYNCHRONIZATION's deviceId is not
--                                         the activities' GPU id: 0 in a process on GPU 1)
-- Where the export does not say (no SYNCHRONIZATION row, no record of the event), the work of
-- the call's process submitted before the call: `stream_id` NULL. Streams are told apart
-- within a process by their id alone. nsys writes 0xFFFFFFFF for a stream or event a call
-- names none of.
--
-- Reads: CUPTI_ACTIVITY_KIND_CUDA_EVENT, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, launch, sync_call
--
-- Columns:
--   launch_id      BIGINT    the call (sync_call)
--   global_pid     BIGINT    its process
--   own            BOOLEAN   a synchronous copy: it waited for its own activities
--   stream_id      BIGINT    the stream it waited on (NULL: any)
--   submitted_ns   BIGINT    it waited for work whose launch began before this instant
CREATE VIEW sync_wait AS
WITH sync_row AS (
    SELECT globalPid AS global_pid, correlationId AS correlation_id,
        min(nullif(streamId, 4294967295)) AS stream_id,
        min(nullif(eventId, 4294967295)) AS event_id
    FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
    GROUP BY ALL
),
record AS (
    SELECT e.globalPid AS global_pid, e.eventId AS event_id, e.streamId AS stream_id,
        l.start_ns
    FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT AS e
    JOIN launch AS l ON l.global_pid = e.globalPid AND l.correlation_id = e.correlationId
),
call AS (
    SELECT l.launch_id, l.global_pid, l.start_ns,
        CASE
            WHEN l.name IN ('cudaEventSynchronize', 'cuEventSynchronize') THEN 'event'
            WHEN l.name IN ('cudaStreamSynchronize', 'cuStreamSynchronize') THEN 'stream'
            WHEN l.name IN ('cudaDeviceSynchronize', 'cuCtxSynchronize') THEN 'device'
            ELSE 'copy'
        END AS waits_on,
        r.stream_id, r.event_id
    FROM sync_call AS s
    JOIN launch AS l ON l.launch_id = s.launch_id
    LEFT JOIN sync_row AS r
        ON r.global_pid = l.global_pid AND r.correlation_id = l.correlation_id
)
SELECT c.launch_id, c.global_pid, c.waits_on = 'copy' AS own,
    CASE c.waits_on WHEN 'event' THEN e.stream_id WHEN 'stream' THEN c.stream_id END AS stream_id,
    CASE WHEN c.waits_on = 'event' AND e.start_ns IS NOT NULL THEN e.start_ns ELSE c.start_ns END
        AS submitted_ns
FROM call AS c
ASOF LEFT JOIN record AS e
    ON e.global_pid = c.global_pid AND e.event_id = c.event_id AND e.start_ns <= c.start_ns
