"""The kernel-level diff of a configuration against the baseline, and whether the two captures
can be compared at all (GPU model, kernel set, model shape, capture window)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from nsysreport.model import Report
from nsysreport.sections.kernel_layers import KernelLayerTotal
from nsysreport.sections.layers import OUTSIDE
from nsysreport.units import fmt_bytes, fmt_ns, fmt_pct

# The kernel sets match when at least this share of both captures' kernel time (per step and
# GPU) is in names both ran. Below it more than a tenth of the time is in kernels one side
# never ran, so the deltas of the shared kernels no longer account for the change (and NCCL
# picking another algorithm, one name for another, stays well inside it: the collectives'
# share of a step is rarely above a tenth once it is that different).
KERNEL_SET_MIN_PCT = 90.0
# The capture windows match when the longer GPU span is at most this much longer: per-GPU
# totals over a window (a trace without steps) move with its length one for one.
WINDOW_TOLERANCE_PCT = 10.0
# The same model when the FLOPs the profiler recorded per step (summed over GPUs) agree this
# closely.
FLOPS_TOLERANCE_PCT = 5.0
TOP = 10  # rows of each diff table


@dataclass(frozen=True, slots=True)
class Check:
    """One comparability check: ok True (same), False (differs) or None (unknown)."""

    check: str  # gpu_model, gpu_count, kernel_set, model, window
    ok: bool | None
    sentence: str


@dataclass(frozen=True, slots=True)
class KernelChange:
    """One kernel name in one layer, per step and GPU in the baseline (base_) and in the
    configuration; instances paired in order of occurrence (`matched`)."""

    name: str
    kernel_class: str
    layer: str
    base_ns: float
    ns: float
    delta_ns: float
    delta_pct: float | None  # of base_ns; None when the baseline did not run it there
    base_count: float
    count: float
    delta_count: float
    matched: float  # min(base_count, count): instances paired k-th with k-th
    status: str  # changed, new (only here), vanished (only in the baseline)


@dataclass(frozen=True, slots=True)
class LayerDelta:
    layer: str
    base_ns: float  # kernel time per step and GPU
    ns: float
    delta_ns: float


@dataclass(frozen=True, slots=True)
class KernelDiff:
    """One configuration against the baseline, kernel by kernel."""

    label: str
    baseline: str
    per: str  # "step and GPU", or "GPU" (whole capture) when a side has no steps
    comparable: bool  # no check says the captures differ
    verdict: str  # one sentence: comparable, or what differs
    checks: tuple[Check, ...]
    base_total_ns: float  # all kernel and copy time per step and GPU
    total_ns: float
    by_time: tuple[KernelChange, ...]  # largest |delta_ns| first
    by_count: tuple[KernelChange, ...]  # largest |delta_count| first; changed counts only
    new: tuple[KernelChange, ...]  # every name only this configuration ran, most time first
    vanished: tuple[KernelChange, ...]  # every name only the baseline ran, most time first
    layers: tuple[LayerDelta, ...]  # per layer, in layer order


def kernel_diff(
    base: tuple[str, Report], other: tuple[str, Report], steps: dict[str, int], top: int = TOP
) -> KernelDiff:
    """`other` against `base`, (label, report) each; `steps`: steps per GPU by label (0: the
    comparison is over each GPU's whole capture)."""
    (base_label, a), (label, b) = base, other
    per_step = steps.get(base_label, 0) > 0 and steps.get(label, 0) > 0
    norm_a = _per(a, steps.get(base_label, 0) if per_step else 0)
    norm_b = _per(b, steps.get(label, 0) if per_step else 0)
    rows_a, rows_b = _keyed(a.kernel_layers, norm_a), _keyed(b.kernel_layers, norm_b)
    names_a = {key[0] for key in rows_a}
    names_b = {key[0] for key in rows_b}
    changes = []
    for key in sorted(set(rows_a) | set(rows_b), key=lambda k: _order(k, rows_a, rows_b)):
        name, layer = key
        ka, kb = rows_a.get(key), rows_b.get(key)
        row = ka or kb
        assert row is not None  # the key is one side's
        ns_a, count_a = (ka[2], ka[3]) if ka else (0.0, 0.0)
        ns_b, count_b = (kb[2], kb[3]) if kb else (0.0, 0.0)
        status = "changed"
        if name not in names_a:
            status = "new"
        elif name not in names_b:
            status = "vanished"
        changes.append(
            KernelChange(
                name=name,
                kernel_class=row[0],
                layer=layer,
                base_ns=ns_a,
                ns=ns_b,
                delta_ns=ns_b - ns_a,
                delta_pct=100.0 * (ns_b - ns_a) / ns_a if ns_a else None,
                base_count=count_a,
                count=count_b,
                delta_count=count_b - count_a,
                matched=min(count_a, count_b),
                status=status,
            )
        )
    by_time = sorted((c for c in changes if c.delta_ns), key=lambda c: -abs(c.delta_ns))
    by_count = sorted((c for c in changes if c.delta_count), key=lambda c: -abs(c.delta_count))
    checks = comparability(base, other, rows_a, rows_b, steps, per_step)
    differ = [c for c in checks if c.ok is False]
    verdict = (
        f"{label} against {base_label}: comparable (" + "; ".join(_brief(c) for c in checks) + ")."
        if not differ
        else f"{label} against {base_label}: not like for like: "
        + " ".join(c.sentence for c in differ)
    )
    return KernelDiff(
        label=label,
        baseline=base_label,
        per="step and GPU" if per_step else "GPU",
        comparable=not differ,
        verdict=verdict,
        checks=checks,
        base_total_ns=sum(v[2] for v in rows_a.values()),
        total_ns=sum(v[2] for v in rows_b.values()),
        by_time=tuple(by_time[:top]),
        by_count=tuple(by_count[:top]),
        new=tuple(_by_name(changes, "new")),
        vanished=tuple(_by_name(changes, "vanished")),
        layers=_layers(changes),
    )


# (name, layer) -> (class, layer_index, ns per step and GPU, instances per step and GPU)
Keyed = dict[tuple[str, str], tuple[str, int | None, float, float]]


def _per(report: Report, steps: int) -> float:
    """What a report's totals are divided by: its GPUs times its steps per GPU (or 1)."""
    return max(len(report.gpus), 1) * max(steps, 1)


def _keyed(rows: Sequence[KernelLayerTotal], divisor: float) -> Keyed:
    out: Keyed = {}
    for x in rows:
        key = (x.name, x.layer)
        kernel_class, index, ns, count = out.get(key, (x.kernel_class, x.layer_index, 0.0, 0.0))
        out[key] = (kernel_class, index, ns + x.total_ns / divisor, count + x.instances / divisor)
    return out


def _order(key: tuple[str, str], a: Keyed, b: Keyed) -> tuple[bool, int, str, str]:
    """Layer order (outside layers last), then name: ties of the diff's sorts keep it."""
    row = a.get(key) or b[key]
    return (key[1] == OUTSIDE, -1 if row[1] is None else row[1], key[1], key[0])


def _by_name(changes: Sequence[KernelChange], status: str) -> list[KernelChange]:
    """The `status` rows summed over layers: one row per name (layer `(all layers)` when it
    ran in several), most time first."""
    rows: dict[str, list[KernelChange]] = {}
    for c in changes:
        if c.status == status:
            rows.setdefault(c.name, []).append(c)
    merged = [_merged(name, group) for name, group in rows.items()]
    return sorted(merged, key=lambda c: -max(c.ns, c.base_ns))


def _merged(name: str, group: Sequence[KernelChange]) -> KernelChange:
    base_ns, ns = sum(c.base_ns for c in group), sum(c.ns for c in group)
    base_count, count = sum(c.base_count for c in group), sum(c.count for c in group)
    return KernelChange(
        name=name,
        kernel_class=group[0].kernel_class,
        layer=group[0].layer if len(group) == 1 else "(all layers)",
        base_ns=base_ns,
        ns=ns,
        delta_ns=ns - base_ns,
        delta_pct=100.0 * (ns - base_ns) / base_ns if base_ns else None,
        base_count=base_count,
        count=count,
        delta_count=count - base_count,
        matched=0.0,
        status=group[0].status,
    )


def _layers(changes: Sequence[KernelChange]) -> tuple[LayerDelta, ...]:
    """Per layer: the kernel time per step and GPU on both sides (changes come in layer
    order already)."""
    sums: dict[str, list[float]] = {}
    for c in changes:
        entry = sums.setdefault(c.layer, [0.0, 0.0])
        entry[0] += c.base_ns
        entry[1] += c.ns
    return tuple(LayerDelta(layer, x, y, y - x) for layer, (x, y) in sums.items())


def comparability(
    base: tuple[str, Report],
    other: tuple[str, Report],
    rows_a: Keyed,
    rows_b: Keyed,
    steps: dict[str, int],
    per_step: bool,
) -> tuple[Check, ...]:
    """Each check in one sentence; none refuses the comparison."""
    (la, a), (lb, b) = base, other
    return (
        _gpu_model(la, a, lb, b),
        _gpu_count(la, a, lb, b),
        _kernel_set(la, lb, rows_a, rows_b),
        _model(la, a, lb, b),
        _window(la, a, lb, b, steps, per_step),
    )


def _brief(c: Check) -> str:
    """A check that passed, in a few words."""
    return c.sentence.rstrip(".")


def _gpu_model(la: str, a: Report, lb: str, b: Report) -> Check:
    ma = sorted({g.gpu_name for g in a.gpus if g.gpu_name})
    mb = sorted({g.gpu_name for g in b.gpus if g.gpu_name})
    if not ma or not mb:
        unknown = ", ".join(label for label, m in ((la, ma), (lb, mb)) if not m)
        return Check("gpu_model", None, f"GPU model unknown for {unknown}.")
    if ma == mb:
        return Check("gpu_model", True, f"same GPU model ({', '.join(ma)}).")
    return Check(
        "gpu_model",
        False,
        f"The GPU model differs: {la} ran on {', '.join(ma)}, {lb} on {', '.join(mb)}.",
    )


def _gpu_count(la: str, a: Report, lb: str, b: Report) -> Check:
    """Another GPU count is a scaling comparison, not a mismatch: the figures are per GPU."""
    na, nb = len(a.gpus), len(b.gpus)
    if na == nb:
        return Check("gpu_count", True, f"{na} GPU{'s' * (na != 1)} each.")
    return Check(
        "gpu_count",
        True,
        f"{nb} GPUs against {na}: a scaling comparison, every figure per GPU.",
    )


def _kernel_set(la: str, lb: str, rows_a: Keyed, rows_b: Keyed) -> Check:
    """The time-weighted share of both sides' kernel time in names both ran."""
    time_a: dict[str, float] = {}
    time_b: dict[str, float] = {}
    for rows, times in ((rows_a, time_a), (rows_b, time_b)):
        for (name, _), row in rows.items():
            times[name] = times.get(name, 0.0) + row[2]
    total = sum(time_a.values()) + sum(time_b.values())
    if not total:
        return Check("kernel_set", None, "no kernel time on either side to compare.")
    common = set(time_a) & set(time_b)
    shared = sum(time_a[n] for n in common) + sum(time_b[n] for n in common)
    pct = 100.0 * shared / total
    only_a, only_b = len(set(time_a) - common), len(set(time_b) - common)
    what = f"{fmt_pct(pct)} of the kernel time is in names both ran"
    if pct >= KERNEL_SET_MIN_PCT:
        return Check("kernel_set", True, f"{what}.")
    return Check(
        "kernel_set",
        False,
        f"The kernel sets differ: {what} (under {KERNEL_SET_MIN_PCT:.0f}%); {only_b} "
        f"name{'s' * (only_b != 1)} only in {lb}, {only_a} only in {la}.",
    )


def _model(la: str, a: Report, lb: str, b: Report) -> Check:
    """--model's all-reduce message (tokens x hidden x sizeof(dtype)) when both reports were
    made with it, else the FLOPs the profiler recorded per step; else unknown."""
    ea = {x.expected_message_bytes for x in a.tp_structure if x.expected_message_bytes}
    eb = {x.expected_message_bytes for x in b.tp_structure if x.expected_message_bytes}
    if ea and eb:
        if ea == eb:
            shown = fmt_bytes(min(ea))
            return Check("model", True, f"same --model (tokens x hidden x dtype {shown}).")
        return Check(
            "model",
            False,
            f"The model shape or tokens differ: --model gives {fmt_bytes(min(ea))} per "
            f"all-reduce (tokens x hidden x dtype) for {la}, {fmt_bytes(min(eb))} for {lb}.",
        )
    fa, fb = _step_flops(a), _step_flops(b)
    if fa and fb:
        change = 100.0 * (fb - fa) / fa
        if abs(change) <= FLOPS_TOLERANCE_PCT:
            return Check("model", True, f"the same recorded FLOPs per step ({change:+.1f}%).")
        return Check(
            "model",
            False,
            f"The model shape or tokens differ: the recorded FLOPs per step (all GPUs) are "
            f"{fb / fa:.2f}x {la}'s in {lb}.",
        )
    return Check("model", None, "model shape and tokens unknown (no --model, no shapes).")


def _step_flops(report: Report) -> float | None:
    """The median over steps of the FLOPs the profiler's shapes give (all GPUs)."""
    c = report.compute
    if c is None or not c.steps or c.flops_source != "shapes":
        return None
    return statistics.median(s.flops for s in c.steps) or None


def _window(la: str, a: Report, lb: str, b: Report, steps: dict[str, int], per_step: bool) -> Check:
    """The median GPU span within WINDOW_TOLERANCE_PCT; on the steps basis the same steps per
    GPU is enough (a faster configuration captures the same steps in less time)."""
    sa, sb = a.median_span_ns or 0.0, b.median_span_ns or 0.0
    if not sa or not sb:
        return Check("window", None, "capture window unknown (no GPU activity).")
    change = 100.0 * (sb - sa) / sa
    spans = f"{fmt_ns(sa)} and {fmt_ns(sb)} per GPU"
    if abs(change) <= WINDOW_TOLERANCE_PCT:
        return Check("window", True, f"capture windows {spans} ({change:+.0f}%).")
    na, nb = steps.get(la, 0), steps.get(lb, 0)
    if per_step and na == nb:
        return Check(
            "window",
            True,
            f"the same {na} steps per GPU captured in windows of {spans} ({change:+.0f}%).",
        )
    if per_step:
        return Check(
            "window",
            False,
            f"The capture windows differ: {fmt_ns(sa)} per GPU ({na} steps) for {la}, "
            f"{fmt_ns(sb)} ({nb} steps) for {lb} ({change:+.0f}%); figures are per step.",
        )
    return Check(
        "window",
        False,
        f"The capture windows differ: {fmt_ns(sa)} per GPU for {la}, {fmt_ns(sb)} for {lb} "
        f"({change:+.0f}%); without steps every total grows with its window.",
    )


def short_name(name: str, width: int = 60) -> str:
    """A kernel name without its `void ` return type, cut to `width` characters (C++ templates
    run to hundreds)."""
    name = name.removeprefix("void ")
    return name if len(name) <= width else name[: width - 1] + "…"


def _per_label(d: KernelDiff) -> str:
    return "per step and GPU" if d.per == "step and GPU" else "per GPU over the capture"


def total_sentence(d: KernelDiff) -> str:
    """All kernel time on both sides, and the change."""
    change = d.total_ns - d.base_total_ns
    pct = f" ({100 * change / d.base_total_ns:+.1f}%)" if d.base_total_ns else ""
    return (
        f"Kernel time {_per_label(d)}: {fmt_ns(d.base_total_ns)} in {d.baseline}, "
        f"{fmt_ns(d.total_ns)} in {d.label}{pct}."
    )


def names_sentence(d: KernelDiff) -> str | None:
    """The kernels only one side ran (None when both ran the same names)."""
    parts = []
    for rows, what, side in ((d.new, "New in", d.label), (d.vanished, "Gone from", d.baseline)):
        if rows:
            shown = ", ".join(
                f"{short_name(c.name, 40)} ({fmt_ns(max(c.ns, c.base_ns))})" for c in rows[:3]
            )
            more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
            parts.append(f"{what} {side}: {shown}{more}.")
    return " ".join(parts) or None


def layers_sentence(d: KernelDiff, top: int = 3) -> str | None:
    """The layers whose kernel time moved the most (None without a change)."""
    moved = sorted((x for x in d.layers if x.delta_ns), key=lambda x: -abs(x.delta_ns))[:top]
    if not moved:
        return None
    parts = ", ".join(
        f"{x.layer} {fmt_ns(x.base_ns)} → {fmt_ns(x.ns)} ({'+' if x.delta_ns > 0 else '-'}"
        f"{fmt_ns(abs(x.delta_ns))})"
        for x in moved
    )
    return f"Layers that moved most: {parts}."
