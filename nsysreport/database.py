"""The DuckDB database of one trace: a connection with the tool's settings (in memory or a cache
file), filled by `load_into` with the trace's raw tables, then its derived tables and views."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.errors import OptionError, TraceError
from nsysreport.kineto import NEXT_STEP, copy_kineto
from nsysreport.nvtx_payload import load_nccl_payloads
from nsysreport.parquet_dir import copy_parquet
from nsysreport.patterns import Patterns
from nsysreport.queries import create_views, run_loader
from nsysreport.raw_tables import create_raw_tables
from nsysreport.source_schema import KINETO_SCHEMA, SourceSchema
from nsysreport.sqlite_copy import Progress, copy_tables
from nsysreport.workers import THREADS_VARIABLE, default_jobs

if TYPE_CHECKING:
    # duckdb: 0.08 s of start-up (python -X importtime), imported where a connection is made: a
    # warm run, which writes the pages it kept, opens no database.
    import duckdb

# The message after the tables: the views and derived tables are made (a step, not a table).
DERIVING = "deriving timelines"


def connect(database: Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB (in memory, or a cache file) that can never try to download an extension."""
    import duckdb

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
            # (DuckDB's default is 80% of RAM); the process's peak RSS is about 0.4 GiB above
            # it (Python, the query results, what DuckDB does not count). A 5M-kernel report
            # (3 runs each): cold 21.0-23.1 s, 1258-1385 MiB peak at 1 GiB; 21.9-23.5 s,
            # 1106-1187 MiB at 768 MiB; 26.4-26.7 s, 834-895 MiB at 512 MiB. --no-cache:
            # 1448-1541 MiB at 1 GiB, 1193-1281 MiB at 768 MiB; in memory the loaded tables
            # count against the limit, and grouped_island spills: 5.3-5.4 s -> 6.6-6.8 s. At
            # 1M kernels (emit_nvtx too) a report peaks at 440-490 MiB, below either limit.
            "memory_limit": _memory_limit(),
            # An in-memory database spills to ./.tmp by default: never beside the user's files.
            # Nor into a folder other processes share: two reports spilling at once into one
            # fixed folder overwrote each other's duckdb_temp_storage files (IO Error: could
            # not read enough bytes), and another user's folder of that name blocked it.
            "temp_directory": str(spill_folder()),
        },
    )
    run_loader(con, "connection_settings")
    return con


_process_spill: tuple[int, Path] | None = None  # (pid, folder) of this process's spill folder


