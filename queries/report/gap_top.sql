-- gap_top: each GPU's longest and long idle gaps, what ran either side, and what the host did
--
-- `before_*` is the activity whose end opened the gap, `after_*` the one whose start closed
-- it. `sync_call` names a synchronising CUDA call (cudaDeviceSynchronize,
-- cudaStreamSynchronize, cudaEventSynchronize, synchronous cudaMemcpy, or their driver
-- equivalents) that the thread which launched the `after` activity was inside during the
-- gap - the likely cause: the host waited, then had to launch more work. When several
-- overlap the gap, the one overlapping it most is named. Ties in length go to the earlier gap.
-- A CUDA graph launch traced as a whole is busy time, never a gap; it can be either neighbour.
-- `os_call` likewise names the OS runtime call (--trace=osrt: poll, ioctl, read, ...) on that
-- thread overlapping the gap most. `host_range` is what that thread was doing when it launched
-- the `after` activity: the
-- innermost NVTX range open on it at the launch call's start (ranges of a thread nest: of those
-- containing the instant, the one that started last), NULL when none was (nothing traced).
--
-- Besides the $top longest gaps, every long one: a gap holding at least $long_pct % of its
-- GPU's idle time (`long_gap`; at most 100 / $long_pct of them, so the aggregate keeps that
-- many), ranked on (`gap_rank` above $top when it is not among the $top longest).
-- `host_cause` is what the launching thread was doing during the gap: of its host events
-- covering at least half of the gap - Python frames (python_call: a PyTorch profiler trace
-- recorded with_stack), OS runtime calls, NVTX ranges other than steps (a step says only that
-- the gap is inside one), synchronising CUDA calls - the innermost: events of one thread nest,
-- so the one that started last (then the one that ended first, then in that order of kinds).
-- `cause_kind` says which kind: python, os, nvtx or sync; or data_loading when one of those
-- events is a DataLoader fetching a batch ($data_loader, patterns.DATA_LOADER_PATTERN), which
-- `host_cause` then names (of several, the innermost). NULL when no event covers half the gap.
--
-- Reads: activity_name, gpu_segment, launch, nvtx_range, nvtx_role_range, os_call,
--   python_call, sync_call
--
-- Params:
--   $top          INTEGER   10   gaps kept per GPU
--   $long_pct     INTEGER   5    share of the GPU's idle time from which a gap is long
--   $data_loader  VARCHAR   ^enumerate\(DataLoader\)#\w+\.__next__(,|$)|(^|/)torch/utils/data/dataloader\.py\(\d+\):\s__next__$   a DataLoader fetching a batch
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   gap_rank       BIGINT    1 = longest gap of the GPU
--   start_ns       BIGINT    gap start
--   duration_ns    BIGINT    gap length
--   long_gap       BOOLEAN   the gap holds at least $long_pct % of the GPU's idle time
--   before_name    VARCHAR   activity that ended at the gap start
--   before_class   VARCHAR   its class
--   after_name     VARCHAR   activity that started at the gap end
--   after_class    VARCHAR   its class
--   sync_call      VARCHAR   synchronising API call covering the gap, or NULL
--   os_call        VARCHAR   OS runtime call on that thread covering the gap most, or NULL
--   host_range     VARCHAR   innermost NVTX range around the `after` activity's launch, or NULL
--   host_cause     VARCHAR   innermost host event covering half the gap on that thread, or NULL
--   cause_kind     VARCHAR   data_loading, python, os, nvtx or sync; NULL with no host_cause
WITH longest AS (
    -- The longest gaps per GPU (ties: the earlier), as many as $top or as can be long, by a
    -- bounded aggregate: sorting every gap of the GPU to rank them cost 4x as long at 1M
    -- kernels. The aggregate keeps the whole gap, so nothing joins back to gpu_segment; the
    -- GPU's idle time is summed in the same pass.
    SELECT pid, device_id, sum(duration_ns) AS idle_ns, unnest(min_by(
        {'start_ns': start_ns, 'end_ns': end_ns, 'duration_ns': duration_ns,
            'before_key': before_key, 'after_key': after_key},
        (-duration_ns, start_ns), greatest($top, 100 // $long_pct))) AS gap
    FROM gpu_segment
    WHERE idle
    GROUP BY pid, device_id
),
gaps AS (
    SELECT pid, device_id, gap.*, gap.duration_ns * 100 >= idle_ns * $long_pct AS long_gap,
        row_number() OVER (
            PARTITION BY pid, device_id ORDER BY gap.duration_ns DESC, gap.start_ns
        ) AS gap_rank
    FROM longest
),
top AS MATERIALIZED (
    SELECT *,
        ['kernel', 'memcpy', 'memset', 'graph'][(before_key % 4)::INTEGER + 1] AS before_source,
        before_key // 4 AS before_id,
        ['kernel', 'memcpy', 'memset', 'graph'][(after_key % 4)::INTEGER + 1] AS after_source,
        after_key // 4 AS after_id
    FROM gaps
    WHERE gap_rank <= $top OR long_gap
),
ends AS (
    -- The gaps' ends as one list, unnested: the planner then expects a few rows, hashes them
    -- and streams every activity past them. Joined as rows, the ends were estimated at
    -- millions and every activity and launch was hashed instead (5M kernels: 1.9 s, now 0.9 s).
    SELECT unnest(list(DISTINCT {'source': source, 'activity_id': activity_id}), recursive := true)
    FROM (
        SELECT before_source AS source, before_id AS activity_id FROM top
        UNION ALL
        SELECT after_source, after_id FROM top
    )
),
named AS MATERIALIZED (
    SELECT n.source, n.activity_id, n.global_pid, n.correlation_id, n.class, n.name
    FROM ends AS e
    JOIN activity_name AS n ON n.source = e.source AND n.activity_id = e.activity_id
),
launched AS (
    -- The launches of those activities: the same few-rows list, hashed, not every launch.
    SELECT l.global_pid, l.correlation_id, l.global_tid, l.start_ns
    FROM launch AS l
    JOIN (
        SELECT unnest(list(DISTINCT {'global_pid': global_pid,
            'correlation_id': correlation_id}), recursive := true)
        FROM named
    ) AS k ON k.global_pid = l.global_pid AND k.correlation_id = l.correlation_id
),
closer AS (
    -- Each gap with the thread that launched the activity closing it, and when.
    SELECT t.pid, t.device_id, t.gap_rank, t.start_ns, t.end_ns, l.global_tid,
        l.start_ns AS launch_ns
    FROM top AS t
    JOIN named AS a ON a.source = t.after_source AND a.activity_id = t.after_id
    JOIN launched AS l ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
),
host_event AS (
    -- What a thread can be seen doing, by kind; the order of kinds breaks ties (kind_order).
    SELECT 'sync' AS kind, 1 AS kind_order, global_tid, start_ns, end_ns, name FROM sync_call
    UNION ALL
    SELECT 'os', 3, global_tid, start_ns, end_ns, name FROM os_call
    UNION ALL
    SELECT 'python', 4, globalTid, "start", "end", name FROM python_call
    UNION ALL
    SELECT 'nvtx', 2, global_tid, start_ns, end_ns, name FROM nvtx_range
    WHERE range_id NOT IN (SELECT range_id FROM nvtx_role_range WHERE role = 'step')
),
overlapping AS (
    SELECT c.pid, c.device_id, c.gap_rank, h.kind, h.kind_order, h.name, h.start_ns, h.end_ns,
        least(h.end_ns, c.end_ns) - greatest(h.start_ns, c.start_ns) AS overlap_ns,
        -- Covers at least half of the gap: a candidate for what the thread was doing.
        2 * (least(h.end_ns, c.end_ns) - greatest(h.start_ns, c.start_ns))
            >= c.end_ns - c.start_ns AS most
    FROM closer AS c
    JOIN host_event AS h
        ON h.global_tid = c.global_tid AND h.start_ns < c.end_ns AND h.end_ns > c.start_ns
),
causes AS (
    SELECT pid, device_id, gap_rank,
        -- The call overlapping the gap most; of equal overlaps the later, the last the
        -- thread made before the launch (whatever order the file lists them in).
        arg_max(name, (overlap_ns, start_ns)) FILTER (kind = 'sync') AS sync_call,
        arg_max(name, (overlap_ns, start_ns)) FILTER (kind = 'os') AS os_call,
        arg_max({'kind': kind, 'name': name}, (start_ns, -end_ns, kind_order))
            FILTER (most) AS innermost,
        arg_max(name, (start_ns, -end_ns, kind_order))
            FILTER (most AND regexp_matches(name, $data_loader)) AS data_loader
    FROM overlapping
    GROUP BY ALL
),
ranges AS (
    SELECT c.pid, c.device_id, c.gap_rank,
        arg_max(r.name, (r.start_ns, r.range_id)) AS host_range
    FROM closer AS c
    JOIN nvtx_range AS r
        ON r.global_tid = c.global_tid AND r.start_ns <= c.launch_ns AND r.end_ns >= c.launch_ns
    GROUP BY ALL
)
SELECT
    t.pid,
    t.device_id,
    t.gap_rank,
    t.start_ns,
    t.duration_ns,
    t.long_gap,
    b.name AS before_name,
    b.class AS before_class,
    a.name AS after_name,
    a.class AS after_class,
    c.sync_call,
    c.os_call,
    h.host_range,
    coalesce(c.data_loader, c.innermost.name) AS host_cause,
    CASE WHEN c.data_loader IS NOT NULL THEN 'data_loading' ELSE c.innermost.kind END
        AS cause_kind
FROM top AS t
LEFT JOIN named AS b ON b.source = t.before_source AND b.activity_id = t.before_id
LEFT JOIN named AS a ON a.source = t.after_source AND a.activity_id = t.after_id
LEFT JOIN causes AS c
    ON c.pid = t.pid AND c.device_id = t.device_id AND c.gap_rank = t.gap_rank
LEFT JOIN ranges AS h
    ON h.pid = t.pid AND h.device_id = t.device_id AND h.gap_rank = t.gap_rank
ORDER BY t.pid, t.device_id, t.gap_rank
