"""The Capture section: what the trace recorded, and what to record next time to sharpen the
report, each with the exact option that records it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from nsysreport.queries import run_query
from nsysreport.sections.verdict import RECAPTURE, WHOLE_STEPS, WHOLE_STEPS_KINETO
from nsysreport.units import fmt_count, fmt_ns, fmt_pct, fmt_ranks

if TYPE_CHECKING:
    import duckdb

# What each hint's topic is called in the terminal's one-line list.
TOPIC_LABELS = {
    "cuda_graphs": "CUDA graphs traced as a whole",
    "graph_nodes": "no graph node creation",
    "nvtx": "no NVTX",
    "steps": "no steps",
    "layers": "no layers",
    "nccl_ranges": "no NCCL call ranges",
    "message_sizes": "no message sizes",
    "gpu_metrics": "no GPU metrics",
    "window": "a window that cuts the run",
    "unused_gpus": "GPUs that ran nothing",
    "old_export": "an export of nsys 2021 or before",
    "late_start": "ranks that started apart",
    "stream_overlap": "kernels that overlap on one stream",
}


@dataclass(frozen=True, slots=True)
class CaptureFacts:
    """Counts of what the trace holds (queries/capture_facts.sql), summed over the files."""

    activities: int
    api_calls: int
    unlaunched_activities: int
    nvtx_ranges: int
    open_ranges: int
    step_ranges: int
    layer_ranges: int
    collective_ranges: int
    comm_kernels: int
    comm_kernels_sized: int
    graph_launches: int
    graph_kernels: int
    graph_kernels_no_origin: int
    gpu_metrics: bool  # the export holds GPU metric samples
    # graph launches whose kernels the trace records, and those kernels' summed durations
    # against all kernels' (0 in reports written before these were counted)
    graph_replays: int = 0
    graph_kernel_ns: int = 0
    kernel_ns: int = 0
    # kernels that run past their successor's start on their stream: as programmatic dependent
    # launch does, or with a duration that cannot be (queries/derived/stream_overlap.sql; 0 in
    # reports written before these were counted)
    pdl_overlaps: int = 0
    impossible_overlaps: int = 0


@dataclass(frozen=True, slots=True)
class CaptureHint:
    """Something the capture lacks: what it costs the report, and how to record it."""

    topic: str  # cuda_graphs, graph_nodes, nvtx, steps, layers, nccl_ranges, message_sizes,
    # gpu_metrics, window
    finding: str
    command: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One of nsys's warnings or errors about the capture (capture_diagnostic.sql), with the
    times it was recorded over all files."""

    severity: str  # error or warning
    source: str  # injection, daemon, analysis or unknown
    text: str
    count: int


@dataclass(frozen=True, slots=True)
class UnusedGpu:
    """A GPU the trace lists that ran nothing in any file of its host (gpu_listed.sql)."""

    host: str | None
    device_id: int
    gpu_name: str | None


@dataclass(frozen=True, slots=True)
class Capture:
    facts: CaptureFacts
    kineto: bool  # a PyTorch profiler trace: its hints are in PyTorch's terms
    hints: tuple[CaptureHint, ...]
    diagnostics: tuple[Diagnostic, ...] = ()
    unused_gpus: tuple[UnusedGpu, ...] = ()


def read_facts(con: duckdb.DuckDBPyConnection) -> CaptureFacts:
    """The counts of one loaded trace."""
    rows = run_query(con, "capture_facts").to_dicts()
    if not rows:  # no GPU activity: nothing recorded
        counts = {f.name: 0 for f in fields(CaptureFacts) if f.name != "gpu_metrics"}
        return CaptureFacts(**counts, gpu_metrics=False)
    return CaptureFacts(**rows[0])


def summed(facts: Sequence[CaptureFacts]) -> CaptureFacts:
    """Several files' counts as one job's."""
    values = {
        f.name: sum(getattr(x, f.name) for x in facts)
        for f in fields(CaptureFacts)
        if f.name != "gpu_metrics"
    }
    return CaptureFacts(**values, gpu_metrics=all(x.gpu_metrics for x in facts))


