-- late_start_rank: each member of a collective instance that a GPU began waiting for a late-starting rank
--
-- For every instance (op, ordinal) that some GPU's first collective waited for a late rank in
-- (collective.late_start), each GPU that ran it: when it started, whether its kernel is such
-- a wait, how long it waited for the last member to arrive, and how long after the first
-- member it arrived. The members that arrived last without waiting are the late ranks. Run
-- over one file's collectives, or over every file's at once on the aligned clock
-- (nsysreport.report_builder): the Capture section names the late ranks from these rows.
--
-- Reads: collective
--
-- Columns:
--   op            VARCHAR   collective op
--   ordinal       BIGINT    the instance: the k-th of its op on each GPU
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   late_start    BOOLEAN   this GPU's kernel is a wait for a late-starting rank
--   waited_ns     BIGINT    the last member's start minus this GPU's start
--   late_by_ns    BIGINT    this GPU's start minus the first member's start
WITH late AS (SELECT DISTINCT op, ordinal FROM collective WHERE late_start),
members AS (
    SELECT c.op, c.ordinal, c.pid, c.device_id, c.late_start, c.start_ns,
        max(c.start_ns) OVER w AS last_ns, min(c.start_ns) OVER w AS first_ns
    FROM collective AS c
    SEMI JOIN late AS l ON l.op = c.op AND l.ordinal = c.ordinal
    WINDOW w AS (PARTITION BY c.op, c.ordinal)
)
SELECT op, ordinal, pid, device_id, late_start, (last_ns - start_ns)::BIGINT AS waited_ns,
    (start_ns - first_ns)::BIGINT AS late_by_ns
FROM members
ORDER BY op, ordinal, pid, device_id
