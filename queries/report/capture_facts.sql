-- capture_facts: one row of what the capture recorded, for the report's Capture section
--
-- Each count says whether the trace holds something the report's analyses use, so the report
-- can say what is missing and the nsys option that records it. `unlaunched_activities` counts
-- GPU activities whose launching call is not in the trace although the trace has CUDA API rows
-- (a window that starts after their launch: nsys --capture-range, or an export sliced in
-- time); `open_ranges` counts NVTX push/pop or start/end ranges that never end in the trace
-- (cut by the window's end). GPU metric samples (nsys profile --gpu-metrics-devices) are in
-- GPU_METRICS, described by TARGET_INFO_GPU_METRICS; the file's table list (source_table) tells
-- whether they were recorded, even when no sample is usable (gpu_metric_summary reads them).
--
-- Reads: NVTX_EVENTS, activity, collective, graph_node_origin, kernel, launch, nvtx_range,
--   nvtx_role_range, nvtx_unloaded, source_table, stream_overlap
--
-- Columns:
--   activities               BIGINT    GPU activities (kernels, copies, memsets, graph launches)
--   api_calls                BIGINT    CUDA runtime and driver calls
--   unlaunched_activities    BIGINT    activities whose launching call is not in the trace
--   nvtx_ranges              BIGINT    NVTX ranges that start and end on one thread
--   open_ranges              BIGINT    NVTX ranges with no end in the trace
--   step_ranges              BIGINT    ranges matching the step pattern
--   layer_ranges             BIGINT    ranges matching the layer pattern
--   collective_ranges        BIGINT    NCCL API ranges and PyTorch nccl:<op> ranges
--   comm_kernels             BIGINT    communication kernels
--   comm_kernels_sized       BIGINT    communication kernels with a known message size
--   graph_launches           BIGINT    CUDA graph launches traced as a whole
--   graph_kernels            BIGINT    kernels replayed from a CUDA graph (node-level tracing)
--   graph_kernels_no_origin  BIGINT    of those, kernels whose node creation is not in the trace
--   graph_replays            BIGINT    graph launches whose kernels the trace records
--                                      (one correlation id each)
--   graph_kernel_ns          BIGINT    Σ durations of the kernels replayed from graphs
--   kernel_ns                BIGINT    Σ durations of all kernels
--   gpu_metrics              BOOLEAN   the file holds GPU metric samples
--   pdl_overlaps             BIGINT    kernels overlapping the next on their stream as PDL does
--   impossible_overlaps      BIGINT    kernels whose duration cannot be (stream_overlap)
SELECT
    a.activities,
    (SELECT count(*) FROM launch) AS api_calls,
    -- One hash anti join (a correlated NOT EXISTS was planned as a delim join that built and
    -- probed the launches twice: 0.95 s against 0.32 s at 5M kernels).
    (SELECT count(*) FROM activity AS a
        ANTI JOIN (SELECT global_pid, correlation_id FROM launch) AS l
            ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
        WHERE EXISTS (SELECT 1 FROM launch)) AS unlaunched_activities,
    -- nvtx_unloaded: ranges that can play no role, counted at load and never loaded.
    ((SELECT count(*) FROM nvtx_range)
        + (SELECT coalesce(sum(count), 0) FROM nvtx_unloaded))::BIGINT AS nvtx_ranges,
    (SELECT count(*) FROM NVTX_EVENTS
        WHERE eventType IN (59, 60, 70, 71) AND "end" IS NULL) AS open_ranges,
    (SELECT count(*) FROM nvtx_role_range WHERE role = 'step') AS step_ranges,
    (SELECT count(*) FROM nvtx_role_range WHERE role = 'layer') AS layer_ranges,
    (SELECT count(*) FROM nvtx_role_range
        WHERE role IN ('torch_collective', 'nccl_collective')) AS collective_ranges,
    (SELECT count(*) FROM collective) AS comm_kernels,
    (SELECT count(*) FROM collective WHERE message_bytes IS NOT NULL) AS comm_kernels_sized,
    (SELECT count(*) FROM activity WHERE source = 'graph') AS graph_launches,
    (SELECT count(*) FROM kernel WHERE graph_node_id IS NOT NULL OR graph_id IS NOT NULL)
        AS graph_kernels,
    (SELECT count(*) FROM kernel AS k
        WHERE (k.graph_node_id IS NOT NULL OR k.graph_id IS NOT NULL)
            AND k.kernel_id NOT IN (SELECT kernel_id FROM graph_node_origin))
        AS graph_kernels_no_origin,
    (SELECT count(DISTINCT (global_pid, correlation_id)) FROM kernel
        WHERE graph_node_id IS NOT NULL OR graph_id IS NOT NULL) AS graph_replays,
    (SELECT coalesce(sum(greatest(end_ns - start_ns, 0)), 0)::BIGINT FROM kernel
        WHERE graph_node_id IS NOT NULL OR graph_id IS NOT NULL) AS graph_kernel_ns,
    (SELECT coalesce(sum(greatest(end_ns - start_ns, 0)), 0)::BIGINT FROM kernel) AS kernel_ns,
    EXISTS (SELECT 1 FROM source_table WHERE name IN ('GPU_METRICS', 'TARGET_INFO_GPU_METRICS'))
        AS gpu_metrics,
    (SELECT count(*) FROM stream_overlap WHERE kind = 'pdl') AS pdl_overlaps,
    (SELECT count(*) FROM stream_overlap WHERE kind = 'impossible') AS impossible_overlaps
FROM (SELECT count(*) AS activities FROM activity) AS a
WHERE a.activities > 0  -- a trace with no GPU activity has nothing to describe: no row
ORDER BY a.activities
