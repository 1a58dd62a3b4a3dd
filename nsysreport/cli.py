"""The nsysreport command line: parse, call the library, print; errors become exits here only."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from nsysreport import __version__, cache_files, gate_budget, gate_output, outputs, queries
from nsysreport.analysis import Progress, open_report
from nsysreport.compare import as_json, compare, input_files, load_inputs
from nsysreport.database import out_of_memory_message
from nsysreport.errors import NsysReportError, OptionError
from nsysreport.gate import GateResult, evaluate
from nsysreport.inputs import expand_inputs
from nsysreport.load import open_trace
from nsysreport.model import with_comm_groups
from nsysreport.patterns import parse_patterns
from nsysreport.peaks import parse_peak_tflops
from nsysreport.perfetto import OPEN_HINT
from nsysreport.progress import terminal_progress
from nsysreport.render import PAPER_SIZES, generated_now, render_compare_html
from nsysreport.sections.communicators import parse_comm_groups
from nsysreport.sections.quality import build_quality
from nsysreport.sqlite_copy import table_rows
from nsysreport.summary import print_comparison, print_summary
from nsysreport.user_facts import Facts, parse_link_peaks, parse_model_shape
from nsysreport.workers import default_jobs
from nsysreport.writes import Input, Output, check_outputs, write_all

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help=(
        "Where multi-GPU step time goes, from Nsight Systems reports (.nsys-rep), their SQLite "
        "exports (.sqlite) and Parquet export folders, and PyTorch profiler traces (.json, "
        ".json.gz); a folder or a quoted glob of per-rank files gives one report.\n\n"
        "Example: nsysreport trace.sqlite  (writes trace.report.html beside the trace)"
    ),
)
# Every input a command reads one trace from (nsysreport.load.open_trace).
TRACE_HELP = (
    "Nsight Systems report (.nsys-rep: exported once with the nsys on PATH), its SQLite export "
    "(nsys export --type sqlite) or Parquet export folder (--type parquetdir), or PyTorch "
    "profiler trace (.json, .json.gz)"
)
SUBCOMMANDS = ("report", "queries", "query", "compare", "cache", "gate")
STEP_HELP = "Regex for step NVTX ranges (default: ProfilerStep#N, step N, iteration N)."
LAYER_HELP = "Regex for layer NVTX ranges; the matched text names the layer, e.g. 'layers\\.\\d+'."
CLASS_HELP = (
    "CLASS=REGEX: kernels whose name matches go in comm, attention, gemm or other "
    "(repeatable; checked before the built-in patterns)."
)
NO_CACHE_HELP = "Load the trace afresh, without reading or writing the cache."
BYTES_HELP = (
    "OP=BYTES: message size of a collective op the trace does not record, for bandwidth "
    "(repeatable), e.g. AllReduce=16777216."
)
PEAK_TFLOPS_HELP = (
    "DTYPE=TFLOPS: a GPU's dense peak for one dtype (fp64, fp32, tf32, bf16, fp16, fp8, fp4), "
    "for the Compute efficiency section's MFU; overrides the table of GPU models. Repeatable."
)
LINK_PEAK_HELP = (
    "LINK=GBPS: the peak of a data-path link, GB/s per direction, over the export and the GPU "
    "model table (repeatable; LINK: hbm, nvlink, pcie, network), e.g. network=50."
)
MODEL_HELP = (
    "hidden=H,dtype=D,tokens=T[,heads=N,kv_heads=N,ffn=F,gated=1,seq=S]: the model's shape, to "
    "set each all-reduce's expected bytes 2(TP-1)/TP x tokens x hidden x sizeof(dtype) beside "
    "the measured, and, in a trace without operator shapes, each layer's FLOPs for the Compute "
    "efficiency section, e.g. hidden=8192,tokens=1."
)
COMM_GROUP_HELP = (
    "NAME=RANKS|stream:N|REGEX: name a communicator's role (tp, dp, pp, ep or any word): the "
    "one whose ranks are RANKS (0-3, or 0,4), that runs on stream N, or whose process group or "
    "name REGEX matches (repeatable), e.g. tp=0-3 --comm-group tp=4-7 --comm-group dp=stream:31."
)
T = TypeVar("T")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: `nsysreport TRACE` is short for `nsysreport report TRACE`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not logging.getLogger().handlers:
        # stderr holds nsysreport's own lines: without this, Python prints a library's warning
        # there (matplotlib's "Could not save font_manager cache" on a full disk) beside the
        # one `Error:` line. A caller that configured logging keeps its records.
        logging.getLogger().addHandler(logging.NullHandler())
    if args and args[0] not in SUBCOMMANDS and not args[0].startswith("-"):
        args.insert(0, "report")
    app(args=args, prog_name="nsysreport")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nsysreport {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Where multi-GPU step time goes, from Nsight Systems and PyTorch profiler traces."""


