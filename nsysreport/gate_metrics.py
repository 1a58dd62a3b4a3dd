"""The metrics `gate` can check: each one's name, unit, direction and aggregation, and how it
reads the report model (the same fields and properties the report shows)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nsysreport.critical_path import CAUSES, HOST_CAUSES
from nsysreport.errors import OptionError
from nsysreport.model import Report
from nsysreport.sections.gpu_breakdown import GpuReport
from nsysreport.sections.kernel_layers import KernelLayerTotal
from nsysreport.sections.layers import OUTSIDE

GpuKey = tuple[str, int, int]  # (file, pid, device_id)


@dataclass(frozen=True, slots=True)
class Spread:
    """Step-to-step range of a metric: the lowest and highest of `samples` values."""

    low: float
    high: float
    samples: int
    over: str  # what was sampled: "steps of rank 3", "GPU-steps"


@dataclass(frozen=True, slots=True)
class Measure:
    value: float | None  # None: the trace has nothing to measure (the note says why)
    spread: Spread | None = None
    note: str = ""  # which GPU, layer or steps the value comes from


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    unit: str  # "pct" or "ns"
    higher_is_worse: bool
    aggregation: str  # one line for --help, the README and the error listing metrics
    compute: Callable[[Report, str | None], Measure]  # (report, [selector]) -> measure
    selector: bool = False  # takes `name[ARG]`


def _key(g: GpuReport) -> GpuKey:
    return g.file, g.pid, g.device_id


def _per_gpu_share(
    part: str, worst: Callable[..., float]
) -> Callable[[Report, str | None], Measure]:
    """A breakdown part as % of time: the median over each GPU's steps (Report.step_shares), or
    its share of the span without steps (GpuReport.shares_pct); the worst GPU."""

    def compute(report: Report, _: str | None) -> Measure:
        shares = report.step_shares(part)
        if shares:
            target = worst(s.median_pct for s in shares)
            s = next(s for s in shares if s.median_pct == target)  # the first among equals
            spread = Spread(s.low_pct, s.high_pct, s.steps, f"steps of rank {s.rank}")
            return Measure(s.median_pct, spread, f"rank {s.rank}, median of {s.steps} steps")
        values = {_key(g): g.shares_pct[part] for g in report.gpus if g.span_ns}
        return _worst_gpu(report, values, worst, "no GPU activity", "whole trace (no steps)")

    return compute


def _per_gpu_value(
    value: Callable[[GpuReport], float | None],
    worst: Callable[..., float],
    missing: str,
) -> Callable[[Report, str | None], Measure]:
    """A whole-trace per-GPU value, worst GPU; GPUs where it is None are left out."""

    def compute(report: Report, _: str | None) -> Measure:
        values = {_key(g): value(g) for g in report.gpus}
        return _worst_gpu(report, values, worst, missing, "whole trace")

    return compute


def _worst_gpu(
    report: Report,
    values: Mapping[GpuKey, float | None],
    worst: Callable[..., float],
    missing: str,
    over: str,
) -> Measure:
    """The worst of per-GPU values (the first GPU in report order among equals), and its rank."""
    known = {k: v for k, v in values.items() if v is not None}
    if not known:
        return Measure(None, note=missing)
    target = worst(known.values())
    key = next(k for k, v in known.items() if v == target)
    rank = next(g.rank for g in report.gpus if _key(g) == key)
    return Measure(target, None, f"rank {rank}, {over}")


def _step_time(report: Report, _: str | None) -> Measure:
    if report.steps:
        times = [s.step_time_ns for s in report.steps]
        gpus = len({(s.file, s.pid, s.device_id) for s in report.steps})
        spread = Spread(min(times), max(times), len(times), "GPU-steps")
        note = f"median of {len(times)} steps on {gpus} GPU{'s' * (gpus != 1)}"
        return Measure(report.median_step_ns, spread, note)
    if not report.gpus:
        return Measure(None, note="no GPU activity")
    return Measure(report.median_span_ns, None, "no steps matched: median GPU span instead")


def _straggler_wait(report: Report, _: str | None) -> Measure:
    spans = {_key(g): g.span_ns for g in report.gpus}
    waits = {
        (s.file, s.pid, s.device_id): 100.0 * s.wait_ns / span
        for s in report.stragglers.gpus
        if (span := spans.get((s.file, s.pid, s.device_id)))
    }
    if not waits:
        return Measure(0.0, None, "no collectives matched across GPUs")
    return _worst_gpu(report, waits, max, "", "whole trace")


def _exposed_comm_share(report: Report, role: str | None) -> Measure:
    """exposed_comm_pct; with [ROLE], the exposed comm of that role's communicators alone."""
    if role is None:
        return _per_gpu_share("exposed comm", max)(report, None)
    mine = [c for c in report.communicators if c.role == role]
    if not mine:
        known = sorted({c.role for c in report.communicators if c.role is not None})
        told = ", ".join(known) or "none (name them with --comm-group NAME=RANKS|stream:N|REGEX)"
        raise OptionError(f"no communicator has the role {role!r}; the roles: {told}")
    gpus = {(c.file, c.pid, c.device_id) for c in mine}
    if report.steps:
        exposed: dict[tuple[str, int, int, int], int] = {}
        for x in report.communicator_steps:
            if x.role == role:
                step = (x.file, x.pid, x.device_id, x.step_ordinal)
                exposed[step] = exposed.get(step, 0) + x.exposed_ns
        shares: dict[GpuKey, list[float]] = {}
        ranks: dict[GpuKey, int] = {}
        for s in report.steps:
            gpu = (s.file, s.pid, s.device_id)
            if gpu in gpus and s.step_time_ns > 0:
                got = exposed.get((*gpu, s.ordinal), 0)
                shares.setdefault(gpu, []).append(100.0 * got / s.step_time_ns)
                ranks[gpu] = s.rank
        if shares:
            medians = {k: statistics.median(v) for k, v in shares.items()}
            worst = max(medians.values())
            chosen = next(k for k, v in medians.items() if v == worst)
            values = shares[chosen]
            over = f"steps of rank {ranks[chosen]}"
            spread = Spread(min(values), max(values), len(values), over)
            note = f"{role}, rank {ranks[chosen]}, median of {len(values)} steps"
            return Measure(worst, spread, note)
    spans = {_key(g): g.span_ns for g in report.gpus}
    totals: dict[GpuKey, float | None] = {}
    for c in mine:
        gpu = (c.file, c.pid, c.device_id)
        if spans.get(gpu):
            totals[gpu] = (totals.get(gpu) or 0.0) + 100.0 * c.exposed_ns / spans[gpu]
    return _worst_gpu(report, totals, max, "no GPU activity", f"{role}, whole trace (no steps)")


