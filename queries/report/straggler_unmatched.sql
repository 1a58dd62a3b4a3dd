-- straggler_unmatched: collective ops whose instance counts differ between GPUs (not matched)
--
-- Such ops cannot be paired instance by instance (a capture window cut mid-collective, or
-- GPUs in different communicators), so the straggler analysis leaves them out and says so.
--
-- Reads: collective
--
-- Columns:
--   op          VARCHAR   collective op
--   pid         BIGINT    process id
--   device_id   BIGINT    nsys GPU id
--   instances   BIGINT    how many this GPU ran
WITH counts AS (SELECT op, pid, device_id, count(*) AS instances FROM collective GROUP BY ALL),
unmatched AS (
    SELECT op FROM counts GROUP BY op HAVING count(*) > 1 AND min(instances) <> max(instances)
)
SELECT c.op, c.pid, c.device_id, c.instances
FROM counts AS c
JOIN unmatched AS u ON u.op = c.op
ORDER BY c.op, c.pid, c.device_id
