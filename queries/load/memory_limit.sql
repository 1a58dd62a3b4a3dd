-- memory_limit: DuckDB's memory limit now, e.g. '2.0 GiB', to restore after a large read
SELECT current_setting('memory_limit') AS memory_limit
