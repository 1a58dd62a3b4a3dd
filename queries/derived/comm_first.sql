-- comm_first: each stream channel's first 32 collective instances, in start order
--
-- The instances comm_match compares across GPUs: for the channels known only by their stream
-- (collective.channel_source `stream`), the k-th kernel of the channel by start (ties: the
-- lower kernel_id), for k up to 32. A channel belongs to one GPU, so a file's rows are the
-- same whether it is read alone or beside other files: the report builder gathers every file's
-- rows (a few per GPU, not every collective) to match channels across per-rank files.
-- Materialised (CREATE TABLE) when the trace is opened.
--
-- Reads: collective
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   channel        VARCHAR   collective.channel (a stream)
--   k              BIGINT    1 = the channel's first instance by start
--   end_ns         BIGINT    kernel end
CREATE TABLE comm_first AS
SELECT pid, device_id, channel,
    row_number() OVER (PARTITION BY pid, device_id, channel ORDER BY start_ns, kernel_id) AS k,
    end_ns
FROM collective
WHERE channel_source = 'stream'
QUALIFY k <= 32
