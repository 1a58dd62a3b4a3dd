-- path_node: each GPU activity and CUDA API call, with the predecessor that finished last
--
-- The dependency graph the critical path walks (nsysreport.critical_path, docs/metrics.md
-- "Critical path"). A node is a GPU activity (kernel, copy, memset, graph launch traced whole)
-- or a CUDA runtime/driver call on a host thread. Each node has up to three candidate
-- predecessors, each ready at an instant; the one ready last is `pred`, its instant `ready_ns`
-- (ties: the order listed):
--   GPU activity  stream  the activity before it on its stream (stream order), at its end;
--                 event   a cross-stream wait (cudaStreamWaitEvent), when that is after both
--                         other candidates: where the export links the wait to its event's
--                         record (stream_wait), the last activity submitted to the record's
--                         stream before the record, for the first activity submitted to the
--                         waiting stream after the wait; else, inferred from the timing, the
--                         activity of another stream of its GPU that ended last before it
--                         started (docs/export-format.md "Synchronisation and events");
--                 launch  the API call with its correlation id (a CUDA graph's replayed kernels
--                         share their cudaGraphLaunch's), at the call's end, or at the
--                         activity's start when it started before the call returned.
--   API call      sync    for a call that waits for the GPU (sync_call) and returned after it
--                         began: of the GPU work it waited for (sync_wait), the activity that
--                         ended last: a synchronous copy's own copy, if it started before
--                         the call returned (at its end, or at the call's end if earlier),
--                         else, on each stream it waited on, the last
--                         activity submitted (its launch begun) before the call, or before
--                         the event's record, that ended by its return;
--                 thread  the call before it on its thread, at its end.
-- A synchronous copy's call and its copy are each other's candidates (launch, sync): the walk
-- (nsysreport.critical_path) takes a call it reaches before it returned, from an activity it
-- launched, by its thread edge.
-- `node` numbers the rows 0.. in order of start; `pred` is NULL for a node with no
-- predecessor in the trace. Only the nodes that may lie on a path through the window
-- [$start_ns, $end_ns] are read: those that start before its end and end after a margin of one
-- window length before its start (a predecessor that ended earlier than that is cut at the
-- window's start all the same; only its kind would be lost). `host_range` is the innermost NVTX
-- range open on the calling thread when an API call began: what the thread was in while it
-- got to the call (ranges of one thread nest; one sweep over their starts and ends gives the
-- depth at each instant, and the innermost open range is the last one that started at that
-- depth). Collective kernels carry their instance (op, ordinal) and the
-- node of the instance's last arrival among this trace's GPUs (the latest start), where the
-- path crosses to the rank the others waited for.
--
-- Reads: activity, activity_range, collective, kernel, launch, memcpy, nvtx_range, stream_wait,
--   sync_call, sync_wait
--
-- Params:
--   $start_ns   BIGINT   0                      window start (trace time)
--   $end_ns     BIGINT   9223372036854775807    window end (trace time)
--
-- Columns:
--   node            BIGINT    0.. in order of start
--   kind            VARCHAR   gpu or api
--   pid             BIGINT    process id
--   device_id       BIGINT    nsys GPU id (NULL for an API call)
--   global_tid      BIGINT    the API call's thread (NULL for a GPU activity)
--   start_ns        BIGINT    start
--   end_ns          BIGINT    end (at least start)
--   class           VARCHAR   comm, attention, gemm, other, memcpy, graph, api or sync
--   name            VARCHAR   kernel, copy or API name
--   layer           VARCHAR   the innermost layer range around the activity's launch, if any
--   host_range      VARCHAR   an API call's innermost NVTX range on its thread, if any
--   pred            BIGINT    the predecessor ready last, NULL: none
--   ready_ns        BIGINT    the instant it was ready
--   edge            VARCHAR   stream, event, launch, sync or thread
--   op              VARCHAR   collective op of a communication kernel, else NULL
--   ordinal         BIGINT    its instance number on this GPU
--   last_node       BIGINT    the instance's node on the GPU that started it last
--   last_start_ns   BIGINT    that node's start
--   first_start_ns  BIGINT    the instance's earliest start among this trace's GPUs
--   stream_pred     BIGINT    the stream candidate (every candidate: NULL where none)
--   stream_ready_ns BIGINT    when it was ready
--   event_pred      BIGINT    the event candidate
--   event_ready_ns  BIGINT    when it was ready
--   launch_pred     BIGINT    the launch candidate
--   launch_ready_ns BIGINT    when it was ready
--   sync_pred       BIGINT    the sync candidate
--   sync_ready_ns   BIGINT    when it was ready
--   thread_pred     BIGINT    the thread candidate
--   thread_ready_ns BIGINT    when it was ready
WITH bounds AS (
    -- In HUGEINT, then held to BIGINT: a window at either end of the clock cannot overflow.
    SELECT greatest(
            $start_ns::HUGEINT - least($end_ns::HUGEINT - $start_ns, 4611686018427387903),
            -9223372036854775808
        )::BIGINT AS lo,
        $end_ns AS hi
),
in_window AS (
    SELECT *
    FROM activity
    WHERE start_ns <= (SELECT hi FROM bounds) AND end_ns >= (SELECT lo FROM bounds)
),
gpu_node AS (
    -- Joined on one equality each (a kernel's id, else NULL): a join that also tests the
    -- source beside the id is a nested loop in DuckDB (1.5: 70 s at 200k kernels).
    SELECT a.source, a.activity_id, a.pid, a.global_pid, a.device_id, a.stream_id,
        a.correlation_id, a.start_ns, greatest(a.end_ns, a.start_ns) AS end_ns, a.class,
        coalesce(k.name, m.name, '[CUDA graph]') AS name, r.label AS layer,
        -- A wait for a late-starting rank is no instance the path crosses at (it lies before
        -- its GPU's analysed window in any case: the activity view).
        CASE WHEN NOT c.late_start THEN c.op END AS op,
        CASE WHEN NOT c.late_start THEN c.ordinal END AS ordinal
    FROM in_window AS a
    LEFT JOIN kernel AS k
        ON k.kernel_id = CASE WHEN a.source = 'kernel' THEN a.activity_id END
    LEFT JOIN memcpy AS m ON m.source = a.source AND m.memcpy_id = a.activity_id
    LEFT JOIN activity_range AS r
        ON r.role = 'layer' AND r.source = a.source AND r.activity_id = a.activity_id
    LEFT JOIN collective AS c
        ON c.kernel_id = CASE WHEN a.source = 'kernel' THEN a.activity_id END
),
api_node AS (
    SELECT l.launch_id, l.pid, l.global_pid, l.global_tid, l.correlation_id, l.start_ns,
        greatest(l.end_ns, l.start_ns) AS end_ns, l.name,
        l.launch_id IN (SELECT launch_id FROM sync_call) AS waits
    FROM launch AS l
    WHERE l.start_ns <= (SELECT hi FROM bounds) AND l.end_ns >= (SELECT lo FROM bounds)
),
range_edge AS (
    -- Ranges open in the window: +1 at a start, -1 at an end, and each call's start as a probe
    -- (after both). At one instant ends come first, inner before outer (the later start
    -- first), then starts, outer before inner (the later end first): `other_ns` is a start's
    -- end and an end's start, sorted descending (no negation: a time can be the BIGINT minimum).
    SELECT global_tid, start_ns AS t, 1 AS d, 1 AS rank_at_t, end_ns AS other_ns, range_id,
        name, NULL::BIGINT AS launch_id
    FROM nvtx_range
    WHERE end_ns >= start_ns AND start_ns <= (SELECT hi FROM bounds)
        AND end_ns >= (SELECT lo FROM bounds)
        AND global_tid IN (SELECT DISTINCT global_tid FROM api_node)
    UNION ALL
    SELECT global_tid, end_ns, -1, 0, start_ns, range_id, NULL, NULL
    FROM nvtx_range
    WHERE end_ns >= start_ns AND start_ns <= (SELECT hi FROM bounds)
        AND end_ns >= (SELECT lo FROM bounds)
        AND global_tid IN (SELECT DISTINCT global_tid FROM api_node)
    UNION ALL
    SELECT global_tid, start_ns, 0, 2, NULL, NULL, NULL, launch_id FROM api_node
),
range_depth AS (
    SELECT *, sum(d) OVER (
            PARTITION BY global_tid
            ORDER BY t, rank_at_t, other_ns DESC, range_id, launch_id ROWS UNBOUNDED PRECEDING
        ) AS depth
    FROM range_edge
),
host_range AS (
    SELECT launch_id, innermost AS host_range
    FROM (
        SELECT launch_id, d,
            last_value(CASE WHEN d = 1 THEN name END IGNORE NULLS) OVER (
                PARTITION BY global_tid, depth
                ORDER BY t, rank_at_t, other_ns DESC, range_id, launch_id
                ROWS UNBOUNDED PRECEDING
            ) AS innermost
        FROM range_depth
    )
    WHERE d = 0
),
nodes AS (
    SELECT row_number() OVER (
            ORDER BY start_ns, end_ns, kind, source, activity_id
        ) - 1 AS node, *
    FROM (
        SELECT 'gpu' AS kind, source, activity_id, pid, global_pid, device_id, stream_id,
            NULL::BIGINT AS global_tid, correlation_id, start_ns, end_ns, class, name, layer,
            NULL::VARCHAR AS host_range, op, ordinal, false AS waits
        FROM gpu_node
        UNION ALL
        SELECT 'api', 'api', a.launch_id, a.pid, a.global_pid, NULL, NULL, a.global_tid,
            a.correlation_id, a.start_ns, a.end_ns, 'api', a.name, NULL, h.host_range, NULL,
            NULL, a.waits
        FROM api_node AS a
        LEFT JOIN host_range AS h ON h.launch_id = a.launch_id
    )
),
stream_prev AS (
    SELECT node,
        lag(node) OVER w AS prev_node, lag(end_ns) OVER w AS prev_end
    FROM nodes
    WHERE kind = 'gpu'
    WINDOW w AS (PARTITION BY pid, device_id, stream_id ORDER BY start_ns, end_ns, node)
),
thread_prev AS (
    SELECT node,
        lag(node) OVER w AS prev_node, lag(end_ns) OVER w AS prev_end
    FROM nodes
    WHERE kind = 'api'
    WINDOW w AS (PARTITION BY global_tid ORDER BY start_ns, end_ns, node)
),
launched AS (
    -- A correlation id may repeat within a process (a driver call under a runtime call):
    -- the activity follows the call that started last.
    SELECT g.node, arg_max(c.node, (c.start_ns, c.node)) AS launch_node,
        arg_max(least(c.end_ns, g.start_ns), (c.start_ns, c.node)) AS launch_ready,
        max(c.start_ns) AS submit_ns
    FROM nodes AS g
    JOIN nodes AS c
        ON c.kind = 'api' AND c.global_pid = g.global_pid AND c.correlation_id = g.correlation_id
    WHERE g.kind = 'gpu'
    GROUP BY g.node
),
gpu_seq AS (
    -- Each GPU activity's place on its stream and when it was submitted: its launch call's
    -- start; an activity whose call is not read was submitted before any that is (a stream
    -- runs its work in the order submitted, so both orders agree).
    SELECT n.node, n.global_pid, n.stream_id, n.end_ns,
        coalesce(la.submit_ns, -9223372036854775808) AS submit_ns,
        row_number() OVER (
            PARTITION BY n.global_pid, n.stream_id ORDER BY n.start_ns, n.end_ns, n.node
        ) AS seq
    FROM nodes AS n
    LEFT JOIN launched AS la ON la.node = n.node
    WHERE n.kind = 'gpu'
),
linked_wait AS (
    -- Waits whose wait call started after the margin's start: the first activity submitted
    -- to the waiting stream after it is a node, as is the one it waits for, if read at all.
    SELECT a.node, arg_max(b.node, (b.end_ns, b.node)) AS event_node,
        max(b.end_ns) AS event_ready
    FROM stream_wait AS w
    ASOF JOIN gpu_seq AS a
        ON a.global_pid = w.global_pid AND a.stream_id = w.stream_id AND w.wait_ns < a.submit_ns
    ASOF JOIN gpu_seq AS b
        ON b.global_pid = w.global_pid AND b.stream_id = w.record_stream_id
        AND w.record_ns > b.submit_ns
    WHERE w.wait_ns >= (SELECT lo FROM bounds) AND b.node <> a.node
    GROUP BY a.node
),
gpu_ends AS (
    -- One sweep per GPU over activity ends and starts: at each start, the activity that ended
    -- last at or before it (ends before starts at one instant).
    SELECT node, kind, pid, device_id, stream_id, t, is_start,
        last_value(CASE WHEN NOT is_start THEN node END IGNORE NULLS) OVER w AS ended_node,
        last_value(CASE WHEN NOT is_start THEN t END IGNORE NULLS) OVER w AS ended_ns
    FROM (
        SELECT node, kind, pid, device_id, stream_id, end_ns AS t, false AS is_start
        FROM nodes WHERE kind = 'gpu'
        UNION ALL
        SELECT node, kind, pid, device_id, stream_id, start_ns, true FROM nodes WHERE kind = 'gpu'
    )
    WINDOW w AS (
        PARTITION BY pid, device_id ORDER BY t, is_start, node ROWS UNBOUNDED PRECEDING
    )
),
cross_stream AS (
    SELECT s.node, s.ended_node, s.ended_ns
    FROM gpu_ends AS s
    JOIN nodes AS o ON o.node = s.ended_node
    WHERE s.is_start AND o.stream_id IS DISTINCT FROM s.stream_id
),
own_copy AS (
    -- A synchronous copy returned once its own copy was done (one that ended after the call
    -- returned: at the return). A copy that started after the call returned was not waited
    -- for (a small pinned copy: the call only queued it).
    SELECT c.node, arg_max(g.node, (g.end_ns, g.node)) AS ended_node,
        max(least(g.end_ns, c.end_ns)) AS ended_ns
    FROM nodes AS c
    JOIN sync_wait AS w ON c.kind = 'api' AND w.launch_id = c.activity_id AND w.own
    JOIN nodes AS g
        ON g.kind = 'gpu' AND g.global_pid = c.global_pid AND g.correlation_id = c.correlation_id
    WHERE g.start_ns < c.end_ns
    GROUP BY c.node
),
waiting AS (
    -- Each waiting call against each stream it may have waited on.
    SELECT c.node, c.start_ns, c.end_ns, w.submitted_ns, k.global_pid, k.stream_id
    FROM nodes AS c
    JOIN sync_wait AS w ON c.kind = 'api' AND w.launch_id = c.activity_id
    JOIN (SELECT DISTINCT global_pid, stream_id FROM gpu_seq) AS k
        ON k.global_pid = w.global_pid AND k.stream_id = coalesce(w.stream_id, k.stream_id)
),
waited AS (
    -- On each stream, the last activity both submitted before the instant and ended by the
    -- call's return: the earlier of the two ASOF matches.
    SELECT w.node, w.start_ns, w.global_pid, w.stream_id, least(s.seq, e.seq) AS seq
    FROM waiting AS w
    ASOF JOIN gpu_seq AS s
        ON s.global_pid = w.global_pid AND s.stream_id = w.stream_id
        AND w.submitted_ns > s.submit_ns
    ASOF JOIN gpu_seq AS e
        ON e.global_pid = w.global_pid AND e.stream_id = w.stream_id AND w.end_ns >= e.end_ns
),
scoped AS (
    SELECT w.node, arg_max(g.node, (g.end_ns, g.node)) AS ended_node, max(g.end_ns) AS ended_ns
    FROM waited AS w
    JOIN gpu_seq AS g
        ON g.global_pid = w.global_pid AND g.stream_id = w.stream_id AND g.seq = w.seq
    GROUP BY w.node
),
synced AS (
    -- A call that returned no later than the work it waited for ended did not wait.
    SELECT n.node,
        CASE WHEN o.node IS NOT NULL THEN o.ended_node ELSE s.ended_node END AS ended_node,
        CASE WHEN o.node IS NOT NULL THEN o.ended_ns ELSE s.ended_ns END AS ended_ns
    FROM nodes AS n
    LEFT JOIN own_copy AS o ON o.node = n.node
    LEFT JOIN scoped AS s ON s.node = n.node
    WHERE n.waits AND coalesce(o.ended_ns, s.ended_ns) > n.start_ns
),
candidates AS (
    SELECT n.node, n.kind, sp.prev_node AS stream_node, sp.prev_end AS stream_ready,
        CASE WHEN lw.node IS NOT NULL THEN lw.event_node ELSE cs.ended_node END AS event_node,
        CASE WHEN lw.node IS NOT NULL THEN lw.event_ready ELSE cs.ended_ns END AS event_ready,
        la.launch_node, la.launch_ready,
        sy.ended_node AS sync_node, sy.ended_ns AS sync_ready,
        tp.prev_node AS thread_node, tp.prev_end AS thread_ready
    FROM nodes AS n
    LEFT JOIN stream_prev AS sp ON sp.node = n.node
    LEFT JOIN cross_stream AS cs ON cs.node = n.node
    LEFT JOIN linked_wait AS lw ON lw.node = n.node
    LEFT JOIN launched AS la ON la.node = n.node
    LEFT JOIN synced AS sy ON sy.node = n.node
    LEFT JOIN thread_prev AS tp ON tp.node = n.node
),
chosen AS (
    SELECT node,
        CASE
            WHEN kind = 'api' AND sync_node IS NOT NULL
                AND sync_ready >= coalesce(thread_ready, sync_ready) THEN 'sync'
            WHEN kind = 'api' AND thread_node IS NOT NULL THEN 'thread'
            WHEN kind = 'gpu' AND stream_node IS NOT NULL
                AND stream_ready >= coalesce(event_ready, stream_ready)
                AND stream_ready >= coalesce(launch_ready, stream_ready) THEN 'stream'
            WHEN kind = 'gpu' AND event_node IS NOT NULL
                AND event_ready > coalesce(stream_ready, event_ready - 1)
                AND event_ready >= coalesce(launch_ready, event_ready) THEN 'event'
            WHEN kind = 'gpu' AND launch_node IS NOT NULL THEN 'launch'
            WHEN kind = 'gpu' AND stream_node IS NOT NULL THEN 'stream'
        END AS edge,
        stream_node, stream_ready, event_node, event_ready, launch_node, launch_ready,
        sync_node, sync_ready, thread_node, thread_ready
    FROM candidates
),
last_arrival AS (
    SELECT op, ordinal, arg_max(node, (start_ns, node)) AS last_node,
        max(start_ns) AS last_start_ns, min(start_ns) AS first_start_ns
    FROM nodes
    WHERE op IS NOT NULL
    GROUP BY op, ordinal
)
SELECT n.node, n.kind, n.pid, n.device_id, n.global_tid, n.start_ns, n.end_ns,
    CASE WHEN n.waits THEN 'sync' ELSE n.class END AS class, n.name, n.layer, n.host_range,
    CASE c.edge
        WHEN 'stream' THEN c.stream_node WHEN 'event' THEN c.event_node
        WHEN 'launch' THEN c.launch_node WHEN 'sync' THEN c.sync_node
        WHEN 'thread' THEN c.thread_node
    END AS pred,
    CASE c.edge
        WHEN 'stream' THEN c.stream_ready WHEN 'event' THEN c.event_ready
        WHEN 'launch' THEN c.launch_ready WHEN 'sync' THEN c.sync_ready
        WHEN 'thread' THEN c.thread_ready
    END AS ready_ns,
    c.edge, n.op, n.ordinal, la.last_node, la.last_start_ns, la.first_start_ns,
    c.stream_node AS stream_pred, c.stream_ready AS stream_ready_ns,
    c.event_node AS event_pred, c.event_ready AS event_ready_ns,
    c.launch_node AS launch_pred, c.launch_ready AS launch_ready_ns,
    c.sync_node AS sync_pred, c.sync_ready AS sync_ready_ns,
    c.thread_node AS thread_pred, c.thread_ready AS thread_ready_ns
FROM nodes AS n
JOIN chosen AS c ON c.node = n.node
LEFT JOIN last_arrival AS la ON la.op = n.op AND la.ordinal = n.ordinal
ORDER BY n.node
