"""Render the report model to one self-contained HTML file (and PDF), with matplotlib charts."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport.model import Report
from nsysreport.queries import resource_dir
from nsysreport.units import fmt_bytes, fmt_count, fmt_ns, fmt_pct, short_kernel_name

if TYPE_CHECKING:
    import jinja2

# Okabe-Ito colours: distinguishable with the common forms of colour blindness.
PART_COLOURS = {
    "compute": "#0072B2",
    "exposed comm": "#D55E00",
    "exposed memcpy": "#E69F00",
    "idle": "#BBBBBB",
}


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
        "generated_at": generated_at,
        "part_colours": PART_COLOURS,
        "breakdown_svg": breakdown_chart(report),
    }
    return environment().get_template("report.html.j2").render(context)


def write_pdf(html: str, path: Path) -> None:
    """Print the HTML through WeasyPrint with the print rules of report.css."""
    import weasyprint

    weasyprint.HTML(string=html, base_url=str(resource_dir("templates"))).write_pdf(path)


def breakdown_chart(report: Report) -> str:
    """Stacked bars, one per GPU: compute, exposed comm, exposed memcpy and idle, % of span."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = report.gpus
    labels = [f"rank {g.rank}" for g in gpus]
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "nsysreport", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(gpus) + 1.1))
        left = [0.0] * len(gpus)
        for part, colour in PART_COLOURS.items():
            widths = [g.shares_pct[part] or 0.0 for g in gpus]
            ax.barh(labels, widths, left=left, color=colour, label=part, height=0.6)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of the GPU's span (%)")
        ax.invert_yaxis()
        ax.legend(ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]
