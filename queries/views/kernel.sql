-- kernel: one row per CUDA kernel, with process, device, stream, times and class
--
-- `pid` is (globalPid >> 24) & 0xFFFFFF, as NVIDIA's reports compute it. Rows with end <= start
-- are kept (they count as kernels) but carry no time in any analysis; rows the
-- analysis cannot use (no start, duplicates, ...: unusable_row) are left out and counted in
-- skipped_row. Names fall back as kernel_name says. A kernel replayed from a CUDA graph under
-- --cuda-graph-trace=node is an ordinary row with graphNodeId (and, from nsys 2026.1, graphId)
-- set; its correlationId is its cudaGraphLaunch's.
--
-- Reads: CUPTI_ACTIVITY_KIND_KERNEL, kernel_name, unusable_row
--
-- Columns:
--   kernel_id        BIGINT    the row's file_row in CUPTI_ACTIVITY_KIND_KERNEL
--   pid              BIGINT    process id
--   global_pid       BIGINT    nsys global process id (joins launch.global_pid)
--   device_id        BIGINT    nsys GPU id (TARGET_INFO_GPU.id)
--   stream_id        BIGINT    CUPTI stream id
--   correlation_id   BIGINT    joins the launching API call within the process
--   start_ns         BIGINT    GPU start
--   end_ns           BIGINT    GPU end
--   duration_ns      BIGINT    end_ns - start_ns
--   name_id          BIGINT    StringIds id of the demangled name
--   name             VARCHAR   kernel name: demangled, else short, else mangled, else a
--                              placeholder
--   class            VARCHAR   comm, attention, gemm or other
--   graph_node_id    BIGINT    graph node it ran as (node-level graph tracing), else NULL
--   graph_id         BIGINT    graph it ran in (nsys 2026.1+, node-level tracing), else NULL
--   unnamed          BOOLEAN   no name was found: the class is a guess (other)
CREATE VIEW kernel AS
SELECT
    k.file_row AS kernel_id,
    (k.globalPid >> 24) & 16777215 AS pid,
    k.globalPid AS global_pid,
    k.deviceId AS device_id,
    k.streamId AS stream_id,
    k.correlationId AS correlation_id,
    k.start AS start_ns,
    k."end" AS end_ns,
    k."end" - k.start AS duration_ns,
    k.demangledName AS name_id,
    n.name,
    n.class,
    k.graphNodeId AS graph_node_id,
    k.graphId AS graph_id,
    n.unnamed
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN kernel_name AS n
    ON n.demangled_key = coalesce(k.demangledName, -1)
    AND n.short_key = coalesce(k.shortName, -1)
    AND n.mangled_key = coalesce(k.mangledName, -1)
WHERE k.file_row NOT IN (
    SELECT row_id FROM unusable_row WHERE source = 'CUPTI_ACTIVITY_KIND_KERNEL'
)
