-- session_start: the UTC time of the capture's session start, to line up files of one job
--
-- nsys 2026+ records the session clock's reading (system_clock_ns) at the moment it read the
-- UTC time (utc_epoch_ns); older exports record the UTC time of the trace's time 0 alone
-- (nsysreport.align.session_epoch, NSYS_SCHEMA.md §4.5). A file holds one row; of several,
-- the first in file order (file_row: the row's rowid in the file).
--
-- Reads: TARGET_INFO_SESSION_START_TIME
--
-- Columns:
--   utc_epoch_ns      BIGINT    UTC nanoseconds since 1970 at system_clock_ns (else at time 0)
--   system_clock_ns   BIGINT    the session clock then, NULL before nsys 2026
SELECT utcEpochNs AS utc_epoch_ns, systemClockNs AS system_clock_ns
FROM TARGET_INFO_SESSION_START_TIME
ORDER BY file_row, rowid
LIMIT 1
