-- gpu_hardware: what the trace records of each GPU's data path: its model and HBM peak
--
-- The HBM peak is TARGET_INFO_GPU.memoryBandwidth (bytes per second; every nsys export from
-- 2022.2 to 2026.2 has it, a Kineto trace does not). No nsys export records the PCIe
-- generation and width or the NVLink links (docs/export-format.md): nsysreport.ceilings reads
-- them from its table of GPU models by name. A trace nsysreport.synth simulated carries the
-- simulator's configuration (NSYSREPORT_SIMULATION): its GPU-to-GPU link and its host copy
-- rate are that trace's true ceilings, so they are read here too. A value that is not JSON
-- (HTML, a comment, JSON cut short: data_quality counts it) is no configuration, and a
-- part of it of the wrong kind (a link name that is not a string, a rate that is not a
-- positive number) is no part: the ceilings then come from where a real capture's come from.
--
-- Reads: META_DATA_EXPORT, TARGET_INFO_GPU, gpu
--
-- Columns:
--   pid                    BIGINT    process id
--   device_id              BIGINT    nsys GPU id
--   gpu_name               VARCHAR   GPU model, NULL when the trace does not say
--   memory_bandwidth_bps   BIGINT    HBM peak from the export, bytes/s; NULL when absent or 0
--   sim_link               VARCHAR   simulated GPU-to-GPU link (nvlink, pcie), NULL if real
--   sim_link_bps           DOUBLE    its bus bandwidth, bytes/s
--   sim_copy_bps           DOUBLE    the simulated host-to-device copy rate, bytes/s
WITH config AS (
    SELECT CASE WHEN json_valid(min(value)) THEN min(value)::JSON END AS config
    FROM META_DATA_EXPORT
    WHERE name = 'NSYSREPORT_SIMULATION'
),
parts AS (
    SELECT CASE WHEN json_type(config, '$.link.name') = 'VARCHAR'
            THEN config->>'$.link.name' END AS link,
        TRY_CAST(config->>'$.link.bus_bytes_per_s' AS DOUBLE) AS link_bps,
        TRY_CAST(config->>'$.host.copy_bytes_per_s' AS DOUBLE) AS copy_bps
    FROM config
),
sim AS (
    SELECT link,
        CASE WHEN link_bps > 0 AND isfinite(link_bps) THEN link_bps END AS link_bps,
        CASE WHEN copy_bps > 0 AND isfinite(copy_bps) THEN copy_bps END AS copy_bps
    FROM parts
),
hbm AS (
    SELECT id, max(nullif(memoryBandwidth, 0)) AS bps FROM TARGET_INFO_GPU GROUP BY id
)
SELECT g.pid, g.device_id, g.gpu_name,
    h.bps AS memory_bandwidth_bps,
    s.link AS sim_link,
    s.link_bps AS sim_link_bps,
    s.copy_bps AS sim_copy_bps
FROM gpu AS g
CROSS JOIN sim AS s  -- one row: the aggregate in config has no GROUP BY
LEFT JOIN hbm AS h ON h.id = g.device_id
ORDER BY g.pid, g.device_id
