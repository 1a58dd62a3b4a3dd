-- kineto_runtime: Kineto's CUDA runtime and driver calls as CUPTI runtime rows (the launches)
--
-- globalTid = globalPid | tid in nsys's encoding; a call without a duration lasts 0 ns.
--
-- Reads: kineto_event, kineto_string
-- Writes: CUPTI_ACTIVITY_KIND_RUNTIME
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (file_row, "start", "end", eventClass, globalTid,
    correlationId, nameId)
SELECT e.event_index, e.start,
    TRY_CAST(e.start::HUGEINT + greatest(coalesce(e.dur, 0), 0) AS BIGINT),
    CASE e.cat WHEN 'cuda_driver' THEN 1 ELSE 0 END,
    (1::BIGINT << 48) | ((e.pid & 16777215) << 24) | (e.tid & 16777215),
    TRY_CAST(e.args->>'correlation' AS BIGINT), s.id
FROM kineto_event AS e JOIN kineto_string AS s ON s.name = e.name
WHERE e.cat IN ('cuda_runtime', 'cuda_driver') AND e.pid IS NOT NULL AND e.start IS NOT NULL
