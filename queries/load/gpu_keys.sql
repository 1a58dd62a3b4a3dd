-- gpu_keys: the trace's GPUs, in order, for the derived tables built one GPU at a time
--
-- nsysreport.queries runs a derived file that takes $pid and $device_id (grouped_island) once
-- for each of these and appends the rows.
--
-- Reads: activity
SELECT DISTINCT pid, device_id FROM activity ORDER BY pid, device_id