def _layer_exposed_comm(report: Report, layer: str | None) -> Measure:
    """LayerAcrossGpus.exposed_comm_mean_ns of the named layer, else of the most exposed one
    (the one the verdict names: layers_across comes most exposed first)."""
    inside = [x for x in report.layers_across if x.layer != OUTSIDE]
    if layer is not None:
        chosen = next((x for x in inside if x.layer == layer), None)
        if chosen is None:
            known = ", ".join(x.layer for x in inside)
            known = known or "none (no NVTX range matched the layer pattern)"
            raise OptionError(f"no layer named {layer!r}; its layers: {known}")
    elif not inside:
        return Measure(None, note="no NVTX range matched the layer pattern")
    else:
        chosen = inside[0]
    gpus = chosen.gpus
    note = f"{chosen.layer}, mean of {gpus} GPU{'s' * (gpus != 1)}"
    return Measure(chosen.exposed_comm_mean_ns, None, note)


def _gap_p99(report: Report, _: str | None) -> Measure:
    if not report.gpus:
        return Measure(None, note="no GPU activity")
    if all(g.gaps.p99_ns is None for g in report.gpus):
        return Measure(0.0, None, "no GPU has a gap")
    return _per_gpu_value(lambda g: g.gaps.p99_ns, max, "")(report, None)


