"""The Jinja environment of the templates: their folder, the unit filters, strict undefined."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

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
        bytecode_cache=_compiled_templates(),
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


def _compiled_templates() -> jinja2.BytecodeCache | None:
    """Jinja's cache of compiled templates, in the private folder jinja2 makes for the user in
    the temp dir (mode 0700, its owner checked), keyed by each template's source: compiling the
    templates costs every page 0.3-0.5 s on the 2-core development machine, loading them
    0.02-0.04 s. None where no safe folder can be had; a file that cannot be written is left
    out (the template compiles again next time)."""
    import jinja2

    class Compiled(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Any) -> None:
            with suppress(OSError):
                super().dump_bytecode(bucket)

    try:
        return Compiled()
    except (OSError, RuntimeError):  # no temp dir, or one another user could write
        return None
