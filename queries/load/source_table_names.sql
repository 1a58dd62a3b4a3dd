-- source_table_names: the names of the trace file's tables and views, into source_table
--
-- Writes: source_table
--
-- Params:
--   $names  VARCHAR[]  -  every table and view of the file (none for a PyTorch profiler trace)
INSERT INTO source_table SELECT unnest($names::VARCHAR[])
