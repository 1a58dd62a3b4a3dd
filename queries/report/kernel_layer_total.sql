-- kernel_layer_total: per GPU, each kernel name's (and copy kind's) instances and time per layer
--
-- What compare's kernel diff matches two captures on: a kernel is keyed by its name, its class
-- and the layer it ran in, so the same GEMM in layer 3 and in layer 7 are two rows, and a
-- kernel that got slower in one layer is not averaged away by the others. The layer is the
-- one layer_summary gives an activity: the innermost layer range containing its launch
-- (activity_range; a kernel replayed from a CUDA graph: the range open when its node was
-- captured), else `(outside layers)`. Time is the sum of durations, as kernel_gpu_total's
-- (overlapping kernels both count); activities with end <= start count as instances with zero
-- time. Small: GPUs x names x layers (a transformer runs the same few names in every layer).
-- On a GPU whose analysis starts after a wait for a late-starting rank, each counts only its
-- time after the cut, as in kernel_gpu_total.
--
-- Reads: activity_range, kernel, kernel_name, late_start_wait, memcpy
--
-- Columns:
--   pid           BIGINT    process id
--   device_id     BIGINT    nsys GPU id
--   class         VARCHAR   comm, attention, gemm, other or memcpy
--   name          VARCHAR   demangled kernel name, or [CUDA memcpy <kind>]
--   layer         VARCHAR   layer label, or (outside layers)
--   layer_index   BIGINT    the number in the label (for natural order), NULL outside
--   instances     BIGINT    how many times it ran in that layer on this GPU
--   total_ns      BIGINT    sum of durations
WITH names AS (
    -- Each distinct name an integer key: the 5M-kernel benchmark's names (100+ characters)
    -- carried through the join with activity_range as grouping keys cost 1.5-2.5x the time
    -- of this integer key (2 cores, side by side).
    SELECT class, name, row_number() OVER (ORDER BY class, name) AS name_key
    FROM (SELECT DISTINCT class, name FROM kernel_name
        UNION SELECT DISTINCT 'memcpy', name FROM memcpy)
),
recorded AS (
    SELECT 'kernel' AS source, kernel_id AS activity_id, pid, device_id, class, name,
        start_ns, end_ns
    FROM kernel
    UNION ALL
    SELECT source, memcpy_id, pid, device_id, 'memcpy', name, start_ns, end_ns
    FROM memcpy
),
cut AS (SELECT DISTINCT pid, device_id, cut_ns FROM late_start_wait),
items AS (
    -- greatest() passes over a NULL cut: a GPU without a wait keeps its times.
    SELECT r.source, r.activity_id, r.pid, r.device_id, r.class, r.name,
        greatest(r.end_ns - greatest(r.start_ns, c.cut_ns), 0) AS duration_ns
    FROM recorded AS r
    LEFT JOIN cut AS c ON c.pid = r.pid AND c.device_id = r.device_id
),
keyed AS (
    SELECT i.source, i.activity_id, i.pid, i.device_id, n.name_key, i.duration_ns
    FROM items AS i
    JOIN names AS n ON n.class = i.class AND n.name = i.name
),
placed AS (
    SELECT k.pid, k.device_id, k.name_key,
        coalesce(r.label, '(outside layers)') AS layer, min(r.label_index) AS layer_index,
        count(*) AS instances, sum(k.duration_ns)::BIGINT AS total_ns
    FROM keyed AS k
    LEFT JOIN activity_range AS r
        ON r.source = k.source AND r.activity_id = k.activity_id AND r.role = 'layer'
    GROUP BY k.pid, k.device_id, k.name_key, r.label
)
SELECT p.pid, p.device_id, n.class, n.name, p.layer, p.layer_index, p.instances, p.total_ns
FROM placed AS p
JOIN names AS n ON n.name_key = p.name_key
ORDER BY p.pid, p.device_id, p.layer_index NULLS LAST, p.layer, n.class, n.name
