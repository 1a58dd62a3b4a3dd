"""The report's key numbers and the numbers each picture's caption states, from the model."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsysreport.sections.gpu_breakdown import Gap, iter_breakdown
from nsysreport.sections.layers import OUTSIDE, LayerAcrossGpus
from nsysreport.sections.verdict import graph_note
from nsysreport.units import pct

if TYPE_CHECKING:
    from nsysreport.model import Report
    from nsysreport.sections.steps import StepReport

# Rows of the table of single steps: past this many it lists the slowest, because a table of
# thousands of rows makes the HTML heavy and the PDF slow while the step-time picture already
# shows every step (and the JSON output lists them all).
STEP_ROWS = 96
WHAT_IF = {
    "compute 2\u00d7 faster": "compute_2x_ns",  # \u00d7 is the multiplication sign
    "comm 2\u00d7 faster": "comm_2x_ns",
    "perfect overlap": "perfect_overlap_ns",
    "no idle": "no_idle_ns",
}


@dataclass(frozen=True, slots=True)
class KeyNumbers:
    """What a reader wants before anything else, over all GPUs of the report."""

    gpus: int
    gpu_names: tuple[str, ...]  # the distinct GPU models, in rank order
    span_ns: int  # the longest GPU span
    shares_pct: dict[str, float | None]  # time breakdown of all GPUs together, whole trace
    steps: int  # steps per GPU (most of any GPU); 0 without NVTX steps
    median_step_ns: float | None  # over every step of every GPU
    # Exposed comm as a share of step time, median over a GPU's steps, on the GPU where it is
    # highest (what `gate` checks as exposed_comm_pct); None without steps. Not the whole
    # trace's share above, which counts the time between steps too.
    step_exposed_comm_pct: float | None
    step_exposed_comm_rank: int | None
    straggler_rank: int | None  # named by the verdict
    straggler_wait_ns: int | None  # the waiting it costs the other GPUs


@dataclass(frozen=True, slots=True)
class BreakdownFacts:
    compute_pct: float | None
    part: str  # the largest part besides compute
    part_pct: float | None
    part_worst_rank: int  # the GPU where that part is largest
    part_worst_pct: float | None


@dataclass(frozen=True, slots=True)
class WhatIfFacts:
    now_ns: float  # mean span over the GPUs
    spans_ns: dict[str, float]  # change -> mean projected span
    saved_pct: dict[str, float | None]  # change -> share of the span it saves
    best: str
    best_ns: float
    best_saved_pct: float | None


@dataclass(frozen=True, slots=True)
class StepFacts:
    steps: int
    median_ns: float
    slowest_name: str
    slowest_ns: int
    slowest_rank: int
    fastest_ns: int
    spread_pct: float | None  # (slowest - fastest) / median


# Below this share of the time (compute + exposed comm, mean per GPU) inside layer ranges, the
# layer chart leaves (outside layers) out and draws the layers on their own scale: next to
# 253 ms outside, 17 layers of 130 µs (a real 2-GPU PyTorch trace) would be invisible bars.
TINY_LAYER_SHARE_PCT = 1.0


@dataclass(frozen=True, slots=True)
class LayerFacts:
    layers: tuple[LayerAcrossGpus, ...]  # in model order, (outside layers) last
    most: LayerAcrossGpus  # most exposed communication
    least: LayerAcrossGpus
    exposed_pct: float | None  # exposed comm share of the layers' compute + exposed comm
    inside_ns: float = 0.0  # the layers' compute + exposed comm, mean per GPU, added up
    total_ns: float = 0.0  # the same with (outside layers)
    inside_pct: float | None = None  # inside_ns as a share of total_ns
    # The layers hold under TINY_LAYER_SHARE_PCT of the time: the chart draws them alone.
    tiny: bool = False

    @property
    def drawn(self) -> tuple[LayerAcrossGpus, ...]:
        """The layer chart's rows: every layer, and (outside layers) unless the layers are tiny."""
        return tuple(x for x in self.layers if not (self.tiny and x.layer == OUTSIDE))

    @property
    def inside_count(self) -> int:
        return sum(1 for x in self.layers if x.layer != OUTSIDE)


