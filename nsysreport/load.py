"""Open an Nsight Systems SQLite export (or a PyTorch profiler JSON trace) read-only and load it
into DuckDB as raw tables + views.

Loader policy (README "What is skipped"): any bytes in a TEXT column load (invalid UTF-8 becomes
U+FFFD, NUL bytes are removed) and never change a number; a value in an integer column that is
not an integer (text, a BLOB, a fraction) makes its row unusable: the row is left out and
counted in `load_skipped` (source table, reason, count), which the `skipped_row` view reports
with the rows the base views leave out. Nothing is written beside the trace: a trace with a
write-ahead log or a hot journal is read from a private copy with the log applied, by the check
and by the load alike.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from nsysreport.cache_files import cache_dir, cache_path, drop_older, remove_stale, temp_prefix
from nsysreport.errors import TraceError
from nsysreport.kineto import copy_kineto, is_kineto
from nsysreport.patterns import Patterns
from nsysreport.queries import create_views, keep_results, run_loader
from nsysreport.workers import THREADS_VARIABLE, default_jobs

if TYPE_CHECKING:
    # duckdb (0.08 s of start-up, python -X importtime), ADBC and pyarrow (0.3 s) are imported
    # in the functions that use them: a warm run, which writes the pages it kept, loads
    # nothing, and only the fast loader needs ADBC.
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


INT_RANGE = 9.2e18  # a float in an integer column is taken as an integer when integral and below


@dataclass(frozen=True, slots=True)
class SourceSchema:
    """What a trace file holds: its tables and views and, for those we read, their columns.

    `typed`: the tables whose declared column types let the fast loader read them as they are
    (any other table, or one whose values turn out not to fit, is read value by value).
    """

    tables: frozenset[str]
    columns: dict[str, frozenset[str]]
    typed: frozenset[str] = frozenset()


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
    patterns = patterns or Patterns()
    if cache:
        return _open_cached(path, patterns, progress)
    schema = inspect_trace(path)
    con = connect()
    load_into(con, path, schema, progress, patterns)
    return con


def _open_cached(
    trace: Path, patterns: Patterns, progress: Progress | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the trace's cache, built first when missing or unreadable.

    Without room or permission for a cache (a read-only home, a full disk) the trace is loaded
    into memory, as --no-cache would: the report never needs the cache, and a failure of the
    cache is never reported as one of the trace.
    """
    import duckdb

    schema = inspect_trace(trace)  # bad input fails the same way with or without a cache
    target = cache_path(trace, patterns)
    if target.exists():
        try:
            con = connect(target, read_only=True)
            con.table("gpu_segment").limit(1).fetchall()  # readable, and holds derived tables
            return con
        except duckdb.Error:
            with suppress(OSError):
                target.unlink(missing_ok=True)  # corrupt, or not what this version writes
    try:
        _build_cache(target, trace, schema, progress, patterns)
        drop_older(target)
        return connect(target, read_only=True)
    except (OSError, duckdb.Error) as exc:
        return _in_memory(trace, schema, progress, patterns, exc)
    except TraceError as exc:
        # The loaders name the trace for any DuckDB error while copying, and a full cache disk
        # is one ("could not be read (... No space left on device)"): loading into memory
        # tells the two apart, failing again only when the trace is at fault.
        if not isinstance(exc.__cause__, OSError | duckdb.Error):
            raise
        return _in_memory(trace, schema, progress, patterns, exc.__cause__)


