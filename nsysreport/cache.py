"""Per-trace caches: a DuckDB file of the loaded and derived tables, so a second run skips
loading, and a pickle of the finished report model (with its pictures), so it skips the queries."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nsysreport import __version__
from nsysreport.errors import TraceError

if TYPE_CHECKING:
    import duckdb

    from nsysreport.load import Progress, SourceSchema
    from nsysreport.patterns import Patterns

# Bump when the cached tables or the report file change shape (a new column, a new derived
# table): old files then miss and are replaced. The tool version is in the key too, so releases
# never share files.
CACHE_FORMAT = 3
DB_SUFFIX = ".duckdb"
REPORT_SUFFIX = ".report"
# The sample of a trace's bytes in its key (see _content_digest).
EDGE_BYTES = 64 << 10
CHUNK_BYTES = 4 << 10
SAMPLES = 16
# A temporary left by a killed run (its pid in the name is gone, or it names none: every run of
# this code names its own, so one without was left by other code) is removed after an hour; one
# whose pid cannot be judged (another machine sharing the folder, a reused pid) after a day. A
# live run's temporary removed by mistake costs that run only its cache: its rename fails and
# it loads into memory.
STALE_SECONDS = 3600
ABANDONED_SECONDS = 86400
TEMP_NAME = re.compile(r"\.[0-9a-f-]+\.(\d+)\.\w+\.tmp(\.wal)?")
# What reading a report file can raise when it is truncated, corrupt or from other code.
UNREADABLE = (
    OSError,
    EOFError,
    pickle.UnpicklingError,
    AttributeError,
    ImportError,
    IndexError,
    KeyError,
    TypeError,
    ValueError,
)

T = TypeVar("T")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/nsysreport, else ~/.cache/nsysreport: never beside or inside the trace."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsysreport"


def cache_path(trace: Path, patterns: Patterns) -> Path:
    """The cache file for this trace as it is now (path, size, mtime, sampled content) and
    these options."""
    try:
        stat = trace.stat()
        content = _content_digest(trace, stat.st_size)
        logs = _logs_beside(trace)
    except OSError as exc:
        raise TraceError(f"{trace}: cannot read it ({exc.strerror})") from None
    where = _digest(str(trace.resolve()))
    # The code's digest too: a checkout that edits a view must not read tables the old SQL made.
    what = _digest(
        str(stat.st_size),
        str(stat.st_mtime_ns),
        content,
        *logs,
        str(CACHE_FORMAT),
        __version__,
        repr(patterns),
        _code_fingerprint(),
    )
    return cache_dir() / f"{where}-{what}{DB_SUFFIX}"


def report_path(trace: Path, patterns: Patterns, options: tuple[Any, ...]) -> Path:
    """The report file for this trace's cache key (code digest included) plus the model's
    options and the path as given (the model records it)."""
    db = cache_path(trace, patterns)
    what = _digest(repr(options), str(trace))
    return db.with_name(f"{db.stem}-{what}{REPORT_SUFFIX}")


def _digest(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _content_digest(path: Path, size: int) -> str:
    """A digest of a sample of the file's bytes: the first and last 64 KiB and SAMPLES chunks
    of 4 KiB evenly between. Another trace of the same size and mtime (cp -p, rsync -t)
    differs in them: the SQLite header's change counter, the schema, the first and last pages
    of the tables. 18 reads whatever the size (1 GB file: 0.2 ms from the page cache, ~20 ms
    from a cold virtual disk)."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        sha.update(f.read(EDGE_BYTES))
        for i in range(1, SAMPLES + 1):
            f.seek(size * i // (SAMPLES + 1))
            sha.update(f.read(CHUNK_BYTES))
        f.seek(max(size - EDGE_BYTES, 0))
        sha.update(f.read(EDGE_BYTES))
    return sha.hexdigest()[:16]


def _logs_beside(trace: Path) -> list[str]:
    """Size, mtime and sampled content of a -wal or -journal beside the trace: the loader reads
    the trace with its log applied (load.py), so a log that appears or grows is new content."""
    parts = []
    for suffix in ("-wal", "-journal"):
        log = trace.with_name(trace.name + suffix)
        try:
            stat = log.stat()
        except FileNotFoundError:
            continue
        parts += [suffix, str(stat.st_size), str(stat.st_mtime_ns)]
        parts.append(_content_digest(log, stat.st_size))
    return parts


@cache
def _code_fingerprint() -> str:
    """A digest of what the tables and outputs are made by: the package's Python, the SQL and
    the templates (a checkout edits them without a new version number)."""
    from nsysreport.queries import resource_dir

    files = sorted(Path(__file__).parent.rglob("*.py"))
    for folder in ("queries", "templates"):
        files += sorted(p for p in resource_dir(folder).rglob("*") if p.is_file())
    sha = hashlib.sha256()
    for f in files:
        sha.update(f.name.encode())
        sha.update(f.read_bytes())
    return sha.hexdigest()[:16]


class CachedReport(Generic[T]):
    """A report model from the cache (or just built), with the outputs kept beside it.

    Outputs are anything derived from the model alone (the HTML with a placeholder for its
    generation time, the JSON text): a warm run writes them as they are, so it neither queries
    nor draws nor encodes. The model itself is unpickled only when asked for.
    """

    def __init__(
        self, path: Path, model_bytes: bytes, outputs: dict[str, Any], build: Callable[[], T]
    ) -> None:
        self.path = path
        self._model_bytes = model_bytes
        self._model: T | None = None
        self._build = build
        self.outputs = outputs

    @property
    def model(self) -> T:
        if self._model is None:
            try:
                self._model = pickle.loads(self._model_bytes)
            except UNREADABLE:  # damaged inside a readable file: build it again, keep that
                self._model = self._build()
                self._model_bytes = pickle.dumps(self._model, protocol=pickle.HIGHEST_PROTOCOL)
                self.outputs = {}
                _write(self.path, self._model_bytes, {})
        return self._model

    def keep(self, **outputs: Any) -> None:
        """Add outputs to the file (best effort, as every cache write)."""
        self.outputs.update(outputs)
        _write(self.path, self._model_bytes, self.outputs)


def cached_report(
    trace: Path, patterns: Patterns, options: tuple[Any, ...], build: Callable[[], T]
) -> CachedReport[T]:
    """The report model of `trace` read from the cache, else `build()` and keep it there.

    `options` are the model's own options (top N, timeline step and range): each set of them
    gets its own file. A hit opens neither the trace's DuckDB cache nor the trace; an
    unreadable file is rebuilt; without room or permission for a file the model is not kept.
    """
    from nsysreport.load import check_file

    check_file(trace)  # a missing or unreadable trace fails the same way with or without a cache
    target = report_path(trace, patterns, options)
    stored = _read(target)
    if stored is not None:
        return CachedReport(target, stored["model"], stored["outputs"], build)
    model = build()
    cached: CachedReport[T] = CachedReport(
        target, pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL), {}, build
    )
    cached._model = model
    _write(target, cached._model_bytes, {})
    _drop_older(target)
    return cached


