-- communicator_step: per GPU, step and communication channel: comm time and exposed comm
--
-- The pieces of each channel's union (grouped_island, grouping `comm`) count in the step
-- whose window (step_window) holds the piece's start: a collective running past the window's
-- end counts whole in the step it began in. comm_ns is the channel's union, exposed_ns the
-- part of it no compute kernel covers.
--
-- Reads: grouped_island, step_window
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   step_ordinal   BIGINT    1 = the GPU's first step
--   channel        VARCHAR   collective.channel
--   comm_ns        BIGINT    union of the channel's kernels starting in the step
--   exposed_ns     BIGINT    of that, time no compute kernel covers
WITH bin AS (
    -- Per GPU, a time bin about as long as a step: each window is listed in the bins it
    -- spans and each piece is looked up in its own bin, so a piece meets the few windows near
    -- it. (Joined on the GPU alone, every piece met every window of its GPU: 22 CPU-s at 5M
    -- kernels.) Floor division is monotonic, so a window's bins hold every start inside it.
    -- The span is taken as HUGEINT: extreme times overflow BIGINT.
    SELECT pid, device_id,
        least(greatest((max(end_ns)::HUGEINT - min(start_ns)) // count(*), 1),
            9223372036854775807)::BIGINT AS width
    FROM step_window
    GROUP BY pid, device_id
),
window_bin AS (
    SELECT w.pid, w.device_id, w.step_ordinal, w.start_ns, w.end_ns,
        unnest(range(w.start_ns // b.width, (w.end_ns - 1) // b.width + 1)) AS bin
    FROM step_window AS w
    JOIN bin AS b ON b.pid = w.pid AND b.device_id = w.device_id
    WHERE w.end_ns > w.start_ns
),
piece AS (
    SELECT p.pid, p.device_id, p.group_key, p.start_ns, p.duration_ns, p.exposed_ns,
        p.start_ns // b.width AS bin
    FROM grouped_island AS p
    JOIN bin AS b ON b.pid = p.pid AND b.device_id = p.device_id
    WHERE p.grouping = 'comm'
)
SELECT w.pid, w.device_id, w.step_ordinal, p.group_key AS channel,
    sum(p.duration_ns)::BIGINT AS comm_ns, sum(p.exposed_ns)::BIGINT AS exposed_ns
FROM piece AS p
JOIN window_bin AS w
    ON w.pid = p.pid AND w.device_id = p.device_id AND w.bin = p.bin
    AND p.start_ns >= w.start_ns AND p.start_ns < w.end_ns
GROUP BY ALL
ORDER BY w.pid, w.device_id, w.step_ordinal, channel