def _fail(exc: NsysReportError) -> typer.Exit:
    typer.echo(f"Error: {_printable(str(exc))}", err=True)
    return typer.Exit(2 if isinstance(exc, OptionError) else 1)


def _printable(text: str) -> str:
    """One printable line: a message can quote bytes of a damaged file (SQLite names the token
    it could not read); a line break there becomes a space, another control character its
    escape (\\x0b), so that the one `Error:` line stays one line of text."""
    return "".join(
        c if c.isprintable() else " " if c.isspace() else c.encode("unicode_escape").decode()
        for c in text
    )


def _run(action: Callable[[], T], inputs: Sequence[object] = ()) -> T:
    """Run `action`, turning nsysreport's errors into one line on stderr and an exit status;
    running out of memory too, with the `inputs` it was working on."""
    try:
        return action()
    except NsysReportError as exc:
        raise _fail(exc) from None
    except _out_of_memory() as exc:
        raise _fail(NsysReportError(out_of_memory_message(inputs, exc))) from None


def _out_of_memory() -> tuple[type[BaseException], ...]:
    """MemoryError, and DuckDB's when DuckDB was imported (this module does not import it: 0.08 s
    of start-up; an error that came out of DuckDB was raised after it was)."""
    duckdb = sys.modules.get("duckdb")
    return (MemoryError,) if duckdb is None else (MemoryError, duckdb.OutOfMemoryException)