@dataclass(frozen=True, slots=True)
class RankedGap:
    rank: int
    gap: Gap


@dataclass(frozen=True, slots=True)
class GapFacts:
    longest: tuple[RankedGap, ...]  # the longest gaps of all GPUs, as many as one GPU lists
    count: int  # over all GPUs
    idle_ns: int
    shortest_bucket: str
    shortest_pct: float | None  # share of the gaps in the shortest bucket
    longest_ns: int
    longest_rank: int


@dataclass(frozen=True, slots=True)
class GraphFacts:
    """CUDA graphs: time inside launches traced as a whole, and graph kernels with no layer."""

    launches: int  # graph launches traced as a whole, all GPUs
    graph_ns: int  # their union, summed over GPUs
    opaque_ns: int  # of that, time no kernel or copy accounts for
    opaque_pct: float | None  # share of all GPUs' span; None without such launches
    note: str  # what the report cannot see and how to re-capture ("" without such launches)
    graph_kernels: int  # kernels replayed from graphs (node-level tracing), all GPUs
    without_layer: int  # of those, in no layer for lack of node creation records


@dataclass(frozen=True, slots=True)
class Overview:
    key: KeyNumbers
    breakdown: BreakdownFacts | None
    what_if: WhatIfFacts | None
    steps: StepFacts | None
    layers: LayerFacts | None
    gaps: GapFacts | None
    step_rows: tuple[StepReport, ...]  # every step of every GPU, or the STEP_ROWS slowest
    graphs: GraphFacts


def build_overview(report: Report) -> Overview:
    return Overview(
        key=_key(report),
        breakdown=_breakdown(report),
        what_if=_what_if(report),
        steps=_steps(report),
        layers=_layers(report.layers_across),
        gaps=_gaps(report),
        step_rows=_step_rows(report.steps),
        graphs=_graphs(report),
    )


def _graphs(report: Report) -> GraphFacts:
    launches = sum(g.graph_launches for g in report.gpus)
    opaque = sum(g.graph_opaque_ns for g in report.gpus)
    share = pct(opaque, sum(g.span_ns for g in report.gpus)) if launches else None
    return GraphFacts(
        launches=launches,
        graph_ns=sum(g.graph_ns for g in report.gpus),
        opaque_ns=opaque,
        opaque_pct=share,
        note=graph_note(share or 0.0, launches) if launches else "",
        graph_kernels=sum(g.graph_kernel_count for g in report.gpus),
        without_layer=sum(g.graph_kernels_without_layer for g in report.gpus),
    )


def _totals(report: Report) -> dict[str, int]:
    totals = {part: 0 for part, _ in iter_breakdown(report.gpus[0])} if report.gpus else {}
    for g in report.gpus:
        for part, ns in iter_breakdown(g):
            totals[part] += ns
    return totals


def _key(report: Report) -> KeyNumbers:
    span = sum(g.span_ns for g in report.gpus)
    straggler = report.bottleneck.straggler
    worst = max(report.step_shares("exposed comm"), key=lambda x: x.median_pct, default=None)
    return KeyNumbers(
        gpus=len(report.gpus),
        gpu_names=tuple(dict.fromkeys(g.gpu_name for g in report.gpus if g.gpu_name)),
        span_ns=max((g.span_ns for g in report.gpus), default=0),
        shares_pct={part: pct(ns, span) for part, ns in _totals(report).items()},
        steps=max((s.steps for s in report.step_stats), default=0),
        median_step_ns=report.median_step_ns,
        step_exposed_comm_pct=worst.median_pct if worst else None,
        step_exposed_comm_rank=worst.rank if worst else None,
        straggler_rank=straggler.rank if straggler else None,
        straggler_wait_ns=straggler.caused_wait_ns if straggler else None,
    )


def _breakdown(report: Report) -> BreakdownFacts | None:
    if not report.gpus:
        return None
    span = sum(g.span_ns for g in report.gpus)
    totals = _totals(report)
    others = [p for p in totals if p != "compute"]
    part = max(others, key=lambda p: (totals[p], -others.index(p)))
    worst = max(report.gpus, key=lambda g: (g.shares_pct[part] or 0.0, -g.rank))
    return BreakdownFacts(
        compute_pct=pct(totals["compute"], span),
        part=part,
        part_pct=pct(totals[part], span),
        part_worst_rank=worst.rank,
        part_worst_pct=worst.shares_pct[part],
    )


