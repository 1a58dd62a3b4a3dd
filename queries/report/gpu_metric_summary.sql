-- gpu_metric_summary: per GPU and metric family, time-weighted means: whole capture, exposed comm, copies
--
-- GPU metrics are sampled per device, not per process: a sample of GPU_METRICS belongs to the
-- device typeId & 255, and every GPU of the report (gpu: pid, device_id) on that device gets
-- its samples (two processes sharing a GPU see the same counters). That the low byte of typeId
-- is the id the CUDA tables call deviceId is how public readers of the export use it
-- (docs/export-format.md); a process that renumbered its GPUs (CUDA_VISIBLE_DEVICES) is not
-- told apart. Samples of a device no GPU of the report ran on are left out (gpu_metric_ignored
-- lists their counters).
--
-- A sample is the counter's average since the previous sample of the same counter: sample i
-- at t[i] covers (t[i-1], t[i]] and weighs by the length of that interval; each counter's
-- first sample covers an unknown interval and weighs nothing. overall is Σ value·dt / Σ dt over
-- the capture; during_exposed_comm weighs each sample by the part of its interval that lies in
-- the GPU's exposed communication (gpu_segment: the exposed_comm macro) and
-- during_copies by the part in its copies (n_memcpy > 0: memcpys and memsets). The covered time
-- up to any instant is a running total over the segments, read with one ASOF lookup per sample,
-- so the overlap of an interval is a difference: one pass over GPU_METRICS.
-- A family of several counters (NVLink's RX or TX: requests and responses, user and protocol
-- data, each a percentage of the link's peak) is the sum of its counters' means; counters of
-- one name on one GPU are pooled. NULL where the GPU had no such time covered by samples.
--
-- Reads: GPU_METRICS, gpu, gpu_metric_series, gpu_segment
--
-- Columns:
--   pid                  BIGINT    process id
--   device_id            BIGINT    nsys GPU id
--   family               VARCHAR   dram_read, dram_write, nvlink_rx, nvlink_tx, pcie_rx, pcie_tx, sm_active
--   unit                 VARCHAR   the values' unit: % (of peak throughput or of SMs)
--   overall              DOUBLE    time-weighted mean over the capture
--   during_exposed_comm  DOUBLE    time-weighted mean inside exposed comm; NULL without any
--   during_copies        DOUBLE    time-weighted mean inside copies; NULL without any
--   exposed_comm_ns      BIGINT    exposed comm time the samples cover (most of any counter)
--   copies_ns            BIGINT    copy time the samples cover (most of any counter)
--   samples              BIGINT    samples weighed (of the family's counter with most)
--   metrics              VARCHAR   the counters summed, by name, '; ' between
WITH series AS (
    SELECT type_id, metric_id, metric_name, family
    FROM gpu_metric_series
    WHERE family IS NOT NULL
),
samples AS (
    SELECT g.pid, m.typeId & 255 AS device_id, m.typeId AS type_id, m.metricId AS metric_id,
        s.metric_name, s.family, m.timestamp AS t_ns, m.value::DOUBLE AS value
    FROM GPU_METRICS AS m
    JOIN series AS s
        ON s.metric_id = m.metricId AND coalesce(s.type_id, m.typeId) = m.typeId
    JOIN gpu AS g ON g.device_id = m.typeId & 255
    WHERE m.timestamp IS NOT NULL AND m.value IS NOT NULL
),
segments AS (
    -- Exposed comm and copy time before each segment of the GPU's sweep (they tile it).
    SELECT pid, device_id, start_ns, end_ns,
        exposed_comm(packed) AS is_exposed,
        n_memcpy > 0 AS is_copy,
        coalesce(sum(CASE WHEN exposed_comm(packed) THEN duration_ns END) OVER w, 0)
            AS exposed_before_ns,
        coalesce(sum(CASE WHEN n_memcpy > 0 THEN duration_ns END) OVER w, 0) AS copies_before_ns
    FROM gpu_segment
    -- only the GPUs with samples: a trace without GPU metrics pays nothing for the sweep
    WHERE (pid, device_id) IN (SELECT DISTINCT pid, device_id FROM samples)
    WINDOW w AS (
        PARTITION BY pid, device_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    )
),
upto AS (
    -- Exposed comm and copy time up to each sample's instant (0 before the GPU's first activity).
    SELECT x.*,
        coalesce(c.exposed_before_ns
            + CASE WHEN c.is_exposed THEN least(x.t_ns, c.end_ns) - c.start_ns ELSE 0 END, 0)
            AS exposed_upto_ns,
        coalesce(c.copies_before_ns
            + CASE WHEN c.is_copy THEN least(x.t_ns, c.end_ns) - c.start_ns ELSE 0 END, 0)
            AS copies_upto_ns
    FROM samples AS x
    ASOF LEFT JOIN segments AS c
        ON c.pid = x.pid AND c.device_id = x.device_id AND c.start_ns <= x.t_ns
),
weighted AS (
    SELECT pid, device_id, family, metric_name, value,
        t_ns - lag(t_ns) OVER s AS dt_ns,
        exposed_upto_ns - lag(exposed_upto_ns) OVER s AS exposed_ns,
        copies_upto_ns - lag(copies_upto_ns) OVER s AS copies_ns
    FROM upto
    WINDOW s AS (PARTITION BY pid, type_id, metric_id ORDER BY t_ns)
),
per_counter AS (
    SELECT pid, device_id, family, metric_name,
        sum(value * dt_ns) / nullif(sum(dt_ns), 0) AS overall,
        sum(value * exposed_ns) / nullif(sum(exposed_ns), 0) AS during_exposed_comm,
        sum(value * copies_ns) / nullif(sum(copies_ns), 0) AS during_copies,
        sum(exposed_ns) AS exposed_comm_ns,
        sum(copies_ns) AS copies_ns,
        count(*) AS samples
    FROM weighted
    WHERE dt_ns IS NOT NULL
    GROUP BY pid, device_id, family, metric_name
)
SELECT pid, device_id, family, '%' AS unit,
    CASE WHEN count(overall) = count(*) THEN sum(overall) END AS overall,
    CASE WHEN count(during_exposed_comm) = count(*) THEN sum(during_exposed_comm) END
        AS during_exposed_comm,
    CASE WHEN count(during_copies) = count(*) THEN sum(during_copies) END AS during_copies,
    max(exposed_comm_ns)::BIGINT AS exposed_comm_ns,
    max(copies_ns)::BIGINT AS copies_ns,
    max(samples)::BIGINT AS samples,
    string_agg(metric_name, '; ' ORDER BY metric_name) AS metrics
FROM per_counter
GROUP BY pid, device_id, family
ORDER BY pid, device_id, family