def spill_folder() -> Path:
    """A new empty folder for one connection's spill, inside this process's private folder
    (made 0700 by mkdtemp, removed when the process exits, after an error too). One folder a
    connection: two databases of one process spilling into one folder would collide as well."""
    global _process_spill
    if _process_spill is None or _process_spill[0] != os.getpid():
        folder = Path(tempfile.mkdtemp(prefix="nsysreport-spill-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _process_spill = (os.getpid(), folder)
    return Path(tempfile.mkdtemp(prefix="db-", dir=_process_spill[1]))


MEMORY_VARIABLE = "NSYSREPORT_MEMORY_LIMIT"  # DuckDB's memory limit, e.g. 2GiB (docs/metrics.md)


def out_of_memory_message(inputs: Sequence[object], exc: BaseException) -> str:
    """One line for a report that ran out of memory: which inputs, the limit, what to do."""
    names = ", ".join(str(i) for i in inputs[:3]) + (
        f" and {len(inputs) - 3} more" if len(inputs) > 3 else ""
    )
    limit = _memory_limit() if os.environ.get(MEMORY_VARIABLE) else f"{_memory_limit()} (default)"
    return (
        f"{names or 'the report'}: ran out of memory ({_first_line(exc)}); "
        f"DuckDB's limit is {limit}: raise it with {MEMORY_VARIABLE}=4GiB, or run fewer "
        "reports at once"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _memory_limit() -> str:
    """DuckDB's memory limit: $NSYSREPORT_MEMORY_LIMIT when set, else a quarter of RAM, at most
    768 MiB and at least 256 MiB."""
    chosen = os.environ.get(MEMORY_VARIABLE, "").strip()
    if chosen:
        if not re.fullmatch(r"\d+(\.\d+)?\s*([KMGT]i?B|B)", chosen, re.IGNORECASE):
            raise OptionError(f"{MEMORY_VARIABLE}={chosen!r}: expected a size such as 2GiB")
        return chosen
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): assume enough RAM
        ram = 4 << 30
    return f"{min(max(ram // 4, 256 << 20), 768 << 20) >> 20}MiB"


def load_into(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    progress: Progress | None,
    patterns: Patterns,
) -> None:
    """Copy the raw tables of `path` into `con`, then create the derived tables and views;
    a trace whose kernels are all unusable is refused (TraceError) once they are made."""
    if schema.kind == "kineto":
        if progress:
            progress("traceEvents")
        create_raw_tables(con)
        copy_kineto(con, path)
    elif schema.kind == "parquetdir":
        copy_parquet(con, path, schema, progress, patterns.role_pattern())
    else:
        copy_tables(con, path, schema, progress, patterns.role_pattern())
        run_loader(con, "old_gpu_list")  # nsys 2020-2021 named the GPUs' ids otherwise
    if schema.kind != "kineto":
        load_nccl_payloads(con, path, schema)  # exports made with --include-blobs=true
    # Which tables the file has, for what the report can say about the capture (whether it has
    # GPU metric tables, usable samples or not).
    run_loader(con, "source_table_names", {"names": sorted(schema.tables - KINETO_SCHEMA.tables)})
    # The GPU list numbered as the rows number the GPUs, where the evidence says it numbers
    # them otherwise (a profiler's visible-device ids); before any view joins the two.
    run_loader(con, "gpu_list_match")
    if progress:
        progress(DERIVING)
    create_views(con, patterns)
    _check_kernels(con, path, schema.kind == "kineto")


KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
SHOWN_REASONS = 3  # the message names the most common reasons, then how many more there are


def _check_kernels(con: duckdb.DuckDBPyConnection, path: Path, kineto: bool) -> None:
    """Refuse a trace that has kernels of which none can be used (queries/load/
    no_usable_kernel.sql): every analysis would stand on nothing. Checked while loading, so
    that such a trace is never cached and every command and run fails alike."""
    rows = run_loader(con, "no_usable_kernel").fetchall()
    if not rows:
        return
    kernels = [(str(why), int(n)) for source, why, n in rows if source == KERNEL_TABLE]
    events = [(str(why), int(n)) for source, why, n in rows if source != KERNEL_TABLE]
    total = sum(count for _, count in kernels)
    which = "its one kernel was" if total == 1 else f"all {total:,} kernels were"
    message = f"{path}: no kernel can be used: {which} skipped ({_reasons(kernels)})"
    if events:
        more = sum(count for _, count in events)
        were = "GPU event was" if more == 1 else "GPU events were"
        message += f"; {more:,} more {were} not read ({_reasons(events)})"
    next_step = NEXT_STEP if kineto else "export it again with nsys export --type sqlite"
    if not events and {why for why, _ in kernels} == {STRAY}:
        # Saving or exporting again would write the same devices: say what the file holds.
        next_step = _strays(con, "it" if total == 1 else "they")
    raise TraceError(f"{message}; {next_step}")


STRAY = "device not in the trace"


def _strays(con: duckdb.DuckDBPyConnection, kernels: str) -> str:
    """Why the devices the kernels ran on are strays (queries/load/gpu_list_match.sql), in the
    file's own numbers: `it ran on device 7, which the GPU list (0) does not hold, ...`."""
    strays, rows, listed, busiest, most, few = run_loader(con, "stray_device").fetchone() or ()
    devices = f"devices {strays}" if "," in str(strays) else f"device {strays}"
    said = f"{kernels} ran on {devices}, which the GPU list ({listed}) does not hold"
    if few:
        row = "GPU row" if rows == 1 else "GPU rows"
        return (
            f"{said}, with {rows:,} {row} against device {busiest}'s {most:,}: too few for a "
            "GPU, so nsysreport takes them for damaged rows"
        )
    return (
        f"{said}, though the other rows ran on devices it holds: beside such a list, a device "
        "it lacks, with fewer rows than a listed GPU or one GPU more than it lists, is taken "
        "for damaged rows"
    )


def _reasons(counts: list[tuple[str, int]]) -> str:
    """`no stream id`, or `8 no stream id, 4 no device id, 1 more reason`: most common first."""
    if len(counts) == 1:
        return counts[0][0]
    shown = [f"{count:,} {reason}" for reason, count in counts[:SHOWN_REASONS]]
    rest = len(counts) - SHOWN_REASONS
    if rest > 0:
        shown.append(f"{rest} more reason" + ("s" if rest > 1 else ""))
    return ", ".join(shown)
