"""A per-trace DuckDB file cache of the loaded and derived tables, so a second run skips loading."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport import __version__

if TYPE_CHECKING:
    import duckdb

    from nsysreport.load import Progress, SourceSchema
    from nsysreport.patterns import Patterns

# Bump when the cached tables change shape (a new column, a new derived table): old files then
# miss and are replaced. The tool version is in the key too, so releases never share files.
CACHE_FORMAT = 2


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/nsysreport, else ~/.cache/nsysreport: never beside or inside the trace."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsysreport"


def cache_path(trace: Path, patterns: Patterns) -> Path:
    """The cache file for this trace as it is now (path, size, mtime) and these options."""
    stat = trace.stat()
    where = hashlib.sha256(str(trace.resolve()).encode()).hexdigest()[:16]
    what = hashlib.sha256(
        "|".join(
            (
                str(stat.st_size),
                str(stat.st_mtime_ns),
                str(CACHE_FORMAT),
                __version__,
                repr(patterns),
            )
        ).encode()
    ).hexdigest()[:16]
    return cache_dir() / f"{where}-{what}.duckdb"


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
    """Remove this trace's caches for earlier versions of the file or other options."""
    prefix = current.name.split("-", 1)[0]
    for other in current.parent.glob(f"{prefix}-*.duckdb"):
        if other != current:
            other.unlink(missing_ok=True)


def clear() -> int:
    """Delete every cache file; returns how many there were."""
    folder = cache_dir()
    files = list(folder.glob("*.duckdb")) + list(folder.glob(".*.tmp*")) if folder.is_dir() else []
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)
