-- set_memory_limit: set DuckDB's memory limit (kineto_doc's read can need more than the usual)
--
-- Params:
--   $limit  VARCHAR  -  e.g. '4096MiB', or a value memory_limit returned
SET memory_limit = $limit
