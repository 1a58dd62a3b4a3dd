"""Open an Nsight Systems SQLite export (or a PyTorch profiler JSON trace) read-only and load it
into DuckDB as raw tables + views."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from nsysreport.errors import TraceError
from nsysreport.kineto import is_kineto

if TYPE_CHECKING:
    import duckdb

    from nsysreport.patterns import Patterns

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
        ("demangledName", "BIGINT", True),
        ("shortName", "BIGINT", False),
        ("graphNodeId", "BIGINT", False),  # set on graph-launched kernels (node-level tracing)
        ("graphId", "BIGINT", False),  # nsys 2026.1+
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
    "TARGET_INFO_GPU": (("id", "BIGINT", True), ("name", "VARCHAR", False)),
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
}
GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
)
SQLITE_MAGIC = b"SQLite format 3\x00"
EXPORT_HINT = "nsys export --type sqlite --output {out} {src}"

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SourceSchema:
    """What a trace file holds: its tables and, for the tables we read, their columns."""

    tables: frozenset[str]
    columns: dict[str, frozenset[str]]


# What inspect_trace returns for a PyTorch profiler (Kineto) JSON trace: load_into reads it with
# nsysreport.kineto into the same raw tables instead of copying SQLite tables.
KINETO_SCHEMA = SourceSchema(frozenset({"<kineto traceEvents>"}), {})


def open_trace(
    path: Path,
    progress: Progress | None = None,
    patterns: Patterns | None = None,
    cache: bool = False,
) -> duckdb.DuckDBPyConnection:
    """Check `path` and load it into DuckDB (raw tables, derived tables and views).

    With `cache`, the loaded database is kept in the user's cache directory and reused while
    the trace and the options are unchanged; otherwise it lives in memory.
    """
    from nsysreport.patterns import Patterns

    patterns = patterns or Patterns()
    if cache:
        from nsysreport.cache import open_cached

        return open_cached(path, patterns, progress)
    schema = inspect_trace(path)
    con = connect()
    load_into(con, path, schema, progress, patterns)
    return con


def load_into(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    progress: Progress | None,
    patterns: Patterns,
) -> None:
    """Copy the raw tables of `path` into `con`, then create the derived tables and views."""
    from nsysreport.queries import create_views

    if schema == KINETO_SCHEMA:
        from nsysreport.kineto import copy_kineto

        if progress:
            progress("traceEvents")
        create_raw_tables(con)
        copy_kineto(con, path)
    else:
        copy_tables(con, path, schema, progress)
    # Which tables the file has, for what the report can say about the capture (GPU metrics
    # are sampled into tables the analysis does not load).
    names = sorted(schema.tables - KINETO_SCHEMA.tables)
    con.execute(
        "CREATE TABLE source_table AS SELECT unnest($names::VARCHAR[]) AS name", {"names": names}
    )
    if progress:
        progress("deriving timelines")
    create_views(con, patterns)


def connect(database: Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB (in memory, or a cache file) that can never try to download an extension."""
    import duckdb

    from nsysreport.workers import THREADS_VARIABLE, default_jobs

    spill = Path(tempfile.gettempdir()) / "nsysreport-duckdb"
    con = duckdb.connect(
        str(database) if database else ":memory:",
        read_only=read_only,
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            # A worker of a multi-file run gets its share of the cores (nsysreport.workers).
            "threads": int(os.environ.get(THREADS_VARIABLE) or 0) or default_jobs(),
            # Lets the SQLite scan use every thread; every query orders its own output.
            "preserve_insertion_order": False,
            # DuckDB runs an ASOF join as a nested loop when it expects at most 64 left rows;
            # that estimate can be far off after a filter (8,000 rows: 6 s instead of 0.1 s in
            # grouped_island), and the sort-based join is fast at every size.
            "asof_loop_join_threshold": 0,
            # Past this, sorts, joins and windows spill to temp_directory instead of growing
            # (DuckDB's default is 80% of RAM). A cold 5M-kernel report (bench_report.py):
            # 5.8 GB peak RSS by default, 2.4 GB at 2 GiB in the same time (+3%); 1 GiB gives
            # 1.4 GB but takes 1.7x as long.
            "memory_limit": _memory_limit(),
            # An in-memory database spills to ./.tmp by default: never beside the user's files.
            "temp_directory": str(spill),
        },
    )
    con.execute("SET enable_progress_bar = false")  # nsysreport draws its own progress
    return con


