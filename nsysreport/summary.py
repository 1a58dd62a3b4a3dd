"""The terminal summary: a per-GPU breakdown table, the verdict and the files written."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.compare import (
    Comparison,
    collective_sentence,
    critical_path_sentence,
    role_comparison_sentence,
    summary_sentence,
)
from nsysreport.kernel_diff import (
    KernelDiff,
    layers_sentence,
    names_sentence,
    short_name,
    total_sentence,
)
from nsysreport.model import Report
from nsysreport.sections.capture import TOPIC_LABELS, Diagnostic
from nsysreport.sections.critical_path import HOST_BOUND_PCT
from nsysreport.sections.gpu_metrics import summary_line as gpu_metrics_line
from nsysreport.sections.verdict import RECAPTURE
from nsysreport.units import fmt_count, fmt_ns, fmt_pct

if TYPE_CHECKING:
    from rich.console import Console


def print_summary(report: Report, written: Sequence[Path]) -> None:
    # Lazy: rich.table costs 25 ms of start-up (python -X importtime), which `--quiet`,
    # `--json -` and `--help` never need.
    from rich.table import Table

    console = _console()
    for trace in report.traces:
        simulated = " [bold yellow](simulated)[/]" if trace.simulated else ""
        console.print(f"[bold]{trace.path}[/]{simulated}  {trace.source}", soft_wrap=True)
    table = Table(box=None, header_style="bold", pad_edge=False)
    # A column for time inside CUDA graphs traced as a whole, only when there are such launches.
    # Likewise for nsys's own pauses with nothing running (profiler overhead).
    graphs = any(g.graph_launches for g in report.gpus)
    overhead = any(g.profiler_overhead_ns for g in report.gpus)
    parts = ("compute", "exposed comm", "exposed memcpy", *(("graph opaque",) * graphs),
             *(("profiler overhead",) * overhead), "idle")  # fmt: skip
    short = {"exposed comm": "exp. comm", "exposed memcpy": "exp. memcpy", "graph opaque": "graph",
             "profiler overhead": "profiler"}  # fmt: skip
    for heading in ("GPU", "pid", "dev", "span", *(short.get(p, p) for p in parts)):
        table.add_column(heading, justify="left" if heading == "GPU" else "right")
    table.add_column("overlap", justify="right")
    table.add_column("gaps", justify="right")
    for g in report.gpus:
        shares = g.shares_pct
        table.add_row(
            f"rank {g.rank}",
            str(g.pid),
            str(g.device_id),
            fmt_ns(g.span_ns),
            *(fmt_pct(shares[p]) for p in parts),
            fmt_pct(g.overlap_pct),
            fmt_count(g.gaps.count),
        )
    console.print(table)
    key = report.overview.key
    if key.step_exposed_comm_pct is not None:
        # Two different numbers, both true: the whole trace counts the time between steps too.
        console.print(
            f"Exposed comm: {fmt_pct(key.shares_pct['exposed comm'])} of all GPUs' time (whole "
            f"trace); median step {fmt_pct(key.step_exposed_comm_pct)} on rank "
            f"{key.step_exposed_comm_rank}, the highest (gate's exposed_comm_pct)",
            soft_wrap=True,
        )
    # Rows left out and guesses made: the numbers above rest on them, so they come first.
    for note in report.quality.notes(with_file=len(report.traces) > 1):
        console.print(f"[bold yellow]Note:[/] {note}", soft_wrap=True)
    if graphs:
        share = report.bottleneck.graph_opaque_pct  # the verdict's figure, stated once
        console.print(
            f"CUDA graphs traced as a whole: {fmt_pct(share)} of GPU time, contents not traced "
            f"(re-capture with `{RECAPTURE}` to see their kernels)",
            soft_wrap=True,
        )
    _print_clocks(console, report)
    if report.capture is not None and report.capture.hints:
        lacks = ", ".join(TOPIC_LABELS[h.topic] for h in report.capture.hints)
        console.print(
            f"Capture: {lacks} (the report's Capture section says how to record them)",
            soft_wrap=True,
        )
    if report.capture is not None and report.capture.diagnostics:
        console.print(_diagnostics_line(report.capture.diagnostics), soft_wrap=True)
    metrics = gpu_metrics_line(report.gpu_metrics)
    if metrics is not None:
        console.print(metrics, soft_wrap=True)
    layers = [layer for layer in report.layers_across if layer.exposed_comm_mean_ns > 0][:3]
    if layers:
        console.print("Layers with the most exposed communication (mean per GPU):")
        for layer in layers:
            console.print(
                f"  {layer.layer}: {fmt_ns(layer.exposed_comm_mean_ns)} "
                f"(worst: rank {layer.worst_rank}, {fmt_ns(layer.exposed_comm_max_ns)})",
                soft_wrap=True,
            )
    # Paths and the verdict are never wrapped: scripts grep them and terminals wrap anyway.
    console.print(f"[bold]Verdict:[/] {report.bottleneck.summary}", soft_wrap=True)
    idle = report.bottleneck.idle_gaps
    if idle is not None and idle.summary and report.bottleneck.stage != "host":
        console.print(f"[bold]Idle:[/] {idle.summary}", soft_wrap=True)  # in the verdict if host
    narrow = report.narrowest_stage
    if narrow is not None:
        console.print(f"[bold]Data path:[/] {narrow.summary}", soft_wrap=True)
    critical = report.critical_path
    if critical is not None:
        drill = f" {critical.drill_down}" if critical.drill_down else ""
        console.print(f"[bold]Critical path:[/] {critical.summary}{drill}", soft_wrap=True)
        host = critical.share("host_side")
        if report.launch_summary and host is not None and host >= HOST_BOUND_PCT:
            console.print(f"[bold]Launches:[/] {report.launch_summary}", soft_wrap=True)
    if report.compute is not None and report.compute.sentence:
        console.print(f"[bold]Compute efficiency:[/] {report.compute.sentence}", soft_wrap=True)
    for path in written:
        console.print(f"Wrote {path}", soft_wrap=True)


def _diagnostics_line(diagnostics: Sequence[Diagnostic]) -> str:
    """`nsys recorded 1 error and 4 warnings about the capture (...)`: counted by message."""
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warnings = len(diagnostics) - errors
    said = [
        f"{n} {word}{'' if n == 1 else 's'}"
        for n, word in ((errors, "error"), (warnings, "warning"))
        if n
    ]
    return (
        f"nsys recorded {' and '.join(said)} about the capture (the report's Capture section "
        "lists them)"
    )


def _print_clocks(console: Console, report: Report) -> None:
    """Several files: each one's clock offset against the reference, and how it was found."""
    if not report.clocks:
        return
    others = report.clocks[1:]
    if len(others) > 8:  # a big job: one line; the report and the JSON list every file
        sources = Counter(c.source for c in others)
        how = ", ".join(f"{n} by {source}" for source, n in sources.most_common())
        worst = max(
            (c.residual_max_ns or 0 for c in others if c.source == "collectives"), default=0
        )
        console.print(
            f"Clocks: {len(others)} files aligned to {report.clocks[0].file} ({how}; "
            f"largest residual {fmt_ns(worst)})",
            soft_wrap=True,
        )
        return
    console.print(f"Clocks, on {report.clocks[0].file}'s time line:")
    for c in others:
        residual = "" if c.residual_p50_ns is None else f", residual {fmt_ns(c.residual_p50_ns)}"
        console.print(
            f"  {c.file}: {c.offset_ns:+,} ns ({c.source}, {c.instances} instances{residual})",
            soft_wrap=True,
        )


