-- kineto_annotation: CPU annotations (record_function ranges, ProfilerStep#N) as NVTX ranges
--
-- Push/pop ranges (event type 59) with inline text, as nsys records NVTX; names as nsys exports
-- hold them after the loader's text policy: no NUL bytes.
--
-- Reads: kineto_event
-- Writes: NVTX_EVENTS
INSERT INTO NVTX_EVENTS (file_row, "start", "end", eventType, globalTid, text)
SELECT e.event_index, e.start,
    TRY_CAST(e.start::HUGEINT + greatest(coalesce(e.dur, 0), 0) AS BIGINT), 59,
    (1::BIGINT << 48) | ((e.pid & 16777215) << 24) | (e.tid & 16777215),
    replace(e.name, chr(0), '')
FROM kineto_event AS e
WHERE e.cat = 'user_annotation' AND e.pid IS NOT NULL AND e.name IS NOT NULL
    AND e.start IS NOT NULL
