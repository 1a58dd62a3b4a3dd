-- nvtx_unloaded_count: how many NVTX rows of the file were left in it as roleless
--
-- The file's NVTX rows (SQLite counts a table's rows without reading them) less those loaded
-- and those the careful read skipped, which every loader reads alike.
--
-- Reads: NVTX_EVENTS, load_skipped
-- Writes: nvtx_unloaded
--
-- Params:
--   $in_file  BIGINT  -  the rows of NVTX_EVENTS in the trace file
INSERT INTO nvtx_unloaded
SELECT $in_file - (SELECT count(*) FROM NVTX_EVENTS)
    - (SELECT coalesce(sum(count), 0) FROM load_skipped WHERE source = 'NVTX_EVENTS')
