"""Steps: per-step, per-GPU breakdowns and step-time statistics (step_breakdown query)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nsysreport.sections.gpu_breakdown import BREAKDOWN_FIELDS, WhatIf, iter_breakdown, what_if
from nsysreport.units import pct


@dataclass(frozen=True, slots=True)
class StepReport:
    file: str
    pid: int
    device_id: int
    rank: int
    name: str
    index: int | None
    ordinal: int
    start_ns: int
    end_ns: int
    step_time_ns: int
    busy_ns: int
    idle_ns: int
    compute_ns: int
    gemm_ns: int
    attention_ns: int
    comm_ns: int
    comm_sum_ns: int
    exposed_comm_ns: int
    overlapped_comm_ns: int
    overlap_pct: float | None
    memcpy_ns: int
    exposed_memcpy_ns: int
    graph_ns: int  # union of CUDA graph launches traced as a whole
    graph_opaque_ns: int  # of that, time no kernel or copy accounts for
    kernel_count: int
    comm_kernel_count: int
    what_if: WhatIf
    profiler_overhead_ns: int = 0  # nothing running while nsys paused the process

    @property
    def shares_pct(self) -> dict[str, float | None]:
        return {part: pct(ns, self.step_time_ns) for part, ns in iter_breakdown(self)}


@dataclass(frozen=True, slots=True)
class StepStats:
    """Step time over one GPU's steps."""

    file: str
    pid: int
    device_id: int
    rank: int
    steps: int
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    slowest: str
    shares_pct: dict[str, float | None]  # breakdown of all its steps together


@dataclass(frozen=True, slots=True)
class StepShare:
    """One part of the time breakdown as a share of step time, over one GPU's steps: the
    median step's share (what `gate` judges) and the range of the steps' shares."""

    file: str
    pid: int
    device_id: int
    rank: int
    median_pct: float
    low_pct: float
    high_pct: float
    steps: int  # steps with a positive step time: the ones a share exists for


def step_shares(steps: Sequence[StepReport], part: str) -> tuple[StepShare, ...]:
    """`part` (a BREAKDOWN_FIELDS name, e.g. "exposed comm") as % of each step's time, per GPU
    in report order; GPUs without a step of positive length are left out."""
    field = BREAKDOWN_FIELDS[part]
    by_gpu: dict[tuple[str, int, int], tuple[int, list[float]]] = {}
    for s in steps:
        if s.step_time_ns > 0:
            share = 100.0 * getattr(s, field) / s.step_time_ns
            by_gpu.setdefault((s.file, s.pid, s.device_id), (s.rank, []))[1].append(share)
    return tuple(
        StepShare(*key, rank, statistics.median(values), min(values), max(values), len(values))
        for key, (rank, values) in by_gpu.items()
    )


def build_steps(
    rows: Iterable[dict[str, Any]], rank: Mapping[tuple[str, int, int], int]
) -> tuple[tuple[StepReport, ...], tuple[StepStats, ...]]:
    """Each step of each GPU, from step_breakdown's stacked rows (a `file` column)."""
    steps = []
    for row in rows:
        row["index"] = row.pop("step_index")
        row["ordinal"] = row.pop("step_ordinal")
        key = (row["file"], row["pid"], row["device_id"])
        steps.append(StepReport(rank=rank[key], what_if=what_if(row), **row))
    steps.sort(key=lambda s: (s.rank, s.file, s.pid, s.device_id, s.ordinal))
    return tuple(steps), tuple(_stats(steps))


def _stats(steps: list[StepReport]) -> list[StepStats]:
    by_gpu: dict[tuple[str, int, int, int], list[StepReport]] = {}
    for s in steps:
        by_gpu.setdefault((s.file, s.pid, s.device_id, s.rank), []).append(s)
    out = []
    for (file, pid, device_id, rank), group in by_gpu.items():
        times = [s.step_time_ns for s in group]
        total = sum(times)
        breakdowns = [dict(iter_breakdown(s)) for s in group]  # once per step, not per part
        parts = {part: pct(sum(b[part] for b in breakdowns), total) for part in breakdowns[0]}
        slowest = max(group, key=lambda s: (s.step_time_ns, -s.ordinal))
        out.append(
            StepStats(
                file,
                pid,
                device_id,
                rank,
                len(group),
                statistics.fmean(times),
                statistics.median(times),
                min(times),
                max(times),
                slowest.name,
                parts,
            )
        )
    return out
