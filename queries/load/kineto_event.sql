-- kineto_event: every event the raw tables need, one row each, with times in integer ns
--
-- kineto_ns(text): microseconds as JSON number text -> integer ns, exact (rounded half up at
-- 1 ns). Plain decimals are split at the point and scaled as integers (a cast to
-- DECIMAL(38, 3) is exact too but 100x slower); anything else (an exponent) falls back to
-- DOUBLE. A number that is no time in ns (beyond BIGINT, NaN, text) is NULL, as a missing one.
-- Operators (`cpu_op`) are kept when they record their input shapes (kineto_op_call), Python
-- frames (`python_function`) when they last at least 100 µs (kineto_python): a with_stack
-- trace records one per Python call (34,405 in 110 ms of mi300_rccl_rank0, 629 of them that
-- long), and a shorter one cannot cover most of a gap worth naming.
-- A GPU event keeps its row without `ts` (its start is then NULL): the views leave it out and
-- skipped_row counts it, as for nsys rows.
--
-- Reads: kineto_doc
-- Writes: kineto_ns, kineto_event
CREATE OR REPLACE TEMP MACRO kineto_ns(t) AS
CASE WHEN regexp_full_match(t, '[0-9]{1,30}([.][0-9]*)?')
    THEN TRY_CAST(split_part(t, '.', 1)::HUGEINT * 1000
        + (rpad(split_part(t, '.', 2), 4, '0')[1:4]::BIGINT + 5) // 10 AS BIGINT)
    ELSE TRY_CAST(round(TRY_CAST(t AS DOUBLE) * 1000) AS BIGINT) END;

CREATE TEMP TABLE kineto_event AS
WITH raw AS (
    -- event_index: the event's place in traceEvents (1-based), the raw rows' file_row.
    SELECT unnest(traceEvents) AS e, generate_subscripts(traceEvents, 1) AS event_index
    FROM kineto_doc
)
SELECT
    event_index,
    e.cat,
    -- A name that is not a JSON string (-1, true, a list) is no name: the placeholder's.
    CASE WHEN json_type(e.name) = 'VARCHAR' THEN e.name->>'$' END AS name,
    TRY_CAST(e.pid AS BIGINT) AS pid,
    coalesce(TRY_CAST(e.tid AS BIGINT), 0) AS tid,
    kineto_ns(e.ts) AS start,
    kineto_ns(e.dur) AS dur,
    e.args
FROM raw
WHERE e.ph = 'X' AND (e.cat IN (
    'kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver', 'user_annotation'
) OR e.cat = 'cpu_op' AND json_exists(e.args, '$."Input Dims"')
    OR e.cat = 'python_function' AND kineto_ns(e.dur) >= 100000)
    AND (e.ts IS NOT NULL OR e.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset'));
