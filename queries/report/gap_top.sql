-- gap_top: each GPU's longest idle gaps, what ran either side, and the sync call behind them
--
-- `before_*` is the activity whose end opened the gap, `after_*` the one whose start closed
-- it. `sync_call` names a synchronising CUDA call (cudaDeviceSynchronize,
-- cudaStreamSynchronize, cudaEventSynchronize, synchronous cudaMemcpy, or their driver
-- equivalents) that the thread which launched the `after` activity was inside during the
-- gap - the likely cause: the host waited, then had to launch more work. When several
-- overlap the gap, the one overlapping it most is named. Ties in length go to the earlier gap.
-- A CUDA graph launch traced as a whole is busy time, never a gap; it can be either neighbour.
--
-- Reads: activity, activity_name, gpu_segment, launch, sync_call
--
-- Params:
--   $top   INTEGER   10   gaps kept per GPU
--
-- Columns:
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   gap_rank       BIGINT    1 = longest gap of the GPU
--   start_ns       BIGINT    gap start
--   duration_ns    BIGINT    gap length
--   before_name    VARCHAR   activity that ended at the gap start
--   before_class   VARCHAR   its class
--   after_name     VARCHAR   activity that started at the gap end
--   after_class    VARCHAR   its class
--   sync_call      VARCHAR   synchronising API call covering the gap, or NULL
WITH longest AS (
    -- The $top longest gaps per GPU (ties: the earlier), by a bounded aggregate: sorting every
    -- gap of the GPU to rank them cost 4x as long at 1M kernels.
    SELECT pid, device_id, unnest(min_by(seq, (-duration_ns, start_ns), $top)) AS seq
    FROM gpu_segment
    WHERE n_all = 0
    GROUP BY pid, device_id
),
gaps AS (
    SELECT s.*, row_number() OVER (
        PARTITION BY s.pid, s.device_id ORDER BY s.duration_ns DESC, s.start_ns
    ) AS gap_rank
    FROM gpu_segment AS s
    SEMI JOIN longest AS l ON l.pid = s.pid AND l.device_id = s.device_id AND l.seq = s.seq
),
top AS (
    SELECT *,
        ['kernel', 'memcpy', 'memset', 'graph'][(before_key % 4)::INTEGER + 1] AS before_source,
        before_key // 4 AS before_id,
        ['kernel', 'memcpy', 'memset', 'graph'][(after_key % 4)::INTEGER + 1] AS after_source,
        after_key // 4 AS after_id
    FROM gaps
),
ends AS (
    SELECT before_source AS source, before_id AS activity_id FROM top
    UNION
    SELECT after_source, after_id FROM top
),
named AS (
    SELECT a.source, a.activity_id, a.global_pid, a.correlation_id, a.class,
        n.name
    FROM ends AS e
    JOIN activity AS a ON a.source = e.source AND a.activity_id = e.activity_id
    LEFT JOIN activity_name AS n ON n.source = a.source AND n.activity_id = a.activity_id
),
causes AS (
    SELECT t.pid, t.device_id, t.gap_rank,
        arg_max(s.name, least(s.end_ns, t.end_ns) - greatest(s.start_ns, t.start_ns)) AS sync_call
    FROM top AS t
    JOIN named AS a ON a.source = t.after_source AND a.activity_id = t.after_id
    JOIN launch AS l ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
    JOIN sync_call AS s
        ON s.global_tid = l.global_tid AND s.start_ns < t.end_ns AND s.end_ns > t.start_ns
    GROUP BY ALL
)
SELECT
    t.pid,
    t.device_id,
    t.gap_rank,
    t.start_ns,
    t.duration_ns,
    b.name AS before_name,
    b.class AS before_class,
    a.name AS after_name,
    a.class AS after_class,
    c.sync_call
FROM top AS t
LEFT JOIN named AS b ON b.source = t.before_source AND b.activity_id = t.before_id
LEFT JOIN named AS a ON a.source = t.after_source AND a.activity_id = t.after_id
LEFT JOIN causes AS c
    ON c.pid = t.pid AND c.device_id = t.device_id AND c.gap_rank = t.gap_rank
ORDER BY t.pid, t.device_id, t.gap_rank
