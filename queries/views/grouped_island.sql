-- grouped_island: unions of kernel intervals per GPU and group (layer or collective op), with
-- the part of each union that no compute kernel on the GPU covers
--
-- Materialised (CREATE TABLE) when the trace is opened: layers and collectives both read it.
--
-- Groupings: `layer` (parts compute, gemm, comm: the kernels launched inside that layer; the
-- rest under `(outside layers)`) and `op` (part comm: the kernels of one collective op).
-- Each row is one island of the union (overlapping or touching intervals merged), so sums of
-- duration_ns are union lengths. exposed_ns is the island minus the union of all compute on
-- the GPU, whoever launched it: the compute time inside [start, end) sums the gpu_segment
-- rows between the island's two ends (two ASOF lookups, then an equality join on seq).
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
CREATE TABLE grouped_island AS
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
groups AS (
    -- Integer ids for the groups: the sorts below then compare numbers, not layer names.
    SELECT grouping, group_key, row_number() OVER (ORDER BY grouping, group_key) AS group_id
    FROM (SELECT DISTINCT grouping, group_key FROM members)
),
keyed AS (
    SELECT m.pid, m.device_id, g.group_id,
        CASE m.part WHEN 'compute' THEN 0 WHEN 'gemm' THEN 1 ELSE 2 END AS part_id,
        m.start_ns, m.end_ns
    FROM members AS m
    JOIN groups AS g ON g.grouping = m.grouping AND g.group_key = m.group_key
),
reached AS (
    -- how far the group's earlier intervals reach: a new island opens past that point
    SELECT *, max(end_ns) OVER w AS reach
    FROM keyed
    WINDOW w AS (
        PARTITION BY pid, device_id, group_id, part_id ORDER BY start_ns, end_ns
        ROWS UNBOUNDED PRECEDING
    )
),
numbered AS (
    SELECT *, sum(opens::BIGINT) OVER w AS island
    FROM (
        SELECT *, coalesce(start_ns > lag(reach) OVER w, true) AS opens
        FROM reached
        WINDOW w AS (PARTITION BY pid, device_id, group_id, part_id ORDER BY start_ns, end_ns)
    )
    WINDOW w AS (
        PARTITION BY pid, device_id, group_id, part_id ORDER BY start_ns, end_ns
        ROWS UNBOUNDED PRECEDING
    )
),
islands AS (
    SELECT n.pid, n.device_id, g.grouping, g.group_key,
        ['compute', 'gemm', 'comm'][n.part_id + 1] AS part,
        min(n.start_ns) AS start_ns, max(n.end_ns) AS end_ns
    FROM numbered AS n
    JOIN groups AS g ON g.group_id = n.group_id
    GROUP BY n.pid, n.device_id, g.grouping, g.group_key, n.part_id, n.island
),
bounds AS (
    -- Communication islands only need their exposed part: the first and last gpu_segment
    -- row inside each (ASOF: the segment containing the instant).
    SELECT i.*, coalesce(lo.seq, 0) AS lo_seq, coalesce(hi.seq, -1) AS hi_seq
    FROM islands AS i
    ASOF LEFT JOIN gpu_segment AS lo
        ON lo.pid = i.pid AND lo.device_id = i.device_id AND lo.start_ns <= i.start_ns
    ASOF LEFT JOIN gpu_segment AS hi
        ON hi.pid = i.pid AND hi.device_id = i.device_id AND hi.start_ns < i.end_ns
    WHERE i.part = 'comm'
),
inside AS (
    SELECT b.*, unnest(range(b.lo_seq, b.hi_seq + 1)) AS seq FROM bounds AS b
),
covered AS (
    -- compute time on the GPU inside the island
    SELECT i.pid, i.device_id, i.grouping, i.group_key, i.part, i.start_ns, i.end_ns,
        coalesce(sum(least(s.end_ns, i.end_ns) - greatest(s.start_ns, i.start_ns))
            FILTER (s.n_compute > 0 AND s.end_ns > i.start_ns AND s.start_ns < i.end_ns), 0)
            AS compute_ns
    FROM inside AS i
    LEFT JOIN gpu_segment AS s
        ON s.pid = i.pid AND s.device_id = i.device_id AND s.seq = i.seq
    GROUP BY i.pid, i.device_id, i.grouping, i.group_key, i.part, i.start_ns, i.end_ns
),
exposed AS (
    SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns,
        end_ns - start_ns AS duration_ns,
        (end_ns - start_ns - compute_ns)::BIGINT AS exposed_ns
    FROM covered
)
SELECT * FROM exposed
UNION ALL
SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns,
    end_ns - start_ns, NULL
FROM islands
WHERE part <> 'comm'
