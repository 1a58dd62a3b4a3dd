-- layer_collective: per GPU and collective op, how many of its calls run inside layer ranges
-- and their mean message size (Megatron-style tensor parallelism: 2 all-reduces per layer)
--
-- A call belongs to the innermost layer range containing its launch (collective.layer), as in
-- layer_summary, whose layer occurrences nsysreport/sections/data_path.py divides by to get
-- the calls per layer occurrence.
--
-- Reads: collective
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   op           VARCHAR   collective op
--   in_layers    BIGINT    the op's calls launched inside a layer range
--   sized        BIGINT    of those, the calls whose message size is known
--   mean_bytes   DOUBLE    their mean message size, NULL when none is known
SELECT c.pid, c.device_id, c.op, count(*) AS in_layers, count(c.message_bytes) AS sized,
    avg(c.message_bytes) AS mean_bytes
FROM collective AS c
WHERE c.layer IS NOT NULL
GROUP BY c.pid, c.device_id, c.op
ORDER BY c.pid, c.device_id, c.op
