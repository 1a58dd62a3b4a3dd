-- gpu_keys: the trace's GPUs, in order, with what the interval engine needs to batch them
--
-- nsysreport.queries runs each derived file that names an `Engine:` step once per batch of
-- these GPUs (nsysreport.engine.batches: as many GPUs as fit its row budget) and appends the
-- rows.
--
-- Rows: pid, device_id, its activities (kernels, copies, memsets, graph launches), and its
-- earliest and latest start or end (first_ns, last_ns: the batch's time axis).
--
-- Reads: activity
SELECT pid, device_id, count(*) AS activities, least(min(start_ns), min(end_ns)) AS first_ns,
    greatest(max(start_ns), max(end_ns)) AS last_ns
FROM activity
GROUP BY pid, device_id
ORDER BY pid, device_id
