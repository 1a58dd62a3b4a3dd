"""Several trace files (one per rank, as `nsys profile -o rank_%q{RANK}` writes), one report.

Each file is loaded and analysed on its own, in a worker (nsysreport.workers): that is where
all the kernels are. The client then does only the cross-rank step, on small tables: rank
numbers (nsysreport.ranks), clock offsets from the collective instances (nsysreport.align),
the straggler analysis over every GPU's collectives on the aligned clock, the merged top-N
tables, and the timeline window, whose rows the workers fetch from each file's cache.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport import __version__
from nsysreport.align import FileClock, align_files, session_epoch
from nsysreport.database import connect
from nsysreport.load import open_trace
from nsysreport.model import Report, build_report, with_role_sentence
from nsysreport.patterns import Patterns
from nsysreport.queries import run_query, view_files
from nsysreport.ranks import FileRanks, RankInfo, assign_ranks, read_file_ranks
from nsysreport.sections.capture import build_capture, summed
from nsysreport.sections.collectives import StragglerGpu, Stragglers, regroup, stragglers_of
from nsysreport.sections.communicators import (
    CommunicatorLayer,
    CommunicatorReport,
    CommunicatorStep,
    matched_across,
    renumbered,
    with_roles,
)
from nsysreport.sections.data_path import regroup_rows
from nsysreport.sections.gpu_breakdown import GpuReport
from nsysreport.sections.gpu_metrics import GpuMetric, metric_order
from nsysreport.sections.kernels import KernelSummary, build_kernels
from nsysreport.sections.layers import OUTSIDE, across_gpus
from nsysreport.sections.quality import merge_quality
from nsysreport.sections.timeline import (
    DEFAULT_ACTIVITIES,
    EVERY_ACTIVITY,
    MAX_ROWS,
    Timeline,
    assemble,
    choose_window,
)
from nsysreport.sections.tp_structure import rebuilt as rebuilt_tp
from nsysreport.sections.verdict import bottleneck
from nsysreport.user_facts import Facts
from nsysreport.workers import Workers

if TYPE_CHECKING:
    # polars is imported where the client joins frames (_stragglers): 0.1 s of start-up
    # (python -X importtime) that a worker, or a report of one file, never needs.
    import duckdb
    import polars as pl

GpuKey = tuple[str, int, int]  # (file, pid, device_id)


@dataclass(frozen=True, slots=True)
class FileJob:
    """What a worker needs to analyse one file; `cache_home` is a private cache (--no-cache)."""

    path: str
    name: str
    patterns: Patterns
    top: int
    cache_home: str | None
    timeline_default: bool  # no --timeline-step/--timeline-range: the middle window may be drawn
    facts: Facts = field(default_factory=Facts)


@dataclass(frozen=True, slots=True)
class FilePart:
    """One file's analysis, small enough to send back: no kernel-level rows but collectives."""

    name: str
    report: Report  # this file alone, local ranks, every kernel name in top_kernels
    ranks: FileRanks
    kineto: bool
    epoch_ns: int | None  # UTC of the file's time 0, from its session start
    instances: pl.DataFrame  # collective_instances: op, ordinal, pid, device_id, start_ns, end_ns
    comm_first: pl.DataFrame  # each stream channel's first instances, for comm_match
    middle: dict[str, Any] | None  # activity_middle's row, in the file's clock
    kernel_totals: pl.DataFrame  # the kernel_gpu_total table: per GPU and kernel name


def analyse_file(job: FileJob) -> FilePart:
    """The worker's job: load (or reuse the cache of) one file and analyse it alone."""
    con = _open(job)
    report = build_report(con, Path(job.path), job.top, partial=True, facts=job.facts)
    session = con.execute(
        "SELECT utcEpochNs, systemClockNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1"
    ).fetchone()
    wanted = DEFAULT_ACTIVITIES if job.timeline_default and not report.steps else EVERY_ACTIVITY
    middle = run_query(con, "activity_middle", {"activities": wanted}).to_dicts()
    product = report.traces[0].product or ""
    return FilePart(
        name=job.name,
        report=report,
        ranks=read_file_ranks(con),
        kineto="kineto" in product.lower(),
        epoch_ns=session_epoch(*session) if session else None,
        instances=run_query(con, "collective_instances"),
        comm_first=con.table("comm_first").pl(),
        middle=middle[0] if middle else None,
        kernel_totals=con.table("kernel_gpu_total").pl(),
    )


