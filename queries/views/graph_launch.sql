-- graph_launch: one row per CUDA graph launch on a GPU, traced as a whole (contents unknown)
--
-- Rows of CUPTI_ACTIVITY_KIND_GRAPH_TRACE, which nsys writes under --cuda-graph-trace=graph
-- (its default). Each is the GPU time of one cudaGraphLaunch from its first node's start to its
-- last node's end; the kernels inside are not recorded. `correlation_id` is the launching
-- call's, so a launch joins its cudaGraphLaunch like any activity. See docs/export-format.md.
-- Rows the analysis cannot use (unusable_row) are left out and counted in skipped_row.
--
-- Reads: CUPTI_ACTIVITY_KIND_GRAPH_TRACE, unusable_row
--
-- Columns:
--   graph_launch_id   BIGINT    the row's file_row in CUPTI_ACTIVITY_KIND_GRAPH_TRACE
--   pid               BIGINT    process id
--   global_pid        BIGINT    nsys global process id
--   device_id         BIGINT    nsys GPU id
--   stream_id         BIGINT    CUPTI stream the graph was launched into
--   correlation_id    BIGINT    joins the cudaGraphLaunch call within the process
--   start_ns          BIGINT    GPU start
--   end_ns            BIGINT    GPU end
--   duration_ns       BIGINT    end_ns - start_ns
--   graph_id          BIGINT    CUDA graph id
--   graph_exec_id     BIGINT    executable graph id
--   name              VARCHAR   [CUDA graph <graph_id>]
CREATE VIEW graph_launch AS
SELECT
    g.file_row AS graph_launch_id,
    (g.globalPid >> 24) & 16777215 AS pid,
    g.globalPid AS global_pid,
    g.deviceId AS device_id,
    g.streamId AS stream_id,
    g.correlationId AS correlation_id,
    g.start AS start_ns,
    g."end" AS end_ns,
    g."end" - g.start AS duration_ns,
    g.graphId AS graph_id,
    g.graphExecId AS graph_exec_id,
    '[CUDA graph ' || coalesce(g.graphId::VARCHAR, '?') || ']' AS name
FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE AS g
WHERE g.file_row NOT IN (
    SELECT row_id FROM unusable_row WHERE source = 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE'
)
