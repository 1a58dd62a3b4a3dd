-- grouped_island: unions of activity intervals per GPU and group (layer or collective op), as
-- disjoint pieces, with the part of each comm or copy piece nothing else on the GPU covers
--
-- Materialised (CREATE TABLE) when the trace is opened: layers, collectives and the data path
-- read it.
--
-- Groupings: `layer` (parts compute, gemm, comm: the kernels launched inside that layer, and
-- memcpy: its copies and memsets; the rest under `(outside layers)`), `op` (part comm: the
-- kernels of one collective op), `comm` (part comm: the kernels of one communicator channel,
-- collective.channel: a process group, else a stream) and `copy` (part memcpy: the copies of one data-path stage,
-- memcpy's `stage`: h2d, d2h, d2d, p2p, memset, ...).
-- In start order, each interval adds to its group's union only what reaches past every earlier
-- interval of the group: [max(start, reach so far), end), when not empty. Those pieces are
-- disjoint and together make the union, so sums of duration_ns are union lengths (one window
-- pass, no island numbering). exposed_ns is the piece minus the union of all compute on the
-- GPU (for copies: of all compute and comm, as exposed memcpy in docs/metrics.md), whoever
-- launched it: a running total of that time over gpu_segment gives the covered time before
-- any instant with one ASOF lookup, so a piece's covered time is a difference.
--
-- Reads: activity, activity_range, collective, gpu_segment, kernel, memcpy
--
-- Columns:
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   grouping      VARCHAR   layer, op, comm or copy
--   group_key     VARCHAR   layer label, collective op, communicator channel, or copy stage
--   part          VARCHAR   compute, gemm, comm or memcpy
--   start_ns      BIGINT    piece start
--   end_ns        BIGINT    piece end
--   duration_ns   BIGINT    piece length
--   exposed_ns    BIGINT    comm pieces: length no compute kernel on the GPU covers; memcpy
--                            pieces: length no compute or comm kernel covers
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
    UNION ALL
    SELECT pid, device_id, 'comm', channel, 'comm', start_ns, end_ns
    FROM collective WHERE end_ns > start_ns
    UNION ALL
    SELECT a.pid, a.device_id, 'layer', coalesce(ar.label, '(outside layers)'), 'memcpy',
        a.start_ns, a.end_ns
    FROM activity AS a
    LEFT JOIN activity_range AS ar
        ON ar.source = a.source AND ar.activity_id = a.activity_id AND ar.role = 'layer'
    WHERE a.class = 'memcpy' AND a.end_ns > a.start_ns
    UNION ALL
    SELECT pid, device_id, 'copy', stage, 'memcpy', start_ns, end_ns
    FROM memcpy WHERE end_ns > start_ns
),
groups AS (
    -- Integer ids for the groups: the sorts below then compare numbers, not layer names.
    SELECT grouping, group_key, row_number() OVER (ORDER BY grouping, group_key) AS group_id
    FROM (SELECT DISTINCT grouping, group_key FROM members)
),
keyed AS (
    SELECT m.pid, m.device_id, g.group_id,
        CASE m.part WHEN 'compute' THEN 0 WHEN 'gemm' THEN 1 WHEN 'comm' THEN 2 ELSE 3 END
            AS part_id,
        m.start_ns, m.end_ns
    FROM members AS m
    JOIN groups AS g ON g.grouping = m.grouping AND g.group_key = m.group_key
),
pieces AS (
    SELECT pid, device_id, group_id, part_id,
        greatest(start_ns, coalesce(reach, start_ns)) AS start_ns, end_ns
    FROM (
        SELECT *, max(end_ns) OVER (
            PARTITION BY pid, device_id, group_id, part_id ORDER BY start_ns, end_ns
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS reach
        FROM keyed
    )
    WHERE reach IS NULL OR end_ns > reach
),
covered_until AS (
    -- from the GPU's first segment to the end of each segment: compute time (what hides
    -- comm), and compute or comm time (what hides a copy)
    SELECT pid, device_id, start_ns, end_ns, duration_ns, n_compute > 0 AS computing,
        n_compute > 0 OR n_comm > 0 AS kernel_running,
        sum(CASE WHEN n_compute > 0 THEN duration_ns ELSE 0 END) OVER w AS compute_until_ns,
        sum(CASE WHEN n_compute > 0 OR n_comm > 0 THEN duration_ns ELSE 0 END) OVER w
            AS kernel_until_ns
    FROM gpu_segment
    WINDOW w AS (PARTITION BY pid, device_id ORDER BY seq ROWS UNBOUNDED PRECEDING)
),
point AS (
    -- Every instant where a piece starts or ends, once (a comm kernel is a piece of its layer,
    -- its op and its communicator): one lookup of covered time each.
    SELECT DISTINCT pid, device_id, part_id = 2 AS by_compute, start_ns AS t
    FROM pieces WHERE part_id >= 2
    UNION
    SELECT pid, device_id, part_id = 2, end_ns FROM pieces WHERE part_id >= 2
),
covered_before AS (
    -- covered time before instant t: the running total at the end of the segment that starts
    -- at or before t, less the part of that segment after t when it is covered. (Sort-based
    -- ASOF lookups: at 5M kernels, equality joins of the pieces with every segment ran out of
    -- DuckDB's memory limit, where sorts spill to disk.)
    SELECT p.pid, p.device_id, p.by_compute, p.t,
        coalesce(CASE WHEN p.by_compute
            THEN c.compute_until_ns - CASE WHEN c.computing
                THEN greatest(c.end_ns - p.t, 0) ELSE 0 END
            ELSE c.kernel_until_ns - CASE WHEN c.kernel_running
                THEN greatest(c.end_ns - p.t, 0) ELSE 0 END
        END, 0) AS covered_ns
    FROM point AS p
    ASOF LEFT JOIN covered_until AS c
        ON c.pid = p.pid AND c.device_id = p.device_id AND c.start_ns <= p.t
),
exposed AS (
    SELECT p.pid, p.device_id, p.group_id, p.part_id, p.start_ns, p.end_ns,
        p.end_ns - p.start_ns - (hi.covered_ns - lo.covered_ns) AS exposed_ns
    FROM pieces AS p
    JOIN covered_before AS lo
        ON lo.pid = p.pid AND lo.device_id = p.device_id AND lo.by_compute = (p.part_id = 2)
        AND lo.t = p.start_ns
    JOIN covered_before AS hi
        ON hi.pid = p.pid AND hi.device_id = p.device_id AND hi.by_compute = (p.part_id = 2)
        AND hi.t = p.end_ns
    WHERE p.part_id >= 2
)
SELECT e.pid, e.device_id, g.grouping, g.group_key, ['comm', 'memcpy'][e.part_id - 1] AS part,
    e.start_ns, e.end_ns,
    e.end_ns - e.start_ns AS duration_ns, e.exposed_ns::BIGINT AS exposed_ns
FROM exposed AS e
JOIN groups AS g ON g.group_id = e.group_id
UNION ALL
SELECT p.pid, p.device_id, g.grouping, g.group_key,
    ['compute', 'gemm'][p.part_id + 1], p.start_ns, p.end_ns,
    p.end_ns - p.start_ns, NULL
FROM pieces AS p
JOIN groups AS g ON g.group_id = p.group_id
WHERE p.part_id < 2
