"""Several trace files (one per rank, as `nsys profile -o rank_%q{RANK}` writes), one report.

Each file is loaded and analysed on its own, in a worker (nsysreport.workers): that is where
all the kernels are, and what comes back is the file's frames (nsysreport.file_frames). The
client then ranks the GPUs (nsysreport.ranks), puts the clocks on one time line from the
collective instances (nsysreport.align), and hands the frames to the one report builder
(nsysreport.report_builder), which builds the report of one file the same way; the timeline's
rows the workers fetch from each file's cache.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nsysreport.align import align_files
from nsysreport.file_frames import FileFrames, file_frames
from nsysreport.load import open_trace
from nsysreport.model import Report
from nsysreport.path_across_files import FilePath, local_walks, stitch
from nsysreport.patterns import Patterns
from nsysreport.ranks import assign_ranks
from nsysreport.report_builder import (
    analysed_start,
    build,
    build_timeline,
    critical_path_section,
    job_window,
    step_spans,
    timeline_rows,
)
from nsysreport.user_facts import Facts
from nsysreport.workers import Workers

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


def analyse_file(job: FileJob) -> FileFrames:
    """The worker's job: load (or reuse the cache of) one file and analyse it alone."""
    return file_frames(_open(job), Path(job.path), job.name, job.top, job.timeline_default)


def file_timeline_rows(task: tuple[FileJob, int, int, int]) -> list[dict[str, Any]]:
    """The worker's second job: one file's timeline rows in [lo, hi) of its own clock."""
    job, lo, hi, max_rows = task
    return timeline_rows(_open(job), lo, hi, max_rows)


def file_path_walks(task: tuple[FileJob, int, int]) -> FilePath:
    """The worker's third job: one file's part of the critical path in [lo, hi) of its clock."""
    job, lo, hi = task
    return local_walks(_open(job), job.name, lo, hi)


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
            FileJob(str(p), n, patterns, top, home, default)
            for p, n in zip(paths, names, strict=True)
        ]
        with Workers(jobs, scheduler, len(jobs_)) as workers:
            if progress:
                progress(f"analysing {len(paths)} files")
            found = workers.map(analyse_file, jobs_)
            kineto = [f.trace.is_kineto for f in found]
            ranks = assign_ranks([(f.name, f.ranks) for f in found], kineto)
            # The file holding rank 0 comes first and is the reference clock.
            ordered = sorted(zip(found, jobs_, strict=True), key=lambda x: _first_rank(x[0], ranks))
            files = [f for f, _ in ordered]
            jobs_ = [job for _, job in ordered]
            del found, ordered
            if progress:
                progress("aligning clocks")
            clocks = align_files(
                [f.name for f in files],
                [f.epoch_ns for f in files],
                [f.frames["collective_instances"] for f in files],
                refine=align,
            )
            report = build(files, ranks, top, facts, clocks)
            middles = [(f.name, f.middle) for f in files]
            offsets = [c.offset_ns for c in clocks]
            start = analysed_start([f.frames["analysed_start"] for f in files], offsets)
            del files  # the frames are in the report: let them go before the timeline

            def fetch(windows: list[tuple[int, int, int]]) -> list[list[dict[str, Any]]]:
                tasks = [(job, *w) for job, w in zip(jobs_, windows, strict=True)]
                return workers.map(file_timeline_rows, tasks)

            spans = step_spans(report.steps)
            timeline = build_timeline(
                middles, offsets, ranks, spans, fetch, timeline_step, timeline_range
            )
            window = job_window(middles, offsets, spans)
            path = None
            if window is not None:
                if progress:
                    progress("walking the critical path")
                basis, step, lo, hi = window
                lo = lo if start is None else max(lo, min(start, hi))
                tasks = [(job, lo - off, hi - off) for job, off in zip(jobs_, offsets, strict=True)]
                walked = stitch(workers.map(file_path_walks, tasks), offsets, lo, hi)
                path = (
                    None
                    if walked is None
                    else critical_path_section(walked, report.steps, spans, ranks, basis, step)
                )
    return replace(report, timeline=timeline, critical_path=path)


def _labels(paths: Sequence[Path]) -> list[str]:
    """File names, or the paths as given when two files share a name."""
    names = [p.name for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def _first_rank(part: FileFrames, ranks: dict[GpuKey, tuple[int, str]]) -> int:
    return min((ranks[(part.name, p, d)][0] for p, d, _ in part.ranks.gpus), default=1 << 62)