def _read(target: Path) -> dict[str, Any] | None:
    """A report file's pickled model and outputs, or None when missing, corrupt or of another
    key. The key covers the code, so the model unpickles; CachedReport.model rebuilds if not."""
    try:
        with target.open("rb") as f:
            stored = pickle.load(f)
        if stored["name"] != target.name:
            raise ValueError(f"{target.name}: written for {stored['name']}")
        if not isinstance(stored["model"], bytes) or not isinstance(stored["outputs"], dict):
            raise TypeError(f"{target.name}: not a report file")
        return {"model": stored["model"], "outputs": stored["outputs"]}
    except FileNotFoundError:
        return None
    except UNREADABLE:
        with suppress(OSError):  # an unusable folder: the next write fails quietly too
            target.unlink(missing_ok=True)  # corrupt, or from other code: rebuilt and rewritten
        return None


def _write(target: Path, model_bytes: bytes, outputs: dict[str, Any]) -> None:
    """Pickle under a unique temporary name and rename into place (as the DuckDB cache)."""
    content = {"name": target.name, "model": model_bytes, "outputs": outputs}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(content, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(name, target)
        finally:
            Path(name).unlink(missing_ok=True)
    except OSError:
        pass  # no room or no permission (a read-only home, a full disk): nothing is kept


def open_cached(
    trace: Path, patterns: Patterns, progress: Progress | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the trace's cache, built first when missing or unreadable.

    Without room or permission for a cache (a read-only home, a full disk) the trace is loaded
    into memory, as --no-cache would: the report never needs the cache, and a failure of the
    cache is never reported as one of the trace.
    """
    import duckdb

    from nsysreport.load import connect, inspect_trace

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
        _build(target, trace, schema, progress, patterns)
        _drop_older(target)
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

    from nsysreport.load import connect, load_into

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


def _build(
    target: Path, trace: Path, schema: SourceSchema, progress: Progress | None, patterns: Patterns
) -> None:
    """Write the cache under a unique temporary name and rename it into place: a crash leaves
    only a stray temporary file (removed by a later run), and two concurrent runs each build
    their own, the last wins.
    """
    from nsysreport.load import connect, load_into

    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target.parent)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()  # DuckDB creates the file itself
    try:
        con = connect(tmp)
        try:
            load_into(con, trace, schema, progress, patterns)
            con.checkpoint()
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with suppress(OSError):
                leftover.unlink(missing_ok=True)


def _temp_prefix(target: Path) -> str:
    """`.NAME.PID.`: a temporary names the run that writes it, so that a later run can tell
    when it was left by a run that died."""
    return f".{target.stem}.{os.getpid()}."


def _remove_stale(folder: Path) -> None:
    """Remove the temporaries of runs killed before their rename (kill -9, a power cut)."""
    now = time.time()
    for tmp in folder.glob(".*.tmp*"):
        match = TEMP_NAME.fullmatch(tmp.name)
        try:
            age = now - tmp.stat().st_mtime
        except OSError:
            continue  # removed meanwhile
        gone = match is None or not _running(int(match.group(1)))
        if age > ABANDONED_SECONDS or (gone and age > STALE_SECONDS):
            with suppress(OSError):
                tmp.unlink()


def _running(pid: int) -> bool:
    """Whether a process with this pid exists here (another user's counts)."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) would signal it there: judge by age alone
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists, owned by someone else
    return True


def _drop_older(current: Path) -> None:
    """Remove this trace's caches (tables and reports) for earlier versions of the file or other
    patterns, and stale temporaries; reports of the same version with other model options stay."""
    where, what = current.name.split("-")[:2]
    what = what.removesuffix(DB_SUFFIX)
    for suffix in (DB_SUFFIX, REPORT_SUFFIX):
        for other in current.parent.glob(f"{where}-*{suffix}"):
            if other.name.split("-")[1].removesuffix(suffix) != what:
                with suppress(OSError):
                    other.unlink(missing_ok=True)
    _remove_stale(current.parent)


def clear() -> int:
    """Delete every cache file; returns how many there were."""
    folder = cache_dir()
    patterns = (f"*{DB_SUFFIX}", f"*{REPORT_SUFFIX}", ".*.tmp*")
    files = [f for p in patterns for f in folder.glob(p)] if folder.is_dir() else []
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)