def _memory_limit() -> str:
    """DuckDB's memory limit: a quarter of RAM, at most 2 GiB and at least 256 MiB."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): assume enough RAM
        ram = 4 << 30
    return f"{min(max(ram // 4, 256 << 20), 2 << 30) >> 20}MiB"


def check_file(path: Path) -> None:
    """Raise TraceError with the next step when `path` cannot be an nsys SQLite export.

    A Kineto JSON trace (`.json`, `.json.gz`) passes here; its content is checked as it loads.
    """
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory; give the .sqlite file that nsys export wrote")
    if path.suffix in (".nsys-rep", ".qdrep"):
        hint = EXPORT_HINT.format(out=path.with_suffix(".sqlite").name, src=path.name)
        raise TraceError(f"{path}: is an Nsight Systems report, not its SQLite export; run: {hint}")
    size = path.stat().st_size
    if size == 0:
        raise TraceError(f"{path}: is empty (0 bytes); export the trace again")
    if is_kineto(path):
        return  # JSON: read and checked as it loads (kineto.copy_kineto)
    with path.open("rb") as f:
        header = f.read(100)
    if not header.startswith(SQLITE_MAGIC):
        hint = EXPORT_HINT.format(out="trace.sqlite", src="trace.nsys-rep")
        raise TraceError(
            f"{path}: is not a SQLite file; nsysreport reads nsys exports made by: {hint}"
        )
    if len(header) < 100:
        raise TraceError(f"{path}: is truncated ({size} bytes, shorter than a SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is only trusted when the two change counters agree (SQLite docs).
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        raise TraceError(
            f"{path}: is truncated ({size} bytes, its header says {pages * page_size}); "
            "copy or export it again"
        )


def inspect_trace(path: Path) -> SourceSchema:
    """Read the table and column names of `path` and reject files that are not nsys exports."""
    check_file(path)
    if is_kineto(path):
        return KINETO_SCHEMA
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    try:
        src = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: cannot be opened as SQLite ({exc})") from exc
    try:
        tables = frozenset(
            row[0] for row in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )
        columns = {
            table: frozenset(row[1] for row in src.execute(f'PRAGMA table_info("{table}")'))
            for table in RAW_TABLES
            if table in tables
        }
        _reject_foreign(path, tables, columns)
        has_gpu_rows = any(
            src.execute(f'SELECT EXISTS (SELECT 1 FROM "{t}")').fetchone() == (1,)
            for t in GPU_TABLES
            if t in tables
        )
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path}: is corrupt ({exc}); copy or export it again") from exc
    finally:
        src.close()
    if not has_gpu_rows:
        raise TraceError(
            f"{path}: contains no GPU activity (no CUDA kernel, memcpy or memset rows); "
            "profile with: nsys profile --trace=cuda,nvtx ..."
        )
    return SourceSchema(tables, columns)


def _reject_foreign(path: Path, tables: frozenset[str], columns: dict[str, frozenset[str]]) -> None:
    """Reject nvprof databases and other SQLite files that merely look similar."""
    if "StringTable" in tables or "CUPTI_ACTIVITY_KIND_MARKER" in tables:
        raise TraceError(
            f"{path}: is an nvprof database, not an Nsight Systems export; "
            "profile with nsys profile and export with nsys export --type sqlite"
        )
    is_nsys = bool({"META_DATA_EXPORT", "EXPORT_META_DATA"} & tables) or any(
        t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables
    )
    if not is_nsys:
        raise TraceError(
            f"{path}: is a SQLite database but not an Nsight Systems export "
            "(no META_DATA_EXPORT or CUPTI_ACTIVITY_KIND_* tables)"
        )
    for table, present in columns.items():
        missing = [
            name for name, _, required in RAW_TABLES[table] if required and name not in present
        ]
        if missing:
            raise TraceError(
                f"{path}: table {table} lacks column {missing[0]!r}; "
                "this export format is not supported (re-export with a current nsys)"
            )


def copy_tables(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    progress: Progress | None = None,
) -> str:
    """Copy the raw tables into `con` with the fastest offline loader; returns the loader's name."""
    import duckdb

    create_raw_tables(con)
    loader = _pick_loader(con)
    present = [t for t in RAW_TABLES if t in schema.tables]
    try:
        if loader == "sqlite_scanner":
            _copy_with_scanner(con, path, schema, present, progress)
        else:
            _copy_with_adbc(con, path, schema, present, progress)
    except (duckdb.Error, OSError, _adbc_error()) as exc:
        raise TraceError(f"{path}: could not be read ({exc}); copy or export it again") from exc
    return loader


