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


def report_html(report: Report) -> str:
    """The verdict, the key numbers and the per-GPU table, as an HTML fragment."""
    context = {
        "report": report,
        "key": report.overview.key,
        "parts": tuple(
            charts.part_colours(charts.has_graphs(report.gpus), charts.has_overhead(report.gpus))
        ),
    }
    return environment().get_template("notebook.html.j2").render(context)


def report_frames(
    data: Mapping[str, Any], layers_across: Sequence[dict[str, Any]]
) -> dict[str, pl.DataFrame]:
    """Every list in a report's JSON (`data`, model.as_json: gpus, steps, layers, collectives,
    top_kernels, ...) as a DataFrame whose columns are the JSON's keys (nested objects become
    struct columns; a list of plain values is one column named as the list), plus
    `stragglers` (the per-GPU straggler rows) and `layers_across` (each layer over all GPUs,
    which the JSON leaves out). A list without rows is an empty frame."""
    import polars as pl  # lazy: 0.2 s of start-up (python -X importtime) for a notebook only

    sections: dict[str, Sequence[Any]] = {k: v for k, v in data.items() if isinstance(v, list)}
    sections["stragglers"] = data["stragglers"]["gpus"]
    sections["layers_across"] = layers_across
    frames = {}
    for name, rows in sections.items():
        if not rows:
            frames[name] = pl.DataFrame()
        elif all(isinstance(row, dict) for row in rows):
            # A whole column is read before its type is chosen: a median can be an int on one
            # row and a float on the next.
            frames[name] = pl.DataFrame(list(rows), infer_schema_length=None)
        else:
            frames[name] = pl.DataFrame({name: list(rows)}, strict=False)
    return frames
