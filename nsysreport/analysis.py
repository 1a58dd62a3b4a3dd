"""From trace files, or a saved report JSON, to the report model: the one way in for the
command line, compare, gate and the Python API."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.database import DERIVING
from nsysreport.inputs import expand_inputs
from nsysreport.load import open_trace
from nsysreport.model import Report
from nsysreport.model_json import saved_json
from nsysreport.multi import build_multi_report
from nsysreport.patterns import Patterns
from nsysreport.perfetto import trace_json
from nsysreport.report_builder import build_report
from nsysreport.trace_file import check_file
from nsysreport.user_facts import Facts
from nsysreport.workers import default_jobs

if TYPE_CHECKING:
    import duckdb

Progress = Callable[[str], None]
Window = tuple[int | None, int | None]  # --timeline-range: ns after the first activity


def analyse(
    traces: str | Path | Sequence[str | Path],
    patterns: Patterns | None = None,
    top: int = 10,
    timeline_step: str | None = None,
    timeline_range: Window = (None, None),
    cache: bool = False,
    jobs: int | None = None,
    scheduler: str | None = None,
    align: bool = True,
    progress: Progress | None = None,
    facts: Facts | None = None,
) -> Report:
    """The report of one trace, or one report over several (files, a directory of per-rank
    files, a quoted glob); nsys SQLite exports or PyTorch profiler JSON traces.

    `facts`: the data path's link peaks and the model's shape, as --link-peak and --model.
    `cache`: keep the loaded tables in the user's cache directory and reuse them while the trace
    is unchanged. Several files: `jobs` worker processes (default: one per core) or a Dask
    `scheduler`; `align`: put their clocks on one time line.
    """
    named = [traces] if isinstance(traces, str | Path) else traces
    paths = expand_inputs([str(p) for p in named])
    patterns = patterns or Patterns()
    if len(paths) == 1:
        return analyse_one(
            paths[0], patterns, top, timeline_step, timeline_range, cache, progress, facts
        )
    for path in paths:
        check_file(path)  # every bad file fails before any work starts
    return build_multi_report(
        paths,
        patterns,
        top,
        timeline_step,
        timeline_range,
        jobs=jobs or default_jobs(),
        scheduler=scheduler,
        align=align,
        cache=cache,
        progress=progress,
        facts=facts,
    )


def analyse_one(
    path: Path,
    patterns: Patterns,
    top: int = 10,
    timeline_step: str | None = None,
    timeline_range: Window = (None, None),
    cache: bool = False,
    progress: Progress | None = None,
    facts: Facts | None = None,
) -> Report:
    """The report of the one trace at `path`; `facts`: what the user tells of the hardware
    and the model (--link-peak, --model)."""
    con = load_one(path, patterns, cache, progress)
    return build_report(con, path, top, timeline_step, timeline_range, facts=facts)


def load_one(
    path: Path, patterns: Patterns, cache: bool = False, progress: Progress | None = None
) -> duckdb.DuckDBPyConnection:
    """The loaded trace at `path`, ready for the report queries."""

    def loading(name: str) -> None:
        """Each table's name as it loads, then the DERIVING step."""
        if progress is not None:
            progress(name if name == DERIVING else f"loading {name}")

    con = open_trace(path, None if progress is None else loading, patterns, cache)
    if progress is not None:
        progress("analysing")
    return con


def open_report(path: Path, patterns: Patterns | None = None, cache: bool = False) -> Report:
    """A saved `report --json` file read back (Report.from_json), else the report of the trace
    or of the directory of per-rank files at `path` (compare and gate take either)."""
    saved = saved_json(path)
    if saved is not None:
        return Report.from_json(saved, path)
    return analyse(path, patterns, cache=cache)


def write_perfetto(
    trace: str | Path,
    path: str | Path,
    patterns: Patterns | None = None,
    timeline_step: str | None = None,
    timeline_range: Window = (None, None),
    cache: bool = False,
) -> Path:
    """Write the Perfetto trace of one trace file to `path` (what `report --perfetto` writes,
    nsysreport.perfetto) and return that path."""
    source, target = Path(trace), Path(path)
    con = load_one(source, patterns or Patterns(), cache)
    report = build_report(con, source, timeline_step=timeline_step, timeline_range=timeline_range)
    chosen = timeline_step is not None or timeline_range != (None, None)
    target.write_text(trace_json(con, report, chosen), encoding="utf-8")
    return target