def _in_memory(
    trace: Path,
    schema: SourceSchema,
    progress: Progress | None,
    patterns: Patterns,
    cache_failure: BaseException,
) -> duckdb.DuckDBPyConnection:
    """The trace loaded into memory after its cache could not be built."""
    import duckdb

    con = connect()
    try:
        load_into(con, trace, schema, progress, patterns)
    except (duckdb.Error, OSError) as exc:
        raise TraceError(
            f"{trace}: could not be loaded: the cache in {cache_dir()} failed "
            f"({_first_line(cache_failure)}), and so did loading into memory "
            f"({_first_line(exc)}); free disk space or memory and run again"
        ) from exc
    return con


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _build_cache(
    target: Path, trace: Path, schema: SourceSchema, progress: Progress | None, patterns: Patterns
) -> None:
    """Write the cache under a unique temporary name and rename it into place: a crash leaves
    only a stray temporary file (removed by a later run), and two concurrent runs each build
    their own, the last wins.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()  # DuckDB creates the file itself
    try:
        con = connect(tmp)
        try:
            load_into(con, trace, schema, progress, patterns)
            keep_results(con)
            con.checkpoint()
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with suppress(OSError):
                leftover.unlink(missing_ok=True)


def load_into(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    progress: Progress | None,
    patterns: Patterns,
) -> None:
    """Copy the raw tables of `path` into `con`, then create the derived tables and views."""
    if schema == KINETO_SCHEMA:
        if progress:
            progress("traceEvents")
        create_raw_tables(con)
        copy_kineto(con, path)
    else:
        copy_tables(con, path, schema, progress, patterns.role_pattern())
    # Which tables the file has, for what the report can say about the capture (GPU metrics
    # are sampled into tables the analysis does not load).
    run_loader(con, "source_table_names", {"names": sorted(schema.tables - KINETO_SCHEMA.tables)})
    if progress:
        progress("deriving timelines")
    create_views(con, patterns)


def connect(database: Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB (in memory, or a cache file) that can never try to download an extension."""
    import duckdb

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
    run_loader(con, "connection_settings")
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
    try:
        info = path.stat()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except NotADirectoryError:
        raise TraceError(f"{path}: no such file (a folder on its path is a file)") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise TraceError(f"{path}: is a directory; give the .sqlite file that nsys export wrote")
    if path.suffix in (".nsys-rep", ".qdrep"):
        hint = EXPORT_HINT.format(out=path.with_suffix(".sqlite").name, src=path.name)
        raise TraceError(f"{path}: is an Nsight Systems report, not its SQLite export; run: {hint}")
    if not stat.S_ISREG(info.st_mode):
        raise TraceError(
            f"{path}: is not a regular file (a pipe or a device); give the exported file itself"
        )
    size = info.st_size
    if size == 0:
        raise TraceError(f"{path}: is empty (0 bytes); export the trace again")
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if is_kineto(path):
        return  # JSON: read and checked as it loads (kineto.copy_kineto)
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
    """Read the table and column names of `path` and reject files that are not nsys exports.

    Views count as tables (a tool may replace a table by a view of it): both read the same.
    """
    check_file(path)
    if is_kineto(path):
        return KINETO_SCHEMA
    with _readable(path) as read:
        schema, has_gpu_rows = _read_schema(path, read)
    if not has_gpu_rows:
        raise TraceError(
            f"{path}: contains no GPU activity (no CUDA kernel, memcpy or memset rows); "
            "profile with: nsys profile --trace=cuda,nvtx ..."
        )
    return schema


def _read_schema(path: Path, read: Path) -> tuple[SourceSchema, bool]:
    """The schema of the file `read` (`path` or its copy), and whether it has GPU rows."""
    try:
        src = sqlite3.connect(_immutable_uri(read), uri=True)
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: cannot be opened as SQLite ({exc})") from exc
    try:
        # SQLite's own catalogue, and the declared tables by name (SQL takes no parameter for a
        # table's name: the names come from RAW_TABLES and GPU_TABLES, quoted).
        listed = src.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        tables = frozenset(row[0] for row in listed)
        declared = {
            table: {
                row[1]: str(row[2] or "") for row in src.execute(f'PRAGMA table_info("{table}")')
            }
            for table in RAW_TABLES
            if table in tables
        }
        columns = {table: frozenset(cols) for table, cols in declared.items()}
        _reject_foreign(path, tables, columns)
        has_gpu_rows = any(
            src.execute(f'SELECT EXISTS (SELECT 1 FROM "{t}")').fetchone() == (1,)
            for t in GPU_TABLES
            if t in tables
        )
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path}: is corrupt ({_reason(exc)}); copy or export it again") from None
    except UnicodeDecodeError:  # a table's or column's name in the schema is not text any more
        raise TraceError(f"{path}: is corrupt ({NOT_UTF8}); copy or export it again") from None
    finally:
        src.close()
    typed = frozenset(t for t, cols in declared.items() if _declared_as_loaded(t, cols))
    return SourceSchema(tables, columns, typed), has_gpu_rows


