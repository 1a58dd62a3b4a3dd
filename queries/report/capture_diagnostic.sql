-- capture_diagnostic: nsys's warnings and errors about the capture, one row per message
--
-- nsys records messages about the capture itself in DIAGNOSTIC_EVENT (schema 3.x; severity
-- from ENUM_DIAGNOSTIC_SEVERITY_LEVEL: 1 Info, 2 Warning, 3 Error; source from
-- ENUM_DIAGNOSTIC_SOURCE_TYPE: 1 Injection, 2 Daemon, 3 Analysis): a CUDA driver the build
-- does not support, events it could not collect, buffers it dropped. The warnings and errors
-- say when the trace cannot be taken at its word, so the Capture section lists them; the
-- infos (counts of events collected, flush policy) are left out. The same text from several
-- processes or times is one row with its count.
--
-- Reads: DIAGNOSTIC_EVENT
--
-- Columns:
--   severity         VARCHAR   error or warning
--   source           VARCHAR   injection (the profiled process), daemon, analysis, or unknown
--   text             VARCHAR   nsys's message, as it wrote it
--   count            BIGINT    times it was recorded
--   first_ns         BIGINT    first time (the export's clock), NULL when not recorded
SELECT CASE severity WHEN 3 THEN 'error' ELSE 'warning' END AS severity,
    CASE source WHEN 1 THEN 'injection' WHEN 2 THEN 'daemon' WHEN 3 THEN 'analysis'
        ELSE 'unknown' END AS source,
    text,
    count(*)::BIGINT AS count,
    min(timestamp)::BIGINT AS first_ns
FROM DIAGNOSTIC_EVENT
WHERE severity IN (2, 3) AND nullif(trim(text), '') IS NOT NULL
GROUP BY ALL
ORDER BY severity, first_ns NULLS LAST, text, source
