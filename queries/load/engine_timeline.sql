-- engine_timeline: a batch of GPUs' segments, for the interval engine's prefix sums
--
-- nsysreport.queries reads these for an `Engine:` step that clips windows or pieces to the
-- GPUs' timelines (window_breakdown, grouped_island); nsysreport.engine puts them in seq order.
--
-- Reads: gpu_sweep
--
-- Params:
--   $gpus        BIGINT[] -   the batch's GPUs, as gpu_key(pid, device_id)
SELECT pid, device_id, seq, start_ns, end_ns, packed
FROM gpu_sweep
WHERE list_contains($gpus, gpu_key(pid, device_id))
