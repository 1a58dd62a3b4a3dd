-- launch_summary: per GPU stream, kernels launched eagerly or from graphs, latency, queue depth
--
-- How the host fed each stream. A kernel ran from a CUDA graph when it was replayed from one
-- (node-level tracing: `graph_node_id` or `graph_id`; a PyTorch trace's graph replay), else it
-- was launched eagerly, by a call of its own; a graph launch traced whole (graph_launch) runs
-- kernels nobody counted: `graph_launches` counts those launches. For the eager kernels whose
-- launching call is in the trace (of a correlation id that repeats, the call that ended last):
-- the launch latency, from the call's end to the kernel's start (0 when the kernel started
-- first), and the queue depth at the launch: the stream's kernels launched before (their calls
-- ended by then, ends before launches at one instant) that had not ended yet. One sweep per
-- stream over launches and ends. A queue near 0 means the host launched just in time: any
-- delay on the host became idle time on the GPU.
--
-- Reads: graph_launch, kernel, launch
--
-- Columns:
--   pid                BIGINT    process id
--   device_id          BIGINT    nsys GPU id
--   stream_id          BIGINT    CUPTI stream id
--   kernels            BIGINT    kernels on the stream
--   graph_kernels      BIGINT    of those, replayed from CUDA graphs
--   graph_launches     BIGINT    CUDA graph launches traced whole on the stream
--   launched           BIGINT    eager kernels whose launching call is in the trace
--   latency_p50_ns     DOUBLE    their launch latency, median (NULL: none)
--   latency_p90_ns     DOUBLE    90th percentile
--   latency_p99_ns     DOUBLE    99th percentile
--   queue_mean         DOUBLE    queue depth at their launches, mean (NULL: none)
--   queue_max          BIGINT    largest
WITH calls AS (
    SELECT global_pid, correlation_id, max(end_ns) AS end_ns
    FROM launch
    GROUP BY global_pid, correlation_id
),
ran AS (
    SELECT k.pid, k.device_id, k.stream_id, k.start_ns, greatest(k.end_ns, k.start_ns) AS end_ns,
        k.graph_node_id IS NOT NULL OR k.graph_id IS NOT NULL AS in_graph,
        c.end_ns AS call_end_ns
    FROM kernel AS k
    LEFT JOIN calls AS c ON c.global_pid = k.global_pid AND c.correlation_id = k.correlation_id
),
eager AS (
    SELECT * FROM ran WHERE NOT in_graph AND call_end_ns IS NOT NULL
),
swept AS (
    SELECT pid, device_id, stream_id, d,
        sum(d) OVER (
            PARTITION BY pid, device_id, stream_id ORDER BY t, d ROWS UNBOUNDED PRECEDING
        ) - 1 AS before
    FROM (
        SELECT pid, device_id, stream_id, call_end_ns AS t, 1 AS d FROM eager
        UNION ALL
        SELECT pid, device_id, stream_id, end_ns, -1 FROM eager
    )
),
queue AS (
    -- A kernel can end before its own call returns: the count is never below 0.
    SELECT pid, device_id, stream_id, avg(greatest(before, 0)) AS queue_mean,
        max(greatest(before, 0))::BIGINT AS queue_max
    FROM swept
    WHERE d = 1
    GROUP BY pid, device_id, stream_id
),
latency AS (
    SELECT pid, device_id, stream_id, count(*) AS launched,
        -- In DOUBLE: a call's end can be any BIGINT, and the difference of two can overflow.
        quantile_cont(greatest(start_ns::DOUBLE - call_end_ns, 0), 0.5) AS latency_p50_ns,
        quantile_cont(greatest(start_ns::DOUBLE - call_end_ns, 0), 0.9) AS latency_p90_ns,
        quantile_cont(greatest(start_ns::DOUBLE - call_end_ns, 0), 0.99) AS latency_p99_ns
    FROM eager
    GROUP BY pid, device_id, stream_id
),
streams AS (
    SELECT pid, device_id, stream_id, count(*) AS kernels,
        count(*) FILTER (in_graph) AS graph_kernels
    FROM ran
    GROUP BY pid, device_id, stream_id
),
whole_graphs AS (
    SELECT pid, device_id, stream_id, count(*) AS graph_launches
    FROM graph_launch
    GROUP BY pid, device_id, stream_id
)
SELECT coalesce(s.pid, g.pid) AS pid, coalesce(s.device_id, g.device_id) AS device_id,
    coalesce(s.stream_id, g.stream_id) AS stream_id,
    coalesce(s.kernels, 0) AS kernels, coalesce(s.graph_kernels, 0) AS graph_kernels,
    coalesce(g.graph_launches, 0) AS graph_launches, coalesce(l.launched, 0) AS launched,
    l.latency_p50_ns::DOUBLE AS latency_p50_ns, l.latency_p90_ns::DOUBLE AS latency_p90_ns,
    l.latency_p99_ns::DOUBLE AS latency_p99_ns, q.queue_mean::DOUBLE AS queue_mean, q.queue_max
FROM streams AS s
FULL JOIN whole_graphs AS g
    ON g.pid = s.pid AND g.device_id = s.device_id AND g.stream_id = s.stream_id
LEFT JOIN latency AS l
    ON l.pid = s.pid AND l.device_id = s.device_id AND l.stream_id = s.stream_id
LEFT JOIN queue AS q
    ON q.pid = s.pid AND q.device_id = s.device_id AND q.stream_id = s.stream_id
ORDER BY pid, device_id, stream_id
