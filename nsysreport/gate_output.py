"""Gate results for people and CI systems: terminal table, JUnit XML, Markdown and JSON."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from typing import Any

from nsysreport.gate import JSON_SCHEMA_VERSION, CheckResult, GateResult
from nsysreport.gate_metrics import Spread
from nsysreport.units import fmt_ns, fmt_pct


def fmt_value(value: float | None, unit: str) -> str:
    if unit == "pct":
        return fmt_pct(value)
    if unit == "ns":
        return fmt_ns(value)
    return "–" if value is None else f"{value:,.0f}"


def fmt_limit(c: CheckResult) -> str:
    if c.kind == "max-regression":
        return f"≤ +{c.limit:g}%" if c.higher_is_worse else f"≥ -{c.limit:g}%"
    return ("≤ " if c.kind == "max" else "≥ ") + _close_pair(c.limit, c.measured, c.unit)[0]


def fmt_measured(c: CheckResult) -> str:
    text = _close_pair(c.measured, c.limit, c.unit)[0] if c.kind in ("max", "min") else ""
    text = text or fmt_value(c.measured, c.unit)
    if c.change_pct is not None:
        text += f" ({_fmt_change(c)})"
    return text


def _fmt_change(c: CheckResult) -> str:
    """The signed change, with as many decimals as it takes to differ from a different limit."""
    assert c.change_pct is not None
    if math.isinf(c.change_pct):
        return "+∞" if c.change_pct > 0 else "-∞"
    limit = c.limit if c.higher_is_worse else -c.limit
    digits = max(1, len(f"{c.limit:g}".partition(".")[2]))  # at least the limit's precision
    while (
        digits < 9
        and c.change_pct != limit
        and f"{c.change_pct:.{digits}f}" == f"{limit:.{digits}f}"
    ):
        digits += 1
    return f"{c.change_pct:+.{digits}f}%"


def fmt_spread(spread: Spread | None, unit: str) -> str:
    if spread is None:
        return ""
    return f"{fmt_value(spread.low, unit)} – {fmt_value(spread.high, unit)}"


def _close_pair(a: float | None, b: float | None, unit: str) -> tuple[str, str]:
    """`a` formatted, with more digits when it would print the same as a different `b`."""
    if a is None or b is None or a == b or fmt_value(a, unit) != fmt_value(b, unit):
        return fmt_value(a, unit), fmt_value(b, unit)
    suffix = "%" if unit == "pct" else " ns" if unit == "ns" else ""
    for digits in range(0 if unit == "ns" else 2, 10):
        x, y = f"{a:,.{digits}f}", f"{b:,.{digits}f}"
        if x != y:
            return x + suffix, y + suffix
    return f"{a!r}{suffix}", f"{b!r}{suffix}"


def summary_line(result: GateResult) -> str:
    n = len(result.checks)
    text = f"{n} check{'s' * (n != 1)}, {result.failed} failed"
    return text + (f", {result.skipped} skipped" if result.skipped else "")


def print_table(result: GateResult) -> None:
    # Lazy: rich's console and table cost 50 ms of start-up (python -X importtime), which
    # writing the JUnit, Markdown or JSON files never needs.
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 160  # CI logs are wide; rich would assume 80 columns and wrap every row
    console.print(Text(f"nsysreport gate: {result.trace}"), soft_wrap=True)
    if result.baseline:
        console.print(Text(f"baseline: {result.baseline}"), soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    regressions = any(c.kind == "max-regression" for c in result.checks)
    # The verdict comes first so that a narrow terminal, which squeezes the columns, never
    # hides it; long values fold rather than end in an ellipsis.
    headings = ["verdict", "check", "limit", "measured", "baseline", "spread", "note"]
    if not regressions:
        headings.remove("baseline")
    for heading in headings:
        table.add_column(
            heading,
            justify="right" if heading in ("limit", "measured") else "left",
            no_wrap=heading == "verdict",
            overflow="fold",
        )
    styles = {"pass": "green", "fail": "bold red", "skip": "yellow"}
    for c in result.checks:
        row = [Text(c.verdict.upper(), style=styles[c.verdict])]
        cells = [c.check, fmt_limit(c), fmt_measured(c)]
        if regressions:
            cells.append(fmt_value(c.baseline, c.unit) if c.baseline is not None else "")
        cells += [_spreads(c, "\n"), c.note]
        table.add_row(*row, *(Text(cell) for cell in cells))
    console.print(table)
    console.print(Text(summary_line(result)))
    for line in ledger_lines(result):
        console.print(Text(line), soft_wrap=True)


def ledger_lines(result: GateResult) -> list[str]:
    """One line per ledger item: what the numbers leave out or take with a caveat."""
    return [f"data quality: {i.sentence} [{i.ledger_class}, {i.source}]" for i in result.ledger]


def _spreads(c: CheckResult, sep: str) -> str:
    text = fmt_spread(c.spread, c.unit)
    if c.baseline_spread is not None:
        text += f"{sep}base {fmt_spread(c.baseline_spread, c.unit)}"
    return text


def to_json(result: GateResult) -> dict[str, Any]:
    def spread(s: Spread | None) -> dict[str, Any] | None:
        return (
            None
            if s is None
            else {"min": s.low, "max": s.high, "samples": s.samples, "over": s.over}
        )

    def change(c: CheckResult) -> float | None:
        return (
            None if c.change_pct is None or math.isinf(c.change_pct) else c.change_pct
        )  # JSON has no inf

    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "trace": result.trace,
        "baseline_trace": result.baseline,
        "passed": result.passed,
        "checks": [
            {
                "check": c.check,
                "metric": c.metric,
                "kind": c.kind,
                "unit": c.unit,
                "limit": c.limit,
                "measured": c.measured,
                "baseline": c.baseline,
                "change_pct": change(c),
                "spread": spread(c.spread),
                "baseline_spread": spread(c.baseline_spread),
                "passed": c.passed,
                "verdict": c.verdict,
                "note": c.note,
                "aggregation": c.aggregation,
            }
            for c in result.checks
        ],
        "ledger": [i.ledger_row() for i in result.ledger],
    }


def to_junit(result: GateResult) -> str:
    """JUnit XML: one testsuite, one testcase per check (Jenkins, GitLab and most CI read it)."""
    suite = ET.Element(
        "testsuite",
        {
            "name": "nsysreport gate",
            "tests": str(len(result.checks)),
            "failures": str(result.failed),
            "errors": "0",
            "skipped": str(result.skipped),
            "time": "0",
        },
    )
    for c in result.checks:
        case = ET.SubElement(
            suite, "testcase", {"classname": "nsysreport.gate", "name": c.check, "time": "0"}
        )
        detail = _detail(c)
        if c.verdict == "fail":
            message = f"measured {fmt_measured(c)}, limit {fmt_limit(c)}"
            failure = ET.SubElement(case, "failure", {"message": message, "type": c.kind})
            failure.text = detail
        elif c.verdict == "skip":
            ET.SubElement(case, "skipped", {"message": c.note})
        ET.SubElement(case, "system-out").text = detail
    if result.ledger:
        ET.SubElement(suite, "system-out").text = "\n".join(ledger_lines(result))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _detail(c: CheckResult) -> str:
    parts = [f"{c.check}: {c.verdict.upper()}", f"limit {fmt_limit(c)}"]
    parts.append(f"measured {fmt_measured(c)}")
    if c.baseline is not None:
        parts.append(f"baseline {fmt_value(c.baseline, c.unit)}")
    if spread := _spreads(c, "; "):
        parts.append(f"spread {spread}")
    if c.note:
        parts.append(c.note)
    return "; ".join(parts)


def to_markdown(result: GateResult) -> str:
    """A GitHub-flavoured table for a pull-request comment or a CI step summary."""
    icons = {"pass": "✅ PASS", "fail": "❌ FAIL", "skip": "⚠️ SKIP"}
    head = "✅" if result.passed else "❌"
    lines = [f"### {head} nsysreport gate: {summary_line(result)}", ""]
    lines.append(
        f"Trace: `{result.trace}`" + (f", baseline: `{result.baseline}`" * bool(result.baseline))
    )
    lines.append("")
    regressions = any(c.kind == "max-regression" for c in result.checks)
    cols = ["verdict", "check", "limit", "measured", "baseline", "spread", "note"]
    if not regressions:
        cols.remove("baseline")
    lines.append("| " + " | ".join(cols) + " |")
    lines.append(
        "| " + " | ".join("---:" if c in ("limit", "measured") else "---" for c in cols) + " |"
    )
    for c in result.checks:
        cells = [icons[c.verdict], f"`{c.check}`", fmt_limit(c), fmt_measured(c)]
        if regressions:
            cells.append(fmt_value(c.baseline, c.unit) if c.baseline is not None else "")
        cells += [_spreads(c, "<br>"), c.note]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if result.ledger:
        lines.append("")
        lines += [f"- {line}" for line in ledger_lines(result)]
    return "\n".join(lines) + "\n"
