-- late_start_wait: each GPU's first collective kernels that spun for seconds, waiting for a late rank
--
-- Ranks that start tracing (or running) seconds apart: the early ranks' first collective
-- kernel is launched, then spins on the GPU until the last rank arrives, and reads as seconds
-- of communication (a peer's 16.8 s window held 15.7 s in one kernel). The kernel ends with
-- the others' (a collective ends together on every rank); only its start is early. A
-- communication kernel is such a wait when it is the first on its stream (NCCL runs each
-- communicator on a stream of its own, so the first of a stream is a communicator's first
-- collective), lasts at least 1 s, and at least 10 times the median of its GPU's other
-- communication kernels (those not first on their stream; a GPU with none has no wait). A
-- GPU's analysed window then starts at `cut_ns`, the latest end of its waits: the activity
-- view clips every activity of the GPU to it (docs/metrics.md, "Ranks that start apart"), so
-- the wait and what ran before it are in no time of the report (breakdown, steps, layers,
-- gaps, critical path), and its collective instance is in no straggler match (collective's
-- late_start). Reads `kernel`, not `collective`: the activity view reads this table, and
-- collective reads the activity view (through activity_range). Materialised (CREATE TABLE)
-- when the trace is opened.
--
-- Reads: kernel
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   kernel_id      BIGINT    the waiting kernel
--   stream_id      BIGINT    its stream
--   start_ns       BIGINT    kernel start (its launch on the early rank)
--   end_ns         BIGINT    kernel end (when the last rank arrived and the transfer ran)
--   duration_ns    BIGINT    its length
--   median_ns      DOUBLE    median length of the GPU's other communication kernels
--   cut_ns         BIGINT    the GPU's analysed window start: the latest end of its waits
CREATE TABLE late_start_wait AS
WITH comm AS (
    SELECT pid, device_id, stream_id, kernel_id, start_ns, end_ns,
        greatest(end_ns - start_ns, 0) AS duration_ns,
        row_number() OVER (
            PARTITION BY pid, device_id, stream_id ORDER BY start_ns, kernel_id
        ) AS k
    FROM kernel
    WHERE class = 'comm'
),
typical AS (
    SELECT pid, device_id, median(duration_ns) AS median_ns
    FROM comm
    WHERE k > 1
    GROUP BY pid, device_id
),
waits AS (
    SELECT c.pid, c.device_id, c.kernel_id, c.stream_id, c.start_ns, c.end_ns, c.duration_ns,
        t.median_ns
    FROM comm AS c
    JOIN typical AS t ON t.pid = c.pid AND t.device_id = c.device_id
    WHERE c.k = 1 AND c.duration_ns >= 1000000000 AND c.duration_ns >= 10 * t.median_ns
)
SELECT *, max(end_ns) OVER (PARTITION BY pid, device_id) AS cut_ns
FROM waits
