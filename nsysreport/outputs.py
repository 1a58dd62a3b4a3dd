"""The report command's outputs (HTML, JSON text, the model for the summary) for one trace or
several, from the report cache when the same report was made before."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Modules, not their functions: a test replaces render.render_html and model.as_json to prove
# that a warm run calls neither.
from nsysreport import model, render
from nsysreport.analysis import Progress, Window, analyse, analyse_one
from nsysreport.cache import cached_report
from nsysreport.model import Report
from nsysreport.patterns import Patterns
from nsysreport.user_facts import Facts
from nsysreport.writes import Output, Writer

# top, timeline step, timeline window, the user's facts (--link-peak, --model)
ModelOptions = tuple[int, str | None, Window, Facts]
# Stands for the generation time in a cached page: the one thing that differs between runs.
GENERATED_AT = "@@nsysreport-generated-at@@"


@dataclass(frozen=True, slots=True)
class Outputs:
    html: str
    json_text: str | None  # None unless asked for
    model: Callable[[], Report]  # built or unpickled only when the summary needs it


def json_text(report: Report) -> str:
    return json.dumps(model.as_json(report), indent=2, sort_keys=False) + "\n"


def report_outputs(
    paths: Sequence[Path],
    patterns: Patterns,
    model_options: ModelOptions,
    cache: bool,
    want_json: bool,
    generated_at: str,
    progress: Progress,
    run_options: dict[str, Any],
) -> Outputs:
    """The outputs of one report over `paths`: one trace, or several (`run_options`: jobs,
    scheduler, align)."""
    if len(paths) == 1:
        return one_trace(
            paths[0], patterns, model_options, cache, want_json, generated_at, progress
        )
    return several_traces(
        paths, patterns, model_options, cache, want_json, generated_at, progress, run_options
    )


def one_trace(
    path: Path,
    patterns: Patterns,
    model_options: ModelOptions,
    cache: bool,
    want_json: bool,
    generated_at: str,
    progress: Progress,
) -> Outputs:
    """A report of one trace. With the cache, a rerun on the unchanged trace with the same
    options writes the pages it kept: no query, no drawing, no JSON encoding."""
    top, step, window, facts = model_options

    def build() -> Report:
        return analyse_one(path, patterns, top, step, window, cache, progress, facts)

    if not cache:
        return _rendered(build(), want_json, generated_at, progress)
    cached = cached_report(path, patterns, model_options, build)
    new: dict[str, Any] = {}
    page = cached.outputs.get("html")
    if page is None:
        progress("rendering")
        page = new["html"] = render.render_html(cached.model, GENERATED_AT)
    text = cached.outputs.get("json") if want_json else None
    if want_json and text is None:
        text = new["json"] = json_text(cached.model)
    if new:
        cached.keep(**new)
    return Outputs(page.replace(GENERATED_AT, generated_at), text, lambda: cached.model)


def several_traces(
    paths: Sequence[Path],
    patterns: Patterns,
    model_options: ModelOptions,
    cache: bool,
    want_json: bool,
    generated_at: str,
    progress: Progress,
    run_options: dict[str, Any],
) -> Outputs:
    """One report over several traces (nsysreport.multi); `run_options`: jobs, scheduler, align."""
    top, step, window, facts = model_options
    report = analyse(
        paths, patterns, top, step, window, cache, progress=progress, facts=facts, **run_options
    )
    return _rendered(report, want_json, generated_at, progress)


def _rendered(report: Report, want_json: bool, generated_at: str, progress: Progress) -> Outputs:
    """The outputs of a model built in this run (nothing kept)."""
    progress("rendering")
    html = render.render_html(report, generated_at)
    return Outputs(html, json_text(report) if want_json else None, lambda: report)


def default_output(paths: Sequence[Path]) -> Path:
    """TRACE.report.html beside one trace; PREFIX-Nfiles.report.html beside the first of several."""
    first = paths[0]
    if len(paths) == 1:
        stem = first.name.removesuffix(".sqlite").removesuffix(".gz").removesuffix(".json")
        return first.with_name(stem + ".report.html")
    # The shared start of the names (rank_0, rank_1, ... -> rank), cut back to a word.
    shared = os.path.commonprefix([p.name for p in paths])  # noqa: RUF071 (names, not paths)
    prefix = shared.rstrip("0123456789_-.") or "ranks"
    return first.with_name(f"{prefix}-{len(paths)}files.report.html")


def page_outputs(out: Path, pdf: bool, option: str) -> list[Output]:
    """The HTML at `out` (or only a PDF when it ends in .pdf), and on request a PDF beside it."""
    if out.suffix.lower() == ".pdf" or not pdf:
        return [Output(option, out)]
    return [Output(option, out), Output("--pdf", out.with_suffix(".pdf"))]


def writer(output: Output, html: str, json_text: str, paper: str = "A4") -> Writer:
    """What writes `output`: the JSON text for --json, else the page as PDF (by suffix) or HTML."""
    if output.option == "--json":
        return text_writer(json_text)
    if output.path.suffix.lower() == ".pdf":
        return lambda tmp: render.write_pdf(html, tmp, paper)
    return text_writer(html)


def text_writer(text: str) -> Writer:
    return lambda tmp: tmp.write_text(text, encoding="utf-8")
