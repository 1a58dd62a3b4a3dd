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
-- Built by the interval engine (nsysreport.engine, step `group_pieces`) from the members this
-- SELECT gives, one GPU at a time (`member`: the grouping and part, engine.MEMBERS). In
-- (group, start, end) order, each interval adds to its group's union only what reaches past
-- every earlier interval of the group: [max(start, reach so far), end), when not empty. Those
-- pieces are disjoint and together make the union, so sums of duration_ns are union lengths.
-- exposed_ns is the piece minus the union of all compute on the GPU (for copies: of all compute
-- and comm, as exposed memcpy in docs/metrics.md), whoever launched it: the difference of the
-- GPU's prefix sums of exposed time (gpu_sweep) at the piece's two ends. Grouping `comm` keeps
-- every piece (communicator_step counts each in the step it starts in); the others are only
-- ever summed, so they keep one row per group and part: its first piece's start, its last
-- piece's end, and the sums (5M kernels: 1M rows written, not 9M).
-- (In SQL, as window passes and a binned join with the segments, this table cost 5.7-8.6 s at
-- 5M kernels.)
--
-- Engine: group_pieces
-- Reads: activity, activity_range, collective, gpu_sweep, kernel, memcpy
--
-- Params:
--   $gpus        BIGINT[] -   the batch's GPUs, as gpu_key(pid, device_id)
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
WITH kernels AS (
    SELECT k.pid, k.device_id, k.start_ns, k.end_ns, k.class,
        coalesce(ar.label, '(outside layers)') AS layer
    FROM kernel AS k
    LEFT JOIN activity_range AS ar
        ON ar.source = 'kernel' AND ar.activity_id = k.kernel_id AND ar.role = 'layer'
    WHERE list_contains($gpus, gpu_key(k.pid, k.device_id)) AND k.end_ns > k.start_ns
)
-- member: 0-3 layer compute, gemm, comm, memcpy; 4 op comm; 5 comm (channel) comm; 6 copy
-- memcpy (nsysreport.engine.MEMBERS).
SELECT pid, device_id, 0 AS member, layer AS group_key, start_ns, end_ns
FROM kernels WHERE class <> 'comm'
UNION ALL
SELECT pid, device_id, 1, layer, start_ns, end_ns FROM kernels WHERE class = 'gemm'
UNION ALL
SELECT pid, device_id, 2, layer, start_ns, end_ns FROM kernels WHERE class = 'comm'
UNION ALL
SELECT a.pid, a.device_id, 3, coalesce(ar.label, '(outside layers)'), a.start_ns, a.end_ns
FROM activity AS a
LEFT JOIN activity_range AS ar
    ON ar.source = a.source AND ar.activity_id = a.activity_id AND ar.role = 'layer'
WHERE list_contains($gpus, gpu_key(a.pid, a.device_id)) AND a.class = 'memcpy'
    AND a.end_ns > a.start_ns
UNION ALL
SELECT pid, device_id, 4, op, start_ns, end_ns
FROM collective
WHERE list_contains($gpus, gpu_key(pid, device_id)) AND end_ns > start_ns
UNION ALL
SELECT pid, device_id, 5, channel, start_ns, end_ns
FROM collective
WHERE list_contains($gpus, gpu_key(pid, device_id)) AND end_ns > start_ns
UNION ALL
SELECT pid, device_id, 6, stage, start_ns, end_ns
FROM memcpy
WHERE list_contains($gpus, gpu_key(pid, device_id)) AND end_ns > start_ns
