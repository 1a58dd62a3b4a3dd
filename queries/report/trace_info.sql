-- trace_info: what the report says about the trace file: versions, host, duration, producer
--
-- trace_meta's one row, left out when it says nothing at all (every field NULL: an export
-- without tables), so that, as every query, it returns no row for an empty export; the report
-- then shows every field as unknown, as it would for that row.
--
-- Reads: trace_meta
--
-- Columns:
--   nsys_version     VARCHAR   e.g. 2026.2.1.210
--   schema_version   VARCHAR   export schema, e.g. 3.25.0
--   host             VARCHAR   captured host name
--   duration_ns      BIGINT    capture duration
--   simulated        VARCHAR   description of the simulation, NULL for a real capture
--   product          VARCHAR   what wrote the trace (NVIDIA Nsight Systems, PyTorch profiler)
SELECT nsys_version, schema_version, host, duration_ns, simulated, product
FROM trace_meta
WHERE coalesce(nsys_version, schema_version, host, duration_ns::VARCHAR, simulated, product)
    IS NOT NULL
ORDER BY nsys_version  -- one row at most
