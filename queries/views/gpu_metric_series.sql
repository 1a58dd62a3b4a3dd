-- gpu_metric_series: every GPU metric counter the capture declares, with its report family
--
-- nsys profile --gpu-metrics-devices samples hardware counters per GPU into GPU_METRICS, one
-- row per sample of one counter; TARGET_INFO_GPU_METRICS names each counter, keyed by
-- (typeId, metricId): typeId is the sampled GPU (its low byte is the GPU's id) and metricId the
-- counter within that GPU's metric set. Names carry their unit in brackets since about
-- nsys 2023 ("DRAM Read Bandwidth [Throughput %]"); older exports name the counter alone
-- ("DRAM Read Bandwidth", "SM Active"). docs/export-format.md lists the sources.
--
-- The one place raw names map to the report's families, by regular expressions on the name
-- without its unit (anchored, case-sensitive as nsys spells them):
--   dram_read   ^DRAM Read (Bandwidth|Throughput)$    (Turing: "Throughput")
--   dram_write  ^DRAM Write (Bandwidth|Throughput)$
--   nvlink_rx   ^NVLink RX\b   every RX counter: Requests/Responses x User/Protocol Data
--   nvlink_tx   ^NVLink TX\b
--   pcie_rx     ^PCIe RX Throughput$
--   pcie_tx     ^PCIe TX Throughput$
--   sm_active   ^SMs? Active$   ("SMs Active" newer, "SM Active" older sets)
-- Only percentages join a family: the unit "Throughput %", or no unit (older exports, whose
-- counters of these names are defined as percentages of peak). Any other counter (clocks, SM
-- Issue, Tensor Active, warps, BAR1 requests, a [GB/s] variant) has family NULL: the report
-- lists it as ignored instead of guessing what it measures.
--
-- Reads: TARGET_INFO_GPU_METRICS
--
-- Columns:
--   type_id      BIGINT    TARGET_INFO_GPU_METRICS.typeId (NULL in a layout without it)
--   metric_id    BIGINT    counter id within the GPU's metric set
--   device_id    BIGINT    typeId & 255: the sampled GPU's id (NULL without typeId)
--   metric_name  VARCHAR   the counter's name as nsys writes it
--   unit         VARCHAR   the bracketed unit of the name, NULL when the name has none
--   family       VARCHAR   dram_read, dram_write, nvlink_rx, nvlink_tx, pcie_rx, pcie_tx,
--                          sm_active (NULL for a counter in no family)
CREATE VIEW gpu_metric_series AS
WITH named AS (
    SELECT typeId AS type_id, metricId AS metric_id, min(metricName) AS metric_name
    FROM TARGET_INFO_GPU_METRICS
    WHERE metricId IS NOT NULL AND metricName IS NOT NULL
    GROUP BY typeId, metricId
),
split AS (
    SELECT *,
        CASE WHEN regexp_matches(metric_name, '\s*\[[^\]]*\]$')
            THEN regexp_replace(metric_name, '\s*\[[^\]]*\]$', '') ELSE metric_name END AS base,
        CASE WHEN regexp_matches(metric_name, '\[[^\]]*\]$')
            THEN regexp_extract(metric_name, '\[([^\]]*)\]$', 1) END AS unit
    FROM named
)
SELECT type_id, metric_id, type_id & 255 AS device_id, metric_name, unit,
    CASE
        WHEN coalesce(unit, 'Throughput %') <> 'Throughput %' THEN NULL
        WHEN regexp_matches(base, '^DRAM Read (Bandwidth|Throughput)$') THEN 'dram_read'
        WHEN regexp_matches(base, '^DRAM Write (Bandwidth|Throughput)$') THEN 'dram_write'
        WHEN regexp_matches(base, '^NVLink RX\b') THEN 'nvlink_rx'
        WHEN regexp_matches(base, '^NVLink TX\b') THEN 'nvlink_tx'
        WHEN regexp_matches(base, '^PCIe RX Throughput$') THEN 'pcie_rx'
        WHEN regexp_matches(base, '^PCIe TX Throughput$') THEN 'pcie_tx'
        WHEN regexp_matches(base, '^SMs? Active$') THEN 'sm_active'
    END AS family
FROM split
