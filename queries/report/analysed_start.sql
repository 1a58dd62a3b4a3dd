-- analysed_start: per GPU whose first collective waited for a late-starting rank, where its analysis starts
--
-- The GPU's analysed window starts when its wait ended (late_start_wait.cut_ns; the activity
-- view clips every activity to it). The critical path of a window that starts earlier starts
-- there instead: before it, the path would walk the wait's launch as seconds of latency. The
-- Capture section says how long each GPU waited.
--
-- Reads: late_start_wait
--
-- Columns:
--   pid          BIGINT    process id
--   device_id    BIGINT    nsys GPU id
--   cut_ns       BIGINT    where the GPU's analysis starts
--   wait_ns      BIGINT    its longest wait (the waiting kernel's length)
SELECT pid, device_id, max(cut_ns) AS cut_ns, max(duration_ns) AS wait_ns
FROM late_start_wait
GROUP BY pid, device_id
ORDER BY pid, device_id