def _immutable_uri(path: Path) -> str:
    """Read-only and immutable: SQLite takes no lock and creates no file beside `path`."""
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def _declared_as_loaded(table: str, declared: dict[str, str]) -> bool:
    """Whether the source declares every wanted column with the affinity we load it as
    (SQLite's rules: INT -> integer; CHAR, CLOB, TEXT -> text). Only then can the fast loader's
    typed scan read it: it reads a column by its declared type, and a REAL column would be
    rounded into BIGINT silently, where the careful read skips fractions."""
    for name, type_, _ in RAW_TABLES[table]:
        if name not in declared:
            continue
        decl = declared[name].upper()
        text = any(word in decl for word in ("CHAR", "CLOB", "TEXT"))
        if ("INT" in decl) if type_ == "BIGINT" else (text and "INT" not in decl):
            continue
        return False
    return True


@contextmanager
def _readable(path: Path) -> Iterator[Path]:
    """The file to read for `path`'s content: `path` itself, or a private copy with its log
    applied, removed when done.

    A non-empty `-wal` beside the trace holds committed data that is part of the database, and
    a non-empty `-journal` may be a hot journal whose changes must be rolled back. SQLite reads
    either only by creating files beside the trace (`-shm`) or by rewriting it, so both go to a
    private folder, where opening the copy applies the log; the copy is then a plain file,
    which the check and the load (each with its own copy) read alike. A database in WAL mode is
    copied even without a log: the fast loader would create the log and its index beside it.
    """
    logs = [p for p in (Path(f"{path}-wal"), Path(f"{path}-journal")) if _non_empty(p)]
    with path.open("rb") as f:
        wal_mode = f.read(20)[18:20] == b"\x02\x02"  # file format versions: 2 = WAL
    if not logs and not wal_mode:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="nsysreport-copy-") as folder:
        copy = Path(folder) / "trace.sqlite"
        try:
            shutil.copyfile(path, copy)
            for log in logs:
                shutil.copyfile(log, Path(folder) / f"trace.sqlite{log.name[len(path.name) :]}")
            con = sqlite3.connect(copy)
            try:
                # Reading applies the log (a WAL is read, a hot journal rolled back); DELETE
                # mode folds a WAL into the file, so the copy needs no side file any more.
                con.execute("PRAGMA journal_mode = DELETE").fetchall()
                con.execute("SELECT count(*) FROM sqlite_master").fetchall()
            finally:
                con.close()
        except sqlite3.DatabaseError as exc:
            raise TraceError(
                f"{path}: is corrupt ({_reason(exc)}); copy or export it again"
            ) from None
        except OSError as exc:
            raise TraceError(
                f"{path}: cannot copy it to a private folder to read its log ({exc.strerror})"
            ) from None
        yield copy


