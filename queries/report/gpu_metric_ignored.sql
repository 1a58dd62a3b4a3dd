-- gpu_metric_ignored: GPU metric counters the report does not show, and why
--
-- Two reasons: the counter is in no family (gpu_metric_series: a clock, SM Issue, Tensor
-- Active, a count of requests, a unit other than a percentage), or it was sampled on a device
-- that no GPU of the report ran on (the samples have no GPU to belong to). One row per counter
-- name and reason, with the number of devices that declare it.
--
-- Reads: gpu, gpu_metric_series
--
-- Columns:
--   metric_name  VARCHAR   the counter's name as nsys writes it
--   reason       VARCHAR   "in no family" or "on a GPU the trace has no activity on"
--   devices      BIGINT    devices declaring the counter for that reason
SELECT metric_name,
    CASE WHEN family IS NULL THEN 'in no family' ELSE 'on a GPU the trace has no activity on' END
        AS reason,
    count(DISTINCT coalesce(device_id, -1)) AS devices
FROM gpu_metric_series AS s
WHERE family IS NULL
    OR (s.device_id IS NOT NULL AND s.device_id NOT IN (SELECT device_id FROM gpu))
GROUP BY ALL
ORDER BY reason, metric_name
