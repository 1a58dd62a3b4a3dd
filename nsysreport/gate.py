"""CI gates: judge a report's metrics against budgets and a baseline, and write the verdicts."""

from __future__ import annotations

import math
import re
import statistics
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport.errors import OptionError, TraceError
from nsysreport.model import JSON_SCHEMA_VERSION as REPORT_SCHEMA_VERSION
from nsysreport.sections.layers import OUTSIDE

if TYPE_CHECKING:
    from nsysreport.patterns import Patterns

Report = Mapping[str, Any]  # the JSON dict of model.as_json, or a `report --json` file read back
KINDS = ("max", "min", "max-regression")
BUDGET_KEYS = ("baseline", "min-steps", *KINDS)
JSON_SCHEMA_VERSION = 1  # of the gate's own --json file
INCOMPLETE = "not a complete `nsysreport report --json` file"
# What computing a metric raises on a report JSON of the wrong shape (a missing key, a string
# for a number, a list for an object, a GPU no step or straggler row can be matched to).
MALFORMED = (
    KeyError,
    TypeError,
    AttributeError,
    ValueError,
    ZeroDivisionError,
    StopIteration,
    IndexError,
)

# The numbers of a saved report that the metrics read, by part: key -> whether every report
# holds a number there (a report from before CUDA graph support has no graph_opaque_ns, and
# overlap_pct is null on a GPU without communication). None may be below 0, nor a share above 100.
_SHARES = {"compute_ns": True, "exposed_comm_ns": True, "exposed_memcpy_ns": True,
           "idle_ns": True, "graph_opaque_ns": False}  # fmt: skip
READS: dict[str, dict[str, bool]] = {
    "gpus": {"span_ns": True, **_SHARES, "overlap_pct": False},
    "steps": {"step_time_ns": True, **_SHARES},
    "layers": {"exposed_comm_ns": True},
    "stragglers.gpus": {"wait_ns": True},
}


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
    compute: Callable[[Report, str | None], Measure]  # (report JSON, [selector]) -> measure
    selector: bool = False  # takes `name[ARG]`


@dataclass(frozen=True, slots=True)
class CheckSpec:
    kind: str  # one of KINDS
    metric: str  # as written, with any [selector]
    limit: float


@dataclass(frozen=True, slots=True)
class Budget:
    checks: tuple[CheckSpec, ...] = ()
    baseline: Path | None = None
    min_steps: int | None = None


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str  # "max exposed_comm_pct"
    metric: str
    kind: str  # one of KINDS, or "min-steps"
    unit: str  # "pct", "ns" or "count"
    higher_is_worse: bool
    limit: float
    measured: float | None
    baseline: float | None
    change_pct: float | None  # (measured - baseline) / baseline * 100
    spread: Spread | None
    baseline_spread: Spread | None
    verdict: str  # "pass", "fail" or "skip" (nothing to measure)
    note: str
    aggregation: str  # the metric's documented aggregation

    @property
    def passed(self) -> bool:
        return self.verdict != "fail"


@dataclass(frozen=True, slots=True)
class GateResult:
    trace: str
    baseline: str | None
    checks: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> int:
        return sum(not c.passed for c in self.checks)

    @property
    def skipped(self) -> int:
        return sum(c.verdict == "skip" for c in self.checks)


# --- metrics -----------------------------------------------------------------------------------


