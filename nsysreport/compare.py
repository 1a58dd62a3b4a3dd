"""Compare parallel configurations: speedup, scaling efficiency and where the efficiency went."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsysreport.analysis import open_report
from nsysreport.critical_path import CAUSES
from nsysreport.errors import OptionError, TraceError
from nsysreport.inputs import expand_inputs
from nsysreport.kernel_diff import KernelDiff, kernel_diff
from nsysreport.model import Report
from nsysreport.patterns import Patterns
from nsysreport.sections.collectives import CollectiveReport
from nsysreport.sections.critical_path import CAUSE_LABELS
from nsysreport.sections.data_path import DataPathRow, dominant_bound
from nsysreport.sections.layers import OUTSIDE
from nsysreport.units import fmt_bytes, fmt_ns, fmt_pct

PARTS = ("compute_ns", "exposed_comm_ns", "exposed_memcpy_ns", "idle_ns")
# Time inside CUDA graphs traced as a whole: a part of the loss split only when some
# configuration has it.
GRAPH_PART = "graph_opaque_ns"
# Time nothing ran while nsys paused the process: likewise, only when some configuration has it.
OVERHEAD_PART = "profiler_overhead_ns"


@dataclass(frozen=True, slots=True)
class Config:
    """One configuration (one trace, or one previously written report JSON)."""

    label: str
    traces: tuple[str, ...]
    gpus: int
    steps: int
    simulated: bool
    step_time_ns: float  # median over steps and GPUs (or over GPU spans, see Comparison.basis)
    mean_step_time_ns: float  # mean of the same; the breakdown and loss parts sum to it
    throughput: float  # steps/s, or tokens/s with --tokens-per-step
    speedup: float  # baseline step time / step time
    ideal_speedup: float  # GPUs / baseline GPUs
    scaling_efficiency: float  # speedup / ideal speedup
    breakdown: dict[str, float]  # PARTS, mean per step and GPU; sums to mean_step_time_ns
    loss: dict[str, float]  # PARTS and total_ns: mean step time minus the ideal, by part
    mfu_pct: float | None = None  # the report's compute step MFU, else span MFU; None: unknown

    @property
    def ideal_step_time_ns(self) -> float:
        """The mean step time linear scaling from the baseline would give."""
        return self.mean_step_time_ns - self.loss["total_ns"]

    @property
    def scaling_efficiency_pct(self) -> float:
        return 100 * self.scaling_efficiency


@dataclass(frozen=True, slots=True)
class Comparison:
    configs: tuple[Config, ...]  # ordered by GPU count
    baseline: str
    basis: str  # "steps" (NVTX steps in every config) or "span" (each GPU's whole trace window)
    throughput_unit: str
    layers: tuple[dict[str, Any], ...]  # {"layer", "exposed_comm_ns": {label: per step per GPU}}
    # {"op", "mean_ns": {label: ..}, "busbw_gbps": {..}, ...}: see _collectives
    collectives: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]  # what could not be compared fairly, and why
    # {"role", "exposed_comm_ns": {label: per step per GPU}, "step_pct": {..}, "hidden_pct": {..}}
    roles: tuple[dict[str, Any], ...] = ()
    # Each configuration's data-quality ledger rows ({"label", "file", "class", "table", ...}).
    ledger: tuple[dict[str, Any], ...] = ()
    # Per cause: {"cause", "label", "pct": {label: % of its median step's path, or None}}; empty
    # when no configuration has a critical path (reports of several files have none yet).
    critical_path: tuple[dict[str, Any], ...] = ()
    # Each other configuration against the baseline, kernel by kernel, with its comparability
    # verdict first (nsysreport.kernel_diff).
    kernel_diffs: tuple[KernelDiff, ...] = ()

    @property
    def graph_part(self) -> bool:
        """Some configuration has time inside CUDA graphs traced as a whole: the loss has
        that part too."""
        return any(GRAPH_PART in x.loss for x in self.configs)

    @property
    def overhead_part(self) -> bool:
        """Some configuration's GPUs waited on nsys's own pauses: the loss has that part."""
        return any(OVERHEAD_PART in x.loss for x in self.configs)


def load_inputs(
    specs: Sequence[str], patterns: Patterns, cache: bool = False
) -> list[tuple[str, Report]]:
    """`[label=]path` -> (label, report); a .json is a saved report unless it is a PyTorch
    profiler trace, a directory the per-rank files of one configuration, anything else a trace."""
    loaded = []
    for spec in specs:
        label, path = _split_label(spec)
        loaded.append((label, open_report(path, patterns, cache)))
    labels = _short_labels([label for label, _ in loaded], specs)
    loaded = [(label, report) for label, (_, report) in zip(labels, loaded, strict=True)]
    if len(set(labels)) != len(labels):
        raise OptionError(f"two inputs share a label ({', '.join(labels)}); name them LABEL=PATH")
    return loaded


def input_files(specs: Sequence[str]) -> list[Path]:
    """Every file the inputs name (a directory's per-rank files), so no output replaces one."""
    return [file for spec in specs for file in expand_inputs([str(_split_label(spec)[1])])]


def _short_labels(labels: list[str], specs: Sequence[str]) -> list[str]:
    """Drop the words all file-name labels share: llama_tp2_pcie, llama_tp4_pcie -> tp2, tp4."""
    named = [spec.partition("=")[0] == label for label, spec in zip(labels, specs, strict=True)]
    words = [label.split("_") for label in labels]
    if len(labels) < 2 or any(named):
        return labels
    head = 0
    while all(len(w) > head + 1 and w[head] == words[0][head] for w in words):
        head += 1
    tail = 0
    while all(len(w) > head + tail + 1 and w[-1 - tail] == words[0][-1 - tail] for w in words):
        tail += 1
    short = ["_".join(w[head : len(w) - tail]) for w in words]
    return short if len(set(short)) == len(short) else labels


def _split_label(spec: str) -> tuple[str, Path]:
    label, sep, rest = spec.partition("=")
    if sep and label and not Path(spec).exists():
        return label, Path(rest)
    path = Path(spec)
    return path.name.removesuffix(".json").removesuffix(".sqlite"), path


def compare(
    inputs: Sequence[tuple[str, Report]],
    baseline: str | None = None,
    tokens_per_step: int | None = None,
) -> Comparison:
    """Scaling of the labelled reports against the baseline (the fewest GPUs unless named)."""
    if len(inputs) < 2:
        raise OptionError("compare needs at least two configurations")
    notes: list[str] = []
    with_steps = [label for label, report in inputs if report.steps]
    basis = "steps" if len(with_steps) == len(inputs) else "span"
    if basis == "span" and with_steps:
        without = ", ".join(label for label, report in inputs if not report.steps)
        notes.append(
            f"Step time is each GPU's whole trace window, not a step: {without} "
            "has no NVTX step ranges, so steps cannot be compared."
        )
    empty = next((label for label, report in inputs if not report.gpus), None)
    if empty is not None:
        raise TraceError(f"{empty}: has no GPUs (no GPU activity); nothing to compare")
    ordered = sorted(inputs, key=lambda item: len(item[1].gpus))  # stable: ties keep order
    labels = [label for label, _ in ordered]
    base_label = baseline or labels[0]
    if base_label not in labels:
        raise OptionError(f"--baseline {base_label!r}: not one of {', '.join(labels)}")
    graphs = any(g.graph_opaque_ns for _, report in ordered for g in report.gpus)
    overhead = any(g.profiler_overhead_ns for _, report in ordered for g in report.gpus)
    parts = (*PARTS, *((GRAPH_PART,) * graphs), *((OVERHEAD_PART,) * overhead))
    measured = {label: _measure(report, basis, parts) for label, report in ordered}
    base = measured[base_label]
    configs = []
    for label, report in ordered:
        m = measured[label]
        ideal = base.gpus and m.gpus / base.gpus
        speedup = base.median / m.median if m.median else 0.0
        ideal_mean = base.mean * base.gpus / m.gpus
        loss = {p: m.parts[p] - base.parts[p] * base.gpus / m.gpus for p in parts}
        loss["total_ns"] = m.mean - ideal_mean
        rate = 1e9 / m.median if m.median else 0.0
        configs.append(
            Config(
                label=label,
                traces=tuple(t.path for t in report.traces),
                gpus=m.gpus,
                steps=m.steps,
                simulated=any(t.simulated for t in report.traces),
                step_time_ns=m.median,
                mean_step_time_ns=m.mean,
                throughput=rate * (tokens_per_step or 1),
                speedup=speedup,
                ideal_speedup=ideal,
                scaling_efficiency=speedup / ideal if ideal else 0.0,
                breakdown=m.parts,
                loss=loss,
                mfu_pct=_mfu(report),
            )
        )
    layers, layer_notes = _layers(ordered, measured)
    reports = dict(ordered)
    steps = {label: m.steps for label, m in measured.items()}
    diffs = tuple(
        kernel_diff((base_label, reports[base_label]), (label, report), steps)
        for label, report in ordered
        if label != base_label
    )
    # What each configuration's numbers leave out or take with a caveat (its ledger).
    quality = [(label, i) for label, report in ordered for i in report.quality.items]
    notes += [f"{label}: {i.file}: {i.sentence}" for label, i in quality]
    return Comparison(
        configs=tuple(configs),
        baseline=base_label,
        basis=basis,
        throughput_unit="tokens/s" if tokens_per_step else "steps/s",
        layers=layers,
        collectives=_collectives(ordered),
        notes=tuple(notes + layer_notes),
        roles=_roles(ordered, measured, basis),
        ledger=tuple({"label": label, **i.ledger_row()} for label, i in quality),
        critical_path=_critical_paths(ordered),
        kernel_diffs=diffs,
    )


def compare_reports(
    reports: Sequence[Report],
    labels: Sequence[str],
    baseline: str | None = None,
    tokens_per_step: int | None = None,
) -> Comparison:
    """`compare` of reports named by `labels`, in the same order."""
    if len(labels) != len(reports):
        raise OptionError(f"{len(reports)} reports but {len(labels)} labels")
    return compare(list(zip(labels, reports, strict=True)), baseline, tokens_per_step)


@dataclass(frozen=True, slots=True)
class _Measured:
    """One configuration's step time and its mean per-step breakdown."""

    gpus: int
    steps: int  # per GPU; 0 on the span basis
    median: float
    mean: float
    parts: dict[str, float]


def _measure(report: Report, basis: str, parts: Sequence[str]) -> _Measured:
    """Median and mean step time and the mean per-step breakdown of one configuration."""
    rows: Sequence[Any] = report.steps if basis == "steps" else report.gpus
    times = [r.step_time_ns if basis == "steps" else r.span_ns for r in rows]
    median = report.median_step_ns if basis == "steps" else report.median_span_ns
    steps = len({(s.file, s.pid, s.device_id, s.ordinal) for s in report.steps})
    n_gpus = len(report.gpus)
    return _Measured(
        gpus=n_gpus,
        steps=steps // n_gpus if basis == "steps" else 0,
        median=float(median) if median is not None else 0.0,
        mean=statistics.fmean(times) if times else 0.0,
        parts={p: statistics.fmean(getattr(r, p) for r in rows) if rows else 0.0 for p in parts},
    )


def _layers(
    ordered: Sequence[tuple[str, Report]], measured: dict[str, _Measured]
) -> tuple[tuple[dict[str, Any], ...], list[str]]:
    """Exposed comm per layer, per step and GPU, for layers matched by name across configs."""
    per_config: dict[str, dict[str, float]] = {}
    order: dict[str, tuple[int, str]] = {}
    for label, report in ordered:
        sums: dict[str, list[int]] = {}
        for row in report.layers:
            if row.layer == OUTSIDE:
                continue
            sums.setdefault(row.layer, []).append(row.exposed_comm_ns)
            order.setdefault(row.layer, (row.layer_index or 0, row.layer))
        per_step = max(measured[label].steps, 1)
        per_config[label] = {k: statistics.fmean(v) / per_step for k, v in sums.items()}
    names = sorted(order, key=lambda k: order[k])
    if not names:
        return (), []
    labels = [label for label, _ in ordered]
    notes = []
    for label in labels:
        missing = [n for n in names if n not in per_config[label]]
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            notes.append(f"{label} has no layer ranges named {shown}: left blank.")
    rows = tuple(
        {"layer": n, "exposed_comm_ns": {label: per_config[label].get(n) for label in labels}}
        for n in names
    )
    return rows, notes


def _roles(
    ordered: Sequence[tuple[str, Report]], measured: dict[str, _Measured], basis: str
) -> tuple[dict[str, Any], ...]:
    """Per communicator role and configuration: exposed comm per step and GPU (on the span
    basis: per GPU over the trace), its share of the step and how much of it is hidden."""
    roles: dict[str, dict[str, dict[str, float | None]]] = {}
    for label, report in ordered:
        gpus = max(len(report.gpus), 1)
        for r in report.roles:
            entry = roles.setdefault(
                r.role, {"exposed_comm_ns": {}, "step_pct": {}, "hidden_pct": {}}
            )
            if basis == "steps":
                exposed = sum(x.exposed_ns for x in report.communicator_steps if x.role == r.role)
                per = exposed / (gpus * max(measured[label].steps, 1))
            else:
                per = r.exposed_ns / gpus
            entry["exposed_comm_ns"][label] = per
            entry["step_pct"][label] = r.step_pct
            entry["hidden_pct"][label] = r.hidden_pct
    return tuple({"role": role, **values} for role, values in sorted(roles.items()))


def _critical_paths(ordered: Sequence[tuple[str, Report]]) -> tuple[dict[str, Any], ...]:
    """Per cause, each configuration's share of its critical path (None: it has no path)."""
    paths = {label: report.critical_path for label, report in ordered}
    if all(p is None for p in paths.values()):
        return ()
    return tuple(
        {
            "cause": cause,
            "label": CAUSE_LABELS[cause],
            "pct": {
                label: None if p is None else next(x.pct for x in p.causes if x.cause == cause)
                for label, p in paths.items()
            },
        }
        for cause in CAUSES
    )


def critical_path_sentence(c: Comparison) -> str | None:
    """How the critical path moved from the baseline to the largest configuration: the causes
    whose share changed the most (None without paths in both)."""
    base = c.baseline
    last = max(c.configs, key=lambda x: (x.gpus, c.configs.index(x))).label
    rows = [r for r in c.critical_path if r["pct"].get(base) is not None]
    rows = [r for r in rows if r["pct"].get(last) is not None]
    if last == base or not rows:
        return None

    def change(r: dict[str, Any]) -> float:
        return float(abs(r["pct"][last] - r["pct"][base]))

    moved = sorted(
        (r for r in rows if change(r)), key=lambda r: (-change(r), CAUSES.index(r["cause"]))
    )[:3]
    if not moved:
        return f"Median step, {base} → {last}: the critical path's causes kept their shares."
    parts = "; ".join(
        f"{r['label']} {fmt_pct(r['pct'][base])} → {fmt_pct(r['pct'][last])}" for r in moved
    )
    return f"Median step, {base} → {last}: {parts}."


def role_comparison_sentence(c: Comparison) -> str | None:
    """Exposed comm per step and GPU by role across the configurations, when some
    configuration tells two roles apart (None otherwise)."""
    told = [
        {role["role"] for role in c.roles if role["exposed_comm_ns"].get(x.label) is not None}
        for x in c.configs
    ]
    if not any(len(t) >= 2 for t in told):
        return None
    parts = []
    for role in c.roles:
        series = " → ".join(
            "–" if (v := role["exposed_comm_ns"].get(x.label)) is None else fmt_ns(v)
            for x in c.configs
        )
        parts.append(f"{role['role']} {series}")
    labels = ", ".join(x.label for x in c.configs)
    return f"Exposed comm per step and GPU by role ({labels}): " + "; ".join(parts) + "."


def _collectives(ordered: Sequence[tuple[str, Report]]) -> tuple[dict[str, Any], ...]:
    """Per collective op and configuration: mean latency, calls per GPU, bus bandwidth, and from
    the data path its message size, bytes moved per GPU, ceiling, utilisation and bound (the
    scaling story: bus bytes grow as 2(TP-1)/TP, latency-bound calls do not get fewer)."""
    keys = ("mean_ns", "busbw_gbps", "busbw_unknown", "calls", "mean_bytes", "bus_bytes",
            "peak_gbps", "utilisation_pct", "bound")  # fmt: skip
    ops: dict[str, dict[str, dict[str, Any]]] = {}
    for label, report in ordered:
        by_op: dict[str, list[CollectiveReport]] = {}
        for row in report.collectives:
            by_op.setdefault(row.op, []).append(row)
        stages: dict[str, list[DataPathRow]] = {}
        for stage in report.data_path:
            if stage.kind == "collective":
                stages.setdefault(stage.stage, []).append(stage)
        for op, rows in by_op.items():
            calls = sum(r.count for r in rows)
            bus = [r.busbw_gbps for r in rows if r.busbw_gbps is not None]
            entry = ops.setdefault(op, {k: {} for k in keys})
            entry["mean_ns"][label] = sum(r.total_ns for r in rows) / calls if calls else None
            entry["busbw_gbps"][label] = statistics.fmean(bus) if bus else None
            # Sizes known but not the group: the bus bandwidth is unknown, not absent.
            entry["busbw_unknown"][label] = not bus and any(r.algbw_gbps is not None for r in rows)
            entry["calls"][label] = calls / len(rows)
            _stage_figures(entry, label, stages.get(op, []))
    return tuple({"op": op, **values} for op, values in sorted(ops.items()))


def _stage_figures(entry: dict[str, dict[str, Any]], label: str, rows: list[DataPathRow]) -> None:
    """One configuration's data-path figures of one op, over its GPUs."""
    sized = sum(r.sized for r in rows)
    mean = sum(r.bytes or 0 for r in rows) / sized if sized else None
    factors = [r.busbw_gbps / r.achieved_gbps for r in rows if r.busbw_gbps and r.achieved_gbps]
    peaks = [r.peak_gbps for r in rows if r.peak_gbps is not None]
    utils = [r.utilisation_pct for r in rows if r.utilisation_pct is not None]
    entry["mean_bytes"][label] = mean
    entry["bus_bytes"][label] = mean * statistics.fmean(factors) if mean and factors else None
    entry["peak_gbps"][label] = statistics.median(peaks) if peaks else None
    entry["utilisation_pct"][label] = statistics.fmean(utils) if utils else None
    entry["bound"][label] = dominant_bound(rows)


def summary_sentence(c: Comparison) -> str:
    """From the baseline to the largest configuration: speedup, efficiency and the main loss."""
    base = next(x for x in c.configs if x.label == c.baseline)
    last = max(c.configs, key=lambda x: (x.gpus, c.configs.index(x)))
    if last is base:
        return f"{base.label} is the only configuration with the most GPUs."
    part = max((p for p in last.loss if p != "total_ns"), key=lambda p: last.loss[p])
    names = {
        "compute_ns": "compute that did not shrink in proportion",
        "exposed_comm_ns": "extra exposed communication",
        "exposed_memcpy_ns": "extra exposed memcpy",
        "idle_ns": "extra idle time",
        GRAPH_PART: "extra time inside CUDA graphs traced as a whole",
        OVERHEAD_PART: "extra profiler overhead (nsys's own pauses)",
    }
    faster = "faster" if last.speedup >= 1 else "slower"
    factor = last.speedup if last.speedup >= 1 else 1 / last.speedup if last.speedup else 0
    sentence = (
        f"From {base.label} ({base.gpus} GPUs) to {last.label} ({last.gpus} GPUs) each step is "
        f"{factor:.2f}x {faster} against an ideal {last.ideal_speedup:.2f}x: "
        f"{last.scaling_efficiency_pct:.0f}% scaling efficiency. Most of the shortfall is "
        f"{names[part]} ({fmt_ns(last.loss[part])} of {fmt_ns(last.loss['total_ns'])} "
        "per step)."
    )
    fastest = min(c.configs, key=lambda x: (x.step_time_ns, x.gpus))
    if fastest.gpus < last.gpus:
        sentence += (
            f" {fastest.label} ({fastest.gpus} GPUs) is the fastest: more GPUs than that made "
            "each step slower."
        )
    return sentence


def collective_sentence(c: Comparison) -> str | None:
    """The collective op that costs the most time per GPU in the largest configuration, across
    the configurations: calls, latency, bus bytes and bound (None without collectives)."""
    if not c.collectives:
        return None
    last = max(c.configs, key=lambda x: (x.gpus, c.configs.index(x))).label

    def cost(op: dict[str, Any]) -> float:
        return float((op["mean_ns"].get(last) or 0) * (op["calls"].get(last) or 0))

    op = max(c.collectives, key=cost)
    labels = [x.label for x in c.configs if op["mean_ns"].get(x.label) is not None]

    def series(key: str, fmt: Any) -> str:
        return " → ".join(fmt(op[key].get(label)) for label in labels)

    calls = {round(op["calls"][label]) for label in labels}
    count = (
        f"{calls.pop()} calls per GPU in every configuration"
        if len(calls) == 1
        else f"{series('calls', lambda v: f'{v:.0f}')} calls per GPU"
    )
    bounds = {op["bound"].get(label) for label in labels}
    bound = f"{bounds.pop()}-bound throughout" if len(bounds) == 1 else series("bound", str)
    return (
        f"{op['op']} ({', '.join(labels)}): {count}; {series('mean_ns', fmt_ns)} per call; "
        f"bus bytes per GPU {series('bus_bytes', fmt_bytes)}; "
        f"{series('utilisation_pct', fmt_pct)} of the link's ceiling; {bound}."
    )


def _mfu(report: Report) -> float | None:
    """The configuration's model FLOPs utilisation (the Compute efficiency section's)."""
    c = report.compute
    if c is None:
        return None
    return c.step_mfu_pct if c.step_mfu_pct is not None else c.span_mfu_pct


def as_json(c: Comparison) -> dict[str, Any]:
    """The comparison as the JSON contract of issue 5 (schema_version 1)."""
    return {
        "schema_version": 1,
        "baseline": c.baseline,
        "basis": c.basis,
        "throughput_unit": c.throughput_unit,
        "configs": [dataclasses.asdict(x) for x in c.configs],
        "layers": list(c.layers),
        "collectives": list(c.collectives),
        "notes": list(c.notes),
        "summary": summary_sentence(c),
        "collectives_summary": collective_sentence(c),
        "roles": list(c.roles),
        "roles_summary": role_comparison_sentence(c),
        "ledger": list(c.ledger),
        "critical_path": list(c.critical_path),
        "critical_path_summary": critical_path_sentence(c),
        "kernel_diff": [_kernel_diff_json(d) for d in c.kernel_diffs],
    }


def _kernel_diff_json(d: KernelDiff) -> dict[str, Any]:
    """One kernel diff, its rows' `kernel_class` written `class` (as the report's top_kernels)."""
    data = dataclasses.asdict(d)
    for key in ("by_time", "by_count", "new", "vanished"):
        data[key] = [{"class": r.pop("kernel_class"), **r} for r in data[key]]
    data["checks"], data["layers"] = list(data["checks"]), list(data["layers"])
    return data
