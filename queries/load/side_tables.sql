-- side_tables: the tables a load fills beside the raw tables, empty
--
-- load_skipped: rows of a source table that no loader could type (a value in an integer column
-- that is not an integer: text, a BLOB, a fraction), left out and counted by source table and
-- reason; the skipped_row view reports them. nvtx_unloaded: NVTX ranges left in the file
-- because they can play no role (nvtx_roleless), counted for the Capture section.
-- source_table: every table and view of the trace file, for what the report can say about
-- the capture (whether it has GPU metric tables, usable samples or not).
--
-- Writes: load_skipped, nvtx_unloaded, source_table
CREATE TABLE load_skipped (source VARCHAR, reason VARCHAR, count BIGINT);
CREATE TABLE nvtx_unloaded (count BIGINT);
CREATE TABLE source_table (name VARCHAR);
