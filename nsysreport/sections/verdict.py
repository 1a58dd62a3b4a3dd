"""The bottleneck verdict: which stage of the data path costs most, and what fixing it buys."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from nsysreport.sections.collectives import CollectiveReport, Stragglers
from nsysreport.sections.gpu_breakdown import GpuReport
from nsysreport.sections.layers import OUTSIDE, LayerAcrossGpus
from nsysreport.units import fmt_ns, pct

COMPUTE_BOUND_PCT = 80.0
# A layer is named as the worst when its exposed comm is this many times the median layer's.
STANDS_OUT = 1.25
# A straggler is named when the waiting it causes is at least this share of the exposed
# communication on the other GPUs (where that waiting happens).
STRAGGLER_EXPLAINS_PCT = 50.0
# From this share of the GPUs' span inside CUDA graphs traced as a whole, the verdict says that
# it cannot see into them and how to re-capture.
GRAPH_NOTE_PCT = 10.0
RECAPTURE = "nsys profile --cuda-graph-trace=node ..."


@dataclass(frozen=True, slots=True)
class Straggler:
    """The GPU the verdict names: its late arrivals cause most of the other GPUs' exposed
    communication (STRAGGLER_EXPLAINS_PCT)."""

    file: str
    pid: int
    device_id: int
    rank: int
    last_arrivals: int
    matched_instances: int
    caused_wait_ns: int
    share_of_exposed_comm_pct: float  # caused_wait_ns as % of the other GPUs' exposed comm


@dataclass(frozen=True, slots=True)
class Bottleneck:
    stage: str  # compute | communication | memcpy | host
    share_pct: float  # share of all GPUs' span spent in that stage
    gain_pct: float  # span saved by fixing it (what-if), share of all GPUs' span
    straggler: Straggler | None
    summary: str
    # share of all GPUs' span inside CUDA graphs traced as a whole (never idle, never host time);
    # None when the trace has no such graph launches
    graph_opaque_pct: float | None = None


def bottleneck(
    gpus: Sequence[GpuReport],
    layers: Sequence[LayerAcrossGpus],
    collectives: Sequence[CollectiveReport],
    stragglers: Stragglers,
) -> Bottleneck:
    """docs/metrics.md's verdict over all GPUs of the report."""
    span = sum(g.span_ns for g in gpus)
    compute = sum(g.compute_ns for g in gpus)
    exposed_comm = sum(g.exposed_comm_ns for g in gpus)
    parts = {
        "communication": exposed_comm,
        "memcpy": sum(g.exposed_memcpy_ns for g in gpus),
        "host": sum(g.idle_ns for g in gpus),
    }
    gains = {
        "compute": sum(g.span_ns - g.what_if.compute_2x_ns for g in gpus),
        "communication": sum(g.span_ns - g.what_if.perfect_overlap_ns for g in gpus),
        "memcpy": parts["memcpy"],
        "host": parts["host"],
    }
    compute_pct = pct(compute, span) or 0.0
    # Nothing besides compute costs any time (the rest is inside CUDA graphs, say): compute.
    if compute_pct >= COMPUTE_BOUND_PCT or not any(parts.values()):
        stage, share = "compute", compute_pct
    else:
        stage = max(parts, key=lambda k: parts[k])
        share = pct(parts[stage], span) or 0.0
    gain = pct(gains[stage], span) or 0.0
    straggler = _straggler(stragglers, gpus)
    where = "the GPU" if len(gpus) == 1 else f"the {len(gpus)} GPUs"
    sit = "sits" if len(gpus) == 1 else "sit"
    sentence = _SENTENCES[stage].format(share=share, gain=gain, where=where, sit=sit)
    if stage == "communication":
        sentence += _dominant_op(collectives, len(gpus)) + _worst_layer(layers)
    if straggler is not None:
        sentence += (
            f" Most exposed communication is waiting for rank {straggler.rank}: it arrives "
            f"last at {straggler.last_arrivals} of {straggler.matched_instances} collectives "
            f"and costs the other GPUs {fmt_ns(straggler.caused_wait_ns)} of waiting."
        )
    graph_pct = None
    if any(g.graph_launches for g in gpus):
        graph_pct = pct(sum(g.graph_opaque_ns for g in gpus), span) or 0.0
        if graph_pct >= GRAPH_NOTE_PCT:
            note = graph_note(graph_pct, sum(g.graph_launches for g in gpus))
            # When the graphs hold more of the time than the stage named, they come first: the
            # verdict is then about the smaller part of the time that the trace does record.
            if graph_pct > share:
                sentence = note + " Of the time the trace does record: " + sentence
            else:
                sentence += " " + note
    return Bottleneck(stage, share, gain, straggler, sentence, graph_pct)


