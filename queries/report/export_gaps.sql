-- export_gaps: what an nsys export of 2021 or before cannot give the report, one row per table
--
-- Exports of nsys 2021.3 and before have no metadata table (EXPORT_META_DATA arrived with
-- 2022.1), no capture duration (ANALYSIS_DETAILS, 2022.1) and, before 2021.3, no session start
-- (TARGET_INFO_SESSION_START_TIME); docs/export-format.md, "nsys 2020-2021". The report still
-- reads their activities exactly; these rows say which of its figures rest on what instead.
-- A current export (one with a metadata table) and a PyTorch profiler trace (no file tables)
-- have no row.
--
-- Reads: source_table
--
-- Columns:
--   missing          VARCHAR   the table the export lacks
--   cost             VARCHAR   what the report does without it
WITH old AS (
    SELECT EXISTS (SELECT 1 FROM source_table)
        AND NOT EXISTS (SELECT 1 FROM source_table
            WHERE name IN ('META_DATA_EXPORT', 'EXPORT_META_DATA')) AS old
),
gaps (ordinal, missing, cost) AS (
    VALUES
        (1, 'EXPORT_META_DATA', 'the nsys version that wrote it is unknown'),
        (2, 'ANALYSIS_DETAILS',
            'the capture''s length is unknown: the capture window is bounded by the rows '
            || 'themselves (docs/metrics.md, "Data-quality ledger")'),
        (3, 'TARGET_INFO_SESSION_START_TIME',
            'no start time: per-rank files are aligned by their collectives alone')
)
SELECT g.missing, g.cost
FROM gaps AS g, old
WHERE old.old
    AND (g.missing = 'EXPORT_META_DATA'
        OR g.missing NOT IN (SELECT name FROM source_table))
ORDER BY g.ordinal