@app.command()
def report(
    traces: Annotated[
        list[str],
        typer.Argument(
            help=f"{TRACE_HELP}; several files, a folder of per-rank files or a quoted glob give "
            "one report over all ranks.",
            metavar="TRACE",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Report path: .html, or .pdf for a PDF only (default: TRACE.report.html).",
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write every metric as JSON (- for stdout).")
    ] = None,
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write a PDF beside the HTML.")] = False,
    top: Annotated[
        int, typer.Option(min=1, help="Rows in the top-N tables (gaps per GPU, kernels per class).")
    ] = 10,
    step_pattern: Annotated[str | None, typer.Option(help=STEP_HELP)] = None,
    layer_pattern: Annotated[str | None, typer.Option(help=LAYER_HELP)] = None,
    kernel_class: Annotated[list[str] | None, typer.Option(help=CLASS_HELP)] = None,
    comm_bytes: Annotated[list[str] | None, typer.Option(help=BYTES_HELP)] = None,
    link_peak: Annotated[list[str] | None, typer.Option(help=LINK_PEAK_HELP)] = None,
    peak_tflops: Annotated[list[str] | None, typer.Option(help=PEAK_TFLOPS_HELP)] = None,
    model: Annotated[str | None, typer.Option("--model", help=MODEL_HELP)] = None,
    comm_group: Annotated[list[str] | None, typer.Option(help=COMM_GROUP_HELP)] = None,
    timeline_step: Annotated[
        str | None,
        typer.Option(help="Step the timeline shows: its NVTX name or number (default: median)."),
    ] = None,
    timeline_range: Annotated[
        str | None,
        typer.Option(
            help="Time the timeline shows instead: START:END in ns after the first activity."
        ),
    ] = None,
    paper: Annotated[str, typer.Option(help="PDF paper size: A4 or letter.")] = "A4",
    no_cache: Annotated[bool, typer.Option("--no-cache", help=NO_CACHE_HELP)] = False,
    jobs: Annotated[
        int | None,
        typer.Option(min=1, help="Several files: worker processes (default: one per core)."),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(help="Several files: run the per-file work on this Dask scheduler."),
    ] = None,
    no_align: Annotated[
        bool,
        typer.Option("--no-align", help="Several files: keep each file's own clock."),
    ] = False,
    perfetto: Annotated[
        Path | None,
        typer.Option(
            help="Also write the timeline window (the whole trace when it has at most "
            "200,000 activities) as Perfetto/Chrome trace-event JSON, with tracks for exposed "
            "comm, gaps, stragglers, steps and layers; the HTML links to it. One trace only."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
) -> None:
    """Write an HTML report of where each GPU's time goes, and print a summary.

    Example: nsysreport report trace.sqlite --json metrics.json

    Several files (one per rank: nsysreport rank*.sqlite) give one report over every GPU:
    ranks from MPI_RANKS, the launcher's rank variable in the capture, else file order; clocks
    aligned from the session start, then from the collectives' end times.
    """

    def work() -> None:
        patterns = parse_patterns(step_pattern, layer_pattern, kernel_class or [], comm_bytes or [])
        if paper.lower() not in PAPER_SIZES:
            raise OptionError(f"--paper {paper!r}: expected A4 or letter")
        paths = expand_inputs(traces)
        facts = Facts(
            parse_link_peaks(link_peak or []),
            parse_model_shape(model),
            parse_comm_groups(comm_group or []),
            parse_peak_tflops(peak_tflops or []),
        )
        options = (top, timeline_step, _parse_range(timeline_range), facts)
        default = output is None
        files = outputs.page_outputs(
            output or outputs.default_output(paths), pdf, "the default -o" if default else "-o"
        )
        if json_path is not None and str(json_path) != "-":
            files.append(Output("--json", json_path))
        href = None
        if perfetto is not None:
            if len(paths) > 1:
                raise OptionError(
                    f"--perfetto: takes one trace, not {len(paths)} files (write one per rank)"
                )
            files.append(Output("--perfetto", perfetto))
            href = outputs.relative_href(perfetto, files[0].path)
        check_outputs(files, [Input("input trace", p) for p in paths])
        run = {"jobs": jobs or default_jobs(), "scheduler": scheduler, "align": not no_align}
        with _progress(quiet, paths) as progress:
            progress("checking the trace")
            made = outputs.report_outputs(
                paths,
                patterns,
                options,
                not no_cache,
                json_path is not None,
                generated_now(),
                progress,
                run,
                href,
            )
        write_all(
            [(f, outputs.writer(f, made.html, made.json, paper, made.perfetto_text)) for f in files]
        )
        if str(json_path) == "-":
            sys.stdout.writelines(made.json() if made.json is not None else ())
        elif not quiet:
            print_summary(made.model(), [f.path for f in files])
            if perfetto is not None:
                typer.echo(f"Perfetto trace: {perfetto}; {OPEN_HINT}")

    _run(work, traces)


@app.command("gate")
def gate(
    trace: Annotated[
        Path,
        typer.Argument(
            help=f"{TRACE_HELP}, a folder of per-rank files, or a `report --json` file."
        ),
    ],
    budget: Annotated[
        Path | None,
        typer.Option(
            help="TOML budget with [max], [min], [max-regression], baseline, min-steps "
            "(default: [tool.nsysreport.gate] of ./pyproject.toml)."
        ),
    ] = None,
    max_: Annotated[
        list[str] | None,
        typer.Option("--max", help="METRIC=VALUE: fail when the metric is above VALUE."),
    ] = None,
    min_: Annotated[
        list[str] | None,
        typer.Option("--min", help="METRIC=VALUE: fail when the metric is below VALUE."),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="Baseline trace (.sqlite, .json) or `report --json` file to compare with."
        ),
    ] = None,
    max_regression: Annotated[
        list[str] | None,
        typer.Option(help="METRIC=PCT: fail when the metric got worse than the baseline by PCT %."),
    ] = None,
    min_steps: Annotated[
        int | None,
        typer.Option(min=0, help="Fail when any GPU has fewer steps than this to judge."),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Fail when the trace's data-quality ledger holds rows: left out (no stream, "
            "outside the capture, ...) or kept with a caveat (see --strict-max-rows).",
        ),
    ] = False,
    strict_max_rows: Annotated[
        int,
        typer.Option(min=0, help="With --strict: the most ledger rows that still pass."),
    ] = 0,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Also write a Markdown table here.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the verdicts as JSON here.")
    ] = None,
    step_pattern: Annotated[str | None, typer.Option(help=STEP_HELP)] = None,
    layer_pattern: Annotated[str | None, typer.Option(help=LAYER_HELP)] = None,
    kernel_class: Annotated[list[str] | None, typer.Option(help=CLASS_HELP)] = None,
    comm_group: Annotated[list[str] | None, typer.Option(help=COMM_GROUP_HELP)] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help=NO_CACHE_HELP)] = False,
) -> None:
    """Check a trace against budgets: exit 0 if every check passes, 1 if any fails, 2 on bad input.

    Example: nsysreport gate trace.sqlite --max exposed_comm_pct=5 --junit gate.xml

    Limits are inclusive: a value exactly at its limit passes. When the trace has steps,
    exposed_comm_pct, exposed_memcpy_pct, idle_pct, graph_opaque_pct, compute_pct and
    step_time_ns are medians over steps, printed with their spread (min – max); the other
    metrics are whole-trace.

    \b
    Metrics (docs/metrics.md names; "worst" is the GPU or layer that is worst):
      exposed_comm_pct       worst GPU, exposed_comm_ns as % of step time (or span);
                             exposed_comm_pct[ROLE] counts one role's communicators
      exposed_memcpy_pct     worst GPU, exposed_memcpy_ns as % of step time (or span)
      idle_pct               worst GPU, idle_ns as % of step time (or span)
      graph_opaque_pct       worst GPU, graph_opaque_ns as % of step time (or span)
      compute_pct            least GPU, compute_ns as % of step time (or span)
      overlap_pct            least overlap_pct of the GPUs that communicate
      step_time_ns           median over all steps of all GPUs (no steps: median span)
      gap_p99_ns             worst GPU's gaps.p99_ns
      straggler_wait_pct     worst GPU's straggler wait_ns as % of its span_ns
      layer_exposed_comm_ns  worst layer's exposed_comm_ns, mean over GPUs;
                             layer_exposed_comm_ns[NAME] gates the layer NAME
      exposed_comm_ns        worst GPU's exposed_comm_ns
      idle_ns                worst GPU's idle_ns
      critical_path_pct      the critical path's host-side time as % of the median step;
                             critical_path_pct[CAUSE] gates one cause (compute, ...)
      critical_path_wait_ns  the longest wait for a rank at a collective on the path
      mfu_pct                model FLOPs utilisation of the median step (recorded shapes);
                             mfu_pct[REGEX] gates the kernel families matching REGEX
      kernel_time_ns         kernel_time_ns[CLASS|REGEX]: a kernel class's (gemm, attention,
                             comm, other, memcpy) or matching names' time per step and GPU
      kernel_time_pct        kernel_time_pct[CLASS|REGEX]: its share of all kernel time
      pageable_copy_pct      worst GPU's host-copy bytes to or from pageable memory, %
    """

    def work() -> GateResult:
        options = (("max", max_), ("min", min_), ("max-regression", max_regression))
        checks = [(kind, item) for kind, items in options for item in items or []]
        plan = gate_budget.plan(
            budget, Path.cwd(), checks, baseline, min_steps, strict_max_rows if strict else None
        )
        patterns = parse_patterns(step_pattern, layer_pattern, kernel_class or [], [])
        named = (("--junit", junit), ("--markdown", markdown), ("--json", json_path))
        files = [Output(option, path) for option, path in named if path is not None]
        reads = [Input("trace", p) for p in expand_inputs([str(trace)])]
        if plan.baseline is not None:
            reads += [Input("baseline", p) for p in expand_inputs([str(plan.baseline)])]
        budget_file = budget or Path("pyproject.toml")  # find_budget reads ./pyproject.toml
        check_outputs(files, [*reads, Input("budget file", budget_file)])
        cache = not no_cache
        specs = parse_comm_groups(comm_group or [])
        base = None if plan.baseline is None else open_report(plan.baseline, patterns, cache)
        base = None if base is None else with_comm_groups(base, specs)
        report = with_comm_groups(open_report(trace, patterns, cache), specs)
        base_name = None if plan.baseline is None else str(plan.baseline)
        result = evaluate(report, str(trace), plan, base, base_name)
        texts = {
            "--junit": gate_output.to_junit(result),
            "--markdown": gate_output.to_markdown(result),
            "--json": json.dumps(gate_output.to_json(result), indent=2) + "\n",
        }
        write_all([(f, outputs.text_writer(texts[f.option])) for f in files])
        return result

    try:
        result = _run(work, [trace])
    except typer.Exit as exc:
        # The contract for gate: usage *and* input errors (a bad trace) exit 2, so a
        # CI job can tell "the gate failed" (1) from "the gate could not run" (2).
        raise typer.Exit(2) from exc
    gate_output.print_table(result)
    raise typer.Exit(0 if result.passed else 1)