# critical_path_pct's default: the causes where the path's GPU waited (for the host, a launch, a
# synchronisation or another stream), together.
HOST_SIDE = "host_side"


def _critical_path_share(report: Report, cause: str | None) -> Measure:
    """The critical path's time on `cause` (default: every host-side cause) as % of its
    window (the median step, else the middle of the trace)."""
    path = report.critical_path
    chosen = cause or HOST_SIDE
    if chosen != HOST_SIDE and chosen not in CAUSES:
        raise OptionError(
            f"critical_path_pct[{chosen}]: no such cause; the causes: {HOST_SIDE}, "
            + ", ".join(CAUSES)
        )
    if path is None:
        return Measure(None, note="no critical path (no GPU work)")
    wanted = HOST_CAUSES if chosen == HOST_SIDE else (chosen,)
    ns = sum(c.ns for c in path.causes if c.cause in wanted)
    window = f"{path.basis} {path.step}" if path.step else path.basis
    return Measure(100.0 * ns / path.length_ns, None, f"{chosen}, {window}")


def _critical_path_wait(report: Report, _: str | None) -> Measure:
    """The longest wait for a rank at a collective on the critical path."""
    path = report.critical_path
    if path is None:
        return Measure(None, note="no critical path (no GPU work)")
    if not path.waits:
        return Measure(0.0, None, "no collective on the path waited for a rank")
    w = path.longest_waits[0]
    return Measure(float(w.wait_ns), None, f"rank {w.last_rank} at {w.op} #{w.ordinal}")


def _mfu(report: Report, family: str | None) -> Measure:
    """Model FLOPs utilisation: the median step's (else the span's), or with [REGEX] the
    kernel families whose name matches it, their FLOPs over their time at peak."""
    c = report.compute
    if c is None:
        return Measure(None, note="no operator with recorded shapes (record_shapes=True)")
    if family is None:
        if c.step_mfu_pct is not None:
            return Measure(c.step_mfu_pct, None, f"median step, {(c.dtype or '?').upper()} peak")
        return Measure(c.span_mfu_pct, None, f"span, {c.peak_source}")
    try:
        pattern = re.compile(family, re.IGNORECASE)
    except re.error as exc:
        raise OptionError(f"mfu_pct[{family}]: not a regular expression ({exc})") from None
    chosen = [f for f in c.families if pattern.search(f.family)]
    if not chosen:
        return Measure(None, note=f"no kernel family matches {family!r}")
    if any(f.mfu_pct is None or not f.mfu_pct for f in chosen):
        return Measure(None, note="a matching family has no known peak (give --peak-tflops)")
    # Each family's time at peak is flops / mfu: summed, the families' MFU together.
    at_peak = sum(f.flops * 100 / f.mfu_pct for f in chosen if f.mfu_pct)
    flops = sum(f.flops for f in chosen)
    return Measure(100 * flops / at_peak, None, f"{len(chosen)} kernel families")


# kernel_time_*[SELECTOR]: a kernel class (docs/metrics.md "Kernel classes", copies included),
# else a regular expression searched in the kernel names.
KERNEL_CLASSES = ("gemm", "attention", "comm", "other", "memcpy")


def _kernel_family(
    report: Report, selector: str | None, metric: str
) -> tuple[list[KernelLayerTotal], str]:
    """The kernel_layers rows of one kernel class or of the names matching a regex."""
    if selector is None:
        raise OptionError(
            f"{metric} needs a [CLASS] ({', '.join(KERNEL_CLASSES)}) or a [REGEX] of kernel "
            f"names, e.g. {metric}[gemm]"
        )
    if selector in KERNEL_CLASSES:
        return [k for k in report.kernel_layers if k.kernel_class == selector], selector
    try:
        pattern = re.compile(selector, re.IGNORECASE)
    except re.error as exc:
        raise OptionError(f"{metric}[{selector}]: not a regular expression ({exc})") from None
    return [k for k in report.kernel_layers if pattern.search(k.name)], f"names ~ {selector}"


