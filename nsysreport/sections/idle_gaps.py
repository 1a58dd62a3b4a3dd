"""Whether the GPUs' idle time sits in a few long gaps, and what the host was doing in them
(docs/metrics.md, Idle concentration): the long gaps of every GPU (gap_top.sql's `long_gap`),
their share of the idle time and their host causes tallied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsysreport.sections.gpu_breakdown import Gap, GpuReport
from nsysreport.units import fmt_ns, pct

# Idle time is concentrated when the long gaps hold at least this share of it.
CONCENTRATED_PCT = 50.0
# The sentence is said only when idle time is at least this share of all GPUs' span: a few
# long gaps in 1% of idle time explain nothing worth a line.
SAY_FROM_IDLE_PCT = 10.0
# What to record when the trace says nothing of what the launching thread was doing.
RECORD_KINETO = "torch.profiler.profile(with_stack=True) records the Python frames"
RECORD_NSYS = "nsys profile --trace=cuda,nvtx,osrt records NVTX ranges and OS runtime calls"


@dataclass(frozen=True, slots=True)
class GapCause:
    """Long gaps with one host cause: `kind` as gap_top.sql's cause_kind, or `unknown`."""

    kind: str  # data_loading | python | os | nvtx | sync | unknown
    name: str | None  # the event named (data_loading: that of the most gaps); None: unknown
    gaps: int
    total_ns: int


@dataclass(frozen=True, slots=True)
class IdleGaps:
    """The long gaps of all GPUs together."""

    gaps: int  # long gaps, over all GPUs
    gpus: int  # GPUs with a long gap
    total_ns: int  # their summed length
    idle_pct: float  # of all GPUs' idle time
    concentrated: bool  # idle_pct >= CONCENTRATED_PCT
    causes: tuple[GapCause, ...]  # the most time first
    summary: str | None  # the sentence, when concentrated and idle time is SAY_FROM_IDLE_PCT


def idle_gaps(gpus: Sequence[GpuReport], kineto: bool = False) -> IdleGaps | None:
    """The long gaps of `gpus` and their causes; None when no GPU idles. `kineto`: every file is
    a PyTorch profiler trace (what to record is then said in PyTorch's terms)."""
    idle = sum(g.idle_ns for g in gpus)
    if not idle:
        return None
    long = [gap for g in gpus for gap in g.gaps.long]
    total = sum(gap.duration_ns for gap in long)
    share = pct(total, idle) or 0.0
    causes = _causes(long)
    with_long = sum(1 for g in gpus if g.gaps.long)
    concentrated = share >= CONCENTRATED_PCT
    summary = None
    if concentrated and idle * 100 >= SAY_FROM_IDLE_PCT * sum(g.span_ns for g in gpus):
        summary = _sentence(len(long), with_long, len(gpus), total, share, causes, kineto)
    return IdleGaps(len(long), with_long, total, share, concentrated, causes, summary)


def _causes(long: Sequence[Gap]) -> tuple[GapCause, ...]:
    """The gaps tallied by cause: by kind and name, data loading by kind alone (the range and
    the Python frame of one DataLoader name it alike)."""
    groups: dict[tuple[str, str | None], list[Gap]] = {}
    for gap in long:
        kind = gap.cause_kind or "unknown"
        key = (kind, None if kind == "data_loading" else gap.host_cause)
        groups.setdefault(key, []).append(gap)
    causes = []
    for (kind, name), gaps in groups.items():
        if kind == "data_loading":
            names = [g.host_cause for g in gaps]
            name = max(names, key=lambda n: (names.count(n), n or ""))
        causes.append(GapCause(kind, name, len(gaps), sum(g.duration_ns for g in gaps)))
    return tuple(sorted(causes, key=lambda c: (-c.total_ns, -c.gaps, c.kind, c.name or "")))


def _sentence(
    n: int,
    gpus_with: int,
    gpus: int,
    total: int,
    share: float,
    causes: Sequence[GapCause],
    kineto: bool,
) -> str:
    """`Idle time is concentrated: 4 gaps hold 480 ms (99.0% of idle time); the GPU waited
    on data loading (DataLoader __next__, num_workers=0) in all 4.`"""
    gaps = f"{n} gap{'' if n == 1 else 's'} hold{'s' if n == 1 else ''}"
    where = f" on {gpus_with} GPUs" if gpus_with > 1 else ""
    text = f"Idle time is concentrated: {gaps} {fmt_ns(total)}{where} ({share:.1f}% of idle time)"
    first = causes[0]
    times = "" if n == 1 else f" in all {n}" if first.gaps == n else f" in {first.gaps} of {n}"
    if first.kind == "unknown":
        record = RECORD_KINETO if kineto else RECORD_NSYS
        them = "it" if n == 1 else "them"
        return text + f"; the trace does not say what the host was doing in {them} ({record})."
    the = "the GPU" if gpus == 1 else "the GPUs"
    name = first.name or ""
    doing = {
        "data_loading": f"{the} waited on data loading ({_loader(name)})",
        "python": f"the launching thread was in the Python function {name}",
        "os": f"the launching thread was in the OS call {name}",
        "nvtx": f"the launching thread was in the range {name}",
        "sync": f"the launching thread was in {name}",
    }[first.kind]
    return text + f"; {doing}{times}."


def _loader(name: str) -> str:
    """`DataLoader __next__`, with `num_workers=0` for the single-process iterator (loading on
    the training thread itself)."""
    return "DataLoader __next__" + (
        ", num_workers=0" if "_SingleProcessDataLoaderIter" in name else ""
    )
