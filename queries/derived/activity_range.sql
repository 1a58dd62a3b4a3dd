-- activity_range: for each GPU activity and NVTX role, the innermost range containing its launch
--
-- Materialised (CREATE TABLE) when the trace is opened: layers and collectives read it. Steps
-- are process-wide, not same-thread: activity_step places activities in steps.
--
-- NVIDIA's projection rule: a range contains an activity when the CUDA call that launched it
-- lies inside the range on the same thread (range.start <= launch.start, launch.end <=
-- range.end). Push/pop ranges nest on a thread, so the innermost open range of a role at a
-- launch is the latest one that started at the same nesting depth: one sorted sweep per
-- (thread, role) gives each launch its depth, and an ASOF join finds that range - no
-- per-kernel scan over ranges. Activities whose launch is not in the trace (a capture window
-- that starts after the launch) get no range.
-- A kernel replayed from a CUDA graph (node-level tracing) shares its cudaGraphLaunch's
-- correlation id (activity_step places it in a step by that call). Here its launch is the
-- creation of its node at capture time, on the capturing thread (graph_node_origin), when the
-- export records it: the layer ranges are open then, not around the replay.
--
-- Reads: activity, graph_node_origin, launch, nvtx_role_range
--
-- Columns:
--   source         VARCHAR   kernel, memcpy, memset or graph
--   activity_id    BIGINT    activity_id in the activity view
--   role           VARCHAR   layer, torch_collective or nccl_collective
--   range_id       BIGINT    the innermost range of that role containing the launch
--   label          VARCHAR   its label
--   label_index    BIGINT    its label_index
--   payload        BIGINT    its payload
CREATE TABLE activity_range AS
WITH launched AS (
    -- `point`: launch (the API call) or origin (graph node creation); `has_origin` says that
    -- the activity has both.
    SELECT a.source, a.activity_id, l.global_tid, l.start_ns AS launch_start,
        l.end_ns AS launch_end, 'launch' AS point, o.kernel_id IS NOT NULL AS has_origin
    FROM activity AS a
    JOIN launch AS l ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
    LEFT JOIN graph_node_origin AS o ON a.source = 'kernel' AND o.kernel_id = a.activity_id
    UNION ALL
    SELECT 'kernel', kernel_id, origin_tid, origin_start_ns, origin_end_ns, 'origin', true
    FROM graph_node_origin
),
roles AS (SELECT DISTINCT role FROM nvtx_role_range WHERE role <> 'step'),
events AS (
    -- +1 at a range start, -1 at its end, 0 at a launch. At one instant ends come first (a
    -- range may end where the next begins), then starts, then launches, so a launch at a
    -- range's start counts as inside it (one at its end cannot be: it lasts past the end).
    -- Steps are not projected here (activity_step: they are process-wide).
    SELECT global_tid, role, start_ns AS t, 1 AS d, range_id, NULL AS source,
        NULL::BIGINT AS activity_id, NULL::BIGINT AS launch_end
    FROM nvtx_role_range
    WHERE role <> 'step'
    UNION ALL
    SELECT global_tid, role, end_ns, -1, range_id, NULL, NULL, NULL
    FROM nvtx_role_range
    WHERE role <> 'step'
    UNION ALL
    SELECT l.global_tid, r.role, l.launch_start, 0, NULL, l.source, l.activity_id, l.launch_end
    FROM launched AS l
    JOIN roles AS r ON l.point = 'origin' OR NOT l.has_origin
    WHERE l.global_tid IN (SELECT global_tid FROM nvtx_role_range WHERE role <> 'step')
),
depths AS (
    SELECT *, sum(d) OVER (
        PARTITION BY global_tid, role
        ORDER BY t, CASE d WHEN -1 THEN 0 WHEN 1 THEN 1 ELSE 2 END, range_id, activity_id
        ROWS UNBOUNDED PRECEDING
    ) AS depth
    FROM events
),
range_starts AS (SELECT global_tid, role, t, depth, range_id FROM depths WHERE d = 1),
launch_depths AS (SELECT * FROM depths WHERE d = 0 AND depth > 0)
SELECT l.source, l.activity_id, l.role, rr.range_id, rr.label, rr.label_index, rr.payload
FROM launch_depths AS l
ASOF JOIN range_starts AS s
    ON s.global_tid = l.global_tid AND s.role = l.role AND s.depth = l.depth AND s.t <= l.t
JOIN nvtx_role_range AS rr ON rr.range_id = s.range_id AND rr.role = s.role
WHERE rr.end_ns >= l.launch_end
