-- trace_meta: one row about the export: nsys version, schema version, host, duration
--
-- Schema 3.x exports keep their metadata in META_DATA_EXPORT, 2.x in EXPORT_META_DATA.
-- `simulated` holds the NSYSREPORT_SIMULATED metadata row that nsysreport.synth writes for
-- simulated traces (NULL for real captures). duration_ns is the capture window from
-- ANALYSIS_DETAILS, else the span of all GPU activity.
--
-- Reads: ANALYSIS_DETAILS, EXPORT_META_DATA, META_DATA_EXPORT, TARGET_INFO_SYSTEM_ENV, gpu_sweep
--
-- Columns:
--   nsys_version     VARCHAR   e.g. 2026.2.1.210
--   schema_version   VARCHAR   export schema, e.g. 3.25.0
--   host             VARCHAR   captured host name
--   duration_ns      BIGINT    capture duration
--   simulated        VARCHAR   description of the simulation, NULL for a real capture
--   product          VARCHAR   what wrote the trace: NVIDIA Nsight Systems, or the PyTorch
--                              profiler (Kineto) for a JSON trace
CREATE VIEW trace_meta AS
WITH meta AS (
    SELECT name, value FROM META_DATA_EXPORT
    UNION ALL
    SELECT name, value FROM EXPORT_META_DATA
)
SELECT
    (SELECT min(value) FROM meta WHERE name = 'EXPORT_PRODUCT_VERSION') AS nsys_version,
    (SELECT min(value) FROM meta WHERE name = 'EXPORT_SCHEMA_VERSION') AS schema_version,
    (SELECT min(value) FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname') AS host,
    coalesce(
        (SELECT max(duration) FROM ANALYSIS_DETAILS),
        -- The span of the activities with end > start: what the sweep's segments tile.
        (SELECT max(end_ns) - min(start_ns) FROM gpu_sweep)
    ) AS duration_ns,
    (SELECT min(value) FROM meta WHERE name = 'NSYSREPORT_SIMULATED') AS simulated,
    (SELECT min(value) FROM meta WHERE name = 'EXPORT_PRODUCT_NAME') AS product