def timeline_rows(task: tuple[FileJob, int, int, int]) -> list[dict[str, Any]]:
    """The worker's second job: one file's timeline rows in [lo, hi) of its own clock."""
    job, lo, hi, max_rows = task
    params = {"start_ns": lo, "end_ns": hi, "max_rows": max_rows}
    return run_query(_open(job), "timeline_window", params).to_dicts()


def _open(job: FileJob) -> Any:
    with _cache_home(job.cache_home):
        return open_trace(Path(job.path), None, job.patterns, cache=True)


@contextmanager
def _cache_home(folder: str | None) -> Iterator[None]:
    """Point the cache at `folder` for one call (a run's private cache under --no-cache)."""
    if folder is None:
        yield
        return
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = folder
    try:
        yield
    finally:
        if before is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = before


def build_multi_report(
    paths: Sequence[Path],
    patterns: Patterns,
    top: int = 10,
    timeline_step: str | None = None,
    timeline_range: tuple[int | None, int | None] = (None, None),
    jobs: int = 1,
    scheduler: str | None = None,
    align: bool = True,
    cache: bool = True,
    progress: Callable[[str], None] | None = None,
    facts: Facts | None = None,
) -> Report:
    """One report over every GPU of every file, on the reference file's clock."""
    facts = facts or Facts()
    names = _labels(paths)
    default = timeline_step is None and timeline_range == (None, None)
    with tempfile.TemporaryDirectory(prefix="nsysreport-") as private:
        home = None if cache else private
        jobs_ = [
            FileJob(str(p), n, patterns, top, home, default, facts)
            for p, n in zip(paths, names, strict=True)
        ]
        with Workers(jobs, scheduler, len(jobs_)) as workers:
            if progress:
                progress(f"analysing {len(paths)} files")
            found = workers.map(analyse_file, jobs_)
            ranks = assign_ranks([(p.name, p.ranks) for p in found], [p.kineto for p in found])
            # The file holding rank 0 comes first and is the reference clock.
            ordered = sorted(zip(found, jobs_, strict=True), key=lambda x: _first_rank(x[0], ranks))
            parts = [part for part, _ in ordered]
            jobs_ = [job for _, job in ordered]
            del found, ordered  # `parts` alone holds the files' parts, let go as they are merged
            if progress:
                progress("aligning clocks")
            clocks = align_files(
                [p.name for p in parts],
                [p.epoch_ns for p in parts],
                [p.instances for p in parts],
                refine=align,
            )
            collective = _take_aligned_instances(parts, clocks, ranks)
            merged = merge(parts, clocks, ranks, collective, top, facts)
            del collective
            # The files' own reports are merged: let them go before the outputs are made.
            middles = [(p.name, p.middle) for p in parts]
            del parts

            def fetch(tasks: list[tuple[FileJob, int, int, int]]) -> list[list[dict[str, Any]]]:
                return workers.map(timeline_rows, tasks)

            timeline = _timeline(
                middles, jobs_, clocks, ranks, merged, fetch, timeline_step, timeline_range
            )
    return replace(merged, timeline=timeline)


