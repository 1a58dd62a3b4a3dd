-- gpu_key: one integer for a GPU (pid, device_id), as the interval engine's batches name them
--
-- pid is 24 bits and a device id 32 (both checked when loading: unusable_row), so the key is
-- unique and fits a BIGINT. Created with the views (nsysreport.queries.create_views), so a
-- cache file keeps it beside the derived tables that use it.
--
-- Writes: gpu_key
CREATE OR REPLACE MACRO gpu_key(pid, device_id) AS pid * 4294967296 + device_id;
