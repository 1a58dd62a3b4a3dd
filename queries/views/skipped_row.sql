-- skipped_row: how many rows of each source the analysis left out, and why
--
-- The one account of skipped rows: the rows the load could not type (load_skipped: a value
-- in an integer column that is not an integer) and the GPU rows the base views leave out
-- (unusable_row). The report lists each line ("3 kernels skipped: end before start").
--
-- Reads: load_skipped, unusable_row
--
-- Columns:
--   source   VARCHAR   raw table the rows come from, e.g. CUPTI_ACTIVITY_KIND_KERNEL
--   reason   VARCHAR   why they were left out
--   count    BIGINT    how many rows
CREATE VIEW skipped_row AS
SELECT source, reason, sum(count)::BIGINT AS count
FROM (
    SELECT source, reason, count FROM load_skipped
    UNION ALL
    SELECT source, reason, count(*) FROM unusable_row GROUP BY ALL
)
GROUP BY ALL
ORDER BY source, reason
