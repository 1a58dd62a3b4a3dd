"""The Jinja environment of the templates: their folder, the unit filters, strict undefined."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsysreport.queries import resource_dir
from nsysreport.sections.gpu_metrics import tables as gpu_metric_tables
from nsysreport.units import fmt_bytes, fmt_count, fmt_gbps, fmt_ns, fmt_pct, short_kernel_name

if TYPE_CHECKING:
    import jinja2


def environment() -> jinja2.Environment:
    # Lazy: jinja2 costs 30 ms of start-up (python -X importtime), which a warm run that
    # writes the pages it kept, or `--help`, never needs.
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
        ns=fmt_ns,
        pct=fmt_pct,
        bytes=fmt_bytes,
        count=fmt_count,
        gbps=fmt_gbps,
        short_name=short_kernel_name,
    )
    env.filters["gpu_metric_tables"] = gpu_metric_tables
    return env
