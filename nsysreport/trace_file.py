"""Check a trace file and read what it holds: reject what cannot be an nsys export (with the
next step to take), and list its tables and columns for the copy.

Nothing is written beside the trace: a trace with a write-ahead log or a hot journal is read
from a private copy with the log applied (`readable`), by the check and by the copy alike.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from nsysreport.errors import TraceError
from nsysreport.kineto import is_kineto
from nsysreport.nsys_export import is_report, nsys_command
from nsysreport.parquet_dir import is_parquet_dir, parquet_schema
from nsysreport.raw_tables import GPU_TABLES, RAW_TABLES
from nsysreport.source_schema import KINETO_SCHEMA, SourceSchema

SQLITE_MAGIC = b"SQLite format 3\x00"
EXPORT_HINT = "nsys export --type sqlite --output {out} {src}"


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
        if is_parquet_dir(path):
            return  # nsys export --type parquetdir: read and checked by parquet_schema
        raise TraceError(
            f"{path}: is a directory but not an nsys Parquet export (no META_DATA_EXPORT or "
            "CUPTI_ACTIVITY_KIND_* .parquet files); give the .sqlite file that nsys export "
            "wrote, or the folder of nsys export --type parquetdir"
        )
    if is_report(path):
        if nsys_command() is not None:
            return  # exported into the cache when it loads (nsysreport.nsys_export)
        hint = EXPORT_HINT.format(out=path.with_suffix(".sqlite").name, src=path.name)
        raise TraceError(
            f"{path}: is an Nsight Systems report, not its export, and nsys is not on PATH to "
            f"export it; run: {hint}"
        )
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
    if path.is_dir():
        schema, has_gpu_rows = parquet_schema(path)
        _reject_foreign(path, schema.tables, schema.columns)
    else:
        with readable(path) as read:
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
        src = sqlite3.connect(immutable_uri(read), uri=True)
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: cannot be opened as SQLite ({exc})") from exc
    try:
        # SQLite's own catalogue, and the declared tables by name (SQL takes no parameter for a
        # table's name: the names come from RAW_TABLES and GPU_TABLES, quoted).
        listed = src.execute(
            "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')"
        ).fetchall()
        tables = frozenset(row[0] for row in listed)
        views = frozenset(name for name, kind in listed if kind == "view")
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
    return SourceSchema(tables, columns, typed, views), has_gpu_rows


def immutable_uri(path: Path) -> str:
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
def readable(path: Path) -> Iterator[Path]:
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


# Tables only nsys writes beside StringIds (every export since 2020.3 has some of them).
NSYS_TARGET_TABLES = frozenset(
    {
        "ThreadNames",
        "ProcessStreams",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_GPU",
        "TARGET_INFO_SYSTEM_ENV",
        "TARGET_INFO_SESSION_START_TIME",
    }
)


def _reject_foreign(path: Path, tables: frozenset[str], columns: dict[str, frozenset[str]]) -> None:
    """Reject nvprof databases and other SQLite files that merely look similar."""
    if "StringTable" in tables or "CUPTI_ACTIVITY_KIND_MARKER" in tables:
        raise TraceError(
            f"{path}: is an nvprof database, not an Nsight Systems export; "
            "profile with nsys profile and export with nsys export --type sqlite"
        )
    # Exports of nsys 2021.3 and before have no metadata table; one of a capture with no CUDA
    # trace holds only StringIds and the target's tables (docs/export-format.md, "nsys
    # 2020-2021"): it is an export, with no GPU activity, not a foreign database.
    is_nsys = (
        bool({"META_DATA_EXPORT", "EXPORT_META_DATA"} & tables)
        or any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables)
        or ("StringIds" in tables and bool(NSYS_TARGET_TABLES & tables))
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


def unreadable_message(path: Path, exc: BaseException) -> str:
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
