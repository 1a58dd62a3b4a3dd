-- kineto_python: the long Python frames (with_stack) on host threads, for idle gaps' causes
--
-- Kineto's `python_function` events of at least 100 µs (kineto_event keeps no others), named
-- as the profiler names them, "file(line): function" (`torch/utils/data/dataloader.py(733):
-- __next__`), on the thread ids of the CUDA calls they made: gap_top names the one the thread
-- that ended a gap sat in. NUL bytes removed, as from every name.
--
-- Reads: kineto_event
-- Writes: python_call
INSERT INTO python_call (row_id, globalTid, "start", "end", name)
SELECT e.event_index,
    (1::BIGINT << 48) | ((e.pid & 16777215) << 24) | (e.tid & 16777215),
    e.start, TRY_CAST(e.start::HUGEINT + e.dur AS BIGINT), replace(e.name, chr(0), '')
FROM kineto_event AS e
WHERE e.cat = 'python_function' AND e.pid IS NOT NULL AND e.name IS NOT NULL
    AND e.start IS NOT NULL
