-- capture_environment: the environment variables nsys recorded when it launched the process
--
-- META_DATA_CAPTURE holds one row per variable, `NAME=value` (the value sometimes quoted),
-- named PROCESS_<n>:ENVIRONMENT_VARIABLE; nsysreport.ranks reads the launchers' rank variables
-- from it. In file order (file_row: the row's rowid in the file; a table another loader filled,
-- in the order it inserted), so that of two rows naming one variable the later one wins, as in
-- the file.
--
-- Reads: META_DATA_CAPTURE
--
-- Columns:
--   value   VARCHAR   NAME=value as nsys wrote it
SELECT value
FROM META_DATA_CAPTURE
WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE'
ORDER BY file_row, rowid