def _key(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return row["file"], row["pid"], row["device_id"]


def _per_gpu_share(
    field: str, worst: Callable[[Iterable[float]], float]
) -> Callable[[Report, str | None], Measure]:
    """A breakdown part as % of time: median over each GPU's steps (or its span), worst GPU."""

    def compute(report: Report, _: str | None) -> Measure:
        by_gpu: dict[tuple[Any, Any, Any], tuple[int, list[float]]] = {}
        for s in report["steps"]:
            if s["step_time_ns"] > 0:
                share = 100.0 * s.get(field, 0) / s["step_time_ns"]
                by_gpu.setdefault(_key(s), (s["rank"], []))[1].append(share)
        if by_gpu:
            medians = {k: statistics.median(v) for k, (_, v) in by_gpu.items()}
            k = _pick(medians, worst)
            rank, values = by_gpu[k]
            spread = Spread(min(values), max(values), len(values), f"steps of rank {rank}")
            return Measure(medians[k], spread, f"rank {rank}, median of {len(values)} steps")
        # .get: a report JSON from before CUDA graph support has no graph_opaque_ns
        spans = [g for g in report["gpus"] if g["span_ns"]]
        shares = {_key(g): 100.0 * g.get(field, 0) / g["span_ns"] for g in spans}
        if not shares:
            return Measure(None, note="no GPU activity")
        k = _pick(shares, worst)
        return Measure(shares[k], None, f"{_rank(report, k)}, whole trace (no steps)")

    return compute


def _per_gpu_value(
    value: Callable[[Mapping[str, Any]], float | None],
    worst: Callable[[Iterable[float]], float],
    missing: str,
) -> Callable[[Report, str | None], Measure]:
    """A whole-trace per-GPU value, worst GPU; GPUs where it is None are left out."""

    def compute(report: Report, _: str | None) -> Measure:
        values = {_key(g): v for g in report["gpus"] if (v := value(g)) is not None}
        if not values:
            return Measure(None, note=missing)
        k = _pick(values, worst)
        return Measure(values[k], None, f"{_rank(report, k)}, whole trace")

    return compute


def _pick(values: Mapping[tuple[Any, Any, Any], float], worst: Callable[..., float]) -> Any:
    """The key of the worst value; the first GPU (in report order) among equals."""
    target = worst(values.values())
    return next(k for k, v in values.items() if v == target)


def _rank(report: Report, key: tuple[Any, Any, Any]) -> str:
    rank = next(g["rank"] for g in report["gpus"] if _key(g) == key)
    return f"rank {rank}"


def _step_time(report: Report, _: str | None) -> Measure:
    times = [s["step_time_ns"] for s in report["steps"]]
    if times:
        gpus = len({_key(s) for s in report["steps"]})
        spread = Spread(min(times), max(times), len(times), "GPU-steps")
        note = f"median of {len(times)} steps on {gpus} GPU{'s' * (gpus != 1)}"
        return Measure(statistics.median(times), spread, note)
    spans = [g["span_ns"] for g in report["gpus"]]
    if not spans:
        return Measure(None, note="no GPU activity")
    return Measure(statistics.median(spans), None, "no steps matched: median GPU span instead")


def _straggler_wait(report: Report, _: str | None) -> Measure:
    spans = {_key(g): g["span_ns"] for g in report["gpus"]}
    waits = {
        _key(s): 100.0 * s["wait_ns"] / spans[_key(s)]
        for s in report["stragglers"]["gpus"]
        if spans.get(_key(s))
    }
    if not waits:
        return Measure(0.0, None, "no collectives matched across GPUs")
    k = _pick(waits, max)
    return Measure(waits[k], None, f"{_rank(report, k)}, whole trace")


def _layer_exposed_comm(report: Report, layer: str | None) -> Measure:
    by_layer: dict[str, list[int]] = {}
    for row in report["layers"]:
        if row["layer"] != OUTSIDE:
            by_layer.setdefault(row["layer"], []).append(row["exposed_comm_ns"])
    means = {name: statistics.fmean(v) for name, v in by_layer.items()}
    if layer is not None:
        if layer not in means:
            known = ", ".join(means) or "none (no NVTX range matched the layer pattern)"
            raise OptionError(f"no layer named {layer!r}; its layers: {known}")
        name = layer
    elif not means:
        return Measure(None, note="no NVTX range matched the layer pattern")
    else:
        name = max(means, key=means.__getitem__)  # the first in report order among equals
    gpus = len(by_layer[name])
    return Measure(means[name], None, f"{name}, mean of {gpus} GPU{'s' * (gpus != 1)}")


def _gap_p99(report: Report, _: str | None) -> Measure:
    if not report["gpus"]:
        return Measure(None, note="no GPU activity")
    if all(g["gaps"]["p99_ns"] is None for g in report["gpus"]):
        return Measure(0.0, None, "no GPU has a gap")
    return _per_gpu_value(lambda g: g["gaps"]["p99_ns"], max, "")(report, None)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "exposed_comm_pct",
            "pct",
            True,
            "worst GPU's exposed_comm_ns as % of time; median over its steps if any, else of span",
            _per_gpu_share("exposed_comm_ns", max),
        ),
        Metric(
            "exposed_memcpy_pct",
            "pct",
            True,
            "worst GPU's exposed_memcpy_ns as % of time; median over steps if any, else of span",
            _per_gpu_share("exposed_memcpy_ns", max),
        ),
        Metric(
            "idle_pct",
            "pct",
            True,
            "worst GPU's idle_ns as % of time; median over its steps if any, else of span",
            _per_gpu_share("idle_ns", max),
        ),
        Metric(
            "graph_opaque_pct",
            "pct",
            True,
            "worst GPU's graph_opaque_ns (inside CUDA graphs traced as a whole) as % of time; "
            "median over its steps if any, else of span",
            _per_gpu_share("graph_opaque_ns", max),
        ),
        Metric(
            "compute_pct",
            "pct",
            False,
            "least GPU's compute_ns as % of time; median over its steps if any, else of span",
            _per_gpu_share("compute_ns", min),
        ),
        Metric(
            "overlap_pct",
            "pct",
            False,
            "least overlap_pct of the GPUs that communicate (whole trace); skipped if none do",
            _per_gpu_value(lambda g: g["overlap_pct"], min, "no GPU has communication"),
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
            _per_gpu_value(lambda g: g["exposed_comm_ns"], max, "no GPU activity"),
        ),
        Metric(
            "idle_ns",
            "ns",
            True,
            "largest idle_ns of any GPU (whole trace)",
            _per_gpu_value(lambda g: g["idle_ns"], max, "no GPU activity"),
        ),
    )
}


