"""CI gates: judge a report's metrics (nsysreport.gate_metrics) against a budget
(nsysreport.gate_budget) and a baseline; nsysreport.gate_output writes the verdicts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsysreport.errors import OptionError, TraceError
from nsysreport.gate_budget import Budget, CheckSpec, budget_from
from nsysreport.gate_metrics import Measure, Metric, Spread, metric_of
from nsysreport.model import Report
from nsysreport.model_json import WRITE_AGAIN
from nsysreport.sections.quality import DataQuality, QualityItem

JSON_SCHEMA_VERSION = 2  # of the gate's own --json file; 2: the data-quality `ledger`


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
    # The trace's data-quality ledger: rows its numbers leave out or take with a caveat.
    ledger: tuple[QualityItem, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> int:
        return sum(not c.passed for c in self.checks)

    @property
    def skipped(self) -> int:
        return sum(c.verdict == "skip" for c in self.checks)


def evaluate(
    report: Report,
    trace: str,
    budget: Budget,
    baseline: Report | None = None,
    baseline_name: str | None = None,
) -> GateResult:
    """Judge `report` against every check of `budget`; equal to a limit passes. `trace` and
    `baseline_name` name the two in the result and in messages."""
    for name, checked in ((trace, report), (baseline_name, baseline)):
        if checked is not None and not checked.gpus:
            raise TraceError(f"{name}: has no GPUs; nothing to gate: {WRITE_AGAIN}")
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
    if budget.strict_max_rows is not None:
        results.append(_strict(report.quality, budget.strict_max_rows))
    return GateResult(trace, baseline_name, tuple(results), report.quality.items)


def _strict(quality: DataQuality, most: int) -> CheckResult:
    """--strict: fail when more than `most` rows were left out or taken with a caveat."""
    changed, dropped = quality.changed_rows, quality.dropped_rows
    classes = sorted({i.ledger_class for i in quality.items})
    return CheckResult(
        check="strict data quality",
        metric="unclean_rows",
        kind="max",
        unit="count",
        higher_is_worse=True,
        limit=most,
        measured=changed,
        baseline=None,
        change_pct=None,
        spread=None,
        baseline_spread=None,
        verdict=_verdict(changed <= most),
        note=(
            f"{_rows(dropped)} left out, {_rows(changed - dropped)} kept with a caveat "
            f"({', '.join(classes)})"
            if classes
            else "every row used as written"
        ),
        aggregation="rows of the trace's data-quality ledger, every class",
    )


def _measure(metric: Metric, selector: str | None, report: Report, source: str | None) -> Measure:
    try:
        return metric.compute(report, selector)
    except OptionError as exc:
        raise OptionError(f"{source}: {exc}") from None


def _min_steps(report: Report, needed: int, check: str) -> CheckResult:
    per_gpu: dict[tuple[str, int, int], int] = {}
    for s in report.steps:
        key = (s.file, s.pid, s.device_id)
        per_gpu[key] = per_gpu.get(key, 0) + 1
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


def _rows(n: int) -> str:
    return f"{n:,} row" + "s" * (n != 1)


def _verdict(ok: bool) -> str:
    return "pass" if ok else "fail"


def gate_report(
    report: Report,
    budget: Budget | Mapping[str, Any],
    baseline: Report | None = None,
    name: str | None = None,
    baseline_name: str | None = None,
) -> GateResult:
    """Judge `report` against `budget`: a Budget, or a dict laid out as the TOML budget, e.g.
    {"max": {"exposed_comm_pct": 5}}; a max-regression check needs `baseline`."""
    if not isinstance(budget, Budget):
        budget = budget_from(budget, "budget", "the budget", Path.cwd())
    return evaluate(
        report,
        name or _name(report),
        budget,
        baseline,
        None if baseline is None else baseline_name or _name(baseline),
    )


def _name(report: Report) -> str:
    paths = [t.path for t in report.traces]
    return paths[0] if len(paths) == 1 else f"{len(paths)} files from {paths[0]}"
