"""The raw tables: which columns of which nsys tables the tool reads, and creating them empty.

The declaration is the one list every loader step reads: the check (nsysreport.trace_file)
rejects a table that lacks a required column, the SQLite copy (nsysreport.sqlite_copy) lists
the columns it reads from it, and the PyTorch profiler loader (nsysreport.kineto) fills the
same tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsysreport.queries import run_loader

if TYPE_CHECKING:
    import duckdb

# The columns each raw table keeps, as nsys names them. Every table is optional (nsys exports
# lazily) and columns come and go between versions, so a table that is absent is created empty
# and a column that is absent is NULL. Required columns must exist when the table does.
Column = tuple[str, str, bool]  # name, DuckDB type, required
RAW_TABLES: dict[str, tuple[Column, ...]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", True),
        ("deviceId", "BIGINT", True),
        ("contextId", "BIGINT", False),
        ("streamId", "BIGINT", True),
        ("correlationId", "BIGINT", False),
        ("globalPid", "BIGINT", True),
        ("demangledName", "BIGINT", False),  # else shortName, mangledName (kernel_name)
        ("shortName", "BIGINT", False),
        ("graphNodeId", "BIGINT", False),  # set on graph-launched kernels (node-level tracing)
        ("graphId", "BIGINT", False),  # nsys 2026.1+
        ("mangledName", "BIGINT", False),  # the last name kernel_name falls back to
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", True),
        ("deviceId", "BIGINT", True),
        ("streamId", "BIGINT", True),
        ("correlationId", "BIGINT", False),
        ("globalPid", "BIGINT", True),
        ("bytes", "BIGINT", False),
        ("copyKind", "BIGINT", False),
        ("srcKind", "BIGINT", False),
        ("dstKind", "BIGINT", False),
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", True),
        ("deviceId", "BIGINT", True),
        ("streamId", "BIGINT", True),
        ("correlationId", "BIGINT", False),
        ("globalPid", "BIGINT", True),
        ("bytes", "BIGINT", False),
    ),
    # One row per CUDA graph launch per GPU, contents not traced (--cuda-graph-trace=graph).
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", True),
        ("deviceId", "BIGINT", True),
        ("streamId", "BIGINT", False),
        ("correlationId", "BIGINT", False),
        ("globalPid", "BIGINT", True),
        ("graphId", "BIGINT", False),
        ("graphExecId", "BIGINT", False),
    ),
    # Graph node creation and cloning on the host (node-level tracing); schema 2.x kept these
    # rows in CUDA_GRAPH_EVENTS, which later holds graph-level events (docs/export-format.md).
    # OS runtime calls (--trace=osrt): what a host thread sat in (poll, ioctl, read, ...).
    "OSRT_API": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", True),
        ("globalTid", "BIGINT", False),
        ("nameId", "BIGINT", True),
    ),
    "CUDA_GRAPH_NODE_EVENTS": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", False),
        ("globalTid", "BIGINT", False),
        ("graphNodeId", "BIGINT", True),
        ("originalGraphNodeId", "BIGINT", False),
    ),
    "CUDA_GRAPH_EVENTS": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", False),
        ("globalTid", "BIGINT", False),
        ("graphNodeId", "BIGINT", False),
        ("originalGraphNodeId", "BIGINT", False),
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", True),
        ("eventClass", "BIGINT", False),
        ("globalTid", "BIGINT", True),
        ("correlationId", "BIGINT", True),
        ("nameId", "BIGINT", True),
    ),
    # What each synchronising call waited on (its stream, its event) and where each event was
    # recorded: the critical path's links from a host wait or a stream wait to the GPU work
    # behind it (queries/views/sync_wait.sql). Not required: without them the path infers.
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
        ("deviceId", "BIGINT", False),
        ("streamId", "BIGINT", False),
        ("correlationId", "BIGINT", False),
        ("globalPid", "BIGINT", False),
        ("eventId", "BIGINT", False),
    ),
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": (
        ("deviceId", "BIGINT", False),
        ("streamId", "BIGINT", False),
        ("correlationId", "BIGINT", False),
        ("globalPid", "BIGINT", False),
        ("eventId", "BIGINT", False),
    ),
    "NVTX_EVENTS": (
        ("start", "BIGINT", True),
        ("end", "BIGINT", False),
        ("eventType", "BIGINT", True),
        ("rangeId", "BIGINT", False),
        ("globalTid", "BIGINT", False),
        ("endGlobalTid", "BIGINT", False),
        ("text", "VARCHAR", False),
        ("textId", "BIGINT", False),
        ("domainId", "BIGINT", False),
        ("uint64Value", "BIGINT", False),
        ("int64Value", "BIGINT", False),
    ),
    "StringIds": (("id", "BIGINT", True), ("value", "VARCHAR", True)),
    # The layouts of NVTX extended payloads (NCCL's: nsysreport.nvtx_payload), listed once per
    # process that registered them; none required (docs/export-format.md).
    "NVTX_PAYLOAD_SCHEMAS": (
        ("domainId", "BIGINT", False),
        ("schemaId", "BIGINT", False),
        ("payloadSize", "BIGINT", False),
    ),
    "NVTX_PAYLOAD_SCHEMA_ENTRIES": (
        ("domainId", "BIGINT", False),
        ("schemaId", "BIGINT", False),
        ("idx", "BIGINT", False),
        ("type", "BIGINT", False),
        ("name", "VARCHAR", False),
        ("offset", "BIGINT", False),
    ),
    # `id` is the activities' deviceId. nsys 2020.5 wrote `deviceId` in its place (and no
    # memoryBandwidth); nsys 2020.3 had no such table, only TARGET_INFO_CUDA_GPU (name and
    # deviceId per process). queries/load/old_gpu_list.sql maps both onto `id` and `name`
    # (docs/export-format.md, "nsys 2020-2021").
    "TARGET_INFO_GPU": (
        ("id", "BIGINT", False),
        ("deviceId", "BIGINT", False),
        ("name", "VARCHAR", False),
        ("memoryBandwidth", "BIGINT", False),  # the HBM peak, bytes/s (docs/export-format.md)
    ),
    "TARGET_INFO_CUDA_GPU": (("deviceId", "BIGINT", False), ("name", "VARCHAR", False)),
    "TARGET_INFO_SYSTEM_ENV": (("name", "VARCHAR", True), ("value", "VARCHAR", False)),
    "TARGET_INFO_SESSION_START_TIME": (
        ("utcEpochNs", "BIGINT", False),
        ("systemClockNs", "BIGINT", False),  # nsys 2026+: the clock utcEpochNs belongs to
    ),
    "ANALYSIS_DETAILS": (
        ("duration", "BIGINT", False),
        ("startTime", "BIGINT", False),
        ("stopTime", "BIGINT", False),
    ),
    # Schema 3.x keeps the export's own metadata here, schema 2.x in EXPORT_META_DATA.
    "META_DATA_EXPORT": (("name", "VARCHAR", True), ("value", "VARCHAR", False)),
    "EXPORT_META_DATA": (("name", "VARCHAR", True), ("value", "VARCHAR", False)),
    "META_DATA_CAPTURE": (("name", "VARCHAR", True), ("value", "VARCHAR", False)),
    "ENUM_CUDA_MEMCPY_OPER": (
        ("id", "BIGINT", True),
        ("name", "VARCHAR", False),
        ("label", "VARCHAR", False),
    ),
    "MPI_RANKS": (("globalTid", "BIGINT", True), ("rank", "BIGINT", True)),
    # Every process nsys saw (unusable_row: a GPU row of a process it does not list is no
    # process's, so no GPU of its own).
    "PROCESSES": (("globalPid", "BIGINT", False),),
    # nsys's own messages about the capture (warnings such as a CUDA driver it does not
    # support, data it dropped); the Capture section lists the warnings and errors. No column
    # is required: the table is only read for that list.
    "DIAGNOSTIC_EVENT": (
        ("timestamp", "BIGINT", False),
        ("source", "BIGINT", False),
        ("severity", "BIGINT", False),
        ("text", "VARCHAR", False),
        ("globalPid", "BIGINT", False),
    ),
    # nsys's own pauses of a host thread (buffer flushes, instrumentation): windows in which
    # a GPU with nothing to run waits on the profiler, not on the application (gpu_sweep).
    "PROFILER_OVERHEAD": (
        ("start", "BIGINT", False),
        ("end", "BIGINT", False),
        ("globalTid", "BIGINT", False),
    ),
    # GPU metric samples (nsys profile --gpu-metrics-devices): one row per sample of one
    # counter of one GPU; TARGET_INFO_GPU_METRICS names the counters (docs/export-format.md).
    # No column is required: a layout this tool does not know leaves the section empty rather
    # than rejecting a trace whose other tables it reads.
    "GPU_METRICS": (
        ("timestamp", "BIGINT", False),
        ("typeId", "BIGINT", False),
        ("metricId", "BIGINT", False),
        ("value", "BIGINT", False),
    ),
    "TARGET_INFO_GPU_METRICS": (
        ("typeId", "BIGINT", False),
        ("sourceId", "BIGINT", False),
        ("typeName", "VARCHAR", False),
        ("metricId", "BIGINT", False),
        ("metricName", "VARCHAR", False),
    ),
}
GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
)


# Each raw table's first column, not one of nsys's: the row's place in the trace, its rowid in
# the SQLite file (a PyTorch profiler trace: its event's index in traceEvents). The views' ids
# (kernel_id, range_id, ...) are this, never DuckDB's rowid: the fast loader inserts in
# whatever order its threads finish (at 5M kernels 2-4% of rows kept their place, differently
# each load), and ties broken by id (an op's k-th kernel, duplicate rows, the file order of
# environment rows) would change between loads of one file. Copying 5M kernels into a cache
# file: 1.9-2.3 s; keeping DuckDB's insertion order instead, 3.7 s; reading the rowid, 2.1 s.
FILE_ROW = "file_row"


# The NVTX rows a loader copies when it may leave out those that can play no role (the
# nvtx_roleless macro, queries/load/nvtx_roleless.sql; $roles: Patterns.role_pattern()): the
# rows that may be op calls with shapes too (nvtx_op_candidate, queries/load/nvtx_op_call.sql;
# $ops: nsysreport.flops.SHAPED_OPS), which op_call_nvtx reads before nvtx_roleless_delete
# drops them. The cheap test first: the role patterns are then matched against the rest only.
ROLELESS_KEPT = (
    "WHERE nvtx_op_candidate(text, $ops) OR NOT coalesce("
    'nvtx_roleless(eventType, "end", endGlobalTid, globalTid, textId, text, $roles), false)'
)


def create_raw_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every raw table, empty, with FILE_ROW and the columns the views read (absent ones stay
    empty), and the tables of rows the load could not type and of the file's table names."""
    # SQL takes no parameter for a table's or a column's name: the names are nsys's, from the
    # declaration above, quoted. The side tables are a file in queries/load/.
    for table, cols in RAW_TABLES.items():
        defs = ", ".join(
            f'"{name}" {type_}' for name, type_, _ in ((FILE_ROW, "BIGINT", False), *cols)
        )
        con.execute(f'CREATE TABLE "{table}" ({defs})')
    run_loader(con, "side_tables")