@app.command("queries")
def list_queries() -> None:
    """List the SQL analyses in queries/ with their one-line summaries.

    Example: nsysreport queries
    """
    typer.echo(queries.listing())


@app.command("query")
def query(
    name: Annotated[str, typer.Argument(help="Query name, as `nsysreport queries` lists it.")],
    trace: Annotated[Path, typer.Argument(help=f"{TRACE_HELP}.")],
    csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead of a table.")] = False,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Query parameter NAME=VALUE (repeatable)."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help=NO_CACHE_HELP)] = False,
) -> None:
    """Run one SQL analysis on a trace and print its rows.

    Example: nsysreport query gap_top trace.sqlite --param top=5 --csv
    """

    def work() -> None:
        params = _parse_params(param or [])
        queries.find_query(name)  # an unknown name fails before the trace is loaded
        con = open_trace(trace, cache=not no_cache)
        frame = queries.run_query(con, name, params)
        sys.stdout.write(queries.frame_text(frame, csv))
        # The rows the numbers leave out or take with a caveat, one line each, on stderr: the
        # printed rows stay exactly the query's.
        for item in build_quality(con, trace.name).items:
            print(f"{trace.name}: {item.sentence} [{item.ledger_class}]", file=sys.stderr)

    _run(work, [trace])