def _what_if(report: Report) -> WhatIfFacts | None:
    if not report.gpus:
        return None
    now = statistics.fmean(g.span_ns for g in report.gpus)
    spans = {
        change: statistics.fmean(getattr(g.what_if, key) for g in report.gpus)
        for change, key in WHAT_IF.items()
    }
    saved = {change: pct(now - ns, now) for change, ns in spans.items()}
    best = min(spans, key=lambda change: (spans[change], list(WHAT_IF).index(change)))
    return WhatIfFacts(now, spans, saved, best, spans[best], saved[best])


def _steps(report: Report) -> StepFacts | None:
    if not report.steps:
        return None
    times = [s.step_time_ns for s in report.steps]
    median = report.median_step_ns
    assert median is not None  # the report has steps
    slowest = max(report.steps, key=lambda s: (s.step_time_ns, -s.ordinal, -s.rank))
    return StepFacts(
        steps=max(s.steps for s in report.step_stats),
        median_ns=median,
        slowest_name=slowest.name,
        slowest_ns=slowest.step_time_ns,
        slowest_rank=slowest.rank,
        fastest_ns=min(times),
        spread_pct=pct(slowest.step_time_ns - min(times), median),
    )


def _step_rows(steps: tuple[StepReport, ...]) -> tuple[StepReport, ...]:
    if len(steps) <= STEP_ROWS:
        return steps
    return tuple(sorted(steps, key=lambda s: (-s.step_time_ns, s.rank, s.ordinal))[:STEP_ROWS])


def layers_in_order(layers: tuple[LayerAcrossGpus, ...]) -> tuple[LayerAcrossGpus, ...]:
    """Layers as the model runs them (by the index in their name), `(outside layers)` last."""
    return tuple(
        sorted(
            layers,
            key=lambda x: (x.layer == OUTSIDE, x.layer_index is None, x.layer_index or 0, x.layer),
        )
    )


def _layers(layers: tuple[LayerAcrossGpus, ...]) -> LayerFacts | None:
    inside = [x for x in layers if x.layer != OUTSIDE]
    if not inside:
        return None
    compute = sum(x.compute_mean_ns for x in inside)
    exposed = sum(x.exposed_comm_mean_ns for x in inside)
    total = sum(x.compute_mean_ns + x.exposed_comm_mean_ns for x in layers)
    inside_pct = pct(compute + exposed, total)
    return LayerFacts(
        layers=layers_in_order(layers),
        most=max(inside, key=lambda x: (x.exposed_comm_mean_ns, -(x.layer_index or 0))),
        least=min(inside, key=lambda x: (x.exposed_comm_mean_ns, x.layer_index or 0)),
        exposed_pct=pct(exposed, compute + exposed),
        inside_ns=compute + exposed,
        total_ns=total,
        inside_pct=inside_pct,
        tiny=inside_pct is not None and inside_pct < TINY_LAYER_SHARE_PCT,
    )


def _gaps(report: Report) -> GapFacts | None:
    with_gaps = [g for g in report.gpus if g.gaps.count]
    if not with_gaps:
        return None
    count = sum(g.gaps.count for g in with_gaps)
    shortest = next(iter(with_gaps[0].gaps.histogram))
    longest = max(with_gaps, key=lambda g: (g.gaps.max_ns or 0, -g.rank))
    ranked = [RankedGap(g.rank, gap) for g in with_gaps for gap in g.gaps.top]
    ranked.sort(key=lambda x: (-x.gap.duration_ns, x.gap.start_ns, x.rank))
    return GapFacts(
        longest=tuple(ranked[: max(len(g.gaps.top) for g in with_gaps)]),
        count=count,
        idle_ns=sum(g.idle_ns for g in with_gaps),
        shortest_bucket=shortest,
        shortest_pct=pct(sum(g.gaps.histogram[shortest] for g in with_gaps), count),
        longest_ns=longest.gaps.max_ns or 0,
        longest_rank=longest.rank,
    )
