"""The bottleneck verdict: which stage of the data path costs most, and what fixing it buys."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from nsysreport.sections.collectives import CollectiveReport, Stragglers
from nsysreport.sections.data_path import COPY_NAMES, DataPathRow
from nsysreport.sections.gpu_breakdown import GpuReport
from nsysreport.sections.idle_gaps import IdleGaps, idle_gaps
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
WHOLE_STEPS = (
    "nsys profile --capture-range=cudaProfilerApi ... with torch.cuda.profiler.start() and "
    "stop() around whole steps (or --capture-range=nvtx --nvtx-capture=RANGE)"
)
WHOLE_STEPS_KINETO = "torch.profiler.schedule(wait=..., warmup=..., active=...) over whole steps"
# A capture with next to no GPU work: the GPUs' busy time (every GPU's span less its idle time,
# summed) under LITTLE_WORK_NS in all and under LITTLE_WORK_PCT of the capture. One step of any
# real training or inference workload keeps a GPU busy for milliseconds (a decode step of a 7B
# model on an H100: about 10 ms), and an nsys capture lasts at least the second or so of CUDA
# start-up; below both bounds the shares describe a handful of operations, not the workload
# (rtx3080_tiny_2026.1 in ../shared/traces: 5.8 µs of GPU work in a 1.87 s capture, whose span
# would otherwise read "idle 100%, the host is the bottleneck"). The share bound keeps a short
# capture that is all GPU work (a micro-benchmark) judged as usual.
LITTLE_WORK_NS = 1_000_000
LITTLE_WORK_PCT = 1.0


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
    stage: str  # compute | communication | memcpy | host | little_gpu_work
    share_pct: float  # share of all GPUs' span spent in that stage (little_gpu_work: the GPUs'
    # busy time as a share of the capture)
    gain_pct: float  # span saved by fixing it (what-if), share of all GPUs' span (0 for
    # little_gpu_work)
    straggler: Straggler | None
    summary: str
    # share of all GPUs' span inside CUDA graphs traced as a whole (never idle, never host time);
    # None when the trace has no such graph launches
    graph_opaque_pct: float | None = None
    # the long idle gaps and what the host was doing in them; None when no GPU idles (and for
    # little_gpu_work)
    idle_gaps: IdleGaps | None = None


def bottleneck(
    gpus: Sequence[GpuReport],
    layers: Sequence[LayerAcrossGpus],
    collectives: Sequence[CollectiveReport],
    stragglers: Stragglers,
    data_path: Sequence[DataPathRow] = (),
    capture_ns: int | None = None,
    kineto: bool = False,
) -> Bottleneck:
    """docs/metrics.md's verdict over all GPUs of the report; `data_path` names the kinds of
    copy (or memset) that make up exposed memcpy time; `capture_ns`: the capture's length
    (the longest file's), which tells a capture with next to no GPU work; `kineto`: every file
    is a PyTorch profiler trace (the advice is then in PyTorch's terms)."""
    little = little_gpu_work(gpus, capture_ns, kineto)
    if little is not None:
        return little
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
    idle = idle_gaps(gpus, kineto)
    concentrated = idle.summary if idle is not None else None
    # Idle time in a few long gaps is the host busy elsewhere, not launches falling behind.
    waiting = "for the host" if concentrated else "for kernel launches or synchronisation"
    sentence = _SENTENCES[stage].format(
        share=share, gain=gain, where=where, sit=sit, waiting=waiting
    )
    if stage == "host" and concentrated:
        sentence += " " + concentrated
    if stage == "communication":
        sentence += _dominant_op(collectives, len(gpus)) + _worst_layer(layers)
    if stage == "memcpy":
        sentence = sentence.replace("{kinds}", _copy_kinds(data_path))
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
    return Bottleneck(stage, share, gain, straggler, sentence, graph_pct, idle)


def little_gpu_work(
    gpus: Sequence[GpuReport], capture_ns: int | None, kineto: bool = False
) -> Bottleneck | None:
    """The verdict of a capture with next to no GPU work (LITTLE_WORK_NS, LITTLE_WORK_PCT), or
    None when the GPUs did enough for the shares to name a bottleneck."""
    busy = sum(g.span_ns - g.idle_ns for g in gpus)
    if not gpus or not capture_ns or busy >= LITTLE_WORK_NS:
        return None
    share = pct(busy, capture_ns) or 0.0
    if share >= LITTLE_WORK_PCT:
        return None
    kernels = sum(g.kernel_count for g in gpus)
    copies = sum(g.memcpy_count for g in gpus)
    what = (
        ", ".join(
            f"{n} {word}{'' if n == 1 else plural}"
            for n, word, plural in ((kernels, "kernel", "s"), (copies, "copy or memset", "s"))
            if n
        )
        or "graph launches only"
    )
    where = "the GPU was" if len(gpus) == 1 else f"the {len(gpus)} GPUs were"
    summary = (
        f"Next to no GPU work was captured: {where} busy {fmt_ns(busy)} in all ({what}) over "
        f"a capture of {fmt_ns(capture_ns)} ({share:.2g}% of it): too little to name a "
        f"bottleneck. Capture whole steps of the workload instead: "
        f"{WHOLE_STEPS_KINETO if kineto else WHOLE_STEPS}."
    )
    return Bottleneck("little_gpu_work", share, 0.0, None, summary)


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
    # Memsets and every kind of copy count here (class memcpy): the sentence names the kinds
    # that hold the exposed time ({kinds}, filled by _copy_kinds), never "host-to-device" alone.
    "memcpy": (
        "Memory copies and memsets are the bottleneck: {share:.1f}% of the time on {where} is "
        "a copy or memset with no kernel running{{kinds}}; hiding them would cut the span by "
        "{gain:.1f}%."
    ),
    "host": (
        "The host is the bottleneck: {where} {sit} idle {share:.1f}% of the time waiting "
        "{waiting}; removing the idle time would cut the span by {gain:.1f}%."
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


def _copy_kinds(data_path: Sequence[DataPathRow]) -> str:
    """` (host-to-device copies 80%, memsets 20%)`: the kinds of copy whose exposed time
    makes up the stage, largest first (data path's per-kind exposed time, all GPUs)."""
    exposed: dict[str, int] = {}
    for r in data_path:
        if r.kind == "copy" and r.exposed_ns > 0:
            exposed[r.stage] = exposed.get(r.stage, 0) + r.exposed_ns
    total = sum(exposed.values())
    if not total:
        return ""
    # Kinds under 1% of the exposed time would read "0%": left out.
    ranked = sorted(
        ((k, v) for k, v in exposed.items() if v * 100 >= total),
        key=lambda kv: (-kv[1], kv[0]),
    )
    if len(ranked) == 1:
        return f" (all of it {COPY_NAMES.get(ranked[0][0], ranked[0][0] + ' copies')})"
    parts = [f"{COPY_NAMES.get(k, k + ' copies')} {v / total * 100:.0f}%" for k, v in ranked]
    return " (" + ", ".join(parts) + ")"


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
