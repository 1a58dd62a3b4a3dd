"""Every surface renders degenerate models (issue #39): no GPUs, no rows in any list, and every
optional field of every value absent (None), so that no template, formatter or summary can
meet an undefined value in a report that a damaged trace might still produce."""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.summary import print_summary

SAMPLES = Path(__file__).parents[1] / "sample_traces"
# A trace with steps, layers, collectives and a straggler; one of TP x DP training with
# communicators and a data path; one with CUDA graphs traced as a whole.
SOURCES = (
    "llama70b_decode_tp8_nvlink_straggler",
    "llama8b_train_tp4_dp2_nvlink",
    "llama70b_decode_tp4_nvlink_graphs_graph",
)
# Report fields that stay as they are: the model needs them to say anything at all.
KEPT = {"tool_version", "traces", "stragglers", "bottleneck", "quality"}


def nulled(value: Any) -> Any:
    """`value` with every optional field of every dataclass in it set to None."""
    if isinstance(value, tuple):
        return tuple(nulled(v) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    hints = typing.get_type_hints(type(value))
    changes = {}
    for f in dataclasses.fields(value):
        if f.init:
            optional = type(None) in typing.get_args(hints[f.name])
            changes[f.name] = None if optional else nulled(getattr(value, f.name))
    return dataclasses.replace(value, **changes)


def emptied(report: Report) -> Report:
    """`report` with no GPUs and no row in any list, no timeline and no capture."""
    lists = {
        f.name: ()
        for f in dataclasses.fields(report)
        if f.name not in KEPT and isinstance(getattr(report, f.name), tuple)
    }
    return dataclasses.replace(report, timeline=None, capture=None, **lists)


@cache
def source(name: str) -> Report:
    path = SAMPLES / f"{name}.sqlite"
    return build_report(open_trace(path), path)


VARIANTS = {
    "optional fields absent": nulled,
    "no GPUs, no rows": emptied,
    "both": lambda report: nulled(emptied(report)),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("name", SOURCES)
def test_every_surface_renders_a_degenerate_model(
    name: str, variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = VARIANTS[variant](source(name))
    html = render_html(report, "fixed")
    assert report.bottleneck.summary in html or report.bottleneck.summary == ""
    assert "Undefined" not in html and "None" not in html.replace("None;", "")
    data = as_json(report)
    assert len(data["gpus"]) == len(report.gpus)
    print_summary(report, [])
    assert "Traceback" not in capsys.readouterr().out
    assert report.bottleneck.summary in report._repr_html_() or not report.bottleneck.summary


def test_a_report_without_gpus_keeps_its_verdict_quality_and_no_gpu_section() -> None:
    report = emptied(source(SOURCES[0]))
    html = render_html(report, "fixed")
    assert 'id="verdict"' in html
    assert 'id="gpu_breakdown"' not in html and 'id="gaps"' not in html
