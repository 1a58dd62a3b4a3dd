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
-- pass, no island numbering). That pass is needed only for a part whose activities overlap
-- somewhere on the GPU (two of its class running in one gpu_segment): where they never
-- do, each interval is a piece as it is, with no sort (one compute stream and one NCCL stream,
-- as in most traces: 5M kernels, 6.9 -> 5.7 s, the same rows).
-- exposed_ns is the piece minus the union of all compute on the GPU (for copies: of all compute
-- and comm, as exposed memcpy in docs/metrics.md), whoever launched it: the sum of the piece's
-- overlaps with the gpu_segment rows where none of that runs. Grouping `comm` keeps every piece
-- (communicator_step counts each in the step it starts in); the others are only ever summed, so
-- they keep one row per group and part: its first piece's start, its last piece's end, and the
-- sums (5M kernels: 1M rows written, not 9M).
--
-- Built one GPU at a time ($pid, $device_id; nsysreport.queries runs it for each GPU and
-- appends the rows): every union and window here is within one GPU, so its sorts hold one
-- GPU's rows, not the whole trace's.
-- On a GPU whose first collective waited for a late-starting rank, every interval is clipped to
-- start where that wait ended (late_start_wait.cut_ns), as the activity view clips them: the
-- wait and what ended before it are in no union.
--
-- Reads: activity, activity_range, collective, gpu_segment, kernel, late_start_wait, memcpy
--
-- Params:
--   $pid         BIGINT   -   the GPU's process id
--   $device_id   BIGINT   -   the GPU's nsys id
--
-- Columns:
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   grouping      VARCHAR   layer, op, comm or copy
--   group_key     VARCHAR   layer label, collective op, communicator channel, or copy stage
--   part          VARCHAR   compute, gemm, comm or memcpy
--   start_ns      BIGINT    piece start (grouping other than comm: the group's first)
--   end_ns        BIGINT    piece end (other than comm: the group's last)
--   duration_ns   BIGINT    piece length (other than comm: the union's length, their sum)
--   exposed_ns    BIGINT    comm pieces: length no compute kernel on the GPU covers; memcpy
--                            pieces: length no compute or comm kernel covers; else NULL
CREATE TABLE grouped_island AS
WITH layer_range AS (
    -- This GPU's layer ranges only (their pid and device_id are redundant for the match): the
    -- joins below then hash these, not every GPU's rows for each GPU (5M kernels, one run
    -- each, the table in a file: 9.3 -> 7.6 s).
    SELECT source, activity_id, label
    FROM activity_range
    WHERE role = 'layer' AND pid = $pid AND device_id = $device_id
),
cut AS (
    -- One row: the GPU's cut, NULL without one (greatest() then passes over it).
    SELECT max(cut_ns) AS cut_ns FROM late_start_wait WHERE pid = $pid AND device_id = $device_id
),
kernels AS (
    SELECT k.pid, k.device_id, greatest(k.start_ns, c.cut_ns) AS start_ns,
        greatest(k.end_ns, c.cut_ns) AS end_ns, k.class,
        coalesce(ar.label, '(outside layers)') AS layer
    FROM kernel AS k
    CROSS JOIN cut AS c
    LEFT JOIN layer_range AS ar ON ar.source = 'kernel' AND ar.activity_id = k.kernel_id
    WHERE k.pid = $pid AND k.device_id = $device_id
        AND greatest(k.end_ns, c.cut_ns) > greatest(k.start_ns, c.cut_ns)
),
clipped_collective AS (
    SELECT x.pid, x.device_id, x.op, x.channel, greatest(x.start_ns, c.cut_ns) AS start_ns,
        greatest(x.end_ns, c.cut_ns) AS end_ns
    FROM collective AS x
    CROSS JOIN cut AS c
    WHERE x.pid = $pid AND x.device_id = $device_id
),
clipped_copy AS (
    SELECT m.pid, m.device_id, m.stage, greatest(m.start_ns, c.cut_ns) AS start_ns,
        greatest(m.end_ns, c.cut_ns) AS end_ns
    FROM memcpy AS m
    CROSS JOIN cut AS c
    WHERE m.pid = $pid AND m.device_id = $device_id
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
    FROM clipped_collective WHERE end_ns > start_ns
    UNION ALL
    SELECT pid, device_id, 'comm', channel, 'comm', start_ns, end_ns
    FROM clipped_collective WHERE end_ns > start_ns
    UNION ALL
    SELECT a.pid, a.device_id, 'layer', coalesce(ar.label, '(outside layers)'), 'memcpy',
        a.start_ns, a.end_ns
    FROM activity AS a
    LEFT JOIN layer_range AS ar ON ar.source = a.source AND ar.activity_id = a.activity_id
    WHERE a.pid = $pid AND a.device_id = $device_id AND a.class = 'memcpy'
        AND a.end_ns > a.start_ns
    UNION ALL
    SELECT pid, device_id, 'copy', stage, 'memcpy', start_ns, end_ns
    FROM clipped_copy WHERE end_ns > start_ns
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
overlapping AS (
    -- The parts (compute, gemm, comm, memcpy) of which two activities run at once somewhere on
    -- this GPU: the most of their class that its segments count, above one. gpu_segment
    -- counts every activity a part's groups take (grouped by layer, op, channel or stage), so
    -- elsewhere no two intervals of one group overlap: each is a piece of its union as it is.
    SELECT p.part_id
    FROM (
        SELECT max(n_compute) AS compute, max(n_gemm) AS gemm, max(n_comm) AS comm,
            max(n_memcpy) AS memcpy
        FROM gpu_segment
        WHERE pid = $pid AND device_id = $device_id
    ) AS m
    CROSS JOIN (VALUES (0), (1), (2), (3)) AS p(part_id)
    WHERE [m.compute, m.gemm, m.comm, m.memcpy][p.part_id + 1] > 1
),
ordered AS (
    SELECT *, lag(end_ns) OVER (
        PARTITION BY group_id, part_id ORDER BY start_ns, end_ns
    ) AS previous_end
    FROM keyed
    SEMI JOIN overlapping USING (part_id)
),
nested AS (
    -- The groups where an interval ends before the one started just before it (one inside
    -- another): only there can the reach be earlier than the latest previous end.
    SELECT DISTINCT group_id, part_id FROM ordered WHERE end_ns < previous_end
),
reached AS (
    -- Where the ends rise in start order (one stream's kernels, staggered streams), the reach
    -- is the previous interval's end: a lag over the sort. Elsewhere, the running max (a
    -- segment tree per partition in DuckDB: 4x the cost of the sort, 0.8 s of 1.4 s per GPU
    -- at 5M kernels when every group took it).
    SELECT o.pid, o.device_id, o.group_id, o.part_id, o.start_ns, o.end_ns,
        o.previous_end AS reach
    FROM ordered AS o
    ANTI JOIN nested AS n ON n.group_id = o.group_id AND n.part_id = o.part_id
    UNION ALL
    SELECT k.pid, k.device_id, k.group_id, k.part_id, k.start_ns, k.end_ns, max(k.end_ns) OVER (
        PARTITION BY k.group_id, k.part_id ORDER BY k.start_ns, k.end_ns
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS reach
    FROM keyed AS k
    SEMI JOIN nested AS n ON n.group_id = k.group_id AND n.part_id = k.part_id
    UNION ALL
    SELECT pid, device_id, group_id, part_id, start_ns, end_ns, NULL
    FROM keyed
    ANTI JOIN overlapping USING (part_id)
),
pieces AS (
    SELECT pid, device_id, group_id, part_id,
        greatest(start_ns, coalesce(reach, start_ns)) AS start_ns, end_ns
    FROM reached
    WHERE reach IS NULL OR end_ns > reach
),
probe AS (
    -- Each distinct comm or copy piece once (a comm kernel is a piece of its layer, its op
    -- and its communicator). `by_compute`: comm, hidden by compute; else a copy, hidden by
    -- compute or comm.
    SELECT DISTINCT pid, device_id, part_id = 2 AS by_compute, start_ns, end_ns
    FROM pieces
    WHERE part_id >= 2
),
bin AS (
    -- A time bin about as long as the gap between pieces. Pieces and the segments that could
    -- expose them are each listed in the bins they span and meet in a shared bin: a hash
    -- join, no sort (the time_bin macros).
    SELECT pid, device_id, time_bin_width(min(start_ns), max(end_ns), count(*)) AS width
    FROM probe
    GROUP BY pid, device_id
),
probe_bin AS (
    SELECT p.*, unnest(time_bins(p.start_ns, p.end_ns, b.width)) AS bin
    FROM probe AS p
    JOIN bin AS b ON b.pid = p.pid AND b.device_id = p.device_id
),
uncovered AS (
    -- The segments that can expose a piece: a piece lies inside its own activity, so under a
    -- comm piece comm runs and it is exposed where the exposed_comm macro holds (no compute);
    -- under a copy a copy runs, exposed where exposed_memcpy holds (neither compute nor comm).
    SELECT s.pid, s.device_id, s.start_ns, s.end_ns, s.packed, b.width,
        unnest(time_bins(s.start_ns, s.end_ns, b.width)) AS bin
    FROM gpu_segment AS s
    JOIN bin AS b ON b.pid = s.pid AND b.device_id = s.device_id
    WHERE s.pid = $pid AND s.device_id = $device_id
        AND (exposed_comm(s.packed) OR exposed_memcpy(s.packed))
),
probe_exposed AS (
    -- A piece's exposed time: its overlap with the segments that do not hide it, each pair
    -- once, in the bin where their overlap starts.
    SELECT p.pid, p.device_id, p.by_compute, p.start_ns, p.end_ns,
        sum(least(p.end_ns, u.end_ns) - greatest(p.start_ns, u.start_ns)) AS exposed_ns
    FROM probe_bin AS p
    JOIN uncovered AS u ON u.pid = p.pid AND u.device_id = p.device_id AND u.bin = p.bin
    WHERE u.start_ns < p.end_ns AND u.end_ns > p.start_ns
        AND CASE WHEN p.by_compute THEN exposed_comm(u.packed) ELSE exposed_memcpy(u.packed) END
        AND u.bin = greatest(p.start_ns, u.start_ns) // u.width
    GROUP BY ALL
),
exposed AS (
    SELECT p.pid, p.device_id, p.group_id, p.part_id, p.start_ns, p.end_ns,
        coalesce(x.exposed_ns, 0) AS exposed_ns
    FROM pieces AS p
    LEFT JOIN probe_exposed AS x
        ON x.pid = p.pid AND x.device_id = p.device_id AND x.by_compute = (p.part_id = 2)
        AND x.start_ns = p.start_ns AND x.end_ns = p.end_ns
    WHERE p.part_id >= 2
),
pieced AS (
    SELECT pid, device_id, group_id, part_id, start_ns, end_ns, exposed_ns FROM exposed
    UNION ALL
    SELECT pid, device_id, group_id, part_id, start_ns, end_ns, NULL FROM pieces
    WHERE part_id < 2
),
named AS (
    SELECT p.*, g.grouping, g.group_key,
        ['compute', 'gemm', 'comm', 'memcpy'][p.part_id + 1] AS part
    FROM pieced AS p
    JOIN groups AS g ON g.group_id = p.group_id
)
-- Grouping `comm`: every piece (communicator_step counts each in the step it starts in).
SELECT pid, device_id, grouping, group_key, part, start_ns, end_ns,
    end_ns - start_ns AS duration_ns, exposed_ns::BIGINT AS exposed_ns
FROM named
WHERE grouping = 'comm'
UNION ALL
-- The others are only summed: one row per group and part (5M kernels: 1M rows, not 9M).
SELECT pid, device_id, grouping, group_key, part, min(start_ns), max(end_ns),
    sum(end_ns - start_ns)::BIGINT, sum(exposed_ns)::BIGINT
FROM named
WHERE grouping <> 'comm'
GROUP BY pid, device_id, grouping, group_key, part
