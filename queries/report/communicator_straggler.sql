-- communicator_straggler: per GPU and communicator: arrivals last, waits, the wait it caused
--
-- As straggler_gpu, but instances are matched within each communicator's members only (the
-- GPUs comm_channel puts in it), by (op, k-th instance of that op on the member's channel),
-- for the ops every member ran equally often. In a matched instance each member waits from
-- its own start to the last start; the last arriver (ties: the lowest pid, device_id) causes
-- the sum of the others' waits. Communicators with one GPU in the trace match nothing. An
-- instance any member began waiting for a late-starting rank (collective.late_start) matches
-- nothing, as in straggler_gpu.
--
-- Reads: collective, comm_channel
--
-- Columns:
--   pid                 BIGINT    process id
--   device_id           BIGINT    nsys GPU id
--   communicator        VARCHAR   comm_channel.communicator
--   matched_instances   BIGINT    its instances matched across the members
--   last_arrivals       BIGINT    instances where this GPU started last (skew > 0)
--   wait_ns             BIGINT    total time this GPU waited for the last arriver
--   caused_wait_ns      BIGINT    total wait this GPU caused the others as last arriver
WITH kernels AS (
    SELECT g.communicator, c.op, c.pid, c.device_id, c.start_ns, c.late_start,
        row_number() OVER (
            PARTITION BY c.pid, c.device_id, c.channel, c.op ORDER BY c.start_ns, c.kernel_id
        ) AS k
    FROM collective AS c
    JOIN comm_channel AS g
        ON g.pid = c.pid AND g.device_id = c.device_id AND g.channel = c.channel
    WHERE g.member_gpus > 1
),
late AS (SELECT DISTINCT communicator, op, k FROM kernels WHERE late_start),
counts AS (SELECT communicator, op, pid, device_id, count(*) AS n FROM kernels GROUP BY ALL),
matched_ops AS (
    SELECT communicator, op FROM counts GROUP BY ALL HAVING count(*) > 1 AND min(n) = max(n)
),
instances AS (
    SELECT c.communicator, c.op, c.k, c.pid, c.device_id,
        max(c.start_ns) OVER w - c.start_ns AS wait_ns,
        max(c.start_ns) OVER w - min(c.start_ns) OVER w AS skew_ns,
        row_number() OVER (
            PARTITION BY c.communicator, c.op, c.k ORDER BY c.start_ns DESC, c.pid, c.device_id
        ) AS arrival_from_last
    FROM kernels AS c
    JOIN matched_ops AS m ON m.communicator = c.communicator AND m.op = c.op
    ANTI JOIN late AS l ON l.communicator = c.communicator AND l.op = c.op AND l.k = c.k
    WINDOW w AS (PARTITION BY c.communicator, c.op, c.k)
),
caused AS (
    SELECT communicator, op, k, sum(wait_ns) AS caused_ns FROM instances GROUP BY ALL
)
SELECT i.pid, i.device_id, i.communicator,
    count(*) AS matched_instances,
    count(*) FILTER (i.arrival_from_last = 1 AND i.skew_ns > 0) AS last_arrivals,
    sum(i.wait_ns)::BIGINT AS wait_ns,
    coalesce(sum(c.caused_ns) FILTER (i.arrival_from_last = 1), 0)::BIGINT AS caused_wait_ns
FROM instances AS i
JOIN caused AS c ON c.communicator = i.communicator AND c.op = i.op AND c.k = i.k
GROUP BY i.pid, i.device_id, i.communicator
ORDER BY i.pid, i.device_id, i.communicator