def _non_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _locked(path: Path) -> str:
    return (
        f"{path}: is locked by another program (is nsys still exporting it?); "
        "wait until it finishes, or run on a copy"
    )


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
    nvtx_roles: str | None = None,
) -> str:
    """Copy the raw tables into `con` with the fastest offline loader; returns the loader's name.

    Both loaders give the same tables: each reads a table as it is (the scanner by its declared
    types, ADBC by the types of its values) and hands any table it cannot read exactly (bytes
    that are not UTF-8, a value of another type) to the careful read (_Adbc). With `nvtx_roles`
    (Patterns.role_pattern), NVTX ranges that can play no role stay in the file, counted in
    nvtx_unloaded.
    """
    import duckdb

    create_raw_tables(con)
    run_loader(con, "nvtx_roleless")  # the macro the scan's filter and the delete after it call
    loader = _pick_loader(con)
    present = [t for t in RAW_TABLES if t in schema.tables]
    try:
        with _readable(path) as source, _Adbc(source) as adbc:
            if loader == "sqlite_scanner":
                _copy_with_scanner(con, source, schema, present, adbc, progress, nvtx_roles)
            else:
                for table in present:
                    if progress:
                        progress(table)
                    if not (table in schema.typed and adbc.copy(con, table, schema, exact=True)):
                        adbc.copy(con, table, schema, exact=False)
            if nvtx_roles is not None and "NVTX_EVENTS" in present:
                _leave_roleless_ranges(con, source, nvtx_roles)
    except (duckdb.Error, OSError, UnicodeDecodeError, _adbc_error()) as exc:
        # Chained: the cache tells a failure of its own disk from one of the trace by the cause.
        raise TraceError(_unreadable(path, exc)) from exc
    return loader


def _leave_roleless_ranges(con: duckdb.DuckDBPyConnection, source: Path, roles: str) -> None:
    """Drop the NVTX rows that can play no role (the scanner never loaded them) and count them:
    the file's NVTX rows (SQLite counts a table's rows without reading them) less those loaded
    and those the careful read skipped, which every loader reads alike."""
    run_loader(con, "nvtx_roleless_delete", {"roles": roles})
    with closing(sqlite3.connect(_immutable_uri(source), uri=True)) as src:
        in_file = src.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
    run_loader(con, "nvtx_unloaded_count", {"in_file": in_file})


def _unreadable(path: Path, exc: BaseException) -> str:
    """One line for a trace that SQLite refused while loading (never the SQL or its bytes)."""
    text = str(exc).strip()
    if "locked" in text:
        return _locked(path)
    if any(w in text for w in ("malformed", "corrupt", "not a database", "disk I/O")):
        return f"{path}: is corrupt ({_reason(exc)}); copy or export it again"
    return f"{path}: could not be read ({_reason(exc)}); copy or export it again"


NOT_UTF8 = "its schema holds bytes that are not UTF-8"


def _reason(exc: BaseException) -> str:
    """SQLite's reason, first line only; of a damaged schema only which table's, since the rest
    quotes the schema's SQL or its damaged bytes ("unrecognized token: ...")."""
    text = str(exc).strip()
    first = (text.splitlines()[0] if text else type(exc).__name__).removeprefix("[SQLite] ")
    if first.startswith("Could not decode to UTF-8"):  # Python's sqlite3, quoting the bytes
        return NOT_UTF8
    schema = re.match(r".*?malformed database schema(?: \([^)]*\))?", first)
    return schema.group(0) if schema else first


# From here on, the SQL that names raw tables and their columns is built from the RAW_TABLES
# declaration, by necessity: which columns a statement lists, and how it reads each (by its
# declared type), come from the declaration and from the columns the trace file really has,
# and SQL takes no parameter for a table's or a column's name. Names are nsys's, quoted; values
# never enter the text (they are bound as parameters). Every statement that is the same for
# every trace is a file in queries/load/, run by run_loader.


def create_raw_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every raw table, empty, with the columns the views read (absent ones stay empty), and
    the tables of rows the load could not type and of the file's table names."""
    for table, cols in RAW_TABLES.items():
        defs = ", ".join(f'"{name}" {type_}' for name, type_, _ in cols)
        con.execute(f'CREATE TABLE "{table}" ({defs})')
    run_loader(con, "side_tables")


def safe_text(data: bytes) -> str:
    """The text policy: bytes as UTF-8, invalid sequences as U+FFFD, NUL bytes removed."""
    return data.decode("utf-8", "replace").replace("\x00", "")


