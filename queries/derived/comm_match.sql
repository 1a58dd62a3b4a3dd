-- comm_match: the GPUs whose stream channels run the same collectives, from their end times
--
-- For the channels known only by their stream (collective.channel_source `stream`): a
-- collective ends at the same time on every member of its communicator (the last rank's data
-- completes it everywhere), so two channels on different GPUs are members of one communicator
-- when, of their first 32 instances taken in start order (comm_first; the k-th against the
-- k-th), at least 90% end within 2 µs of each other. Each channel is listed with its own GPU
-- and every GPU with a channel that matches it. nsysreport.report_builder runs this file over
-- every file's comm_first rows at once, on one aligned clock, to match channels across per-rank
-- files. Materialised (CREATE TABLE) when the trace is opened.
--
-- Reads: comm_first
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   channel        VARCHAR   collective.channel (a stream)
--   members        VARCHAR   its GPU and the matched ones, pid:device_id, comma-separated
--   member_gpus    BIGINT    how many GPUs that is (1: none matched)
CREATE TABLE comm_match AS
WITH firsts AS (SELECT pid, device_id, channel, end_ns, k FROM comm_first),
pairs AS (
    SELECT a.pid, a.device_id, a.channel, b.pid AS peer_pid, b.device_id AS peer_device
    FROM firsts AS a
    JOIN firsts AS b
        ON b.k = a.k AND (b.pid <> a.pid OR b.device_id <> a.device_id)
    GROUP BY a.pid, a.device_id, a.channel, b.pid, b.device_id, b.channel
    HAVING count(*) FILTER (abs(a.end_ns - b.end_ns) <= 2000) >= 0.9 * count(*)
),
matched AS (
    -- each channel with its own GPU and its peers' (a GPU once, however many of its channels
    -- matched)
    SELECT pid, device_id, channel,
        string_agg(peer_pid || ':' || peer_device, ',' ORDER BY peer_pid, peer_device)
            AS members,
        count(*) AS member_gpus
    FROM (
        SELECT DISTINCT * FROM pairs
        UNION
        SELECT DISTINCT pid, device_id, channel, pid, device_id FROM firsts
    )
    GROUP BY pid, device_id, channel
)
SELECT * FROM matched