def print_comparison(c: Comparison, written: Sequence[Path]) -> None:
    from rich.table import Table  # lazy, as in print_summary

    console = _console()
    table = Table(box=None, header_style="bold", pad_edge=False)
    headings = ("config", "GPUs", "step time", c.throughput_unit, "speedup", "ideal", "efficiency")
    mfu = any(x.mfu_pct is not None for x in c.configs)
    for heading in (*headings, "exp. comm/step", "idle/step", *(("MFU",) if mfu else ())):
        table.add_column(heading, justify="left" if heading == "config" else "right")
    for x in c.configs:
        shown = (fmt_pct(x.mfu_pct) if x.mfu_pct is not None else "unknown",) if mfu else ()
        table.add_row(
            x.label + (" (baseline)" if x.label == c.baseline else ""),
            str(x.gpus),
            fmt_ns(x.step_time_ns),
            f"{x.throughput:.1f}",
            f"{x.speedup:.2f}x",
            f"{x.ideal_speedup:.2f}x",
            f"{x.scaling_efficiency_pct:.0f}%",
            fmt_ns(x.breakdown["exposed_comm_ns"]),
            fmt_ns(x.breakdown["idle_ns"]),
            *shown,
        )
    console.print(table)
    console.print(f"[bold]Scaling:[/] {summary_sentence(c)}", soft_wrap=True)
    collectives = collective_sentence(c)
    if collectives is not None:
        console.print(f"[bold]Collectives:[/] {collectives}", soft_wrap=True)
    roles = role_comparison_sentence(c)
    if roles is not None:
        console.print(f"[bold]Communicators:[/] {roles}", soft_wrap=True)
    moved = critical_path_sentence(c)
    if moved is not None:
        console.print(f"[bold]Critical path:[/] {moved}", soft_wrap=True)
    for diff in c.kernel_diffs:
        _print_kernel_diff(console, diff)
    for note in c.notes:
        console.print(f"Note: {note}", soft_wrap=True)
    for path in written:
        console.print(f"Wrote {path}", soft_wrap=True)


def _print_kernel_diff(console: Console, d: KernelDiff, top: int = 5) -> None:
    """The comparability verdict first, then the kernels whose time changed most."""
    from rich.markup import escape  # lazy, as in print_summary (kernel names hold brackets)
    from rich.table import Table

    console.print(f"[bold]Kernel diff:[/] {escape(d.verdict)}", soft_wrap=True)
    console.print(escape(total_sentence(d)), soft_wrap=True)
    if d.by_time:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for heading in ("kernel", "class", "layer", d.baseline, d.label, "change", "count"):
            # The names give way on a narrow terminal; the numbers never wrap.
            wide = {"kernel": 44, "layer": 20}.get(heading)
            left = heading in ("kernel", "class", "layer")
            table.add_column(
                heading,
                justify="left" if left else "right",
                no_wrap=True,
                overflow="ellipsis",
                max_width=wide,
            )
        for x in d.by_time[:top]:
            sign = "+" if x.delta_ns > 0 else "-"
            pct = "" if x.delta_pct is None else f" ({x.delta_pct:+.0f}%)"
            table.add_row(
                escape(short_name(x.name, 44)),
                x.kernel_class,
                escape(x.layer),
                fmt_ns(x.base_ns),
                fmt_ns(x.ns),
                f"{sign}{fmt_ns(abs(x.delta_ns))}{pct}",
                f"{x.base_count:.3g} → {x.count:.3g}",
            )
        console.print(table)
    for line in (names_sentence(d), layers_sentence(d)):
        if line is not None:
            console.print(escape(line), soft_wrap=True)


def _console() -> Console:
    """Rich's console, 120 columns wide when stdout is a pipe or a CI log (not 80)."""
    from rich.console import Console  # lazy, as in print_summary

    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)
