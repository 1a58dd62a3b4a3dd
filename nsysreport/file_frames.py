"""One loaded trace analysed alone, as frames: every report query's rows, keyed by pid and
device_id, and what the file says of its ranks, its clock and its capture. Nothing here is
said across GPUs of different files: nsysreport.report_builder does that, once, over the
stacked frames of one file or of many (a worker of a multi-file run sends these back)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport.align import session_epoch
from nsysreport.model import TraceInfo
from nsysreport.queries import run_query
from nsysreport.ranks import FileRanks, read_file_ranks
from nsysreport.sections.capture import CaptureFacts, read_facts
from nsysreport.sections.gpu_breakdown import gap_top_rows
from nsysreport.sections.quality import DataQuality, build_quality
from nsysreport.sections.timeline import DEFAULT_ACTIVITIES

if TYPE_CHECKING:
    import duckdb
    import polars as pl

# The report queries whose rows the builder reads (each one's header says what a row is).
FRAME_QUERIES = (
    "gpu_rank",
    "gpu_hardware",
    "gpu_breakdown",
    "gap_summary",
    "gap_histogram",
    "graph_layer_gap",
    "step_breakdown",
    "layer_summary",
    "collective_summary",
    "data_path_stage",
    "layer_collective",
    "gpu_metric_summary",
    "gpu_metric_ignored",
    "communicator_summary",
    "communicator_step",
    "communicator_layer",
    "communicator_straggler",
    "capture_diagnostic",
    "gpu_listed",
    "export_gaps",
    "launch_summary",
    "compute_op",
    "compute_step",
    "kernel_layer_total",
    "analysed_start",
)
# The queries that read op_call: without a recorded shape they have no row, and are not run
# (26 ms of a 0.72 s report on a sample trace, which hundreds of tests build).
SHAPED_QUERIES = ("compute_op", "compute_step")
# What the job-level analyses read of a file of several, on the aligned clock: its collective
# instances (clock alignment, the straggler analysis), and whole derived tables: per GPU and
# kernel name, every name (the top N is taken over all files' totals), and each stream
# channel's first collective instances (comm_match.sql, run again over all files').
JOB_QUERIES = ("collective_instances",)
JOB_TABLES = ("kernel_gpu_total", "comm_first")


@dataclass(frozen=True, slots=True)
class FileFrames:
    """One file's analysis, small enough to send between processes: no kernel-level rows but
    its collective instances (the straggler analysis and clock alignment match them)."""

    name: str  # the file as the report names it
    trace: TraceInfo
    frames: dict[str, pl.DataFrame]  # FRAME_QUERIES' results, `gap_top`; JOB_* with instances
    ranks: FileRanks
    epoch_ns: int | None  # UTC of the file's time 0, from its session start
    capture: CaptureFacts
    quality: DataQuality
    middle: dict[str, Any] | None  # activity_middle's row (the timeline's default window)


def file_frames(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    name: str,
    top: int,
    timeline_default: bool,
    instances: bool = True,
) -> FileFrames:
    """Every frame of the trace loaded in `con`: `top` gaps per GPU; `timeline_default`: no
    --timeline-step/--timeline-range, so the middle window may be the one drawn. Without
    `instances`, JOB_QUERIES and JOB_TABLES stay in `con` (a report of this file alone reads
    them there: report_builder.build_report)."""
    meta = run_query(con, "trace_info").rows()  # no row: the export says nothing of itself
    shaped = has_op_calls(con)
    frames = {
        query: run_query(con, query) if shaped or query not in SHAPED_QUERIES else _no_rows()
        for query in FRAME_QUERIES
    }
    frames["gap_top"] = gap_top_rows(con, top)
    if instances:
        frames.update({query: run_query(con, query) for query in JOB_QUERIES})
        frames.update({table: con.table(table).pl() for table in JOB_TABLES})
    session = run_query(con, "session_start").rows()
    return FileFrames(
        name=name,
        trace=TraceInfo(str(path), *(meta[0] if meta else (None,) * 6)),
        frames=frames,
        ranks=read_file_ranks(con),
        epoch_ns=session_epoch(*session[0]) if session else None,
        capture=read_facts(con),
        quality=build_quality(con, name),
        middle=activity_middle(con, timeline_default and frames["step_breakdown"].is_empty()),
    )


def has_op_calls(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the trace recorded any operator's shapes (queries/load/side_tables.sql)."""
    return con.execute("SELECT EXISTS (SELECT 1 FROM op_call)").fetchone() == (True,)


def _no_rows() -> pl.DataFrame:
    import polars as pl  # lazy: see the TYPE_CHECKING import above

    return pl.DataFrame()


def activity_middle(con: duckdb.DuckDBPyConnection, middle_drawn: bool) -> dict[str, Any] | None:
    """activity_middle's row: the trace's first and last activity, and the window of
    DEFAULT_ACTIVITIES in its middle when that is the window drawn (it sorts the activities),
    else the whole span (activity_extent's row, kept in a cached trace); None without
    activity."""
    if middle_drawn:
        rows = run_query(con, "activity_middle", {"activities": DEFAULT_ACTIVITIES}).to_dicts()
        return rows[0] if rows else None
    extent = run_query(con, "activity_extent").to_dicts()
    if not extent:
        return None
    return {**extent[0], "start_ns": extent[0]["first_ns"], "end_ns": extent[0]["last_ns"]}
