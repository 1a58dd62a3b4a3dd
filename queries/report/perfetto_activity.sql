-- perfetto_activity: every GPU activity overlapping a window, named, for the Perfetto trace file
--
-- One row per kernel, memcpy, memset or CUDA graph launch (traced as a whole) that overlaps
-- [$start_ns, $end_ns), clipped to the window: the stream tracks of `--perfetto`
-- (nsysreport.perfetto). Activities with end <= start carry no time and are left out, as in
-- timeline_window.
--
-- Reads: activity, activity_name
--
-- Params:
--   $start_ns   BIGINT   0                      window start (trace time)
--   $end_ns     BIGINT   9223372036854775807    window end (trace time), exclusive
--
-- Columns:
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   stream_id     BIGINT    CUPTI stream id
--   source        VARCHAR   kernel, memcpy, memset or graph
--   activity_id   BIGINT    kernel_id, memcpy_id or graph_launch_id
--   class         VARCHAR   comm, attention, gemm, other, memcpy or graph
--   name          VARCHAR   kernel name, [CUDA memcpy <kind>], [CUDA memset] or [CUDA graph <id>]
--   start_ns      BIGINT    start, clipped to the window
--   end_ns        BIGINT    end, clipped to the window
SELECT a.pid, a.device_id, a.stream_id, a.source, a.activity_id, a.class,
    n.name,
    greatest(a.start_ns, $start_ns)::BIGINT AS start_ns,
    least(a.end_ns, $end_ns)::BIGINT AS end_ns
FROM activity AS a
LEFT JOIN activity_name AS n ON n.source = a.source AND n.activity_id = a.activity_id
WHERE a.end_ns > a.start_ns AND a.start_ns < $end_ns AND a.end_ns > $start_ns
ORDER BY a.pid, a.device_id, a.stream_id, start_ns, a.source, a.activity_id