def create_raw_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every raw table, empty, with the columns the views read (absent ones stay empty)."""
    for table, cols in RAW_TABLES.items():
        defs = ", ".join(f'"{name}" {type_}' for name, type_, _ in cols)
        con.execute(f'CREATE TABLE "{table}" ({defs})')


def _adbc_error() -> type[Exception]:
    """ADBC's DB-API error base (its driver raises its own family, not sqlite3's)."""
    import adbc_driver_manager

    error: type[Exception] = adbc_driver_manager.Error
    return error


def _select_list(table: str, schema: SourceSchema) -> str:
    """Quoted names of the wanted columns the source table really has."""
    present = schema.columns[table]
    return ", ".join(f'"{name}"' for name, _, _ in RAW_TABLES[table] if name in present)


def _pick_loader(con: duckdb.DuckDBPyConnection) -> str:
    """`sqlite_scanner` when its wheel matches this DuckDB (fast path), else `adbc` (any DuckDB)."""
    import duckdb

    if os.environ.get("NSYSREPORT_LOADER") == "adbc":
        return "adbc"
    extension = _scanner_extension_path()
    if extension is None:
        return "adbc"
    try:
        con.execute(f"LOAD '{_sql_string(str(extension))}'")
    except duckdb.Error:
        return "adbc"  # built for another DuckDB version: refused cleanly, no crash
    return "sqlite_scanner"


def _scanner_extension_path() -> Path | None:
    import duckdb

    try:
        import duckdb_extension_sqlite_scanner as wheel
    except ImportError:
        return None
    path = (
        Path(wheel.__file__).parent
        / "extensions"
        / f"v{duckdb.__version__}"
        / "sqlite_scanner.duckdb_extension"
    )
    return path if path.is_file() else None


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


def _copy_with_scanner(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    tables: list[str],
    progress: Progress | None,
) -> None:
    con.execute(f"ATTACH '{_sql_string(str(path.resolve()))}' AS nsys (TYPE sqlite, READ_ONLY)")
    try:
        for table in tables:
            if progress:
                progress(table)
            cols = _select_list(table, schema)
            con.execute(f'INSERT INTO main."{table}" ({cols}) SELECT {cols} FROM nsys."{table}"')
    finally:
        con.execute("DETACH nsys")


def _copy_with_adbc(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    tables: list[str],
    progress: Progress | None,
) -> None:
    import adbc_driver_sqlite.dbapi as adbc

    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    with adbc.connect(uri) as src:
        for table in tables:
            if progress:
                progress(table)
            cols = _select_list(table, schema)
            with src.cursor() as cur:
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": "65536"})
                cur.execute(f'SELECT {cols} FROM "{table}"')
                batches = cur.fetch_record_batch()
                con.register("nsys_batches", batches)
                try:
                    con.execute(f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM nsys_batches')
                finally:
                    con.unregister("nsys_batches")