def _labels(paths: Sequence[Path]) -> list[str]:
    """File names, or the paths as given when two files share a name."""
    names = [p.name for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def _first_rank(part: FilePart, ranks: dict[GpuKey, tuple[int, str]]) -> int:
    return min((ranks[(part.name, p, d)][0] for p, d, _ in part.ranks.gpus), default=1 << 62)


def merge(
    parts: Sequence[FilePart],
    clocks: Sequence[FileClock],
    ranks: dict[GpuKey, tuple[int, str]],
    collective: pl.DataFrame,
    top: int,
    facts: Facts | None = None,
) -> Report:
    """The files' reports as one: GPUs renumbered, times on the reference clock, and every
    cross-GPU figure (layers across GPUs, stragglers, top kernels, verdict) computed afresh.
    `collective`: every file's collective instances, aligned (_take_aligned_instances)."""
    gpus, steps, stats, layers, collectives, infos = [], [], [], [], [], []
    paths, tps = [], []
    gpu_metrics: list[GpuMetric] = []
    comms: list[CommunicatorReport] = []
    comm_steps: list[CommunicatorStep] = []
    comm_layers: list[CommunicatorLayer] = []
    for part, clock in zip(parts, clocks, strict=True):
        r, off = part.report, clock.offset_ns

        def rank(pid: int, device_id: int, file: str = part.name) -> int:
            return ranks[(file, pid, device_id)][0]

        for g in r.gpus:
            top_gaps = tuple(replace(x, start_ns=x.start_ns + off) for x in g.gaps.top)
            gpus.append(
                replace(
                    g,
                    file=part.name,
                    rank=rank(g.pid, g.device_id),
                    gaps=replace(g.gaps, top=top_gaps),
                )
            )
            infos.append(
                RankInfo(
                    rank(g.pid, g.device_id),
                    part.name,
                    g.pid,
                    g.device_id,
                    g.host,
                    g.gpu_name,
                    ranks[(part.name, g.pid, g.device_id)][1],
                )
            )
        steps += [
            replace(
                s,
                file=part.name,
                rank=rank(s.pid, s.device_id),
                start_ns=s.start_ns + off,
                end_ns=s.end_ns + off,
            )
            for s in r.steps
        ]
        stats += [replace(s, file=part.name, rank=rank(s.pid, s.device_id)) for s in r.step_stats]
        layers += [replace(x, file=part.name, rank=rank(x.pid, x.device_id)) for x in r.layers]
        collectives += [
            replace(c, file=part.name, rank=rank(c.pid, c.device_id)) for c in r.collectives
        ]
        paths += [replace(x, file=part.name, rank=rank(x.pid, x.device_id)) for x in r.data_path]
        tps += [replace(x, file=part.name, rank=rank(x.pid, x.device_id)) for x in r.tp_structure]
        gpu_metrics += [
            replace(m, file=part.name, rank=rank(m.pid, m.device_id)) for m in r.gpu_metrics
        ]
        moved = renumbered(
            r.communicators, r.communicator_steps, r.communicator_layers, part.name, rank
        )
        comms += moved[0]
        comm_steps += moved[1]
        comm_layers += moved[2]

    def order(x: Any) -> tuple[int, str, int, int]:
        return (x.rank, x.file, x.pid, x.device_id)

    gpus.sort(key=order)
    steps.sort(key=lambda s: (*order(s), s.ordinal))
    stats.sort(key=order)
    # A collective's group spans the files; the ranks named tell whether they hold the job.
    collectives = regroup(collectives, len(gpus), max((g.rank for g in gpus), default=-1) + 1)
    facts = facts or Facts()
    hosts = _hosts_per_op(gpus, collectives)
    names = {(g.file, g.pid, g.device_id): g.gpu_name for g in gpus}
    data_path = regroup_rows(paths, collectives, hosts, facts.link_peaks, names)
    tp = rebuilt_tp(tps, collectives, layers, facts.model)
    collectives.sort(key=lambda c: (*order(c), -c.total_ns, c.op))
    layers_t = tuple(layers) if any(x.layers for x in (p.report for p in parts)) else ()
    across = tuple(across_gpus(layers_t)) if layers_t else ()
    stragglers = _stragglers(collective, ranks)
    comms, comm_steps, comm_layers = matched_across(
        comms, comm_steps, comm_layers, _stream_matches(parts, clocks, ranks), ranks, len(gpus)
    )
    comms_t, comm_steps_t, comm_layers_t = with_roles(
        sorted(comms, key=lambda c: (*order(c), -c.total_ns, c.channel)),
        sorted(comm_steps, key=lambda c: (*order(c), c.step_ordinal, c.communicator)),
        sorted(comm_layers, key=lambda c: (*order(c), c.layer, c.communicator)),
        facts.comm_groups,
        any(x.layer != OUTSIDE for x in layers_t),
    )
    verdict = with_role_sentence(
        bottleneck(gpus, across, collectives, stragglers), comms_t, comm_steps_t, steps, gpus
    )
    return Report(
        tool_version=__version__,
        traces=tuple(t for p in parts for t in p.report.traces),
        gpus=tuple(gpus),
        steps=tuple(steps),
        step_stats=tuple(stats),
        layers=layers_t,
        layers_across=across,
        collectives=tuple(collectives),
        stragglers=stragglers,
        top_kernels=_top_kernels(parts, ranks, top),
        bottleneck=verdict,
        ranks=tuple(sorted(infos, key=lambda i: (i.rank, i.file, i.pid, i.device_id))),
        clocks=tuple(clocks),
        capture=build_capture(
            summed([p.report.capture.facts for p in parts if p.report.capture is not None]),
            verdict.graph_opaque_pct,
            kineto=all(p.kineto for p in parts),
        ),
        quality=merge_quality((p.name, p.report.quality) for p in parts),
        data_path=data_path,
        tp_structure=tp,
        gpu_metrics=tuple(sorted(gpu_metrics, key=metric_order)),
        communicators=comms_t,
        communicator_steps=comm_steps_t,
        communicator_layers=comm_layers_t,
        gpu_metrics_ignored=tuple(
            replace(i, file=p.name) for p in parts for i in p.report.gpu_metrics_ignored
        ),
    )


def _hosts_per_op(gpus: Sequence[GpuReport], collectives: Sequence[Any]) -> dict[str, int]:
    """Per collective op, how many hosts its GPUs are on (above 1: it rides the network)."""
    host = {(g.file, g.pid, g.device_id): g.host for g in gpus}
    seen: dict[str, set[str]] = {}
    for c in collectives:
        h = host.get((c.file, c.pid, c.device_id))
        if h:
            seen.setdefault(c.op, set()).add(h)
    return {op: len(hosts) for op, hosts in seen.items()}


def _stragglers(collective: pl.DataFrame, ranks: dict[GpuKey, tuple[int, str]]) -> Stragglers:
    """The straggler analysis (queries/straggler_*.sql) over every file's collectives at once
    (`collective`: on the reference clock, each GPU on its stand-in id)."""
    keys = list(_stand_ins(ranks))  # a stand-in id back to its GPU
    with _reading(collective=collective) as con:
        unmatched_rows = run_query(con, "straggler_unmatched").to_dicts()
        found = _sliced_straggler_rows(con, collective, {row["op"] for row in unmatched_rows})
    gpus = []
    for pid_, row in sorted(found.items()):
        file, pid, dev = keys[pid_]
        gpus.append(
            StragglerGpu(file=file, pid=pid, device_id=dev, rank=ranks[(file, pid, dev)][0], **row)
        )
    unmatched = []
    for row in unmatched_rows:
        file, pid, dev = keys[row["pid"]]
        unmatched.append(
            {**row, "file": file, "pid": pid, "device_id": dev, "rank": ranks[(file, pid, dev)][0]}
        )
    gpus.sort(key=lambda g: (g.rank, g.file, g.pid, g.device_id))
    return stragglers_of(tuple(gpus), tuple(unmatched))


# straggler_gpu's windows hold every instance they read; run over this many instances at a
# time, the merging process's memory stays that of one slice (64 files of 20,000 collectives:
# 1.28M instances, +390 MB at once, bench_ranks.py).
SLICE_INSTANCES = 100_000


def _sliced_straggler_rows(
    con: duckdb.DuckDBPyConnection, collective: pl.DataFrame, unmatched_ops: set[str]
) -> dict[int, dict[str, Any]]:
    """straggler_gpu's rows per stand-in pid, the query run in `con` over slices of the
    instances, each registered in turn as the table `collective`.

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
    out: dict[int, dict[str, Any]] = {}
    for i in range(slices):
        con.unregister("collective")
        con.register("collective", collective.filter(matchable & (pl.col("ordinal") % slices == i)))
        rows = run_query(con, "straggler_gpu").to_dicts()
        for row in rows:
            row.pop("device_id")
            pid = row.pop("pid")
            seen = out.get(pid)
            if seen is None:
                out[pid] = row
                continue
            for name in ("matched_instances", "last_arrivals", "wait_ns", "caused_wait_ns"):
                seen[name] += row[name]
            skews = [x for x in (seen["max_skew_ns"], row["max_skew_ns"]) if x is not None]
            seen["max_skew_ns"] = max(skews, default=None)
    return out


def _stream_matches(
    parts: Sequence[FilePart], clocks: Sequence[FileClock], ranks: dict[GpuKey, tuple[int, str]]
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
                part.comm_first, part.name, stand_in, end_ns=pl.col("end_ns") + clock.offset_ns
            )
            for part, clock in zip(parts, clocks, strict=True)
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


def _take_aligned_instances(
    parts: list[FilePart], clocks: Sequence[FileClock], ranks: dict[GpuKey, tuple[int, str]]
) -> pl.DataFrame:
    """Every file's collective instances as straggler_*.sql read them (op, ordinal, pid,
    device_id, start_ns), starts on the reference clock, each GPU on its stand-in id.

    The queries key GPUs by (pid, device_id); across files that pair can repeat, so each GPU
    gets a stand-in pid, its position in rank order, and device_id 0. Each part in `parts` is
    replaced by one without its instances as they are taken: they are the largest thing the
    merging process holds (GPUs x collectives), and are never held twice.
    """
    import polars as pl

    stand_in = _stand_ins(ranks)
    frames = []
    for i, (part, clock) in enumerate(zip(parts, clocks, strict=True)):
        frames.append(
            _on_stand_ins(
                part.instances.select("op", "ordinal", "pid", "device_id", "start_ns"),
                part.name,
                stand_in,
                start_ns=pl.col("start_ns") + clock.offset_ns,
                # DuckDB reads a categorical in place; a string column it copies.
                op=pl.col("op").cast(pl.Categorical),
            )
        )
        parts[i] = replace(part, instances=part.instances.clear())
    return pl.concat(frames)


def _stand_ins(ranks: dict[GpuKey, tuple[int, str]]) -> dict[GpuKey, int]:
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


def _top_kernels(
    parts: Sequence[FilePart], ranks: dict[GpuKey, tuple[int, str]], top: int
) -> tuple[KernelSummary, ...]:
    """kernel_top over every file's per-GPU kernel totals at once: the one-file query."""
    import polars as pl

    stand_in = _stand_ins(ranks)
    totals = pl.concat([_on_stand_ins(p.kernel_totals, p.name, stand_in) for p in parts])
    with _reading(kernel_gpu_total=totals) as con:
        return build_kernels(con, top)


