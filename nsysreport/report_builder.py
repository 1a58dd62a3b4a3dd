"""The one report builder: the report of one trace file or of many, from their frames stacked.

Each file is analysed alone (nsysreport.file_frames: every report query's rows, keyed by pid and
device_id). Here the frames of every file are read as one stack, a file after another, each
row with its `file` and on the reference clock, and turned into the report model once; every
figure that spans GPUs (group sizes, stragglers, communicators matched across files, top
kernels, the verdict) is computed over all of them at once. A report of one file is the same
call with one file, its own ranks and its own clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport import __version__
from nsysreport.align import FileClock
from nsysreport.critical_path import Walk, critical_path
from nsysreport.database import connect
from nsysreport.file_frames import FileFrames, activity_middle, file_frames
from nsysreport.model import Report, has_layers
from nsysreport.queries import run_query, view_files
from nsysreport.ranks import RankInfo
from nsysreport.sections.capture import build_capture, merged_diagnostics, summed, unused_gpus
from nsysreport.sections.collectives import (
    StragglerGpu,
    Stragglers,
    build_collectives,
    regroup,
    stragglers_of,
)
from nsysreport.sections.communicators import (
    CommunicatorReport,
    CommunicatorStep,
    build_communicators,
    matched_across,
    role_sentence,
    role_summaries,
    with_roles,
)
from nsysreport.sections.compute import (
    build_compute,
    build_model_compute,
    matrix_kernel_ns,
    roof_quality,
)
from nsysreport.sections.critical_path import CriticalPath, build_critical_path
from nsysreport.sections.data_path import build_data_path, hardware
from nsysreport.sections.gpu_breakdown import GpuReport, build_gpus, with_top_gaps
from nsysreport.sections.gpu_metrics import build_gpu_metrics
from nsysreport.sections.kernel_layers import build_kernel_layers
from nsysreport.sections.kernels import build_kernels
from nsysreport.sections.launches import build_launches
from nsysreport.sections.layers import build_layers
from nsysreport.sections.quality import DataQuality, merge_quality
from nsysreport.sections.steps import StepReport, build_steps
from nsysreport.sections.timeline import MAX_ROWS, Timeline, assemble, choose_window
from nsysreport.sections.tp_structure import build_tp_structure
from nsysreport.sections.verdict import Bottleneck, bottleneck
from nsysreport.user_facts import Facts

if TYPE_CHECKING:
    # polars is imported where frames are stacked: 0.1 s of start-up (python -X importtime)
    # that a warm run, which writes the pages it kept, never needs.
    import duckdb
    import polars as pl

GpuKey = tuple[str, int, int]  # (file, pid, device_id)
Ranks = Mapping[GpuKey, tuple[int, str]]  # -> (rank, where it came from)
# A timeline's rows of each file: given per file a window [lo, hi) on its own clock and the
# rows it may return at most, timeline_window's rows.
Fetch = Callable[[list[tuple[int, int, int]]], list[list[dict[str, Any]]]]


def build_report(
    con: duckdb.DuckDBPyConnection,
    trace_path: Path,
    top: int = 10,
    timeline_step: str | None = None,
    timeline_range: tuple[int | None, int | None] = (None, None),
    facts: Facts | None = None,
) -> Report:
    """The report of the one trace loaded in `con`: its frames through the one builder, with
    the ranks the file gives its GPUs (gpu_rank.sql) and its own clock."""
    default = timeline_step is None and timeline_range == (None, None)
    part = file_frames(con, trace_path, trace_path.name, top, default, instances=False)
    ranks = own_ranks(part.name, part.frames["gpu_rank"])
    report = build([part], ranks, top, facts or Facts(), job=_own_tables(con, part.name))
    spans = run_query(con, "step_span").to_dicts()
    timeline = _own_timeline(
        con, part.name, part.middle, ranks, spans, timeline_step, timeline_range
    )
    # Without steps the path's window is the default timeline's middle one, whatever is drawn.
    middle = part.middle if default or spans else activity_middle(con, True)
    start = analysed_start([part.frames["analysed_start"]], [0])
    path = _own_critical_path(con, ranks, report.steps, spans, middle, start)
    return replace(report, timeline=timeline, critical_path=path)


def _own_critical_path(
    con: duckdb.DuckDBPyConnection,
    ranks: Ranks,
    steps: Sequence[StepReport],
    spans: list[dict[str, Any]],
    middle: dict[str, Any] | None,
    start: int | None = None,
) -> CriticalPath | None:
    """The critical path of the trace loaded in `con` through the window the timeline draws by
    default, whatever the display options: the median step (`spans`: step_span's rows), else
    the middle of the trace (`middle`: activity_middle's row of it); never before `start`
    (analysed_start). (A report of several files walks each file's part in its worker:
    nsysreport.path_across_files.)"""
    if middle is None:
        return None
    basis, step, lo, hi = choose_window(spans, middle, None, None, None)
    lo = lo if start is None else max(lo, min(start, hi))
    file = next(iter(ranks))[0] if ranks else ""
    path = critical_path(con, lo, hi, file)
    if path is None:
        return None
    return critical_path_section(path, steps, spans, ranks, basis, step)


def critical_path_section(
    path: Walk,
    steps: Sequence[StepReport],
    spans: list[dict[str, Any]],
    ranks: Ranks,
    basis: str,
    step: str | None,
) -> CriticalPath:
    """The report's section of a walked path (one file's, or stitched across files)."""
    rank = {key: r for key, (r, _) in ranks.items()}
    return build_critical_path(path, rank, basis, step, _span_what_if(steps, spans, path, step))


def job_window(
    middles: Sequence[tuple[str, dict[str, Any] | None]],
    offsets: Sequence[int],
    spans: list[dict[str, Any]],
) -> tuple[str, str | None, int, int] | None:
    """The window the timeline draws by default, over all files (aligned): the median step
    (`spans`: step_span's rows of the job), else the reference file's middle window (`middles`:
    each file's name and activity_middle row). None: no activity."""
    known = [(m, off) for (_, m), off in zip(middles, offsets, strict=True) if m is not None]
    if not known:
        return None
    return choose_window(spans, merged_middle(known), None, None, None)


def analysed_start(frames: Sequence[pl.DataFrame], offsets: Sequence[int]) -> int | None:
    """Where the job's analysis starts (None: from its first activity): the latest cut of any
    GPU whose first collective waited for a late-starting rank (`frames`: each file's
    analysed_start rows, `offsets` their clocks'). Before it not every rank was traced, so no
    critical path walks there."""
    cuts = [c + off for f, off in zip(frames, offsets, strict=True) for c in f["cut_ns"]]
    return max(cuts, default=None)


def merged_middle(middles: Sequence[tuple[dict[str, Any], int]]) -> dict[str, Any]:
    """activity_middle's row of the job from each file's (with its clock offset): the first
    and last activity over all files, the reference file's middle window."""
    ref, ref_off = middles[0]
    return {
        "first_ns": min(m["first_ns"] + off for m, off in middles),
        "last_ns": max(m["last_ns"] + off for m, off in middles),
        "start_ns": ref["start_ns"] + ref_off,
        "end_ns": ref["end_ns"] + ref_off,
    }


def _span_what_if(
    steps: Sequence[StepReport], spans: list[dict[str, Any]], path: Walk, step: str | None
) -> dict[str, int] | None:
    """The span-based what-if of the step the path walks, on the GPU where it ends, by the
    path's what-if change each matches (None: the window is not a step)."""
    ordinal = next((s["step_ordinal"] for s in spans if s["name"] == step), None)
    mine = next(
        (s for s in steps if (s.file, s.pid, s.device_id) == path.end_gpu and s.ordinal == ordinal),
        None,
    )
    if step is None or mine is None:
        return None
    return {
        "compute_2x": mine.what_if.compute_2x_ns,
        "comm_hidden": mine.what_if.perfect_overlap_ns,
    }


def own_ranks(file: str, gpu_rank: pl.DataFrame) -> dict[GpuKey, tuple[int, str]]:
    """The ranks one file alone gives its GPUs: gpu_rank.sql's (MPI rank, else position)."""
    return {
        (file, pid, dev): (rank, "gpu_rank")
        for pid, dev, rank in gpu_rank.select("pid", "device_id", "rank").rows()
    }


def with_display(
    con: duckdb.DuckDBPyConnection,
    report: Report,
    top: int = 10,
    timeline_step: str | None = None,
    timeline_range: tuple[int | None, int | None] = (None, None),
) -> Report:
    """`report` (a one-file report built with other display options) with the parts that
    --top, --timeline-step and --timeline-range choose made again from its loaded trace: each
    GPU's longest gaps, the top kernels and the timeline. Everything else depends on the trace,
    the patterns and the user's facts alone, so it is what build_report(con, path, top, ...)
    would build (tests/test_cache.py checks the pages and JSON against a fresh run's), and a
    run with another display option skips every other query."""
    default = timeline_step is None and timeline_range == (None, None)
    file = Path(report.traces[0].path).name  # as build_report names it
    ranks = own_ranks(file, run_query(con, "gpu_rank"))
    middle = activity_middle(con, default and not report.steps)
    spans = run_query(con, "step_span").to_dicts()
    return replace(
        report,
        gpus=with_top_gaps(con, report.gpus, top),
        top_kernels=build_kernels(con, top),
        timeline=_own_timeline(con, file, middle, ranks, spans, timeline_step, timeline_range),
    )


def _own_timeline(
    con: duckdb.DuckDBPyConnection,
    file: str,
    middle: dict[str, Any] | None,
    ranks: Ranks,
    spans: list[dict[str, Any]],
    step: str | None,
    timeline_range: tuple[int | None, int | None],
) -> Timeline | None:
    """build_timeline for the one trace loaded in `con`: its own step spans (step_span's rows)
    and rows."""

    def fetch(windows: list[tuple[int, int, int]]) -> list[list[dict[str, Any]]]:
        return [timeline_rows(con, *window) for window in windows]

    return build_timeline([(file, middle)], [0], ranks, spans, fetch, step, timeline_range)


def timeline_rows(
    con: duckdb.DuckDBPyConnection, lo: int, hi: int, max_rows: int
) -> list[dict[str, Any]]:
    """One trace's timeline rows in [lo, hi) of its own clock."""
    params = {"start_ns": lo, "end_ns": hi, "max_rows": max_rows}
    return run_query(con, "timeline_window", params).to_dicts()


def build(
    files: Sequence[FileFrames],
    ranks: Ranks,
    top: int,
    facts: Facts,
    clocks: Sequence[FileClock] | None = None,
    job: JobTables | None = None,
) -> Report:
    """The report over every GPU of `files` (the timeline aside: build_timeline). `ranks`:
    every GPU's rank; `clocks`: how each file's clock was aligned onto the first's, None for
    one file alone (on its own clock, its ranks and alignment not shown); `job`: where the
    job-level queries read every file's rows, None: tables made of the files' frames."""
    several = clocks is not None
    offsets = [c.offset_ns for c in clocks] if clocks is not None else [0] * len(files)

    def rows(name: str, *shift: str) -> Iterator[dict[str, Any]]:
        """Every file's rows of frame `name`, a file after another, each with its `file`, the
        `shift` columns on the reference clock. One row at a time: a list of every file's rows
        as dicts would hold two to three times the model they become (64 files, 32k steps)."""
        for f, off in zip(files, offsets, strict=True):
            for row in f.frames[name].iter_rows(named=True):
                row["file"] = f.name
                for column in shift:
                    if off and row[column] is not None:
                        row[column] += off
                yield row

    rank = {k: v[0] for k, v in ranks.items()}
    labels = {
        (r["file"], r["pid"], r["device_id"]): (
            rank[(r["file"], r["pid"], r["device_id"])],
            r["host"],
            r["gpu_name"],
        )
        for r in rows("gpu_rank")
    }
    gpus = build_gpus(
        rows("gpu_breakdown", "first_start_ns", "last_end_ns"),
        rows("gap_summary"),
        rows("gap_histogram"),
        rows("gap_top", "start_ns"),
        rows("graph_layer_gap"),
        labels,
        top,
    )
    steps, step_stats = build_steps(rows("step_breakdown", "start_ns", "end_ns"), rank)
    layers, layers_across = build_layers(rows("layer_summary"), rank)
    collectives = build_collectives(rows("collective_summary"), rank)
    if several:
        # A collective's group spans the files; the ranks named tell whether they hold the job.
        collectives = regroup(collectives, len(gpus), max(rank.values(), default=-1) + 1)
    data_path = build_data_path(
        rows("data_path_stage"),
        rank,
        collectives,
        hardware(rows("gpu_hardware")),
        facts.link_peaks,
        _hosts_per_op(gpus, collectives),
    )
    tp = build_tp_structure(rows("layer_collective"), rank, collectives, layers, facts.model)
    with _stacked_tables(files, offsets, ranks) if job is None else nullcontext(job) as tables:
        stragglers = _stragglers(tables, ranks)
        late_members = _late_members(tables, ranks)
        top_kernels = build_kernels(tables.con, top)
        matrix_ns = matrix_kernel_ns(tables.con)
    launches = build_launches(rows("launch_summary"), rank)
    compute = build_compute(
        rows("compute_op"),
        rows("compute_step"),
        {key: gpu_name for key, (_, _, gpu_name) in labels.items()},
        {((s.file, s.pid, s.device_id), s.ordinal): s.step_time_ns for s in steps},
        {(g.file, g.pid, g.device_id): g.span_ns for g in gpus},
        matrix_ns,
        facts.peak_tflops,
        facts.link_peaks.get("hbm"),
    )
    if compute is None and facts.model is not None:
        compute = build_model_compute(
            facts.model,
            layers,
            tp,
            {key: gpu_name for key, (_, _, gpu_name) in labels.items()},
            {(g.file, g.pid, g.device_id): g.span_ns for g in gpus},
            facts.peak_tflops,
        )
    gpu_metrics, gpu_metrics_ignored = build_gpu_metrics(
        rows("gpu_metric_summary"), rows("gpu_metric_ignored"), rank
    )
    comms, comm_steps, comm_layers = build_communicators(
        rows("communicator_summary"),
        rows("communicator_step"),
        rows("communicator_layer"),
        rows("communicator_straggler"),
        rank,
    )
    if several:
        matches = _stream_matches(files, offsets, ranks)
        comms, comm_steps, comm_layers = matched_across(
            comms, comm_steps, comm_layers, matches, ranks, len(gpus)
        )
    comms_t, comm_steps_t, comm_layers_t = with_roles(
        sorted(comms, key=lambda c: (*_order(c), -c.total_ns, c.channel)),
        sorted(comm_steps, key=lambda c: (*_order(c), c.step_ordinal, c.communicator)),
        sorted(comm_layers, key=lambda c: (*_order(c), c.layer, c.communicator)),
        facts.comm_groups,
        has_layers(layers),
    )
    verdict = with_role_sentence(
        bottleneck(
            gpus,
            layers_across,
            collectives,
            stragglers,
            data_path,
            max((f.trace.duration_ns or 0 for f in files), default=0),
            kineto=all(f.trace.is_kineto for f in files),
        ),
        comms_t,
        comm_steps_t,
        steps,
        gpus,
    )
    infos = [
        RankInfo(g.rank, g.file, g.pid, g.device_id, g.host, g.gpu_name, ranks[_key(g)][1])
        for g in gpus
    ]
    return Report(
        tool_version=__version__,
        traces=tuple(f.trace for f in files),
        gpus=gpus,
        steps=steps,
        step_stats=step_stats,
        layers=layers,
        layers_across=layers_across,
        collectives=tuple(collectives),
        stragglers=stragglers,
        top_kernels=top_kernels,
        bottleneck=verdict,
        ranks=tuple(sorted(infos, key=lambda i: (i.rank, i.file, i.pid, i.device_id)))
        if several
        else (),
        clocks=tuple(clocks) if clocks is not None else (),
        capture=build_capture(
            summed([f.capture for f in files]),
            verdict.graph_opaque_pct,
            kineto=all(f.trace.is_kineto for f in files),
            diagnostics=merged_diagnostics(rows("capture_diagnostic")),
            unused=unused_gpus(rows("gpu_listed"), {f.name: f.trace.host for f in files}),
            export_gaps=rows("export_gaps"),
            late_waits=[{**r, "rank": rank[_key_of(r)]} for r in rows("analysed_start")],
            late_members=late_members,
        ),
        quality=DataQuality(
            merge_quality((f.name, f.quality) for f in files).items
            + roof_quality(compute, rows("compute_op")).items
        ),
        data_path=data_path,
        tp_structure=tp,
        gpu_metrics=gpu_metrics,
        gpu_metrics_ignored=gpu_metrics_ignored,
        communicators=comms_t,
        communicator_steps=comm_steps_t,
        communicator_layers=comm_layers_t,
        launches=launches,
        compute=compute,
        kernel_layers=build_kernel_layers(rows("kernel_layer_total")),
    )


def _key(x: Any) -> GpuKey:
    return (x.file, x.pid, x.device_id)


def _key_of(row: Mapping[str, Any]) -> GpuKey:
    return (row["file"], row["pid"], row["device_id"])


def _order(x: Any) -> tuple[int, str, int, int]:
    return (x.rank, x.file, x.pid, x.device_id)


def with_role_sentence(
    verdict: Bottleneck,
    comms: Sequence[CommunicatorReport],
    comm_steps: Sequence[CommunicatorStep],
    steps: Sequence[StepReport],
    gpus: Sequence[GpuReport],
) -> Bottleneck:
    """The verdict, with a sentence on each role's exposure when two or more roles are told
    apart (one role adds nothing to the sentence on communication as a whole)."""
    spans = {(g.file, g.pid, g.device_id): g.span_ns for g in gpus}
    sentence = role_sentence(role_summaries(comms, comm_steps, steps, spans))
    return replace(verdict, summary=verdict.summary + sentence) if sentence else verdict


def _hosts_per_op(gpus: Sequence[GpuReport], collectives: Sequence[Any]) -> dict[str, int]:
    """Per collective op, how many hosts its GPUs are on (above 1: it rides the network)."""
    host = {(g.file, g.pid, g.device_id): g.host for g in gpus}
    seen: dict[str, set[str]] = {}
    for c in collectives:
        h = host.get((c.file, c.pid, c.device_id))
        if h:
            seen.setdefault(c.op, set()).add(h)
    return {op: len(hosts) for op, hosts in seen.items()}


@dataclass(frozen=True, slots=True)
class JobTables:
    """A DuckDB holding every file's collective instances (`collective`: op, ordinal, pid,
    device_id, start_ns on the reference clock) and per-GPU kernel totals
    (`kernel_gpu_total`), as the job-level queries (straggler_*, kernel_top) read them; `gpus`:
    each (pid, device_id) there to its GPU."""

    con: duckdb.DuckDBPyConnection
    gpus: Mapping[tuple[int, int], GpuKey]
    # The frame registered as `collective`, read a slice at a time (see _sliced_straggler_rows);
    # None: a table of `con`'s own, which DuckDB reads at once within its memory limit.
    instances: pl.DataFrame | None = None


def _own_tables(con: duckdb.DuckDBPyConnection, file: str) -> JobTables:
    """One file's database: its derived tables already are the job's tables."""
    gpus = run_query(con, "gpu_rank").select("pid", "device_id").rows()
    return JobTables(con, {(pid, dev): (file, pid, dev) for pid, dev in gpus})


@contextmanager
def _stacked_tables(
    files: Sequence[FileFrames], offsets: Sequence[int], ranks: Ranks
) -> Iterator[JobTables]:
    """The job's tables made of every file's frames, each GPU on a stand-in id."""
    import polars as pl

    stand_in = _stand_ins(ranks)
    totals = pl.concat(
        [_on_stand_ins(f.frames["kernel_gpu_total"], f.name, stand_in) for f in files]
    )
    instances = _aligned_instances(files, offsets, ranks)
    with _reading(collective=instances, kernel_gpu_total=totals) as con:
        yield JobTables(con, {(i, 0): key for key, i in stand_in.items()}, instances)


def _stragglers(tables: JobTables, ranks: Ranks) -> Stragglers:
    """The straggler analysis (queries/straggler_*.sql) over every file's collectives at once."""
    con = tables.con
    unmatched_rows = run_query(con, "straggler_unmatched").to_dicts()
    if tables.instances is not None:
        ops = {row["op"] for row in unmatched_rows}
        found = _sliced_straggler_rows(con, tables.instances, ops)
    else:
        found = {
            (r.pop("pid"), r.pop("device_id")): r
            for r in run_query(con, "straggler_gpu").to_dicts()
        }
    gpus = []
    for gpu, row in sorted(found.items()):
        file, pid, dev = tables.gpus[gpu]
        gpus.append(
            StragglerGpu(file=file, pid=pid, device_id=dev, rank=ranks[(file, pid, dev)][0], **row)
        )
    unmatched = []
    for row in unmatched_rows:
        file, pid, dev = tables.gpus[(row["pid"], row["device_id"])]
        unmatched.append(
            {**row, "file": file, "pid": pid, "device_id": dev, "rank": ranks[(file, pid, dev)][0]}
        )
    gpus.sort(key=lambda g: (g.rank, g.file, g.pid, g.device_id))
    return stragglers_of(tuple(gpus), tuple(unmatched))


def _late_members(tables: JobTables, ranks: Ranks) -> list[dict[str, Any]]:
    """late_start_rank's rows over every file's collectives at once, each with its GPU's
    file, pid, device_id and rank."""
    out = []
    for row in run_query(tables.con, "late_start_rank").to_dicts():
        file, pid, dev = tables.gpus[(row["pid"], row["device_id"])]
        out.append(
            {**row, "file": file, "pid": pid, "device_id": dev, "rank": ranks[(file, pid, dev)][0]}
        )
    return out


# straggler_gpu's windows hold every instance they read; run over this many instances at a
# time, the merging process's memory stays that of one slice (64 files of 20,000 collectives:
# 1.28M instances, +390 MB at once, bench_ranks.py).
SLICE_INSTANCES = 100_000


def _sliced_straggler_rows(
    con: duckdb.DuckDBPyConnection, collective: pl.DataFrame, unmatched_ops: set[str]
) -> dict[tuple[int, int], dict[str, Any]]:
    """straggler_gpu's rows per (pid, device_id), the query run in `con` over slices of the
    instances `collective` (registered there as the table `collective`), each registered in
    turn as that table.

    Instances are matched by (op, ordinal) alone, so those of disjoint sets of ordinals are
    independent: each slice holds the ordinals k with k % slices = i, of every op but those
    straggler_unmatched found (over all instances: counts that differ between GPUs). Within a
    slice every GPU of a matched op then holds the same ordinals, so straggler_gpu matches the
    same ops in it as over all instances, and per GPU the slices' counts and waits add up and
    the largest skew is the largest of theirs.
    """
    import polars as pl

    slices = max(1, -(-collective.height // SLICE_INSTANCES))
    matchable = ~pl.col("op").is_in(sorted(unmatched_ops))
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for i in range(slices):
        con.unregister("collective")
        con.register("collective", collective.filter(matchable & (pl.col("ordinal") % slices == i)))
        rows = run_query(con, "straggler_gpu").to_dicts()
        for row in rows:
            gpu = (row.pop("pid"), row.pop("device_id"))
            seen = out.get(gpu)
            if seen is None:
                out[gpu] = row
                continue
            for name in ("matched_instances", "last_arrivals", "wait_ns", "caused_wait_ns"):
                seen[name] += row[name]
            skews = [x for x in (seen["max_skew_ns"], row["max_skew_ns"]) if x is not None]
            seen["max_skew_ns"] = max(skews, default=None)
    con.unregister("collective")
    con.register("collective", collective)
    return out


def _stream_matches(
    files: Sequence[FileFrames], offsets: Sequence[int], ranks: Ranks
) -> dict[tuple[str, int, int, str], tuple[GpuKey, ...]]:
    """For each GPU's stream channel, the GPUs of every file whose channels end its collectives
    with it (queries/derived/comm_match.sql over all files' comm_first rows on the aligned
    clock: a channel's first instances, a few per GPU)."""
    import polars as pl

    stand_in = _stand_ins(ranks)
    keys = list(stand_in)
    firsts = pl.concat(
        [
            _on_stand_ins(
                f.frames["comm_first"], f.name, stand_in, end_ns=pl.col("end_ns") + offset
            )
            for f, offset in zip(files, offsets, strict=True)
        ]
    )
    sql = next(v.sql for v in view_files() if v.name == "comm_match")
    with _reading(comm_first=firsts) as con:
        con.execute(sql)
        rows = con.execute("SELECT pid, channel, members FROM comm_match").fetchall()
    out = {}
    for pid, channel, members in rows:
        gpus = tuple(keys[int(m.split(":")[0])] for m in members.split(","))
        out[(*keys[pid], channel)] = gpus
    return out


def _aligned_instances(
    files: Sequence[FileFrames], offsets: Sequence[int], ranks: Ranks
) -> pl.DataFrame:
    """Every file's collective instances as straggler_*.sql read them (op, ordinal, pid,
    device_id, start_ns, late_start), starts on the reference clock, each GPU on its stand-in
    id.

    The queries key GPUs by (pid, device_id); across files that pair can repeat, so each GPU
    gets a stand-in pid, its position in rank order, and device_id 0. Each file's instances
    leave its frames as they are taken: they are the largest thing the merging process holds
    (GPUs x collectives), and are never held twice.
    """
    import polars as pl

    stand_in = _stand_ins(ranks)
    frames = []
    for f, offset in zip(files, offsets, strict=True):
        instances = f.frames.pop("collective_instances")
        frames.append(
            _on_stand_ins(
                instances.select("op", "ordinal", "pid", "device_id", "start_ns", "late_start"),
                f.name,
                stand_in,
                start_ns=pl.col("start_ns") + offset,
                # DuckDB reads a categorical in place; a string column it copies.
                op=pl.col("op").cast(pl.Categorical),
            )
        )
        del instances
    return pl.concat(frames)


def _stand_ins(ranks: Ranks) -> dict[GpuKey, int]:
    """Every GPU of every file, in rank order, to its stand-in pid (its position) for when the
    files' rows meet in one query, which keys GPUs by (pid, device_id), a pair files can repeat
    (device_id is then 0)."""
    return {k: i for i, k in enumerate(sorted(ranks, key=lambda k: (ranks[k][0], k)))}


@contextmanager
def _reading(**frames: pl.DataFrame) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh DuckDB where each frame is a table of its name: the one-file queries then run
    over every file's rows at once."""
    con = connect()
    try:
        for name, frame in frames.items():
            con.register(name, frame)
        yield con
    finally:
        con.close()


def _on_stand_ins(
    frame: pl.DataFrame, file: str, stand_in: dict[GpuKey, int], **shifted: pl.Expr
) -> pl.DataFrame:
    """`frame` (one file's rows, keyed by pid and device_id) on the stand-in GPU ids."""
    import polars as pl

    mapping = pl.DataFrame(
        [(pid, dev, i) for (f, pid, dev), i in stand_in.items() if f == file],
        schema={"pid": pl.Int64, "device_id": pl.Int64, "gpu": pl.Int64},
        orient="row",
    )
    # The ids alone are joined: a join would copy every column, with_columns shares the others.
    gpu = frame.select("pid", "device_id").join(
        mapping, on=("pid", "device_id"), how="left", maintain_order="left"
    )["gpu"]
    moved = frame.with_columns(pid=gpu, device_id=pl.lit(0, pl.Int64), **shifted)
    return moved.drop_nulls("pid") if gpu.null_count() else moved  # a GPU no file ranked


def build_timeline(
    files: Sequence[tuple[str, dict[str, Any] | None]],
    offsets: Sequence[int],
    ranks: Ranks,
    spans: list[dict[str, Any]],
    fetch: Fetch,
    step: str | None,
    timeline_range: tuple[int | None, int | None],
) -> Timeline | None:
    """The timeline's window chosen over all files (aligned), its rows fetched from each:
    `step` (a name or its number), else the range counted from the first activity, else the
    median step, else the middle of the trace. `files`: each file's name and activity_middle
    row; `spans`: step_span's rows of the job, on the reference clock (step_spans). None: no
    activity."""
    middles = [(m, off) for (_, m), off in zip(files, offsets, strict=True) if m is not None]
    if not middles:
        return None
    middle = merged_middle(middles)
    basis, name, lo, hi = choose_window(spans, middle, step, *timeline_range)
    # Each file gets its share of the rows drawn, but never fewer than 200 (or the cap).
    share = max(min(200, MAX_ROWS), MAX_ROWS // len(files))
    results = fetch([(lo - off, hi - off, share) for off in offsets])
    rows: list[dict[str, Any]] = []
    window_rows, cut = 0, None
    for (file, _), off, found in zip(files, offsets, results, strict=True):
        mine = [
            {**r, "file": file, "start_ns": r["start_ns"] + off, "end_ns": r["end_ns"] + off}
            for r in found
        ]
        held = found[0]["window_rows"] if found else 0
        window_rows += held
        # The rows are the earliest by start time: when the window held more, every piece that
        # starts before the last start returned is there, so the drawing stops at that instant.
        if held > len(found):
            last = max(r["start_ns"] for r in mine)
            cut = last if cut is None else min(cut, last)
        rows += mine

    def rank_of(file: str | None, pid: int, device_id: int) -> int:
        return ranks[(file or "", pid, device_id)][0]

    return assemble(
        basis, name, len(spans), lo, hi, middle["first_ns"], rows, window_rows, rank_of, cut
    )


def step_spans(steps: Sequence[StepReport]) -> list[dict[str, Any]]:
    """step_span.sql over the report's steps (on one clock and in rank order): the k-th step
    of every GPU is one step of the job; the GPU that sorts first names it."""
    import polars as pl

    windows = pl.DataFrame(
        {
            "pid": range(len(steps)),  # position: a stand-in pid in rank order
            "device_id": [0] * len(steps),
            "step_ordinal": [s.ordinal for s in steps],
            "name": [s.name for s in steps],
            "step_index": [s.index for s in steps],
            "start_ns": [s.start_ns for s in steps],
            "end_ns": [s.end_ns for s in steps],
        },
        schema={
            "pid": pl.Int64,
            "device_id": pl.Int64,
            "step_ordinal": pl.Int64,
            "name": pl.String,
            "step_index": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
        },
    )
    with _reading(step_window=windows) as con:
        return run_query(con, "step_span").to_dicts()
