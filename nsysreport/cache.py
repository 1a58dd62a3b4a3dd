"""Per-trace caches: a DuckDB file of the loaded and derived tables, so a second run skips
loading, and a pickle of the finished report model (with its pictures), so it skips the queries."""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nsysreport import __version__

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
    """The cache file for this trace as it is now (path, size, mtime) and these options."""
    stat = trace.stat()
    where = _digest(str(trace.resolve()))
    # The code's digest too: a checkout that edits a view must not read tables the old SQL made.
    what = _digest(
        str(stat.st_size),
        str(stat.st_mtime_ns),
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
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".tmp")
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
    """A read-only connection to the trace's cache, built first when missing or unreadable."""
    import duckdb

    from nsysreport.load import connect, inspect_trace, load_into

    schema = inspect_trace(trace)  # bad input fails the same way with or without a cache
    target = cache_path(trace, patterns)
    if target.exists():
        try:
            con = connect(target, read_only=True)
            con.execute("SELECT count(*) FROM gpu_segment").fetchone()
            return con
        except duckdb.Error:
            target.unlink(missing_ok=True)  # corrupt, or not what this version writes: rebuild
    try:
        _build(target, trace, schema, progress, patterns)
    except (OSError, duckdb.IOException):
        # No room or no permission for a cache (a read-only home, a full disk): the report
        # does not need one, so load into memory as --no-cache would.
        con = connect()
        load_into(con, trace, schema, progress, patterns)
        return con
    _drop_older(target)
    return connect(target, read_only=True)


def _build(
    target: Path, trace: Path, schema: SourceSchema, progress: Progress | None, patterns: Patterns
) -> None:
    """Write the cache under a unique temporary name and rename it into place: a crash leaves
    only a stray temporary file, and two concurrent runs each build their own, the last wins.
    """
    from nsysreport.load import connect, load_into

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()  # DuckDB creates the file itself
    try:
        con = connect(tmp)
        load_into(con, trace, schema, progress, patterns)
        con.execute("CHECKPOINT")
        con.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)


def _drop_older(current: Path) -> None:
    """Remove this trace's caches (tables and reports) for earlier versions of the file or other
    patterns; reports of the same version with other model options stay."""
    where, what = current.name.split("-")[:2]
    what = what.removesuffix(DB_SUFFIX)
    for suffix in (DB_SUFFIX, REPORT_SUFFIX):
        for other in current.parent.glob(f"{where}-*{suffix}"):
            if other.name.split("-")[1].removesuffix(suffix) != what:
                other.unlink(missing_ok=True)


def clear() -> int:
    """Delete every cache file; returns how many there were."""
    folder = cache_dir()
    patterns = (f"*{DB_SUFFIX}", f"*{REPORT_SUFFIX}", ".*.tmp*")
    files = [f for p in patterns for f in folder.glob(p)] if folder.is_dir() else []
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)
