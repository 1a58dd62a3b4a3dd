"""The report command's outputs (HTML, JSON text, the model for the summary) for one trace or
several, from the report cache when the same report was made before; and a saved JSON read back."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsysreport.model import Report
    from nsysreport.patterns import Patterns

Progress = Callable[[str], None]
ModelOptions = tuple[int, str | None, tuple[int | None, int | None]]  # top, step, time window
# Stands for the generation time in a cached page: the one thing that differs between runs.
GENERATED_AT = "@@nsysreport-generated-at@@"
# A PyTorch profiler trace names these at its top level; a report JSON never has them as keys
# (a quote inside a report's strings is escaped, so the pattern cannot match there).
KINETO_KEY = re.compile(rb'"(traceEvents|schemaVersion|deviceProperties)"\s*:')
REPORT_START = re.compile(rb'\s*\{\s*"schema_version"\s*:')


@dataclass(frozen=True, slots=True)
class Outputs:
    html: str
    json_text: str | None  # None unless asked for
    model: Callable[[], Report]  # built or unpickled only when the summary needs it


def json_text(model: Report) -> str:
    from nsysreport.model import as_json

    return json.dumps(as_json(model), indent=2, sort_keys=False) + "\n"


def saved_json(path: Path) -> Any | None:
    """The parsed JSON of a saved report (`report --json`), or None when `path` is a trace to
    analyse: a .json is a saved report unless it is a PyTorch profiler (Kineto) trace, which
    only its content tells apart. NaN and Infinity, which json.loads accepts, are refused."""
    from nsysreport.errors import TraceError

    if path.is_dir() or not path.name.lower().endswith(".json"):
        return None
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
        if not REPORT_START.match(head) and KINETO_KEY.search(head):
            return None
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    try:
        data = json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and "traceEvents" in data and "schema_version" not in data:
        return None  # a Kineto trace whose keys come late
    return data


def _not_a_number(word: str) -> float:
    # No report writes these, and no limit or ratio means anything with them.
    raise ValueError(f"{word} is not a number JSON allows; write the report again")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range of a float; write the report again")
    return value


def report_of(path: Path, patterns: Patterns, cache: bool) -> Report:
    """The model of one trace, or of a directory of per-rank files as one job (compare and gate
    take these as one configuration each); the workers are one per core."""
    from nsysreport.inputs import expand_inputs

    paths = expand_inputs([str(path)])
    if len(paths) == 1:
        from nsysreport.load import open_trace
        from nsysreport.model import build_report

        return build_report(open_trace(paths[0], patterns=patterns, cache=cache), paths[0])
    from nsysreport.multi import build_multi_report
    from nsysreport.workers import default_jobs

    return build_multi_report(paths, patterns, cache=cache, jobs=default_jobs())


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
    from nsysreport.load import open_trace
    from nsysreport.model import build_report
    from nsysreport.render import render_html

    top, step, window = model_options

    def build() -> Report:
        con = open_trace(path, lambda t: progress(f"loading {t}"), patterns, cache)
        progress("analysing")
        return build_report(con, path, top, step, window)

    if not cache:
        return _rendered(build(), want_json, generated_at, progress)

    from nsysreport.cache import cached_report

    cached = cached_report(path, patterns, model_options, build)
    new: dict[str, Any] = {}
    page = cached.outputs.get("html")
    if page is None:
        progress("rendering")
        page = new["html"] = render_html(cached.model, GENERATED_AT)
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
    from nsysreport.load import check_file
    from nsysreport.multi import build_multi_report

    for path in paths:
        check_file(path)  # every bad file fails before any work starts
    top, step, window = model_options
    model = build_multi_report(
        paths, patterns, top, step, window, cache=cache, progress=progress, **run_options
    )
    return _rendered(model, want_json, generated_at, progress)


def _rendered(model: Report, want_json: bool, generated_at: str, progress: Progress) -> Outputs:
    """The outputs of a model built in this run (nothing kept)."""
    from nsysreport.render import render_html

    progress("rendering")
    html = render_html(model, generated_at)
    return Outputs(html, json_text(model) if want_json else None, lambda: model)
