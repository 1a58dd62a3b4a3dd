-- activity_range: for each GPU activity and NVTX role, the innermost range containing its launch
--
-- Materialised (CREATE TABLE) when the trace is opened: layers and collectives read it. Steps
-- are process-wide, not same-thread: activity_step places activities in steps.
--
-- NVIDIA's projection rule: a range contains an activity when the CUDA call that launched it
-- lies inside the range on the same thread (range.start <= launch.start, launch.end <=
-- range.end). Push/pop ranges nest on a thread, so the innermost open range of a role at a
-- launch is the latest one that started at the nesting depth the launch is at. One sorted
-- sweep per (thread, role) over the ranges' starts and ends alone gives each instant the
-- innermost range open from it to the next instant (after an end: by an ASOF join among the
-- starts); each launch then meets the state holding its instant in a time bin, a hash join -
-- no per-kernel scan over ranges, and the launches are not sorted at all (5M kernels: 1.9 s
-- against 4.9 s when they were swept with the ranges). Activities whose launch is not in the
-- trace (a capture window that starts after the launch) get no range.
-- A kernel replayed from a CUDA graph (node-level tracing) shares its cudaGraphLaunch's
-- correlation id (activity_step places it in a step by that call). Here its launch is the
-- creation of its node at capture time, on the capturing thread (graph_node_origin), when the
-- export records it: the layer ranges are open then, not around the replay.
--
-- Reads: activity, graph_node_origin, launch, nvtx_role_range, op_call
--
-- Columns:
--   source         VARCHAR   kernel, memcpy, memset or graph
--   activity_id    BIGINT    activity_id in the activity view
--   role           VARCHAR   layer, torch_collective, nccl_collective or op (op_call)
--   range_id       BIGINT    innermost range of that role around the launch (op: op_call.row_id)
--   label          VARCHAR   its label
--   label_index    BIGINT    its label_index
--   payload        BIGINT    its payload
--   pid            BIGINT    the activity's process id
--   device_id      BIGINT    the activity's GPU (grouped_island joins one GPU's rows)
CREATE TABLE activity_range AS
WITH launched AS (
    -- `point`: launch (the API call) or origin (graph node creation); `has_origin` says that
    -- the activity has both.
    SELECT a.source, a.activity_id, a.pid, a.device_id, l.global_tid, l.start_ns AS launch_start,
        l.end_ns AS launch_end, 'launch' AS point, o.kernel_id IS NOT NULL AS has_origin
    FROM activity AS a
    JOIN launch AS l ON l.global_pid = a.global_pid AND l.correlation_id = a.correlation_id
    LEFT JOIN graph_node_origin AS o ON a.source = 'kernel' AND o.kernel_id = a.activity_id
    UNION ALL
    SELECT 'kernel', kernel_id, pid, device_id, origin_tid, origin_start_ns, origin_end_ns,
        'origin', true
    FROM graph_node_origin
),
ranges AS (
    -- The framework operators whose shapes are recorded (op_call) are one more role, `op`:
    -- what the FLOPs of a kernel's operator are read by (compute_op). Their range_id is their
    -- op_call row_id; they carry no label index or payload.
    SELECT global_tid, role, range_id, start_ns, end_ns, label, label_index, payload
    FROM nvtx_role_range
    WHERE role <> 'step'
    UNION ALL
    SELECT globalTid, 'op', row_id, "start", "end", name, NULL, NULL
    FROM op_call
    WHERE globalTid IS NOT NULL AND "start" IS NOT NULL AND "end" IS NOT NULL
),
edges AS (
    -- +1 at a range start, -1 at its end. At one instant ends come first (a range may end
    -- where the next begins), then starts, outer before inner: the one that ends later first
    -- (ranges pushed in one clock tick share a start; a kineto trace's microseconds often do),
    -- whatever order the file lists them in; ends inner first alike. Then range_id.
    SELECT global_tid, role, start_ns AS t, 1 AS d, -end_ns AS nesting, range_id FROM ranges
    UNION ALL
    SELECT global_tid, role, end_ns, -1, -start_ns, range_id FROM ranges
),
swept AS (
    SELECT *, sum(d) OVER w AS depth, lead(t) OVER w AS next_t
    FROM edges
    WINDOW w AS (
        PARTITION BY global_tid, role ORDER BY t, d, nesting, range_id ROWS UNBOUNDED PRECEDING
    )
),
starts AS (SELECT global_tid, role, t, depth, range_id FROM swept WHERE d = 1),
held AS (
    -- The last edge of each instant (the next edge is later) leaves a state that holds until
    -- the next instant, [t, next_t): its innermost open range. After a start, that range;
    -- after an end, the latest range that started at the depth left open, earlier than the
    -- end (a start at the same instant comes after it); none at depth 0 or less (a range of
    -- no length ends before it starts, as every end at an instant precedes its starts).
    -- Launches at an instant follow its edges, so a launch at a range's start counts as
    -- inside it; one at its end cannot be: it lasts past the end.
    SELECT global_tid, role, t, next_t, range_id AS open_id
    FROM swept
    WHERE d = 1 AND depth > 0 AND next_t > t
    UNION ALL
    SELECT e.global_tid, e.role, e.t, e.next_t, s.range_id
    FROM (SELECT * FROM swept WHERE d = -1 AND depth > 0 AND next_t > t) AS e
    ASOF JOIN starts AS s
        ON s.global_tid = e.global_tid AND s.role = e.role AND s.depth = e.depth AND s.t < e.t
),
bin AS (
    -- A time bin per thread and role about as long as a state: each state is listed in the
    -- bins it spans and each launch looked up in its own (the time_bin macros), a hash join
    -- where an ASOF join of every launch cost 2.0 of 5.3 operator-s at 5M kernels.
    SELECT global_tid, role, time_bin_width(min(t), max(next_t), count(*)) AS width
    FROM held
    GROUP BY global_tid, role
),
held_bin AS (
    SELECT h.*, unnest(time_bins(h.t, h.next_t, b.width)) AS bin
    FROM held AS h
    JOIN bin AS b ON b.global_tid = h.global_tid AND b.role = h.role
),
roles AS (SELECT DISTINCT role FROM ranges),
points AS (
    SELECT l.global_tid, r.role, l.launch_start AS t, l.launch_end, l.source, l.activity_id,
        l.pid, l.device_id, l.launch_start // b.width AS bin
    FROM launched AS l
    JOIN roles AS r ON l.point = 'origin' OR NOT l.has_origin
    JOIN bin AS b ON b.global_tid = l.global_tid AND b.role = r.role
)
SELECT p.source, p.activity_id, p.role, rr.range_id, rr.label, rr.label_index, rr.payload,
    p.pid, p.device_id
FROM points AS p
JOIN held_bin AS h
    ON h.global_tid = p.global_tid AND h.role = p.role AND h.bin = p.bin
    AND h.t <= p.t AND p.t < h.next_t
JOIN ranges AS rr
    ON rr.range_id = h.open_id AND rr.role = p.role AND rr.global_tid = p.global_tid
WHERE rr.end_ns >= p.launch_end