def build_capture(
    facts: CaptureFacts,
    graph_opaque_pct: float | None,
    kineto: bool,
    diagnostics: Sequence[Diagnostic] = (),
    unused: Sequence[UnusedGpu] = (),
    export_gaps: Iterable[Mapping[str, Any]] = (),
    late_waits: Sequence[Mapping[str, Any]] = (),
    late_members: Sequence[Mapping[str, Any]] = (),
) -> Capture:
    """What the capture lacks, most costly first; `graph_opaque_pct` is the verdict's share of
    the GPUs' time inside CUDA graphs traced as a whole; `diagnostics`, nsys's warnings and
    errors; `unused`, the listed GPUs that ran nothing; `export_gaps`, export_gaps' rows of
    every file (an export of nsys 2021 or before); `late_waits` and `late_members`, the
    GPUs whose first collective waited for a late-starting rank (late_start_hint)."""
    hints = _hints(facts, graph_opaque_pct, kineto)
    if late_waits:
        hints.insert(0, late_start_hint(late_waits, late_members, kineto))
    gaps = {r["missing"]: r["cost"] for r in export_gaps}
    if gaps:
        hints.insert(0, _old_export_hint(gaps))
    if unused:
        hints.append(_unused_hint(unused, kineto))
    return Capture(facts, kineto, tuple(hints), tuple(diagnostics), tuple(unused))


def merged_diagnostics(rows: Iterable[Mapping[str, Any]]) -> list[Diagnostic]:
    """capture_diagnostic's rows of every file as one list: a message recorded by several
    files (each rank's nsys warns alike) is one item with the sum of their counts; errors
    first, then by how often."""
    counts: dict[tuple[str, str, str], int] = {}
    for r in rows:
        key = (r["severity"], r["source"], r["text"])
        counts[key] = counts.get(key, 0) + r["count"]
    ranked = sorted(counts.items(), key=lambda kv: (kv[0][0] != "error", -kv[1], kv[0]))
    return [Diagnostic(sev, source, text, n) for (sev, source, text), n in ranked]


def unused_gpus(
    rows: Iterable[Mapping[str, Any]], host_of: Mapping[str, str | None]
) -> list[UnusedGpu]:
    """The GPUs gpu_listed's rows list that ran nothing in any file of their host (each rank's
    file lists the whole node; a GPU another rank used is used). `host_of`: file -> host, the
    file itself standing for an unnamed host."""
    listed: dict[tuple[str, int], str | None] = {}
    used: set[tuple[str, int]] = set()
    for r in rows:
        key = (host_of.get(r["file"]) or f"file {r['file']}", r["device_id"])
        listed.setdefault(key, r["gpu_name"])
        if r["used"]:
            used.add(key)
    return [
        UnusedGpu(None if host.startswith("file ") else host, device, listed[(host, device)])
        for host, device in sorted(listed)
        if (host, device) not in used
    ]


def late_start_hint(
    waits: Sequence[Mapping[str, Any]], members: Sequence[Mapping[str, Any]], kineto: bool
) -> CaptureHint:
    """Ranks that started seconds apart: which ranks' first collective waited, how long
    (`waits`: analysed_start's rows, each with its GPU's `rank`), and for which ranks, those
    that arrived last at that instance without waiting (`members`: late_start_rank's rows,
    each with its GPU's `rank`; none when the late rank is not in the trace)."""
    waited = sorted({r["rank"] for r in waits})
    spread = sorted(r["wait_ns"] for r in waits)
    how_long = (
        fmt_ns(spread[-1])
        if spread[0] == spread[-1]
        else f"{fmt_ns(spread[0])} to {fmt_ns(spread[-1])}"
    )
    late = [r for r in members if not r["late_start"] and r["waited_ns"] == 0]
    first = f"the first collective of {_ranks_named(waited)} waited {how_long}"
    if late:
        ranks = sorted({r["rank"] for r in late})
        by = max(r["late_by_ns"] for r in late)
        said = f"{_ranks_named(ranks)} started {fmt_ns(by)} after the first rank: {first} for it"
    else:
        said = f"{first} for a rank that is not in the trace"
    return CaptureHint(
        "late_start",
        f"{said}, spinning as if communicating; that wait and what ran before it are left out "
        "of the times (breakdown, steps, critical path), and the instance out of the "
        "stragglers",
        "start every rank's profiler at the same step, after a dist.barrier() "
        "(torch.profiler.profile(schedule=schedule(wait=1, warmup=1, active=3)) stepped on "
        "every rank)"
        if kineto
        else "start every rank's capture at the same step, after a dist.barrier(): nsys "
        "profile --capture-range=cudaProfilerApi ... with torch.cuda.profiler.start() at that "
        "step on every rank",
    )