def _no_kernel_table(report: Report) -> bool:
    """A report with kernels but no per-kernel rows was written before the kernel diff."""
    return not report.kernel_layers and any(g.kernel_count or g.memcpy_count for g in report.gpus)


def _kernel_time(report: Report, selector: str | None) -> Measure:
    """The family's summed kernel time per step and GPU (per GPU over the trace without
    steps): what compare's kernel diff shows."""
    rows, what = _kernel_family(report, selector, "kernel_time_ns")
    if _no_kernel_table(report):
        return Measure(None, note="no kernel_layers in the report (written before them)")
    if not report.gpus:
        return Measure(None, note="no GPU activity")
    gpus = len(report.gpus)
    steps = len({(s.file, s.pid, s.device_id, s.ordinal) for s in report.steps}) // gpus
    per = "per step and GPU" if steps else "per GPU, whole trace (no steps)"
    ns = sum(k.total_ns for k in rows) / (gpus * max(steps, 1))
    note = f"{what}, {len({k.name for k in rows})} names, {per}"
    return Measure(ns, None, note)


def _kernel_share(report: Report, selector: str | None) -> Measure:
    """The family's share of all kernel and copy time (summed durations), whole trace."""
    rows, what = _kernel_family(report, selector, "kernel_time_pct")
    if _no_kernel_table(report):
        return Measure(None, note="no kernel_layers in the report (written before them)")
    total = sum(k.total_ns for k in report.kernel_layers)
    if not total:
        return Measure(None, note="no kernel time")
    ns = sum(k.total_ns for k in rows)
    note = f"{what}, {len({k.name for k in rows})} names, all GPUs, whole trace"
    return Measure(100.0 * ns / total, None, note)


def _pageable_copies(report: Report, _: str | None) -> Measure:
    """The worst GPU's share of its host-side copy bytes (those whose host memory the trace
    names) to or from pageable memory, whole trace (data_path's pageable/pinned bytes)."""
    host: dict[GpuKey, list[int]] = {}
    for r in report.data_path:
        if r.pageable_bytes or r.pinned_bytes:
            sums = host.setdefault((r.file, r.pid, r.device_id), [0, 0])
            sums[0] += r.pageable_bytes or 0
            sums[1] += (r.pageable_bytes or 0) + (r.pinned_bytes or 0)
    values = {key: 100.0 * pageable / total for key, (pageable, total) in host.items()}
    return _worst_gpu(report, values, max, "no copy to or from pinned or pageable host memory",
                      "whole trace")  # fmt: skip


def _overlap(g: GpuReport) -> float | None:
    return g.overlap_pct


def _exposed_comm(g: GpuReport) -> float:
    return g.exposed_comm_ns


