-- communicator_layer: per GPU, layer and communication channel: the collectives a layer launched
--
-- A kernel belongs to the layer range it was launched inside (collective.layer: activity_range,
-- role `layer`; every occurrence of the layer together); the others are under `(outside layers)`.
--
-- Reads: collective
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   layer          VARCHAR   layer label, or (outside layers)
--   channel        VARCHAR   collective.channel
--   count          BIGINT    kernels
--   total_ns       BIGINT    sum of durations
SELECT c.pid, c.device_id, coalesce(c.layer, '(outside layers)') AS layer, c.channel,
    count(*) AS count, sum(c.duration_ns)::BIGINT AS total_ns
FROM collective AS c
WHERE NOT c.late_start  -- a wait for a late-starting rank, as in communicator_summary
GROUP BY ALL
ORDER BY c.pid, c.device_id, layer, c.channel
