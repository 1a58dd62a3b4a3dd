"""The trace cache: a trace's loaded DuckDB database kept on disk (nsysreport.cache_files names
it) and reused while the trace and the options are unchanged, built under a temporary name and
renamed into place; loaded into memory instead when no cache can be written."""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.cache_files import cache_dir, cache_path, drop_older, remove_stale, temp_prefix
from nsysreport.database import connect, load_into
from nsysreport.errors import TraceError
from nsysreport.queries import keep_results

if TYPE_CHECKING:
    # duckdb: 0.08 s of start-up (python -X importtime), imported where the cache is opened: a
    # warm run, which writes the pages it kept, opens no database.
    import duckdb

    from nsysreport.patterns import Patterns
    from nsysreport.source_schema import SourceSchema
    from nsysreport.sqlite_copy import Progress


def open_cached(
    trace: Path, schema: SourceSchema, patterns: Patterns, progress: Progress | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the trace's cache, built first when missing or unreadable.

    Without room or permission for a cache (a read-only home, a full disk) the trace is loaded
    into memory, as --no-cache would: the report never needs the cache, and a failure of the
    cache is never reported as one of the trace.
    """
    import duckdb

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
    except duckdb.OutOfMemoryException:
        raise  # loading into memory instead would need more of it (cli._run says so)
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
            # Written to disk first, the tables' blocks can be evicted while the queries
            # whose results are kept run (at 5M kernels they ran out of the memory limit).
            con.checkpoint()
            keep_results(con)
            con.checkpoint()
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with suppress(OSError):
                leftover.unlink(missing_ok=True)
