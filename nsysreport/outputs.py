"""The report command's outputs (HTML, JSON text, the model for the summary) for one trace or
several, from the report cache when the same report was made before."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from html import escape as html_escape
from pathlib import Path
from typing import Any

# Modules, not their functions: a test replaces render.render_html and json_sections to prove
# that a warm run calls neither.
from nsysreport import model, perfetto, picture_worker, render, report_builder
from nsysreport.analysis import Progress, Window, analyse, load_one
from nsysreport.cache import cached_report
from nsysreport.json_indent import object_blocks, value_blocks
from nsysreport.model import Report
from nsysreport.patterns import Patterns
from nsysreport.picture_worker import PictureWorker
from nsysreport.user_facts import Facts
from nsysreport.writes import Output, Writer

# top, timeline step, timeline window, the user's facts (--link-peak, --model)
ModelOptions = tuple[int, str | None, Window, Facts]
# Stands for the generation time in a cached page: the one thing that differs between runs.
GENERATED_AT = "@@nsysreport-generated-at@@"
# Stands for the Perfetto file's link in a cached page: the same page serves any --perfetto path.
PERFETTO_HREF = "@@nsysreport-perfetto-href@@"


# A text made a block at a time, each time it is called: a large one is never held whole.
Blocks = Callable[[], Iterable[str]]


@dataclass(frozen=True, slots=True)
class Outputs:
    html: str
    json: Blocks | None  # the JSON's text, made as it is written; None unless asked for
    model: Callable[[], Report]  # built or unpickled only when the summary needs it
    perfetto_text: str | None = None  # the --perfetto file's text, None unless asked for


# The JSON is made in blocks of about this many pieces (a key, a value, a line's indent); a
# text is written this many characters at a time.
JSON_BLOCK_PIECES = 8192
WRITE_CHARS = 1 << 20


# The JSON text of each top-level key, in order (json_sections): what the report cache keeps.
KeptJson = dict[str, str]


def json_blocks(report: Report) -> Iterator[str]:
    """The report's JSON, as json.dumps(indent=2) writes it, a block at a time
    (nsysreport.json_indent: never held whole as millions of small pieces)."""
    return object_blocks(json_sections(report))


def json_sections(
    report: Report, previous: tuple[Report, Any] | None = None
) -> Iterator[tuple[str, Iterable[str]]]:
    """Each top-level key of the report's JSON with its value's text (model.JSON_SECTIONS).
    `previous`: a report this one was made from by replacing some fields, and its kept JSON
    (KeptJson, or None): a key whose fields are the very same objects there takes the kept
    text, made from equal values (at 5M kernels a run with another --top encodes 90 kB of
    JSON instead of 29 MB: the steps do not change)."""
    old, kept = previous if previous is not None else (None, None)
    for key, fields, make in model.JSON_SECTIONS:
        if (
            isinstance(kept, dict)
            and key in kept
            and all(getattr(report, f) is getattr(old, f) for f in fields)
        ):
            yield key, (kept[key],)
        else:
            yield key, value_blocks(make(report), JSON_BLOCK_PIECES)


def kept_json(report: Report, previous: tuple[Report, Any] | None = None) -> KeptJson:
    """The report's JSON as the report cache keeps it: each key's text (json_sections)."""
    return {key: "".join(text) for key, text in json_sections(report, previous)}


def kept_blocks(kept: KeptJson) -> Blocks:
    """The JSON text of kept sections, a key at a time."""
    return lambda: object_blocks((key, (text,)) for key, text in kept.items())


def json_text(report: Report) -> str:
    return "".join(json_blocks(report))


def report_outputs(
    paths: Sequence[Path],
    patterns: Patterns,
    model_options: ModelOptions,
    cache: bool,
    want_json: bool,
    generated_at: str,
    progress: Progress,
    run_options: dict[str, Any],
    perfetto_href: str | None = None,
) -> Outputs:
    """The outputs of one report over `paths`: one trace, or several (`run_options`: jobs,
    scheduler, align). `perfetto_href`: the Perfetto file is wanted (one trace only), and the
    page links to it there."""
    if len(paths) == 1:
        return one_trace(
            paths[0],
            patterns,
            model_options,
            cache,
            want_json,
            generated_at,
            progress,
            perfetto_href,
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
    perfetto_href: str | None = None,
) -> Outputs:
    """A report of one trace. With the cache, a rerun on the unchanged trace with the same
    options writes the pages it kept: no query, no drawing, no JSON encoding."""
    top, step, window, facts = model_options
    chosen = step is not None or window != (None, None)  # the user picked the timeline window

    worker: PictureWorker | None = None

    def build() -> Report:
        # The model is made from scratch: its pictures will be drawn (a large trace's in a
        # worker, started now so that its imports overlap the analysis).
        nonlocal worker
        worker = worker or picture_worker.start([path])
        con = load_one(path, patterns, cache, progress)
        return report_builder.build_report(con, path, top, step, window, facts=facts)

    def refresh(kept: Report) -> Report:
        # A report of this trace with other display options: only what they choose is new.
        return report_builder.with_display(
            load_one(path, patterns, cache, progress), kept, top, step, window
        )

    def trace_file(report: Report) -> str:
        # With the cache the loaded trace opens from its cache file, without loading again.
        con = load_one(path, patterns, cache, None)
        progress("writing the Perfetto trace")
        return perfetto.trace_json(con, report, chosen)

    try:
        if not cache:
            worker = picture_worker.start([path])
            con = load_one(path, patterns, False, progress)
            report = report_builder.build_report(con, path, top, step, window, facts=facts)
            made = _rendered(report, want_json, generated_at, progress, perfetto_href, worker)
            if perfetto_href is None:
                return made
            progress("writing the Perfetto trace")
            return replace(made, perfetto_text=perfetto.trace_json(con, report, chosen))
        cached = cached_report(path, patterns, model_options, build, (facts,), refresh)
        new: dict[str, Any] = {}
        html_key = "html" if perfetto_href is None else "html_perfetto"
        page = cached.outputs.get(html_key)
        text = cached.outputs.get("json") if want_json else None
        drawn = None
        if page is None:
            progress("rendering")
            # Kept with their digests: a report with other display options reuses the same
            # ones. Those to draw are drawn (by the worker) while the JSON is made.
            kept_svg = cached.outputs.get("svg")
            made_from = None if kept_svg or cached.previous is None else cached.previous[0]
            drawn = render.start_keyed_pictures(
                cached.model, kept_svg or cached.pictures, worker, made_from
            )
        if want_json and text is None:
            previous = cached.previous  # made from it: its unchanged keys' text is reused
            reuse = None if previous is None else (previous[0], previous[1].get("json"))
            text = new["json"] = kept_json(cached.model, reuse)
        if page is None:
            assert drawn is not None  # started above, for the page that was not kept
            svg = new["svg"] = drawn()
            page = new[html_key] = render.render_html(
                cached.model,
                GENERATED_AT,
                svg={name: picture for name, (_, picture) in svg.items()},
                perfetto_href=None if perfetto_href is None else PERFETTO_HREF,
            )
    finally:
        picture_worker.stop(worker)
    trace_text = cached.outputs.get("perfetto") if perfetto_href is not None else None
    if perfetto_href is not None and trace_text is None:
        trace_text = new["perfetto"] = trace_file(cached.model)
    if new:
        cached.keep(**new)
    page = page.replace(GENERATED_AT, generated_at)
    if perfetto_href is not None:
        page = page.replace(PERFETTO_HREF, html_escape(perfetto_href, quote=True))
    json = None if text is None else kept_blocks(text)
    return Outputs(page, json, lambda: cached.model, trace_text)


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
    # Started now, so that its imports overlap the analysis (as for one large trace): it
    # draws while this process makes the JSON, after the files' workers are done.
    worker = picture_worker.start(paths)
    try:
        report = analyse(
            paths, patterns, top, step, window, cache, progress=progress, facts=facts, **run_options
        )
        return _rendered(report, want_json, generated_at, progress, worker=worker)
    finally:
        picture_worker.stop(worker)


def _rendered(
    report: Report,
    want_json: bool,
    generated_at: str,
    progress: Progress,
    perfetto_href: str | None = None,
    worker: PictureWorker | None = None,
) -> Outputs:
    """The outputs of a model built in this run (nothing kept). With a picture worker, the
    JSON is made here while it draws (a text then, not blocks made as they are written)."""
    progress("rendering")
    if worker is None:
        html = render.render_html(report, generated_at, perfetto_href=perfetto_href)
        return Outputs(html, (lambda: json_blocks(report)) if want_json else None, lambda: report)
    drawn = render.start_keyed_pictures(report, {}, worker)
    blocks = _whole(json_text(report)) if want_json else None
    svg = {name: picture for name, (_, picture) in drawn().items()}
    html = render.render_html(report, generated_at, svg=svg, perfetto_href=perfetto_href)
    return Outputs(html, blocks, lambda: report)


def _whole(text: str) -> Blocks:
    return lambda: (text,)


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


def writer(
    output: Output,
    html: str,
    json_text: Blocks | None,
    paper: str = "A4",
    perfetto_text: str | None = None,
) -> Writer:
    """What writes `output`: the JSON text for --json, the trace-event text for --perfetto,
    else the page as PDF (by suffix) or HTML."""
    if output.option == "--json":
        return blocks_writer(json_text or _whole(""))
    if output.option == "--perfetto":
        return text_writer(perfetto_text or "")
    if output.path.suffix.lower() == ".pdf":
        return lambda tmp: render.write_pdf(html, tmp, paper)
    return text_writer(html)


def blocks_writer(blocks: Blocks) -> Writer:
    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            f.writelines(blocks())

    return write


def text_writer(text: str) -> Writer:
    """Writes `text` as Path.write_text does, a slice at a time: encoded at once, a large text
    (the JSON of many rank files) would be held twice."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            for start in range(0, len(text), WRITE_CHARS):
                f.write(text[start : start + WRITE_CHARS])

    return write


def relative_href(target: Path, page: Path) -> str:
    """The link from the page at `page` to the file at `target`, relative (the two travel
    together), with forward slashes."""
    relative = os.path.relpath(target.resolve(), page.resolve().parent)
    return Path(relative).as_posix()