def _idle(g: GpuReport) -> float:
    return g.idle_ns


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "exposed_comm_pct",
            "pct",
            True,
            "worst GPU's exposed_comm_ns as % of time; median over its steps if any, else of "
            "span; exposed_comm_pct[ROLE] counts one communicator role's (tp, dp, ...) alone",
            _exposed_comm_share,
            selector=True,
        ),
        Metric(
            "exposed_memcpy_pct",
            "pct",
            True,
            "worst GPU's exposed_memcpy_ns as % of time; median over steps if any, else of span",
            _per_gpu_share("exposed memcpy", max),
        ),
        Metric(
            "idle_pct",
            "pct",
            True,
            "worst GPU's idle_ns as % of time; median over its steps if any, else of span",
            _per_gpu_share("idle", max),
        ),
        Metric(
            "graph_opaque_pct",
            "pct",
            True,
            "worst GPU's graph_opaque_ns (inside CUDA graphs traced as a whole) as % of time; "
            "median over its steps if any, else of span",
            _per_gpu_share("graph opaque", max),
        ),
        Metric(
            "compute_pct",
            "pct",
            False,
            "least GPU's compute_ns as % of time; median over its steps if any, else of span",
            _per_gpu_share("compute", min),
        ),
        Metric(
            "overlap_pct",
            "pct",
            False,
            "least overlap_pct of the GPUs that communicate (whole trace); skipped if none do",
            _per_gpu_value(_overlap, min, "no GPU has communication"),
        ),
        Metric(
            "step_time_ns",
            "ns",
            True,
            "median step_time_ns over all steps of all GPUs; without steps the median GPU span",
            _step_time,
        ),
        Metric(
            "gap_p99_ns",
            "ns",
            True,
            "largest gaps.p99_ns of any GPU (whole trace); 0 when no GPU has a gap",
            _gap_p99,
        ),
        Metric(
            "straggler_wait_pct",
            "pct",
            True,
            "largest stragglers wait_ns of any GPU as % of its span_ns (whole trace)",
            _straggler_wait,
        ),
        Metric(
            "layer_exposed_comm_ns",
            "ns",
            True,
            "exposed_comm_ns of the worst layer, mean over GPUs, all occurrences; "
            "layer_exposed_comm_ns[NAME] gates one layer",
            _layer_exposed_comm,
            selector=True,
        ),
        Metric(
            "exposed_comm_ns",
            "ns",
            True,
            "largest exposed_comm_ns of any GPU (whole trace)",
            _per_gpu_value(_exposed_comm, max, "no GPU activity"),
        ),
        Metric(
            "idle_ns",
            "ns",
            True,
            "largest idle_ns of any GPU (whole trace)",
            _per_gpu_value(_idle, max, "no GPU activity"),
        ),
        Metric(
            "critical_path_pct",
            "pct",
            True,
            "the critical path's host-side causes (launch latency, CUDA API, synchronisation, "
            "host, GPU waiting, untraced) as % of its window (the median step); "
            "critical_path_pct[CAUSE] gates one cause",
            _critical_path_share,
            selector=True,
        ),
        Metric(
            "critical_path_wait_ns",
            "ns",
            True,
            "the longest wait for a rank at a collective on the critical path",
            _critical_path_wait,
        ),
        Metric(
            "mfu_pct",
            "pct",
            False,
            "model FLOPs utilisation of the median step (else the span); mfu_pct[REGEX]: of the "
            "kernel families matching REGEX",
            _mfu,
            selector=True,
        ),
        Metric(
            "kernel_time_ns",
            "ns",
            True,
            "kernel_time_ns[CLASS|REGEX]: the summed time of one kernel class (gemm, attention, "
            "comm, other, memcpy) or of the kernel names matching REGEX, per step and GPU "
            "(without steps per GPU over the trace)",
            _kernel_time,
            selector=True,
        ),
        Metric(
            "kernel_time_pct",
            "pct",
            True,
            "kernel_time_pct[CLASS|REGEX]: that time's share of all kernel and copy time "
            "(summed durations, all GPUs, whole trace)",
            _kernel_share,
            selector=True,
        ),
        Metric(
            "pageable_copy_pct",
            "pct",
            True,
            "worst GPU's copy bytes to or from pageable host memory as % of its copy bytes to or "
            "from host memory of a known kind (whole trace); skipped without such copies",
            _pageable_copies,
        ),
    )
}


def metric_of(name: str) -> tuple[Metric, str | None]:
    """The metric `name` refers to, and its [selector] if it has one."""
    match = re.fullmatch(r"(\w+)(?:\[(.+)\])?", name.strip())
    metric = METRICS.get(match.group(1)) if match else None
    if match is None or metric is None:
        valid = ", ".join(METRICS) + (
            ", layer_exposed_comm_ns[LAYER], exposed_comm_pct[ROLE], critical_path_pct[CAUSE], "
            "kernel_time_ns[CLASS|REGEX], kernel_time_pct[CLASS|REGEX]"
        )
        raise OptionError(f"unknown metric {name!r}; valid metrics: {valid}")
    if match.group(2) is not None and not metric.selector:
        raise OptionError(f"metric {metric.name!r} takes no [selector]")
    return metric, match.group(2)
