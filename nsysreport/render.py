"""Render the report model to one self-contained HTML file (and PDF), with matplotlib charts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport import __version__
from nsysreport.charts import PART_COLOURS, breakdown_chart, loss_chart, scaling_chart
from nsysreport.compare import Comparison, summary_sentence
from nsysreport.model import Report
from nsysreport.queries import resource_dir
from nsysreport.units import fmt_bytes, fmt_count, fmt_ns, fmt_pct, short_kernel_name

if TYPE_CHECKING:
    import jinja2


def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"], default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        ns=fmt_ns, pct=fmt_pct, bytes=fmt_bytes, count=fmt_count, short_name=short_kernel_name
    )
    return env


def render_html(report: Report, generated_at: str) -> str:
    """The report as one HTML document: CSS inlined, charts as inline SVG, no network access."""
    context: dict[str, Any] = {
        "report": report,
        "tool_version": report.tool_version,
        "generated_at": generated_at,
        "part_colours": PART_COLOURS,
        "breakdown_svg": breakdown_chart(report),
    }
    return environment().get_template("report.html.j2").render(context)


def render_compare_html(comparison: Comparison, generated_at: str) -> str:
    """The comparison of configurations as one self-contained HTML document."""
    context: dict[str, Any] = {
        "c": comparison,
        "summary": summary_sentence(comparison),
        "generated_at": generated_at,
        "tool_version": __version__,
        "part_colours": PART_COLOURS,
        "scaling_svg": scaling_chart(comparison),
        "loss_svg": loss_chart(comparison),
    }
    return environment().get_template("compare.html.j2").render(context)


def write_pdf(html: str, path: Path) -> None:
    """Print the HTML through WeasyPrint with the print rules of report.css."""
    import weasyprint

    weasyprint.HTML(string=html, base_url=str(resource_dir("templates"))).write_pdf(path)
