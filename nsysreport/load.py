"""Open a trace (an Nsight Systems SQLite or Parquet export, a report that nsys exports first,
or a PyTorch profiler JSON trace) as a DuckDB connection with raw tables, derived tables and
views: the loading pipeline's entry point.

The pipeline, one module a step: nsysreport.trace_file checks the file and lists its tables;
nsysreport.sqlite_copy (nsysreport.parquet_dir for a Parquet export, nsysreport.kineto for
JSON) copies the columns nsysreport.raw_tables
declares into DuckDB; nsysreport.database makes the connection and derives the timelines; and
nsysreport.trace_cache keeps the result on disk for the next run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.database import connect, load_into
from nsysreport.nsys_export import exported, is_report
from nsysreport.patterns import Patterns
from nsysreport.trace_cache import open_cached
from nsysreport.trace_file import check_file, inspect_trace

if TYPE_CHECKING:
    import duckdb

    from nsysreport.sqlite_copy import Progress


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
    if is_report(path):
        check_file(path)  # no nsys on PATH: the one-line error with the export command
        path = exported(path)  # an .nsys-rep: its export, made once in the cache
    schema = inspect_trace(path)  # bad input fails the same way with or without a cache
    if cache:
        return open_cached(path, schema, patterns, progress)
    con = connect()
    load_into(con, path, schema, progress, patterns)
    return con
