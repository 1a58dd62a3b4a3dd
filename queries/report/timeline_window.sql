-- timeline_window: activities, exposed communication and gaps of every GPU inside one window
--
-- What the report's timeline draws. `activity` rows: every activity of every GPU that overlaps
-- [$start_ns, $end_ns), clipped to the window, one row each, on its stream. `exposed_comm` rows:
-- the stretches where communication runs and no compute kernel does, on any stream (the
-- gpu_counter macro exposed_comm). `gap` rows: idle gaps (n_all = 0).
-- Exposed and gap rows belong to the GPU, not to a stream (stream_id is NULL); within one GPU
-- they never overlap, so their lengths add up. Activities with end <= start carry no time and
-- are left out. Only the first $max_rows rows by start time are returned, so a huge window stays
-- bounded; `window_rows` counts them all, so a caller can tell that the list was cut.
--
-- Reads: activity, gpu_segment
--
-- Params:
--   $start_ns   BIGINT   0                      window start (trace time)
--   $end_ns     BIGINT   9223372036854775807    window end (trace time), exclusive
--   $max_rows   BIGINT   20000                  most rows returned
--
-- Columns:
--   kind          VARCHAR   activity, exposed_comm or gap
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   stream_id     BIGINT    CUPTI stream id (NULL for exposed_comm and gap)
--   class         VARCHAR   comm, attention, gemm, other, memcpy or graph (NULL: exposed_comm, gap)
--   source        VARCHAR   kernel, memcpy, memset or graph (NULL for exposed_comm and gap)
--   activity_id   BIGINT    kernel_id, memcpy_id or graph_launch_id (NULL for exposed_comm, gap)
--   start_ns      BIGINT    piece start, clipped to the window
--   end_ns        BIGINT    piece end, clipped to the window
--   window_rows   BIGINT    rows in the window before the $max_rows cut
WITH pieces AS (
    SELECT 'activity' AS kind, pid, device_id, stream_id, class, source, activity_id,
        greatest(start_ns, $start_ns) AS start_ns, least(end_ns, $end_ns) AS end_ns
    FROM activity
    WHERE end_ns > start_ns AND start_ns < $end_ns AND end_ns > $start_ns
    UNION ALL
    SELECT CASE WHEN idle THEN 'gap' ELSE 'exposed_comm' END, pid, device_id,
        NULL, NULL, NULL, NULL,
        greatest(start_ns, $start_ns), least(end_ns, $end_ns)
    FROM gpu_segment
    WHERE (idle OR exposed_comm(packed))
        AND start_ns < $end_ns AND end_ns > $start_ns
),
ranked AS (
    SELECT *,
        row_number() OVER (
            ORDER BY start_ns, pid, device_id, kind, stream_id, source, activity_id
        ) AS row_order,
        count(*) OVER () AS window_rows
    FROM pieces
)
SELECT kind, pid, device_id, stream_id::BIGINT AS stream_id, class, source,
    activity_id::BIGINT AS activity_id, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns,
    window_rows::BIGINT AS window_rows
FROM ranked
WHERE row_order <= $max_rows
ORDER BY pid, device_id, kind, stream_id, start_ns, source, activity_id
