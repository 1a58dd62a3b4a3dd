"""The report in a notebook: its HTML for Jupyter (`Report._repr_html_`) and its sections as
polars DataFrames (`Report.frames()`), both from the model alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nsysreport import charts
from nsysreport.template_env import environment

if TYPE_CHECKING:
    import polars as pl

    from nsysreport.model import Report

# The report JSON's keys that hold a list of rows.
LIST_SECTIONS = (
    "gpus",
    "steps",
    "step_stats",
    "layers",
    "collectives",
    "top_kernels",
    "ranks",
    "skipped",
)


def report_html(report: Report) -> str:
    """The verdict, the key numbers and the per-GPU table, as an HTML fragment."""
    context = {
        "report": report,
        "key": report.overview.key,
        "parts": tuple(charts.part_colours(charts.has_graphs(report.gpus))),
    }
    return environment().get_template("notebook.html.j2").render(context)


def report_frames(
    data: Mapping[str, Any], layers_across: Sequence[dict[str, Any]]
) -> dict[str, pl.DataFrame]:
    """The list sections of a report's JSON (`data`, model.as_json) as DataFrames whose
    columns are the JSON's keys (nested objects become struct columns), plus `stragglers`
    (the per-GPU straggler rows) and `layers_across` (each layer over all GPUs, which the JSON
    leaves out). A section without rows is an empty frame."""
    import polars as pl  # lazy: 0.2 s of start-up (python -X importtime) for a notebook only

    sections: dict[str, Sequence[dict[str, Any]]] = {name: data[name] for name in LIST_SECTIONS}
    sections["stragglers"] = data["stragglers"]["gpus"]
    sections["layers_across"] = layers_across
    # A whole column is read before its type is chosen: a median can be an int on one row and
    # a float on the next.
    return {
        name: pl.DataFrame(list(rows), infer_schema_length=None) if rows else pl.DataFrame()
        for name, rows in sections.items()
    }