def metric_of(name: str) -> tuple[Metric, str | None]:
    """The metric `name` refers to, and its [selector] if it has one."""
    match = re.fullmatch(r"(\w+)(?:\[(.+)\])?", name.strip())
    metric = METRICS.get(match.group(1)) if match else None
    if match is None or metric is None:
        valid = ", ".join(METRICS) + ", layer_exposed_comm_ns[LAYER]"
        raise OptionError(f"unknown metric {name!r}; valid metrics: {valid}")
    if match.group(2) is not None and not metric.selector:
        raise OptionError(f"metric {metric.name!r} takes no [selector]")
    return metric, match.group(2)


# --- budgets -----------------------------------------------------------------------------------


def parse_check(kind: str, item: str) -> CheckSpec:
    """A check from `--max METRIC=VALUE` (or --min, --max-regression)."""
    name, sep, value = item.rpartition("=")
    if not sep or not name:
        raise OptionError(f"--{kind} {item!r}: expected METRIC=VALUE")
    try:
        metric_of(name)
        limit = float(value)
    except OptionError as exc:
        raise OptionError(f"--{kind} {item!r}: {exc}") from None
    except ValueError:
        raise OptionError(f"--{kind} {item!r}: VALUE must be a number") from None
    if not math.isfinite(limit):
        raise OptionError(f"--{kind} {item!r}: VALUE must be a finite number")
    return CheckSpec(kind, name.strip(), limit)


def load_budget(path: Path) -> Budget:
    """Read a budget file, or the [tool.nsysreport.gate] table of a pyproject.toml."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise OptionError(f"{path}: cannot read the budget ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptionError(f"{path}: not valid TOML ({exc})") from None
    if path.name != "pyproject.toml":
        return _budget_from(data, path, "the top level")
    table = _gate_table(data)
    if table is None:
        raise OptionError(f"{path}: has no [tool.nsysreport.gate] table")
    return _budget_from(table, path, "[tool.nsysreport.gate]")


def find_budget(folder: Path) -> Budget | None:
    """The budget in `folder`/pyproject.toml's [tool.nsysreport.gate], if it has one."""
    path = folder / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptionError(f"{path}: not readable as TOML ({exc})") from None
    table = _gate_table(data)
    return None if table is None else _budget_from(table, path, "[tool.nsysreport.gate]")