def graph_note(share_pct: float, launches: int) -> str:
    """What the report cannot see inside CUDA graphs traced as a whole, and the way to see it."""
    return (
        f"{share_pct:.1f}% of the GPU time is inside {launches} CUDA graph launches traced as a "
        "whole, whose kernels the trace does not record (neither idle nor host time, and not "
        "part of this verdict); re-capture with `" + RECAPTURE + "` to see them."
    )


_SENTENCES = {
    "compute": (
        "Compute-bound: kernels keep {where} busy {share:.1f}% of the time; "
        "2x faster compute would cut the span by {gain:.1f}%."
    ),
    "communication": (
        "GPU-to-GPU communication is the bottleneck: {share:.1f}% of the time on {where} is "
        "communication not hidden behind compute; perfect overlap would cut the span by "
        "{gain:.1f}%."
    ),
    "memcpy": (
        "Host-to-device copies are the bottleneck: {share:.1f}% of the time on {where} is "
        "memcpy with no kernel running; hiding the copies would cut the span by {gain:.1f}%."
    ),
    "host": (
        "The host is the bottleneck: {where} {sit} idle {share:.1f}% of the time waiting for "
        "kernel launches or synchronisation; removing the idle time would cut the span by "
        "{gain:.1f}%."
    ),
}


def _straggler(stragglers: Stragglers, gpus: Sequence[GpuReport]) -> Straggler | None:
    """The straggler, when the waiting it causes is most of the other GPUs' exposed comm."""
    s = stragglers.straggler
    if s is None:
        return None
    others = sum(
        g.exposed_comm_ns
        for g in gpus
        if (g.file, g.pid, g.device_id) != (s.file, s.pid, s.device_id)
    )
    explains = pct(s.caused_wait_ns, others)
    if explains is None or explains < STRAGGLER_EXPLAINS_PCT:
        return None
    return Straggler(
        s.file,
        s.pid,
        s.device_id,
        s.rank,
        s.last_arrivals,
        s.matched_instances,
        s.caused_wait_ns,
        explains,
    )


def _dominant_op(collectives: Sequence[CollectiveReport], n_gpus: int) -> str:
    """` Most of it is AllReduce: 72 calls per GPU of 93 µs each.` for the most exposed op."""
    by_op: dict[str, list[CollectiveReport]] = {}
    for c in collectives:
        by_op.setdefault(c.op, []).append(c)
    if not by_op:
        return ""
    op, rows = max(by_op.items(), key=lambda item: (sum(c.exposed_ns for c in item[1]), item[0]))
    calls = sum(c.count for c in rows)
    mean = sum(c.total_ns for c in rows) / calls if calls else 0
    return f" Most of it is {op}: {calls / n_gpus:.0f} calls per GPU of {fmt_ns(mean)} each."


def _worst_layer(layers: Sequence[LayerAcrossGpus]) -> str:
    """Name the layer that exposes most, when it stands out from the others."""
    inside = [layer for layer in layers if layer.layer != OUTSIDE]
    if len(inside) < 2 or inside[0].exposed_comm_mean_ns <= 0:
        return ""
    median = statistics.median(layer.exposed_comm_mean_ns for layer in inside)
    worst = inside[0]
    if worst.exposed_comm_mean_ns >= STANDS_OUT * median:
        return f" {worst.layer} exposes the most ({fmt_ns(worst.exposed_comm_mean_ns)} per GPU)."
    return f" It is spread evenly over the {len(inside)} layers."
