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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport import __version__
from nsysreport.align import FileClock, align_files, session_epoch
from nsysreport.model import Report, build_report
from nsysreport.patterns import Patterns
from nsysreport.ranks import FileRanks, RankInfo, assign_ranks, read_file_ranks
from nsysreport.sections.capture import build_capture, summed
from nsysreport.sections.collectives import StragglerGpu, Stragglers, regroup, stragglers_of
from nsysreport.sections.kernels import KernelSummary
from nsysreport.sections.layers import across_gpus
from nsysreport.sections.quality import merge_quality
from nsysreport.sections.timeline import (
    DEFAULT_ACTIVITIES,
    EVERY_ACTIVITY,
    MAX_ROWS,
    Timeline,
    assemble,
    choose_window,
)
from nsysreport.sections.verdict import bottleneck
from nsysreport.workers import Workers

if TYPE_CHECKING:
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


@dataclass(frozen=True, slots=True)
class FilePart:
    """One file's analysis, small enough to send back: no kernel-level rows but collectives."""

    name: str
    report: Report  # this file alone, local ranks, every kernel name in top_kernels
    ranks: FileRanks
    kineto: bool
    epoch_ns: int | None  # UTC of the file's time 0, from its session start
    instances: pl.DataFrame  # op, ordinal, pid, device_id, start_ns, end_ns
    middle: dict[str, Any] | None  # activity_middle's row, in the file's clock


def analyse_file(job: FileJob) -> FilePart:
    """The worker's job: load (or reuse the cache of) one file and analyse it alone."""
    from nsysreport.queries import run_query

    con = _open(job)
    report = build_report(con, Path(job.path), job.top, partial=True)
    session = run_query(con, "session_start").rows()
    wanted = DEFAULT_ACTIVITIES if job.timeline_default and not report.steps else EVERY_ACTIVITY
    middle = run_query(con, "activity_middle", {"activities": wanted}).to_dicts()
    instances = run_query(con, "collective_instances")
    product = report.traces[0].product or ""
    return FilePart(
        name=job.name,
        report=report,
        ranks=read_file_ranks(con),
        kineto="kineto" in product.lower(),
        epoch_ns=session_epoch(*session[0]) if session else None,
        instances=instances,
        middle=middle[0] if middle else None,
    )


def timeline_rows(task: tuple[FileJob, int, int, int]) -> list[dict[str, Any]]:
    """The worker's second job: one file's timeline rows in [lo, hi) of its own clock."""
    from nsysreport.queries import run_query

    job, lo, hi, max_rows = task
    params = {"start_ns": lo, "end_ns": hi, "max_rows": max_rows}
    return run_query(_open(job), "timeline_window", params).to_dicts()


def _open(job: FileJob) -> Any:
    from nsysreport.load import open_trace

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
) -> Report:
    """One report over every GPU of every file, on the reference file's clock."""
    names = _labels(paths)
    default = timeline_step is None and timeline_range == (None, None)
    with tempfile.TemporaryDirectory(prefix="nsysreport-") as private:
        home = None if cache else private
        jobs_ = [
            FileJob(str(p), n, patterns, top, home, default)
            for p, n in zip(paths, names, strict=True)
        ]
        with Workers(jobs, scheduler, len(jobs_)) as workers:
            if progress:
                progress(f"analysing {len(paths)} files")
            parts = workers.map(analyse_file, jobs_)
            ranks = assign_ranks([(p.name, p.ranks) for p in parts], [p.kineto for p in parts])
            # The file holding rank 0 comes first and is the reference clock.
            order = sorted(range(len(parts)), key=lambda i: _first_rank(parts[i], ranks))
            parts = [parts[i] for i in order]
            jobs_ = [jobs_[i] for i in order]
            if progress:
                progress("aligning clocks")
            clocks = align_files(
                [p.name for p in parts],
                [p.epoch_ns for p in parts],
                [p.instances for p in parts],
                refine=align,
            )
            merged = merge(parts, clocks, ranks, top)

            def fetch(tasks: list[tuple[FileJob, int, int, int]]) -> list[list[dict[str, Any]]]:
                return workers.map(timeline_rows, tasks)

            timeline = _timeline(
                parts, jobs_, clocks, ranks, merged, fetch, timeline_step, timeline_range
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
    top: int,
) -> Report:
    """The files' reports as one: GPUs renumbered, times on the reference clock, and every
    cross-GPU figure (layers across GPUs, stragglers, top kernels, verdict) computed afresh."""
    gpus, steps, stats, layers, collectives, infos = [], [], [], [], [], []
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

    def order(x: Any) -> tuple[int, str, int, int]:
        return (x.rank, x.file, x.pid, x.device_id)

    gpus.sort(key=order)
    steps.sort(key=lambda s: (*order(s), s.ordinal))
    stats.sort(key=order)
    collectives = regroup(collectives)  # a collective's group spans the files
    collectives.sort(key=lambda c: (*order(c), -c.total_ns, c.op))
    layers_t = tuple(layers) if any(x.layers for x in (p.report for p in parts)) else ()
    across = tuple(across_gpus(layers_t)) if layers_t else ()
    stragglers = _stragglers(parts, clocks, ranks)
    verdict = bottleneck(gpus, across, collectives, stragglers)
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
        top_kernels=_top_kernels([k for p in parts for k in p.report.top_kernels], top),
        bottleneck=verdict,
        ranks=tuple(sorted(infos, key=lambda i: (i.rank, i.file, i.pid, i.device_id))),
        clocks=tuple(clocks),
        capture=build_capture(
            summed([p.report.capture.facts for p in parts if p.report.capture is not None]),
            verdict.graph_opaque_pct,
            kineto=all(p.kineto for p in parts),
        ),
        quality=merge_quality((p.name, p.report.quality) for p in parts),
    )