def _gate_table(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    table: Any = data
    for key in ("tool", "nsysreport", "gate"):
        table = table.get(key) if isinstance(table, Mapping) else None
    return table if isinstance(table, Mapping) else None


def _budget_from(table: Mapping[str, Any], path: Path, where: str) -> Budget:
    checks = []
    baseline = min_steps = None
    for key, value in table.items():
        if key not in BUDGET_KEYS:
            expected = ", ".join(BUDGET_KEYS)
            raise OptionError(f"{path}: unknown key {key!r} in {where}; expected {expected}")
        if key == "baseline":
            if not isinstance(value, str):
                raise OptionError(f"{path}: 'baseline' must be a path string")
            baseline = path.parent / value  # relative to the budget file, not the shell
        elif key == "min-steps":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise OptionError(f"{path}: 'min-steps' must be a whole number ≥ 0")
            min_steps = value
        else:
            if not isinstance(value, Mapping):
                raise OptionError(f"{path}: [{key}] must be a table of METRIC = VALUE")
            for name, limit in value.items():
                try:
                    metric_of(name)
                except OptionError as exc:
                    raise OptionError(f"{path}: [{key}] {exc}") from None
                if not isinstance(limit, int | float) or isinstance(limit, bool):
                    raise OptionError(f"{path}: [{key}] {name!r} must be a number")
                checks.append(CheckSpec(key, name, float(limit)))
    return Budget(tuple(checks), baseline, min_steps)


def merge(base: Budget | None, override: Budget) -> Budget:
    """`override` (the command line) wins over `base` (a file) check by check; the last of
    two checks of one metric and kind wins."""
    base = base or Budget()
    checks = {(c.kind, c.metric): c for c in (*base.checks, *override.checks)}
    return Budget(
        tuple(checks.values()),
        override.baseline or base.baseline,
        override.min_steps if override.min_steps is not None else base.min_steps,
    )


# --- loading and judging -----------------------------------------------------------------------


def load_report(path: Path, patterns: Patterns | None = None, cache: bool = False) -> Report:
    """The report JSON of a trace (.sqlite or a PyTorch profiler .json, analysed now), a
    directory of per-rank files (one report over all of them) or a `report --json` file."""
    from nsysreport.outputs import saved_json

    data = saved_json(path)
    if data is None:
        from nsysreport.model import as_json
        from nsysreport.outputs import report_of
        from nsysreport.patterns import Patterns

        return as_json(report_of(path, patterns or Patterns(), cache))
    if not isinstance(data, dict) or data.get("schema_version") != REPORT_SCHEMA_VERSION:
        raise TraceError(
            f"{path}: not a report of JSON schema_version {REPORT_SCHEMA_VERSION}; "
            "write one with: nsysreport report TRACE --json FILE"
        )
    if not isinstance(data.get("gpus"), list) or not data["gpus"]:
        raise TraceError(
            f"{path}: has no GPUs (its 'gpus' is not a list of GPUs); nothing to gate: "
            "write it again with: nsysreport report TRACE --json FILE"
        )
    if problem := _impossible(data):
        raise TraceError(
            f"{path}: {problem}; write it again with: nsysreport report TRACE --json FILE"
        )
    try:  # every metric once, so that a hand-edited or truncated file fails here, in one line
        for metric in METRICS.values():
            metric.compute(data, None)
        _min_steps(data, 0, "min-steps")
    except MALFORMED as exc:
        raise TraceError(f"{path}: {INCOMPLETE} ({type(exc).__name__}: {exc})") from None
    return data


def _impossible(data: Report) -> str | None:
    """The first number a metric reads that no report can hold: missing (or null where the
    report always writes one), not a number, negative, or a share above 100 %."""
    for part, reads in READS.items():
        where, _, inner = part.partition(".")
        rows = data.get(where)
        rows = rows.get(inner) if inner and isinstance(rows, dict) else rows
        for i, row in enumerate(rows if isinstance(rows, list) else []):
            for key, required in reads.items() if isinstance(row, dict) else ():
                value = row.get(key)
                if value is None and not required:
                    continue
                if isinstance(value, bool) or not isinstance(value, int | float):
                    what = "missing" if key not in row else "not a number"
                    return f"{INCOMPLETE} ({part}[{i}] {key} is {what})"
                if value < 0 or (key.endswith("_pct") and value > 100):
                    return f"{part}[{i}] {key} is {value:g}, which no report holds"
    return None


def evaluate(
    report: Report,
    trace: str,
    budget: Budget,
    baseline: Report | None = None,
    baseline_name: str | None = None,
) -> GateResult:
    """Judge `report` against every check of `budget`; equal to a limit passes."""
    results: list[CheckResult] = []
    if budget.min_steps is not None:
        results.append(_min_steps(report, budget.min_steps, "min-steps"))
        if baseline is not None:
            results.append(_min_steps(baseline, budget.min_steps, "min-steps baseline"))
    for spec in budget.checks:
        metric, selector = metric_of(spec.metric)
        now = _measure(metric, selector, report, trace)
        base = None
        if spec.kind == "max-regression":
            if baseline is None:
                raise OptionError(f"--max-regression {spec.metric}: needs a baseline")
            base = _measure(metric, selector, baseline, baseline_name)
        results.append(_judge(spec, metric, now, base))
    return GateResult(trace, baseline_name, tuple(results))


def _measure(metric: Metric, selector: str | None, report: Report, source: str | None) -> Measure:
    try:
        return metric.compute(report, selector)
    except OptionError as exc:
        raise OptionError(f"{source}: {exc}") from None


def _min_steps(report: Report, needed: int, check: str) -> CheckResult:
    per_gpu: dict[tuple[Any, Any, Any], int] = {}
    for s in report["steps"]:
        per_gpu[_key(s)] = per_gpu.get(_key(s), 0) + 1
    steps = min(per_gpu.values(), default=0)
    ok = steps >= needed
    note = "fewest steps on any GPU" if ok else f"not enough steps to judge ({steps} < {needed})"
    return CheckResult(
        check=check,
        metric="steps",
        kind="min-steps",
        unit="count",
        higher_is_worse=False,
        limit=needed,
        measured=steps,
        baseline=None,
        change_pct=None,
        spread=None,
        baseline_spread=None,
        verdict=_verdict(ok),
        note=note,
        aggregation="number of steps on the GPU with the fewest",
    )


def _judge(spec: CheckSpec, metric: Metric, now: Measure, base: Measure | None) -> CheckResult:
    measured, note = now.value, now.note
    base_value = base.value if base else None
    change = None
    if measured is not None and base_value is not None:
        if base_value:
            change = 100.0 * (measured - base_value) / base_value
        elif measured == base_value:
            change = 0.0
        else:
            change = math.inf if measured > 0 else -math.inf
    if measured is None:
        verdict = "skip"
    elif spec.kind == "max":
        verdict = _verdict(measured <= spec.limit or _equal(measured, spec.limit))
    elif spec.kind == "min":
        verdict = _verdict(measured >= spec.limit or _equal(measured, spec.limit))
    elif base is None or change is None:
        verdict, note = "skip", f"baseline: {base.note if base else 'none'}"
    else:
        # The regression is the rise of a higher-is-worse metric, the drop of the others.
        regression = change if metric.higher_is_worse else -change
        verdict = _verdict(regression <= spec.limit or _equal(regression, spec.limit))
        if math.isinf(change):
            note += "; baseline is 0"
        elif (
            verdict == "fail"
            and now.spread
            and base_value is not None
            and now.spread.low <= base_value <= now.spread.high
        ):
            note += "; baseline median is within this run's step range (may be noise)"
    return CheckResult(
        f"{spec.kind} {spec.metric}",
        spec.metric,
        spec.kind,
        metric.unit,
        metric.higher_is_worse,
        spec.limit,
        measured,
        base_value,
        change,
        now.spread,
        base.spread if base else None,
        verdict,
        note,
        metric.aggregation,
    )


def _equal(a: float, b: float) -> bool:
    # A limit copied from a printed value must not fail on float rounding of a ratio.
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _verdict(ok: bool) -> str:
    return "pass" if ok else "fail"


# --- outputs -----------------------------------------------------------------------------------
