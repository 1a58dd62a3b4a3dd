-- step_window_bin: each step window listed in every time bin it spans, for joins by time
--
-- Per GPU the bin width is about one step (the GPU's span of windows over their number), and
-- `bin` = instant // width. A query that asks which windows hold an instant, or overlap an
-- interval, lists its own rows in their bins the same way and joins on (pid, device_id, bin):
-- each row then meets the few windows near it. Joined on the GPU alone, every row met every
-- window of its GPU, quadratic in the steps (communicator_step: 22 CPU-s at 5M kernels).
-- The bins are the time_bin macros' (queries/load/time_bin.sql). Windows with end <= start
-- hold nothing and are left out.
--
-- Reads: step_window
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   range_id       BIGINT    the step's NVTX range
--   step_ordinal   BIGINT    1 = the GPU's first step
--   start_ns       BIGINT    window start
--   end_ns         BIGINT    window end
--   width          BIGINT    the GPU's bin width, ns
--   bin            BIGINT    one bin the window spans
CREATE VIEW step_window_bin AS
WITH bin AS (
    SELECT pid, device_id,
        time_bin_width(min(start_ns), max(end_ns), count(*)) AS width
    FROM step_window
    GROUP BY pid, device_id
)
SELECT w.pid, w.device_id, w.range_id, w.step_ordinal, w.start_ns, w.end_ns, b.width,
    unnest(time_bins(w.start_ns, w.end_ns, b.width)) AS bin
FROM step_window AS w
JOIN bin AS b ON b.pid = w.pid AND b.device_id = w.device_id
WHERE w.end_ns > w.start_ns