def _text_functions(con: duckdb.DuckDBPyConnection) -> None:
    """nsys_text(BLOB) -> VARCHAR, the text policy in SQL (queries/load/nsys_text.sql): DuckDB
    decodes valid UTF-8 (nearly every value), Python only the rare rest."""
    import duckdb

    con.create_function(
        "nsys_decode_rest",
        safe_text,
        [duckdb.sqltype("BLOB")],
        duckdb.sqltype("VARCHAR"),
        side_effects=False,
    )
    run_loader(con, "nsys_text")


def _adbc_error() -> type[Exception]:
    """ADBC's DB-API error base (its driver raises its own family, not sqlite3's)."""
    import adbc_driver_manager

    error: type[Exception] = adbc_driver_manager.Error
    return error


def _wanted(table: str, schema: SourceSchema) -> list[tuple[str, str]]:
    """(name, type) of the wanted columns the source table really has."""
    present = schema.columns[table]
    return [(name, type_) for name, type_, _ in RAW_TABLES[table] if name in present]


def _names(cols: list[tuple[str, str]]) -> str:
    return ", ".join(f'"{name}"' for name, _ in cols)


def _integer_sql(name: str) -> str:
    """SQLite: the column as an integer, NULL when it holds none (its row is then skipped)."""
    return (
        f'CASE WHEN typeof("{name}") = \'integer\' THEN "{name}" '
        f'WHEN {_integral_real(name)} THEN CAST("{name}" AS INTEGER) END'
    )


def _integral_real(name: str) -> str:
    return (
        f'(typeof("{name}") = \'real\' AND "{name}" = CAST("{name}" AS INTEGER) '
        f'AND abs("{name}") < {INT_RANGE})'
    )


def _reason_sql(cols: list[tuple[str, str]]) -> str:
    """SQLite: why a row cannot be loaded (its first integer column holding no integer: text,
    a BLOB, a fraction), NULL for a good row. The careful read keeps the rows where it is NULL
    and counts the others by it, so what is left out and what is counted cannot differ."""
    checks = [
        f"WHEN typeof(\"{name}\") NOT IN ('integer', 'null') AND NOT {_integral_real(name)} "
        f"THEN '{name} is not an integer'"
        for name, type_ in cols
        if type_ == "BIGINT"
    ]
    return f"CASE {' '.join(checks)} END" if checks else "NULL"


ADBC_BATCH_ROWS = 65536  # rows per Arrow batch from ADBC's SQLite driver