@app.command("compare")
def compare_command(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Traces, directories of per-rank files, or saved report JSONs, optionally "
            "LABEL=PATH; two or more."
        ),
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Comparison report (.html, or .pdf).")
    ] = Path("nsysreport-compare.html"),
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the comparison as JSON (- for stdout)."),
    ] = None,
    pdf: Annotated[bool, typer.Option("--pdf", help="Also write a PDF beside the HTML.")] = False,
    baseline: Annotated[
        str | None, typer.Option(help="Label of the baseline (default: the fewest GPUs).")
    ] = None,
    tokens_per_step: Annotated[
        int | None, typer.Option(min=1, help="Report tokens/s instead of steps/s.")
    ] = None,
    step_pattern: Annotated[str | None, typer.Option(help=STEP_HELP)] = None,
    layer_pattern: Annotated[str | None, typer.Option(help=LAYER_HELP)] = None,
    comm_group: Annotated[list[str] | None, typer.Option(help=COMM_GROUP_HELP)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help=NO_CACHE_HELP)] = False,
) -> None:
    """Compare parallel configurations: speedup, scaling efficiency and where it went.

    Example: nsysreport compare tp2=run_tp2.sqlite tp4=run_tp4.sqlite tp8=run_tp8.sqlite
    """

    def work() -> None:
        patterns = parse_patterns(step_pattern, layer_pattern, [], [])
        files = outputs.page_outputs(output, pdf, "-o")
        if json_path is not None and str(json_path) != "-":
            files.append(Output("--json", json_path))
        check_outputs(files, [Input("input", p) for p in input_files(inputs)])
        with _progress(quiet) as progress:
            progress("loading the configurations")
            specs = parse_comm_groups(comm_group or [])
            configs = [
                (label, with_comm_groups(r, specs))
                for label, r in load_inputs(inputs, patterns, cache=not no_cache)
            ]
            comparison = compare(configs, baseline, tokens_per_step)
            html = render_compare_html(comparison, generated_now())
        text = json.dumps(as_json(comparison), indent=2) + "\n" if json_path is not None else ""
        write_all([(f, outputs.writer(f, html, lambda: (text,))) for f in files])
        if str(json_path) == "-":
            sys.stdout.write(text)
        elif not quiet:
            print_comparison(comparison, [f.path for f in files])

    _run(work, inputs)


cache_app = typer.Typer(
    help="The cache of loaded traces (in $XDG_CACHE_HOME/nsysreport, else ~/.cache/nsysreport).",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def cache_clear() -> None:
    """Delete every cached trace.

    Example: nsysreport cache clear
    """
    typer.echo(f"Removed {cache_files.clear()} cache file(s) from {cache_files.cache_dir()}")


@cache_app.command("dir")
def cache_where() -> None:
    """Print the cache folder.

    Example: du -sh "$(nsysreport cache dir)"
    """
    typer.echo(str(cache_files.cache_dir()))


def _parse_params(items: list[str]) -> dict[str, str]:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise OptionError(f"--param {item!r}: expected NAME=VALUE")
        params[key] = value
    return params


def _parse_range(text: str | None) -> tuple[int | None, int | None]:
    """--timeline-range START:END (ns after the first activity; either side may be empty)."""
    if text is None:
        return None, None
    start, sep, end = text.partition(":")
    if not sep or not (start or end) or not all(x.isdigit() for x in (start, end) if x):
        raise OptionError(
            f"--timeline-range {text!r}: expected START:END in ns, e.g. 2000000:3500000"
        )
    return (int(start) if start else None, int(end) if end else None)


def _progress(quiet: bool, paths: Sequence[Path] = ()) -> AbstractContextManager[Progress]:
    """The progress line on stderr, only when stderr is a terminal; for one nsys trace it
    counts the rows of its tables as they load (read from the file's SQLite first)."""
    totals = {}
    if len(paths) == 1 and not quiet and sys.stderr.isatty():
        totals = table_rows(paths[0])
    return terminal_progress(quiet, sys.stderr, totals)