def _timeline(
    files: Sequence[tuple[str, dict[str, Any] | None]],
    jobs: Sequence[FileJob],
    clocks: Sequence[FileClock],
    ranks: dict[GpuKey, tuple[int, str]],
    merged: Report,
    fetch: Callable[[list[tuple[FileJob, int, int, int]]], list[list[dict[str, Any]]]],
    step: str | None,
    timeline_range: tuple[int | None, int | None],
) -> Timeline | None:
    """The timeline's window chosen over all files (aligned), its rows fetched from each;
    `files`: each file's name and activity_middle row."""
    middles = [(m, c.offset_ns) for (_, m), c in zip(files, clocks, strict=True) if m is not None]
    if not middles:
        return None
    ref, ref_off = middles[0]
    middle = {
        "first_ns": min(m["first_ns"] + off for m, off in middles),
        "last_ns": max(m["last_ns"] + off for m, off in middles),
        "start_ns": ref["start_ns"] + ref_off,
        "end_ns": ref["end_ns"] + ref_off,
    }
    spans = _step_spans(merged)
    basis, name, lo, hi = choose_window(spans, middle, step, *timeline_range)
    share = max(200, MAX_ROWS // len(files))
    results = fetch(
        [(j, lo - c.offset_ns, hi - c.offset_ns, share) for j, c in zip(jobs, clocks, strict=True)]
    )
    rows: list[dict[str, Any]] = []
    window_rows, cut = 0, None
    for (name, _), clock, found in zip(files, clocks, results, strict=True):
        off = clock.offset_ns
        mine = [
            {**r, "file": name, "start_ns": r["start_ns"] + off, "end_ns": r["end_ns"] + off}
            for r in found
        ]
        held = found[0]["window_rows"] if found else 0
        window_rows += held
        if held > len(found):  # this file's rows stop early: the drawing stops there too
            last = max(r["start_ns"] for r in mine)
            cut = last if cut is None else min(cut, last)
        rows += mine

    def rank_of(file: str | None, pid: int, device_id: int) -> int:
        return ranks[(file or "", pid, device_id)][0]

    return assemble(
        basis, name, len(spans), lo, hi, middle["first_ns"], rows, window_rows, rank_of, cut
    )


def _step_spans(report: Report) -> list[dict[str, Any]]:
    """step_span.sql over the merged steps (already on one clock and in rank order): the k-th
    step of every GPU is one step of the job; the GPU that sorts first names it."""
    import polars as pl

    windows = pl.DataFrame(
        [
            (i, 0, s.ordinal, s.name, s.index, s.start_ns, s.end_ns)
            for i, s in enumerate(report.steps)  # position: a stand-in pid in rank order
        ],
        schema={
            "pid": pl.Int64,
            "device_id": pl.Int64,
            "step_ordinal": pl.Int64,
            "name": pl.String,
            "step_index": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
        },
        orient="row",
    )
    with _reading(step_window=windows) as con:
        return run_query(con, "step_span").to_dicts()