class _Adbc:
    """Reads of a table through ADBC's SQLite driver (immutable: no lock, no file beside it).

    `copy(exact=True)` reads the columns as they are, integer columns typed by the driver:
    it gives up (False, nothing inserted) unless every integer value is one, so what it loads
    is what the careful read would. `copy(exact=False)`, the careful read, goes value by value
    in SQLite: integer columns as integers (rows where one is not: counted in load_skipped).
    Text columns are read as bytes, which nsys_text decodes, in both. Opens the file only when
    a table needs it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.src: Any = None

    def __enter__(self) -> _Adbc:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.src is not None:
            self.src.close()

    def copy(
        self, con: duckdb.DuckDBPyConnection, table: str, schema: SourceSchema, exact: bool
    ) -> bool:
        import adbc_driver_sqlite.dbapi as adbc
        import duckdb
        import pyarrow as pa

        if self.src is None:
            self.src = adbc.connect(_immutable_uri(self.path))
            _text_functions(con)  # one connection per load: registered once, when needed
        cols = _wanted(table, schema)
        if not cols:
            return True  # none of the columns we read: the table stays empty, as when absent
        reason = _reason_sql(cols)
        values = ", ".join(
            (f'"{n}"' if exact else _integer_sql(n)) if t == "BIGINT" else f'CAST("{n}" AS BLOB)'
            for n, t in cols
        )
        # ADBC types a column by its first batch (and refuses another type later): a first
        # row of the right types, dropped below, keeps a column whose first values are all
        # NULL from being typed INT64.
        first = ", ".join(("0" if t == "BIGINT" else "x''") + f' AS "{n}"' for n, t in cols)
        sql = f'SELECT 1 AS nsys_first, {first} UNION ALL SELECT 0, {values} FROM "{table}"'
        if not exact:
            sql += f" WHERE ({reason}) IS NULL"
        names = _names(cols)
        decoded = ", ".join(f'"{n}"' if t == "BIGINT" else f'nsys_text("{n}")' for n, t in cols)
        with self.src.cursor() as cur:
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(ADBC_BATCH_ROWS)})
            cur.execute(sql)
            batches = cur.fetch_record_batch()
            # A float or text in an integer column of the first batch widens its type.
            if exact and any(
                batches.schema.field(n).type != pa.int64() for n, t in cols if t == "BIGINT"
            ):
                return False
            con.register("nsys_batches", batches)
            try:
                con.execute(
                    f'INSERT INTO main."{table}" ({names}) '
                    f"SELECT {decoded} FROM nsys_batches WHERE nsys_first = 0"
                )
            except (duckdb.Error, _adbc_error(), pa.ArrowException):
                if exact:
                    return False  # another type in a later batch: nothing was inserted
                raise
            finally:
                con.unregister("nsys_batches")
        if exact:
            return True
        with self.src.cursor() as cur:
            cur.execute(
                f'SELECT reason, count(*) FROM (SELECT {reason} AS reason FROM "{table}") '
                "WHERE reason IS NOT NULL GROUP BY reason ORDER BY reason"
            )
            rows = cur.fetchall()
        for why, count in rows:
            run_loader(con, "skipped_rows", {"source": table, "reason": why, "count": count})
        return True


def _pick_loader(con: duckdb.DuckDBPyConnection) -> str:
    """`sqlite_scanner` when its wheel matches this DuckDB (fast path), else `adbc` (any DuckDB)."""
    import duckdb

    if os.environ.get("NSYSREPORT_LOADER") == "adbc":
        return "adbc"
    extension = _scanner_extension_path()
    if extension is None:
        return "adbc"
    try:
        con.load_extension(str(extension))
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


# The scan's filter for NVTX_EVENTS: the rows that can play a role (nvtx_roleless.sql).
ROLELESS_KEPT = (
    "WHERE NOT coalesce("
    'nvtx_roleless(eventType, "end", endGlobalTid, globalTid, textId, text, $roles), false)'
)


def _copy_with_scanner(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    tables: list[str],
    adbc: _Adbc,
    progress: Progress | None,
    nvtx_roles: str | None,
) -> None:
    """The typed scan (all threads) for tables declared as we load them; a table it refuses
    (a value of another type, bytes that are not UTF-8) is read carefully instead. The scan
    refuses every such value, so where it succeeds the careful read would skip nothing."""
    import duckdb

    # DuckDB's ATTACH takes no parameter: the file's name is a quoted literal.
    con.execute(f"ATTACH '{_sql_string(str(path.resolve()))}' AS nsys (TYPE sqlite, READ_ONLY)")
    try:
        for table in tables:
            if progress:
                progress(table)
            cols = _wanted(table, schema)
            if cols and table in schema.typed:
                names = _names(cols)
                values = ", ".join(
                    f'"{n}"' if t == "BIGINT" else f"replace(\"{n}\", chr(0), '')" for n, t in cols
                )
                # Roleless NVTX ranges are never loaded (the delete after the load then finds none).
                keep, params = "", {}
                if table == "NVTX_EVENTS" and nvtx_roles is not None:
                    keep, params = ROLELESS_KEPT, {"roles": nvtx_roles}
                try:
                    con.execute(
                        f'INSERT INTO main."{table}" ({names}) '
                        f'SELECT {values} FROM nsys."{table}" {keep}',
                        params,
                    )
                    continue
                except (duckdb.Error, UnicodeDecodeError) as exc:
                    # DuckDB's message may quote the raw bytes, which Python then fails to
                    # decode: either way the careful read takes the table.
                    if "locked" in str(exc):
                        raise
            adbc.copy(con, table, schema, exact=False)
    finally:
        run_loader(con, "detach_trace")
