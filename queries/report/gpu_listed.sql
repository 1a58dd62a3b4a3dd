-- gpu_listed: every GPU the trace lists (TARGET_INFO_GPU), and whether any activity ran on it
--
-- nsys lists every GPU of the node it profiled (a PyTorch profiler trace, deviceProperties:
-- every GPU the process could see), used or not. A listed GPU that ran nothing in this trace
-- is either idle in the job (it runs on fewer GPUs than the node has) or driven by a process
-- whose trace is not among those given; the report names such GPUs (over all files of one
-- host: nsysreport.report_builder) rather than leaving them out without a word.
--
-- Reads: TARGET_INFO_GPU, activity
--
-- Columns:
--   device_id        BIGINT    the GPU's id (the activities' deviceId)
--   gpu_name         VARCHAR   GPU model, NULL when the trace does not say
--   used             BOOLEAN   some kernel, copy, memset or graph launch ran on it
WITH used AS (SELECT DISTINCT device_id FROM activity)
SELECT t.id AS device_id, min(t.name) AS gpu_name,
    t.id IN (SELECT device_id FROM used) AS used
FROM TARGET_INFO_GPU AS t
WHERE t.id IS NOT NULL
GROUP BY t.id
ORDER BY device_id
