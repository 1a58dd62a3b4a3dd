-- activity_step: for each GPU activity, the step of its process it belongs to (process-wide)
--
-- A view, not a table: step_window reads it once when the trace is opened and keeps what the
-- step breakdown needs, per step and GPU; writing its row per activity into the trace cache
-- cost more than computing it (at 1M kernels 0.43 s of 0.68 s). Unlike layers (activity_range, same thread), a step is process-wide (docs/metrics.md):
-- it holds every activity of its process whose launch call starts inside the step range's span
-- [start, end), on any thread - PyTorch's autograd threads run the backward pass and DDP/FSDP
-- launch NCCL from their own thread. An activity whose launch call is not in the trace (no
-- runtime row with its correlation id) is placed by its GPU start instead.
--
-- Overlapping step ranges of one process (nested, or on two threads) are resolved by cutting
-- the process's time at every step start and end: each piece belongs to the latest-starting
-- step range covering it (ties: the one ending first, then the higher range_id), so an
-- instant belongs to at most one step. Every activity then meets the piece holding its
-- instant in a time bin (a hash join, no sort of the activities: an ASOF join cost 1.8
-- operator-s at 5M kernels), no per-kernel scan over ranges.
--
-- Reads: activity, launch, nvtx_role_range
--
-- Columns:
--   source         VARCHAR   kernel, memcpy or memset
--   activity_id    BIGINT    activity_id in the activity view
--   pid            BIGINT    process id
--   device_id      BIGINT    nsys GPU id
--   start_ns       BIGINT    GPU start
--   end_ns         BIGINT    GPU end
--   class          VARCHAR   comm, attention, gemm, other or memcpy
--   range_id       BIGINT    the step's NVTX range (nvtx_role_range, role step)
--   label          VARCHAR   its label, e.g. ProfilerStep#12
--   label_index    BIGINT    its label_index
--   placed_by      VARCHAR   launch (its launch call's start) or gpu_start (no launch call)
CREATE VIEW activity_step AS
WITH steps AS (
    -- The mask 0xFFFFFFFFFF000000 (as in launch): a shift would fail on a negative id.
    SELECT range_id, global_tid & -16777216 AS global_pid, start_ns, end_ns, label, label_index
    FROM nvtx_role_range
    WHERE role = 'step' AND end_ns > start_ns
),
cuts AS (
    SELECT global_pid, start_ns AS t FROM steps
    UNION
    SELECT global_pid, end_ns FROM steps
),
pieces AS (
    SELECT global_pid, t AS start_ns, lead(t) OVER (PARTITION BY global_pid ORDER BY t) AS end_ns
    FROM cuts
),
bin AS (
    -- Per process, a time bin about as long as a step: each step is listed in the bins it
    -- spans and each piece is looked up in its own bin, so a piece meets the few steps near
    -- it, not every step of its process (quadratic in the steps of a long capture; the
    -- time_bin macros).
    SELECT global_pid, time_bin_width(min(start_ns), max(end_ns), count(*)) AS width
    FROM steps
    GROUP BY global_pid
),
step_bin AS (
    SELECT s.range_id, s.global_pid, s.start_ns, s.end_ns,
        unnest(time_bins(s.start_ns, s.end_ns, b.width)) AS bin
    FROM steps AS s
    JOIN bin AS b ON b.global_pid = s.global_pid
),
piece_bin AS (
    SELECT p.global_pid, p.start_ns, p.end_ns, p.start_ns // b.width AS bin
    FROM pieces AS p
    JOIN bin AS b ON b.global_pid = p.global_pid
),
owned AS (
    SELECT p.global_pid, p.start_ns, p.end_ns,
        arg_max(s.range_id, (s.start_ns, -s.end_ns, s.range_id)) AS range_id
    FROM piece_bin AS p
    JOIN step_bin AS s
        ON s.global_pid = p.global_pid AND s.bin = p.bin
        AND s.start_ns <= p.start_ns AND p.start_ns < s.end_ns
    GROUP BY p.global_pid, p.start_ns, p.end_ns
),
placed AS (
    SELECT a.source, a.activity_id, a.pid, a.global_pid, a.device_id, a.start_ns, a.end_ns,
        a.class, coalesce(l.start_ns, a.start_ns) AS t,
        CASE WHEN l.start_ns IS NULL THEN 'gpu_start' ELSE 'launch' END AS placed_by
    FROM activity AS a
    LEFT JOIN launch AS l ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
    WHERE a.global_pid IN (SELECT global_pid FROM steps)
),
owned_bin AS (
    -- Each owned piece in the bins it spans (the pieces of a process are disjoint, so an
    -- instant's bin holds at most one piece that contains it).
    -- The step's label is joined here, to the few pieces, not to every activity.
    SELECT o.global_pid, o.start_ns, o.end_ns, o.range_id, s.label, s.label_index,
        unnest(time_bins(o.start_ns, o.end_ns, b.width)) AS bin
    FROM owned AS o
    JOIN bin AS b ON b.global_pid = o.global_pid
    JOIN steps AS s ON s.range_id = o.range_id
    WHERE o.end_ns IS NOT NULL
),
placed_bin AS (
    SELECT p.*, p.t // b.width AS bin
    FROM placed AS p
    JOIN bin AS b ON b.global_pid = p.global_pid
)
SELECT p.source, p.activity_id, p.pid, p.device_id, p.start_ns, p.end_ns, p.class,
    o.range_id, o.label, o.label_index, p.placed_by
FROM placed_bin AS p
JOIN owned_bin AS o
    ON o.global_pid = p.global_pid AND o.bin = p.bin AND o.start_ns <= p.t AND p.t < o.end_ns
