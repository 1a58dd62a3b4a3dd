-- stream_wait: cross-stream waits (cudaStreamWaitEvent) whose event's record the export gives
--
-- cudaStreamWaitEvent(stream, event) makes the work submitted to `stream` after the call wait
-- for the work submitted, before the record, to the stream the event was last recorded on:
-- SYNCHRONIZATION gives the waiting stream and the event (keyed on the call's name, not its
-- syncType: docs/export-format.md "Synchronisation and events"), CUPTI_ACTIVITY_KIND_CUDA_EVENT
-- the record (its stream, and its call by correlation id). A wait whose event has no record
-- in the export is left out (the critical path then infers it from the timing). Streams are
-- told apart within a process by their id alone (the rows' deviceId is not the activities'
-- GPU id, sync_wait).
--
-- Reads: CUPTI_ACTIVITY_KIND_CUDA_EVENT, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, launch
--
-- Columns:
--   global_pid         BIGINT    process
--   stream_id          BIGINT    the waiting stream
--   wait_ns            BIGINT    the wait call's start: work launched after it waits
--   record_stream_id   BIGINT    the stream it was recorded on
--   record_ns          BIGINT    the record call's start: work launched before it is waited for
CREATE VIEW stream_wait AS
WITH record AS (
    SELECT e.globalPid AS global_pid, e.eventId AS event_id, e.streamId AS stream_id,
        l.start_ns
    FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT AS e
    JOIN launch AS l ON l.global_pid = e.globalPid AND l.correlation_id = e.correlationId
),
wait AS (
    SELECT DISTINCT l.global_pid, s.streamId AS stream_id, s.eventId AS event_id, l.start_ns
    FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION AS s
    JOIN launch AS l ON l.global_pid = s.globalPid AND l.correlation_id = s.correlationId
    WHERE l.name IN ('cudaStreamWaitEvent', 'cuStreamWaitEvent')
)
SELECT w.global_pid, w.stream_id, w.start_ns AS wait_ns, r.stream_id AS record_stream_id,
    r.start_ns AS record_ns
FROM wait AS w
ASOF JOIN record AS r
    ON r.global_pid = w.global_pid AND r.event_id = w.event_id AND r.start_ns <= w.start_ns