def _stragglers(
    parts: Sequence[FilePart], clocks: Sequence[FileClock], ranks: dict[GpuKey, tuple[int, str]]
) -> Stragglers:
    """The straggler analysis (queries/straggler_*.sql) over every file's collectives at once.

    The queries key GPUs by (pid, device_id); across files that pair can repeat, so each GPU
    gets a stand-in pid, its position in rank order, and device_id 0.
    """
    import polars as pl

    from nsysreport.load import connect
    from nsysreport.queries import run_query

    keys = sorted(ranks, key=lambda k: (ranks[k][0], k))
    stand_in = {k: i for i, k in enumerate(keys)}
    frames = []
    for part, clock in zip(parts, clocks, strict=True):
        mapping = pl.DataFrame(
            [(pid, dev, stand_in[(f, pid, dev)]) for f, pid, dev in keys if f == part.name],
            schema={"pid": pl.Int64, "device_id": pl.Int64, "gpu": pl.Int64},
            orient="row",
        )
        frames.append(
            part.instances.join(mapping, on=("pid", "device_id")).select(
                "op",
                "ordinal",
                pid=pl.col("gpu"),
                device_id=pl.lit(0, pl.Int64),
                start_ns=pl.col("start_ns") + clock.offset_ns,
                end_ns=pl.col("end_ns") + clock.offset_ns,
            )
        )
    con = connect()
    con.register("collective", pl.concat(frames))  # the straggler queries read it by name
    gpus = []
    for row in run_query(con, "straggler_gpu").to_dicts():
        file, pid, dev = keys[row.pop("pid")]
        row.pop("device_id")
        gpus.append(
            StragglerGpu(file=file, pid=pid, device_id=dev, rank=ranks[(file, pid, dev)][0], **row)
        )
    unmatched = []
    for row in run_query(con, "straggler_unmatched").to_dicts():
        file, pid, dev = keys[row["pid"]]
        unmatched.append(
            {**row, "file": file, "pid": pid, "device_id": dev, "rank": ranks[(file, pid, dev)][0]}
        )
    con.close()
    gpus.sort(key=lambda g: (g.rank, g.file, g.pid, g.device_id))
    return stragglers_of(tuple(gpus), tuple(unmatched))


def _top_kernels(kernels: Sequence[KernelSummary], top: int) -> tuple[KernelSummary, ...]:
    """kernel_top over all files: per-file sums added, shares and ranks within class redone."""
    by_name: dict[tuple[str, str], list[KernelSummary]] = {}
    for k in kernels:
        by_name.setdefault((k.kernel_class, k.name), []).append(k)
    merged = []
    for (cls, name), group in by_name.items():
        instances = sum(k.instances for k in group)
        total = sum(k.total_ns for k in group)
        merged.append(
            KernelSummary(
                cls,
                name,
                0,
                instances,
                sum(k.gpus for k in group),
                total,
                total / instances if instances else 0.0,
                max(k.max_ns for k in group),
                None,
            )
        )
    out = []
    for cls in sorted({k.kernel_class for k in merged}):
        ranked = sorted(
            (k for k in merged if k.kernel_class == cls), key=lambda k: (-k.total_ns, k.name)
        )
        class_total = sum(k.total_ns for k in ranked)
        out += [
            replace(
                k,
                name_rank=i,
                pct_of_class=100.0 * k.total_ns / class_total if class_total else None,
            )
            for i, k in enumerate(ranked[:top], start=1)
        ]
    return tuple(out)


def _timeline(
    parts: Sequence[FilePart],
    jobs: Sequence[FileJob],
    clocks: Sequence[FileClock],
    ranks: dict[GpuKey, tuple[int, str]],
    merged: Report,
    fetch: Callable[[list[tuple[FileJob, int, int, int]]], list[list[dict[str, Any]]]],
    step: str | None,
    timeline_range: tuple[int | None, int | None],
) -> Timeline | None:
    """The timeline's window chosen over all files (aligned), its rows fetched from each."""
    middles = [
        (p.middle, c.offset_ns) for p, c in zip(parts, clocks, strict=True) if p.middle is not None
    ]
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
    share = max(200, MAX_ROWS // len(parts))
    results = fetch(
        [(j, lo - c.offset_ns, hi - c.offset_ns, share) for j, c in zip(jobs, clocks, strict=True)]
    )
    rows: list[dict[str, Any]] = []
    window_rows, cut = 0, None
    for part, clock, found in zip(parts, clocks, results, strict=True):
        off = clock.offset_ns
        mine = [
            {**r, "file": part.name, "start_ns": r["start_ns"] + off, "end_ns": r["end_ns"] + off}
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
    """step_span.sql over the merged steps: the k-th step of every GPU is one step of the job."""
    by_ordinal: dict[int, list[Any]] = {}
    for s in report.steps:  # in rank order, so the first is the GPU that sorts first
        by_ordinal.setdefault(s.ordinal, []).append(s)
    spans = []
    for ordinal, group in sorted(by_ordinal.items()):
        start, end = min(s.start_ns for s in group), max(s.end_ns for s in group)
        spans.append(
            {
                "step_ordinal": ordinal,
                "name": group[0].name,
                "step_index": group[0].index,
                "gpus": len(group),
                "start_ns": start,
                "end_ns": end,
                "duration_ns": end - start,
                "max_step_time_ns": max(s.step_time_ns for s in group),
            }
        )
    return spans
