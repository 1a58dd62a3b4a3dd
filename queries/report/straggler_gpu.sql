-- straggler_gpu: per GPU: how often it arrived last at collectives, its wait, the wait it caused
--
-- Instances are matched across the GPUs of the trace by (op, ordinal): the k-th instance of
-- that op on each GPU, only for ops that every GPU running them ran equally often (others:
-- straggler_unmatched). In a matched instance each GPU waits from its own start to the last
-- start (inside the collective kernel, for the slowest rank); the last arriver causes the sum
-- of the others' waits. Ties for last go to the lowest (pid, device_id); an instance with no
-- skew has no last arriver. The straggler is the GPU with the largest caused_wait_ns. An
-- instance that any GPU began seconds before a late-starting rank arrived (collective's
-- late_start: the first collective of ranks that started tracing apart) matches nothing: its
-- skew is when the ranks started, not how fast they run.
--
-- Reads: collective
--
-- Columns:
--   pid                 BIGINT    process id
--   device_id           BIGINT    nsys GPU id
--   matched_instances   BIGINT    collective instances matched across GPUs
--   last_arrivals       BIGINT    instances where this GPU started last (skew > 0)
--   wait_ns             BIGINT    total time this GPU waited for the last arriver
--   caused_wait_ns      BIGINT    total wait this GPU caused the others as last arriver
--   max_skew_ns         BIGINT    largest start skew of an instance it arrived last at
WITH late AS (SELECT DISTINCT op, ordinal FROM collective WHERE late_start),
counts AS (SELECT op, pid, device_id, count(*) AS n FROM collective GROUP BY ALL),
matched_ops AS (
    SELECT op FROM counts GROUP BY op HAVING count(*) > 1 AND min(n) = max(n)
),
instances AS (
    SELECT c.op, c.ordinal, c.pid, c.device_id, c.start_ns,
        max(c.start_ns) OVER (PARTITION BY c.op, c.ordinal) - c.start_ns AS wait_ns,
        max(c.start_ns) OVER (PARTITION BY c.op, c.ordinal)
            - min(c.start_ns) OVER (PARTITION BY c.op, c.ordinal) AS skew_ns,
        row_number() OVER (
            PARTITION BY c.op, c.ordinal ORDER BY c.start_ns DESC, c.pid, c.device_id
        ) AS arrival_from_last
    FROM collective AS c
    JOIN matched_ops AS m ON m.op = c.op
    ANTI JOIN late AS l ON l.op = c.op AND l.ordinal = c.ordinal
),
caused AS (
    SELECT op, ordinal, sum(wait_ns) AS caused_ns FROM instances GROUP BY op, ordinal
)
SELECT i.pid, i.device_id,
    count(*) AS matched_instances,
    count(*) FILTER (i.arrival_from_last = 1 AND i.skew_ns > 0) AS last_arrivals,
    sum(i.wait_ns)::BIGINT AS wait_ns,
    coalesce(sum(c.caused_ns) FILTER (i.arrival_from_last = 1), 0)::BIGINT AS caused_wait_ns,
    max(i.skew_ns) FILTER (i.arrival_from_last = 1 AND i.skew_ns > 0) AS max_skew_ns
FROM instances AS i
JOIN caused AS c ON c.op = i.op AND c.ordinal = i.ordinal
GROUP BY i.pid, i.device_id
ORDER BY i.pid, i.device_id
