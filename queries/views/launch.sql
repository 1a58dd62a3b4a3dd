-- launch: CUDA runtime and driver API calls (the host side of every GPU activity)
--
-- Only eventClass 0 (runtime) and 1 (driver): exports made with --cudabacktrace repeat each
-- call as class 67 with the same correlationId, which would double-count. The `_vNNNN`
-- version suffix is stripped (cudaLaunchKernel_v7000 -> cudaLaunchKernel).
--
-- Reads: CUPTI_ACTIVITY_KIND_RUNTIME, StringIds
--
-- Columns:
--   launch_id        BIGINT    the row's file_row in CUPTI_ACTIVITY_KIND_RUNTIME
--   pid              BIGINT    process id
--   tid              BIGINT    thread id
--   global_pid       BIGINT    nsys global process id (joins kernel.global_pid)
--   global_tid       BIGINT    nsys global thread id
--   correlation_id   BIGINT    joins GPU activities of the same process
--   start_ns         BIGINT    call start
--   end_ns           BIGINT    call end
--   name             VARCHAR   API name without version suffix
CREATE VIEW launch AS
SELECT
    r.file_row AS launch_id,
    (r.globalTid >> 24) & 16777215 AS pid,
    r.globalTid & 16777215 AS tid,
    -- NVIDIA's mask 0xFFFFFFFFFF000000 as a BIGINT: no shift, which a negative id would fail.
    r.globalTid & -16777216 AS global_pid,
    r.globalTid AS global_tid,
    r.correlationId AS correlation_id,
    r.start AS start_ns,
    r."end" AS end_ns,
    coalesce(s.name, '<api ' || r.nameId || '>') AS name
FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
-- An id listed twice reads as its smallest value (kernel_name): no call counted twice. The
-- suffix is cut once per name, not once per call (millions of calls, a few hundred names).
LEFT JOIN (
    SELECT id, regexp_replace(min(value), '_v[0-9]+$', '') AS name FROM StringIds GROUP BY id
) AS s
    ON s.id = r.nameId
WHERE coalesce(r.eventClass, 0) IN (0, 1)
