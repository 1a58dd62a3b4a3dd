-- window_breakdown: the time breakdown of every window of every GPU: the whole GPU and each step
--
-- Built by the interval engine (nsysreport.engine, step `window_parts`) from the windows this
-- SELECT gives, one GPU at a time: each part of docs/metrics.md's time breakdown over all of
-- the GPU's activity clipped to [start_ns, end_ns), read from the GPU's prefix sums over its
-- gpu_sweep segments with two binary searches per window (work launched before the window
-- that runs into it counts too). Scopes: `gpu` (first activity start to last end;
-- gpu_breakdown) and `step` (step_window, window_id its range_id; step_breakdown). Another
-- scope is one more SELECT below. (In SQL, clipping the segments to the step windows in a
-- binned join cost 1.2 s at 5M kernels.)
--
-- Engine: window_parts
-- Reads: gpu_sweep, step_window
--
-- Params:
--   $gpus        BIGINT[] -   the batch's GPUs, as gpu_key(pid, device_id)
--
-- Columns:
--   pid                BIGINT    process id
--   device_id          BIGINT    nsys GPU id
--   scope              VARCHAR   gpu or step
--   window_id          BIGINT    0 for the GPU; the step's NVTX range_id
--   start_ns           BIGINT    window start
--   end_ns             BIGINT    window end
--   busy_ns            BIGINT    union of all activity in the window
--   compute_ns         BIGINT    union of compute kernels (gemm, attention, other)
--   gemm_ns            BIGINT    union of GEMM kernels
--   attention_ns       BIGINT    union of attention kernels
--   comm_ns            BIGINT    union of communication kernels
--   exposed_comm_ns    BIGINT    comm union minus compute union
--   memcpy_ns          BIGINT    union of memcpys and memsets
--   exposed_memcpy_ns  BIGINT    copies with neither compute nor comm running
--   graph_ns           BIGINT    union of CUDA graph launches traced as a whole
--   graph_opaque_ns    BIGINT    graph union minus (compute + comm + memcpy unions)
SELECT pid, device_id, 'gpu' AS scope, 0::BIGINT AS window_id, min(start_ns) AS start_ns,
    max(end_ns) AS end_ns
FROM gpu_sweep
WHERE list_contains($gpus, gpu_key(pid, device_id))
GROUP BY pid, device_id
UNION ALL
SELECT pid, device_id, 'step', range_id, start_ns, end_ns
FROM step_window
WHERE list_contains($gpus, gpu_key(pid, device_id)) AND end_ns > start_ns
