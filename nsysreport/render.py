"""Render the report model to one self-contained HTML file (and PDF), with matplotlib charts."""

from __future__ import annotations

import hashlib
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport import __version__, charts, picture_worker
from nsysreport.compare import (
    Comparison,
    collective_sentence,
    critical_path_sentence,
    role_comparison_sentence,
    summary_sentence,
)
from nsysreport.errors import OptionError
from nsysreport.kernel_diff import total_sentence
from nsysreport.model import Report
from nsysreport.pickling import pickled_model
from nsysreport.queries import resource_dir
from nsysreport.sections.data_path import bound_rule
from nsysreport.sections.overview import Overview
from nsysreport.template_env import environment

if TYPE_CHECKING:
    from concurrent.futures import Future

    from nsysreport.picture_worker import PictureWorker

PAPER_SIZES = ("a4", "letter")  # CSS page sizes; any letter case is accepted


def generated_now() -> str:
    """UTC time of the report; SOURCE_DATE_EPOCH (the reproducible-builds convention) fixes it."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


Drawing = tuple[Callable[..., str], tuple[Any, ...]]  # a chart function and its arguments


def drawings(report: Report, overview: Overview | None = None) -> dict[str, Drawing]:
    """The report's pictures, by name, as the chart function and the arguments that draw each;
    a picture with nothing to show is absent. The arguments hold what the picture shows and
    nothing a display option alone changes (each GPU's longest gaps: --top), so a picture
    drawn from equal arguments is the same picture (keyed_pictures)."""
    overview = overview or report.overview
    gpus = tuple(replace(g, gaps=replace(g.gaps, top=())) for g in report.gpus)
    out: dict[str, Drawing] = {}
    if gpus:
        out["breakdown"] = (charts.breakdown_chart, (gpus,))
    if overview.what_if is not None:
        out["what_if"] = (
            charts.what_if_chart,
            (overview.what_if.now_ns, overview.what_if.spans_ns),
        )
    if report.timeline is not None and report.timeline.gpus:
        out["timeline"] = (
            charts.timeline_chart,
            (report.timeline, _path_drawn(report) if report.path_on_timeline else ()),
        )
    if report.steps:
        out["steps"] = (charts.step_series_chart, (report.steps,))
    if overview.layers is not None:
        out["layers"] = (charts.layer_chart, (overview.layers.drawn, overview.layers.tiny))
    if overview.gaps is not None:
        out["gaps"] = (charts.gap_histogram_chart, ([g.gaps for g in gpus],))
    if report.compute is not None and any(
        f.intensity and f.tflops for f in report.compute.families
    ):
        out["roofline"] = (charts.roofline_chart, (report.compute.families,))
    return out


def _path_drawn(report: Report) -> tuple[tuple[int, int, int, bool], ...]:
    """The critical path's pieces on the timeline's clock, from its start: (rank, start, end,
    on the GPU), those in the part drawn."""
    t, path = report.timeline, report.critical_path
    assert t is not None and path is not None
    return tuple(
        (p.rank, p.start_ns - t.start_ns, min(p.end_ns, t.end_ns) - t.start_ns, p.on_gpu)
        for p in path.pieces
        if p.start_ns < t.end_ns
    )


def pictures(report: Report, overview: Overview | None = None) -> dict[str, str]:
    """The report's pictures as inline SVG, by name; a picture with nothing to show is absent."""
    return {name: draw(*args) for name, (draw, args) in drawings(report, overview).items()}


def keyed_pictures(
    report: Report, reuse: Mapping[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """The report's pictures, each with a digest of its arguments: a picture in `reuse` (by
    name, with its digest) drawn from the same arguments is taken as it is, not drawn again
    (a report with another --top redraws none of them, and matplotlib is not imported)."""
    return start_keyed_pictures(report, reuse, None)()


def start_keyed_pictures(
    report: Report,
    reuse: Mapping[str, tuple[str, str]],
    worker: PictureWorker | None,
    previous: Report | None = None,
) -> Callable[[], dict[str, tuple[str, str]]]:
    """keyed_pictures, with the pictures to draw handed to `worker` (when there is one) at
    once; calling the result waits for them (nsysreport.picture_worker). `previous`: the
    report whose pictures `reuse` holds, when `report` was made from it by replacing some
    fields (report_builder.with_display): a picture drawn from the very same (immutable) objects is
    taken without digesting them again."""
    done: dict[str, tuple[str, str]] = {}
    todo: dict[str, tuple[str, Drawing, bytes, Future[str] | None]] = {}
    wanted = drawings(report)
    before = drawings(previous) if previous is not None else {}
    for name, (draw, args) in wanted.items():
        kept = reuse.get(name)
        if kept is not None and name in before and _same_objects(args, before[name][1]):
            done[name] = kept  # 5M kernels, another --top: the steps' 25k rows not pickled
            continue
        pickled = pickled_model(args)  # 25k steps: 0.36 s (0.61 s by pickle.dumps)
        key = hashlib.sha256(pickled).hexdigest()
        if kept is not None and kept[0] == key:
            done[name] = kept
        else:
            future = worker.draw(draw, pickled) if worker else None
            todo[name] = (key, (draw, args), pickled, future)

    def finish() -> dict[str, tuple[str, str]]:
        for name, (key, (draw, args), pickled, future) in todo.items():
            picture = picture_worker.result(future, draw, pickled) if future else draw(*args)
            done[name] = (key, picture)
        return {name: done[name] for name in wanted}

    return finish


def _same_objects(args: tuple[Any, ...], others: tuple[Any, ...]) -> bool:
    """The same objects, one for one: the model is frozen dataclasses and tuples of plain
    values, so the same objects pickle to the same digest."""
    return len(args) == len(others) and all(map(operator.is_, args, others))


def render_html(
    report: Report,
    generated_at: str | None = None,
    svg: dict[str, str] | None = None,
    perfetto_href: str | None = None,
) -> str:
    """The report as one HTML document: CSS inlined, charts as inline SVG, no network access.

    `generated_at`: the time the page states (default: now, see generated_now); `svg`: the
    pictures, when they were drawn already; `perfetto_href`: where the page links to the
    Perfetto trace of its window (`report --perfetto`), relative to the page.
    """
    overview = report.overview
    context: dict[str, Any] = {
        "report": report,
        "overview": overview,
        "tool_version": report.tool_version,
        "generated_at": generated_at or generated_now(),
        "part_colours": charts.part_colours(
            charts.has_graphs(report.gpus), charts.has_overhead(report.gpus)
        ),
        "svg": pictures(report, overview) if svg is None else svg,
        "perfetto_href": perfetto_href,
        "data_path_rule": bound_rule(),
    }
    return environment().get_template("report.html.j2").render(context)


def render_compare_html(comparison: Comparison, generated_at: str | None = None) -> str:
    """The comparison of configurations as one self-contained HTML document."""
    context: dict[str, Any] = {
        "c": comparison,
        "summary": summary_sentence(comparison),
        "collectives_summary": collective_sentence(comparison),
        "roles_summary": role_comparison_sentence(comparison),
        "critical_path_summary": critical_path_sentence(comparison),
        "kernel_totals": {d.label: total_sentence(d) for d in comparison.kernel_diffs},
        "generated_at": generated_at or generated_now(),
        "tool_version": __version__,
        "part_colours": charts.part_colours(comparison.graph_part, comparison.overhead_part),
        "scaling_svg": charts.scaling_chart(comparison),
        "loss_svg": charts.loss_chart(comparison),
    }
    return environment().get_template("compare.html.j2").render(context)


def write_pdf(page: Report | str, path: Path | str, paper: str = "A4") -> None:
    """Print a report (or its HTML, rendered already) through WeasyPrint with the print rules
    of report.css, on A4 or Letter."""
    # Lazy: WeasyPrint costs 0.5 s of start-up (python -X importtime), for the PDF only.
    import weasyprint

    html = render_html(page) if isinstance(page, Report) else page
    if paper.lower() not in PAPER_SIZES:
        raise OptionError(f"paper size {paper!r}: expected A4 or letter")
    # report.css leaves the size to the printer (WeasyPrint's default is A4 portrait).
    size = [weasyprint.CSS(string=f"@page {{ size: {paper.lower()} portrait }}")]
    document = weasyprint.HTML(string=html, base_url=str(resource_dir("templates")))
    document.write_pdf(path, stylesheets=size)