def stream_overlap_hint(f: CaptureFacts) -> CaptureHint:
    """Kernels that overlap their successor on one stream, and which kind each is."""
    total = f.pdl_overlaps + f.impossible_overlaps
    return CaptureHint(
        "stream_overlap",
        f"{fmt_count(total)} {'kernel overlaps' if total == 1 else 'kernels overlap'} the next "
        f"kernel on {'its' if total == 1 else 'their'} stream: {fmt_count(f.pdl_overlaps)} as "
        "programmatic dependent launch (PDL) does, the next one starting early and ending "
        f"after; {fmt_count(f.impossible_overlaps)} with a duration that cannot be, ending at "
        "or after the next one (or starting with it). Every time counts the overlap once",
        "nothing to change for PDL; durations that cannot be are the profiler's: re-capture "
        "with a current nsys and CUDA driver",
    )


def _ranks_named(ranks: Sequence[int]) -> str:
    """`rank 3`, `ranks 0-2`, `ranks 0-4,6,7`."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fmt_ranks(ranks)}"


def _old_export_hint(gaps: Mapping[str, str]) -> CaptureHint:
    """An export of nsys 2021 or before: which tables it lacks and what that costs."""
    return CaptureHint(
        "old_export",
        "an export of nsys 2021 or before (no "
        + ", ".join(gaps)
        + "): "
        + "; ".join(gaps.values()),
        "nsys export --type sqlite REPORT.qdrep with a current nsys, if the report file still "
        "exists (nsys reads the .qdrep of old releases)",
    )


def _unused_hint(unused: Sequence[UnusedGpu], kineto: bool) -> CaptureHint:
    """Listed GPUs that ran nothing: an idle part of the node, or ranks whose traces are not
    among those given."""
    names = sorted({g.gpu_name for g in unused if g.gpu_name})
    ids = ", ".join(str(g.device_id) for g in unused[:16]) + (", ..." if len(unused) > 16 else "")
    one = len(unused) == 1
    return CaptureHint(
        "unused_gpus",
        f"{'GPU' if one else 'GPUs'} {ids}{f' ({names[0]})' if len(names) == 1 else ''} "
        f"{'is' if one else 'are'} listed by the trace but ran nothing in it: the job uses "
        "fewer GPUs than the node has, or the processes that drive "
        f"{'it' if one else 'them'} were not traced",
        "give every rank's trace (nsysreport rank0.json rank1.json ...)"
        if kineto
        else "trace every process of the job: nsys profile ... torchrun ... (one file), or "
        "one nsys profile -o rank%q{RANK} per rank, and give all the files",
    )


def _hints(f: CaptureFacts, graph_opaque_pct: float | None, kineto: bool) -> list[CaptureHint]:
    hints = []
    if f.graph_launches:
        hints.append(
            CaptureHint(
                "cuda_graphs",
                f"{fmt_pct(graph_opaque_pct)} of the GPUs' time is inside "
                f"{fmt_count(f.graph_launches)} CUDA graph launches traced as a whole: their "
                "kernels, layers and collectives are not in the report",
                RECAPTURE,
            )
        )
    if f.graph_kernels_no_origin and kineto:
        share = fmt_pct(100 * f.graph_kernel_ns / f.kernel_ns if f.kernel_ns else None)
        per = f.graph_kernels / f.graph_replays if f.graph_replays else 0
        hints.append(
            CaptureHint(
                "graph_nodes",
                f"{fmt_count(f.graph_kernels)} kernels were replayed by "
                f"{fmt_count(f.graph_replays)} CUDA/HIP graph launches ({per:.0f} per replay, "
                f"{share} of kernel time); the profiler records no graph capture, so their layer "
                "follows the graph launch call, not the module that captured them",
                "profile a few steps without graphs for per-layer numbers (vLLM --enforce-eager, "
                "SGLang --disable-cuda-graph, torch.compile without mode='reduce-overhead')",
            )
        )
    elif f.graph_kernels_no_origin:
        hints.append(
            CaptureHint(
                "graph_nodes",
                f"{fmt_count(f.graph_kernels_no_origin)} of {fmt_count(f.graph_kernels)} kernels "
                "replayed from CUDA graphs have no node-creation record, so their layer follows "
                "the cudaGraphLaunch call instead of the ranges open when the graph was captured",
                "start the capture before the graphs are captured (no --delay or --capture-range "
                "that begins after warm-up), with --cuda-graph-trace=node",
            )
        )
    if not f.nvtx_ranges:
        hints.append(
            CaptureHint(
                "nvtx",
                "no NVTX ranges: the report has no steps, no layers and no NCCL call names",
                "record_function('step 3') / record_function('layers.3') around steps and layers"
                if kineto
                else "nsys profile --trace=cuda,nvtx ..., and name steps and layers: "
                "torch.cuda.nvtx.range_push('layers.3') / range_pop(), or "
                "torch.autograd.profiler.emit_nvtx()",
            )
        )
    else:
        if not f.step_ranges:
            hints.append(
                CaptureHint(
                    "steps",
                    "no range matches the step pattern: no per-step numbers",
                    "torch.profiler.profile(schedule=...) with prof.step() every step"
                    if kineto
                    else "a range per step (torch.cuda.nvtx.range_push(f'step {i}')), or "
                    "nsysreport --step-pattern REGEX",
                )
            )
        if not f.layer_ranges:
            hints.append(
                CaptureHint(
                    "layers",
                    "no range matches the layer pattern: no per-layer numbers",
                    "a range per layer (e.g. 'layers.3'), or nsysreport --layer-pattern REGEX",
                )
            )
    if f.comm_kernels and not f.collective_ranges and not kineto:
        hints.append(
            CaptureHint(
                "nccl_ranges",
                f"{fmt_count(f.comm_kernels)} communication kernels but no NCCL call ranges: "
                "collective ops come from kernel names (a SendRecv kernel may be an all-to-all)",
                "nsys profile --trace=cuda,nvtx ... (NCCL 2.8.3 and later annotate their calls "
                "with NVTX; leave NCCL_NVTX_DISABLE unset)",
            )
        )
    if f.comm_kernels_sized < f.comm_kernels:
        hints.append(
            CaptureHint(
                "message_sizes",
                f"{fmt_count(f.comm_kernels - f.comm_kernels_sized)} of "
                f"{fmt_count(f.comm_kernels)} communication kernels have no message size: "
                "no bandwidth for them",
                "nsysreport --comm-bytes OP=BYTES (NCCL's NVTX payload carries the size when "
                "the capture records it)",
            )
        )
    if not f.gpu_metrics and not kineto:
        hints.append(
            CaptureHint(
                "gpu_metrics",
                "no GPU metric samples: no DRAM, NVLink or PCIe throughput",
                "nsys profile --gpu-metrics-devices=all ...",
            )
        )
    if f.pdl_overlaps or f.impossible_overlaps:
        hints.append(stream_overlap_hint(f))
    if f.unlaunched_activities or f.open_ranges:
        cut = []
        if f.unlaunched_activities:
            cut.append(
                f"{fmt_count(f.unlaunched_activities)} GPU activities were launched before the "
                "capture began (they count in GPU time, but in no step or layer)"
            )
        if f.open_ranges:
            cut.append(f"{fmt_count(f.open_ranges)} NVTX ranges never end in the trace")
        hints.append(
            CaptureHint(
                "window",
                "the capture window cuts the run: " + "; ".join(cut),
                WHOLE_STEPS_KINETO if kineto else WHOLE_STEPS,
            )
        )
    return hints
