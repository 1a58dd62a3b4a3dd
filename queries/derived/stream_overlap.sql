-- stream_overlap: each kernel that runs past the start of the next kernel on its stream
--
-- A stream runs its kernels one after another, with one exception: programmatic dependent
-- launch (PDL, compute capability 9.0 and later) lets the next kernel start once every block
-- of the running one has signalled (griddepcontrol.launch_dependents) or exited; the next
-- kernel then waits in griddepcontrol.wait until the running one has finished and its writes
-- are visible (CUDA Programming Guide, "Programmatic Dependent Launch and Synchronization").
-- No export records whether a kernel was launched so (docs/export-format.md, "Kernels that
-- overlap on one stream"), so the overlap's shape decides: `pdl` when the next kernel starts
-- after this one starts and ends after this one ends, as a dependent kernel does; else
-- `impossible`, a duration that cannot be: this kernel ends at or after the next one ends (it
-- would have finished after work queued behind it), or both start at one instant. Kernels
-- with end <= start carry no time and are left out; the next kernel is the next by start
-- (ties: kernel_id) among the stream's others. Every time in the report is a union, so an
-- overlap counts once whichever it is; the capture facts count both kinds, the ledger the
-- impossible ones. Materialised (CREATE TABLE) when the trace is opened: its one sort of the
-- kernels by stream is not made again by each reader.
--
-- Reads: kernel
--
-- Columns:
--   pid              BIGINT    process id
--   device_id        BIGINT    nsys GPU id
--   stream_id        BIGINT    the stream
--   kernel_id        BIGINT    the kernel that runs past its successor's start
--   next_kernel_id   BIGINT    its successor on the stream
--   start_ns         BIGINT    kernel start
--   end_ns           BIGINT    kernel end
--   next_start_ns    BIGINT    successor's start
--   next_end_ns      BIGINT    successor's end
--   overlap_ns       BIGINT    time both run
--   kind             VARCHAR   pdl or impossible
CREATE TABLE stream_overlap AS
WITH timed AS (
    SELECT pid, device_id, stream_id, kernel_id, start_ns, end_ns,
        lead(kernel_id) OVER w AS next_kernel_id,
        lead(start_ns) OVER w AS next_start_ns,
        lead(end_ns) OVER w AS next_end_ns
    FROM kernel
    WHERE end_ns > start_ns
    WINDOW w AS (PARTITION BY pid, device_id, stream_id ORDER BY start_ns, kernel_id)
)
SELECT pid, device_id, stream_id, kernel_id, next_kernel_id, start_ns, end_ns, next_start_ns,
    next_end_ns, least(end_ns, next_end_ns) - next_start_ns AS overlap_ns,
    CASE WHEN next_start_ns > start_ns AND end_ns < next_end_ns THEN 'pdl' ELSE 'impossible' END
        AS kind
FROM timed
WHERE next_start_ns < end_ns
