-- os_call: the OS runtime calls nsys traced on host threads (--trace=osrt)
--
-- poll, ioctl, read, pthread_cond_wait, ...: what a host thread sat in. An idle gap whose next
-- activity was launched by a thread inside one of these during the gap names it (gap_top).
-- An id listed twice in StringIds reads as its smallest value, as for the CUDA calls.
--
-- Reads: OSRT_API, StringIds
--
-- Columns:
--   global_tid   BIGINT    nsys global thread id
--   start_ns     BIGINT    call start
--   end_ns       BIGINT    call end
--   name         VARCHAR   the function's name
CREATE VIEW os_call AS
SELECT o.globalTid AS global_tid, o.start AS start_ns, o."end" AS end_ns,
    coalesce(s.name, '<os ' || o.nameId || '>') AS name
FROM OSRT_API AS o
LEFT JOIN (SELECT id, min(value) AS name FROM StringIds GROUP BY id) AS s ON s.id = o.nameId
