-- grouped_island: unions of kernel intervals per GPU and group (layer or collective op), with
-- the part of each union that no compute kernel on the GPU covers
--
-- Groupings: `layer` (parts compute, gemm, comm: the kernels launched inside that layer; the
-- rest under `(outside layers)`) and `op` (part comm: the kernels of one collective op).
-- Each row is one island of the union (overlapping or touching intervals merged), so sums of
-- duration_ns are union lengths. exposed_ns is the island minus the union of all compute on
-- the GPU, whoever launched it: the compute time inside [start, end) is a difference of two
-- lookups in gpu_segment's running compute total (two ASOF joins, no range join).
--
-- Columns:
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   grouping      VARCHAR   layer or op
--   group_key     VARCHAR   layer label, or collective op
--   part          VARCHAR   compute, gemm or comm
--   start_ns      BIGINT    island start
--   end_ns        BIGINT    island end
--   duration_ns   BIGINT    island length
--   exposed_ns    BIGINT    comm islands: length not covered by any compute kernel on the GPU
CREATE VIEW grouped_island AS
WITH kernels AS (
    SELECT k.pid, k.device_id, k.start_ns, k.end_ns, k.class,
        coalesce(ar.label, '(outside layers)') AS layer
    FROM kernel AS k
    LEFT JOIN activity_range AS ar
        ON ar.source = 'kernel' AND ar.activity_id = k.kernel_id AND ar.role = 'layer'
    WHERE k.end_ns > k.start_ns
),
members AS (
    SELECT pid, device_id, 'layer' AS grouping, layer AS group_key, 'compute' AS part,
        start_ns, end_ns
    FROM kernels WHERE class <> 'comm'
    UNION ALL
    SELECT pid, device_id, 'layer', layer, 'gemm', start_ns, end_ns
    FROM kernels WHERE class = 'gemm'
    UNION ALL
    SELECT pid, device_id, 'layer', layer, 'comm', start_ns, end_ns
    FROM kernels WHERE class = 'comm'
    UNION ALL
    SELECT pid, device_id, 'op', op, 'comm', start_ns, end_ns
    FROM collective WHERE end_ns > start_ns
),
marked AS (
    SELECT *, coalesce(start_ns > max(end_ns) OVER (
        PARTITION BY pid, device_id, grouping, group_key, part ORDER BY start_ns, end_ns
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ), true) AS opens
    FROM members
),
numbered AS (
    SELECT *, sum(opens::BIGINT) OVER (
        PARTITION BY pid, device_id, grouping, group_key, part ORDER BY start_ns, end_ns
        ROWS UNBOUNDED PRECEDING
    ) AS island
    FROM marked
),
islands AS (
    SELECT pid, device_id, grouping, group_key, part, min(start_ns) AS start_ns,
        max(end_ns) AS end_ns
    FROM numbered
    GROUP BY pid, device_id, grouping, group_key, part, island
),
edges AS (
    -- only communication islands need their exposed part
    SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns, start_ns AS t, -1 AS sign
    FROM islands
    WHERE part = 'comm'
    UNION ALL
    SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns, end_ns, 1
    FROM islands
    WHERE part = 'comm'
),
covered AS (
    -- compute time on the GPU before instant t
    SELECT e.*, coalesce(s.compute_before_ns
        + CASE WHEN s.n_compute > 0 THEN least(e.t, s.end_ns) - s.start_ns ELSE 0 END, 0)
        AS compute_until_t
    FROM edges AS e
    ASOF LEFT JOIN gpu_segment AS s
        ON s.pid = e.pid AND s.device_id = e.device_id AND s.start_ns <= e.t
),
exposed AS (
    SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns,
        end_ns - start_ns AS duration_ns,
        (end_ns - start_ns - sum(sign * compute_until_t))::BIGINT AS exposed_ns
    FROM covered
    GROUP BY pid, device_id, grouping, group_key, part, start_ns, end_ns
)
SELECT * FROM exposed
UNION ALL
SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns,
    end_ns - start_ns, NULL
FROM islands
WHERE part <> 'comm'
