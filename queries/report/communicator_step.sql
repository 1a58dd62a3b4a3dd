-- communicator_step: per GPU, step and communication channel: comm time and exposed comm
--
-- The pieces of each channel's union (grouped_island, grouping `comm`) count in the step
-- whose window (step_window) holds the piece's start: a collective running past the window's
-- end counts whole in the step it began in. comm_ns is the channel's union, exposed_ns the
-- part of it no compute kernel covers.
--
-- Reads: grouped_island, step_window_bin
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   step_ordinal   BIGINT    1 = the GPU's first step
--   channel        VARCHAR   collective.channel
--   comm_ns        BIGINT    union of the channel's kernels starting in the step
--   exposed_ns     BIGINT    of that, time no compute kernel covers
WITH width AS (SELECT DISTINCT pid, device_id, width FROM step_window_bin),
piece AS (
    -- Each piece in the bin of its start (step_window_bin: a piece meets the windows near it).
    SELECT p.pid, p.device_id, p.group_key, p.start_ns, p.duration_ns, p.exposed_ns,
        p.start_ns // b.width AS bin
    FROM grouped_island AS p
    JOIN width AS b ON b.pid = p.pid AND b.device_id = p.device_id
    WHERE p.grouping = 'comm'
)
SELECT w.pid, w.device_id, w.step_ordinal, p.group_key AS channel,
    sum(p.duration_ns)::BIGINT AS comm_ns, sum(p.exposed_ns)::BIGINT AS exposed_ns
FROM piece AS p
JOIN step_window_bin AS w
    ON w.pid = p.pid AND w.device_id = p.device_id AND w.bin = p.bin
    AND p.start_ns >= w.start_ns AND p.start_ns < w.end_ns
GROUP BY ALL
ORDER BY w.pid, w.device_id, w.step_ordinal, channel
