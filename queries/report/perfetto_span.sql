-- perfetto_span: the derived tracks of the Perfetto trace file: what no trace viewer shows
--
-- Spans overlapping [$start_ns, $end_ns), clipped to it, on one GPU each (`track` names the
-- track, nsysreport.perfetto gives each its own thread row under the GPU):
--   exposed comm      communication running and no compute kernel, on any stream (the
--                     gpu_counter macro exposed_comm), touching segments
--                     merged into one span
--   idle gap          nothing running on the GPU (n_all = 0); `name` is its likely cause: the
--                     synchronising CUDA call the launching thread of the next activity was in
--                     (as gap_top), else `idle`; `detail` names the activities either side
--   straggler wait    in a collective matched across the GPUs (straggler_gpu's rule: the k-th
--                     instance of an op on every GPU, for ops every GPU ran equally often), this
--                     GPU's wait from its own start to the last GPU's start
--   late to collective  on the last arriver: from the first GPU's start to its own, its
--                     lateness; `detail` says how late
--   step              the step's window on this GPU (step_window)
--   layer             a layer range's window on this GPU: first start to last end of the
--                     activities launched in that NVTX range (activity_range)
--
-- Reads: activity, activity_name, activity_range, collective, gpu_segment, launch,
--   step_window, sync_call
--
-- Params:
--   $start_ns   BIGINT   0                      window start (trace time)
--   $end_ns     BIGINT   9223372036854775807    window end (trace time), exclusive
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   track        VARCHAR   exposed comm, idle gap, straggler wait, late to collective, step or layer
--   name         VARCHAR   the span's label
--   detail       VARCHAR   more about it (NULL: nothing more)
--   start_ns     BIGINT    span start, clipped to the window
--   end_ns       BIGINT    span end, clipped to the window
WITH exposed AS (
    SELECT pid, device_id, start_ns, end_ns,
        CASE WHEN start_ns = lag(end_ns) OVER (PARTITION BY pid, device_id ORDER BY seq)
            THEN 0 ELSE 1 END AS opens
    FROM gpu_segment
    WHERE exposed_comm(packed) AND start_ns < $end_ns AND end_ns > $start_ns
),
exposed_islands AS (
    SELECT *, sum(opens) OVER (PARTITION BY pid, device_id ORDER BY start_ns) AS island
    FROM exposed
),
exposed_spans AS (
    SELECT pid, device_id, 'exposed comm' AS track, 'exposed comm' AS name,
        NULL::VARCHAR AS detail, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM exposed_islands
    GROUP BY pid, device_id, island
),
gaps AS (
    SELECT pid, device_id, start_ns, end_ns,
        ['kernel', 'memcpy', 'memset', 'graph'][(before_key % 4)::INTEGER + 1] AS before_source,
        before_key // 4 AS before_id,
        ['kernel', 'memcpy', 'memset', 'graph'][(after_key % 4)::INTEGER + 1] AS after_source,
        after_key // 4 AS after_id
    FROM gpu_segment
    WHERE idle AND start_ns < $end_ns AND end_ns > $start_ns
),
ends AS (
    SELECT before_source AS source, before_id AS activity_id FROM gaps
    UNION
    SELECT after_source, after_id FROM gaps
),
named AS (
    SELECT a.source, a.activity_id, a.global_pid, a.correlation_id,
        n.name
    FROM ends AS e
    JOIN activity AS a ON a.source = e.source AND a.activity_id = e.activity_id
    LEFT JOIN activity_name AS n ON n.source = a.source AND n.activity_id = a.activity_id
),
causes AS (
    SELECT t.pid, t.device_id, t.start_ns,
        -- The call overlapping the gap most; of equal overlaps the later, the last the
        -- thread made before the launch (whatever order the file lists them in).
        arg_max(
            s.name, (least(s.end_ns, t.end_ns) - greatest(s.start_ns, t.start_ns), s.start_ns)
        ) AS sync_call
    FROM gaps AS t
    JOIN named AS a ON a.source = t.after_source AND a.activity_id = t.after_id
    JOIN launch AS l ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
    JOIN sync_call AS s
        ON s.global_tid = l.global_tid AND s.start_ns < t.end_ns AND s.end_ns > t.start_ns
    GROUP BY ALL
),
gap_spans AS (
    SELECT t.pid, t.device_id, 'idle gap' AS track,
        coalesce('idle: host in ' || c.sync_call, 'idle') AS name,
        concat_ws('; ', 'after ' || b.name, 'before ' || a.name) AS detail,
        t.start_ns, t.end_ns
    FROM gaps AS t
    LEFT JOIN named AS b ON b.source = t.before_source AND b.activity_id = t.before_id
    LEFT JOIN named AS a ON a.source = t.after_source AND a.activity_id = t.after_id
    LEFT JOIN causes AS c
        ON c.pid = t.pid AND c.device_id = t.device_id AND c.start_ns = t.start_ns
),
counts AS (SELECT op, pid, device_id, count(*) AS n FROM collective GROUP BY ALL),
matched_ops AS (
    SELECT op FROM counts GROUP BY op HAVING count(*) > 1 AND min(n) = max(n)
),
instances AS (
    SELECT c.op, c.ordinal, c.pid, c.device_id, c.start_ns,
        max(c.start_ns) OVER (PARTITION BY c.op, c.ordinal) AS last_start_ns,
        min(c.start_ns) OVER (PARTITION BY c.op, c.ordinal) AS first_start_ns,
        row_number() OVER (
            PARTITION BY c.op, c.ordinal ORDER BY c.start_ns DESC, c.pid, c.device_id
        ) AS arrival_from_last
    FROM collective AS c
    JOIN matched_ops AS m ON m.op = c.op
),
straggler_spans AS (
    SELECT pid, device_id, 'straggler wait' AS track, 'waits: ' || op || ' #' || ordinal AS name,
        NULL::VARCHAR AS detail, start_ns, last_start_ns AS end_ns
    FROM instances
    WHERE last_start_ns > start_ns
    UNION ALL
    SELECT pid, device_id, 'late to collective', 'late: ' || op || ' #' || ordinal,
        'started ' || (start_ns - first_start_ns) || ' ns after the first GPU',
        first_start_ns, start_ns
    FROM instances
    WHERE arrival_from_last = 1 AND start_ns > first_start_ns
),
step_spans AS (
    SELECT pid, device_id, 'step' AS track, name, NULL::VARCHAR AS detail, start_ns, end_ns
    FROM step_window
),
layer_spans AS (
    SELECT a.pid, a.device_id, 'layer' AS track, r.label AS name, NULL::VARCHAR AS detail,
        min(a.start_ns) AS start_ns, max(a.end_ns) AS end_ns
    FROM activity_range AS r
    JOIN activity AS a ON a.source = r.source AND a.activity_id = r.activity_id
    WHERE r.role = 'layer' AND a.end_ns > a.start_ns
    GROUP BY a.pid, a.device_id, r.range_id, r.label
),
spans AS (
    SELECT * FROM exposed_spans
    UNION ALL SELECT * FROM gap_spans
    UNION ALL SELECT * FROM straggler_spans
    UNION ALL SELECT * FROM step_spans
    UNION ALL SELECT * FROM layer_spans
)
SELECT pid, device_id, track, name, detail,
    greatest(start_ns, $start_ns)::BIGINT AS start_ns, least(end_ns, $end_ns)::BIGINT AS end_ns
FROM spans
WHERE start_ns < $end_ns AND end_ns > $start_ns AND end_ns > start_ns
ORDER BY pid, device_id, track, start_ns, end_ns, name, detail
