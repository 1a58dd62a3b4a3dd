"""A trace whose kernels are all unusable after cleaning is refused in one line by every command
(report, query, gate, compare, the Python API), exit 1 (gate: 2), no output written, nothing
cached; a trace that never had a kernel (copies or memsets alone) still reports."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import nsysreport
from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.synth import Kernel, Memset, Scenario, write_trace

runner = CliRunner()
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
NEXT_NSYS = "export it again with nsys export --type sqlite"


def twelve_kernels(tmp_path: Path, assignment: str | None, name: str = "run.sqlite") -> Path:
    """12 gemms of 50 ns, one every 100 ns on one GPU; `assignment` (SQL) applied to them all,
    after the table lost its NOT NULL constraints."""
    kernels = [Kernel(100 * i, 100 * i + 50, "gemm_kernel") for i in range(12)]
    path = write_trace(Scenario(kernels=kernels), tmp_path / name)
    if assignment is not None:
        con = sqlite3.connect(path)
        con.execute(f"CREATE TABLE loose AS SELECT * FROM {KERNEL}")
        con.execute(f"DROP TABLE {KERNEL}")
        con.execute(f"ALTER TABLE loose RENAME TO {KERNEL}")
        con.execute(f"UPDATE {KERNEL} SET {assignment}")
        con.commit()
        con.close()
    return path


def _event(cat: str, ts: float, dur: float | None) -> dict[str, Any]:
    event = {"ph": "X", "cat": cat, "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": ts,
             "args": {"device": 0, "stream": 7, "correlation": 11}}  # fmt: skip
    return event if dur is None else {**event, "dur": dur}


def assert_refused(code: int, stderr: str, *fragments: str, exit_code: int = 1) -> None:
    assert code == exit_code
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ") and "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0]


def report(trace: Path, out: Path) -> tuple[int, str]:
    """`nsysreport report` with HTML and JSON outputs: neither may be left on a failure."""
    html, saved = out / "r.html", out / "r.json"
    result = runner.invoke(app, ["report", str(trace), "-o", str(html), "--json", str(saved)])
    assert not html.exists() and not saved.exists(), "no output on failure"
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("assignment", "reason"),
    [
        ("streamId = NULL", "no stream id"),
        ("deviceId = NULL", "no device id"),
        ("deviceId = ''", "deviceId is not an integer"),  # an empty string: untyped at load
    ],
)
def test_a_trace_whose_kernels_are_all_unusable_is_one_line_naming_file_and_reason(
    tmp_path: Path, assignment: str, reason: str
) -> None:
    trace = twelve_kernels(tmp_path, assignment)
    assert_refused(
        *report(trace, tmp_path),
        f"Error: {trace}: no kernel can be used: all 12 kernels were skipped ({reason}); "
        + NEXT_NSYS,
    )


def test_every_command_refuses_it_the_same_way(tmp_path: Path) -> None:
    trace = twelve_kernels(tmp_path, "streamId = NULL")
    message = f"Error: {trace}: no kernel can be used: all 12 kernels were skipped (no stream id)"
    query = runner.invoke(app, ["query", "gpu_breakdown", str(trace)])
    assert_refused(query.exit_code, query.stderr, message)
    assert query.stdout == ""  # not a header over no rows
    # gate: an input error exits 2, apart from a failed check (1).
    gate = runner.invoke(app, ["gate", str(trace), "--max", "idle_pct=50"])
    assert_refused(gate.exit_code, gate.stderr, message, exit_code=2)
    good = twelve_kernels(tmp_path, None, "good.sqlite")
    compare = runner.invoke(app, ["compare", str(good), str(trace)])
    assert_refused(compare.exit_code, compare.stderr, message)
    with pytest.raises(TraceError) as err:
        nsysreport.analyse(trace)
    assert f"Error: {err.value}" == message + "; " + NEXT_NSYS


def test_the_refusal_is_never_cached_and_a_second_run_fails_alike(
    tmp_path: Path, isolated_cache: Path
) -> None:
    trace = twelve_kernels(tmp_path, "streamId = NULL")
    first = report(trace, tmp_path)
    assert not list(isolated_cache.glob("*.duckdb")), "a trace that is refused leaves no cache"
    assert report(trace, tmp_path) == first
    assert_refused(*first, "all 12 kernels were skipped (no stream id)")


def test_the_reasons_are_named_most_common_first(tmp_path: Path) -> None:
    # 12 kernels: the first 4 lose their device, the other 8 their stream.
    trace = twelve_kernels(tmp_path, "streamId = NULL, deviceId = CASE WHEN start < 400 THEN "
                           "NULL ELSE deviceId END")  # fmt: skip
    assert_refused(
        *report(trace, tmp_path),
        "all 12 kernels were skipped (8 no stream id, 4 no device id); " + NEXT_NSYS,
    )


def test_one_usable_kernel_is_enough_to_report(tmp_path: Path) -> None:
    trace = twelve_kernels(tmp_path, "streamId = CASE WHEN start = 0 THEN streamId END")
    result = runner.invoke(app, ["query", "gpu_breakdown", str(trace), "--csv"])
    assert result.exit_code == 0, result.stderr
    (row,) = [dict(zip(*(line.split(",") for line in result.stdout.splitlines()), strict=True))]
    assert row["kernel_count"] == "1" and row["busy_ns"] == "50"


def test_a_profiler_trace_without_a_kernel_duration_is_refused(tmp_path: Path) -> None:
    # Two kernels with no `dur`, and a third that is no complete event (ph B): none is usable.
    events = [_event("kernel", 1, None), _event("kernel", 5, None), {**_event("kernel", 8, 1),
              "ph": "B"}]  # fmt: skip
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    assert_refused(
        *report(trace, tmp_path),
        f"Error: {trace}: no kernel can be used: all 2 kernels were skipped (no end time); "
        "1 more GPU event was not read (GPU event that is not a complete event (ph X)); save it "
        "again with torch.profiler",
    )
    query = runner.invoke(app, ["query", "gpu_breakdown", str(trace)])
    assert_refused(query.exit_code, query.stderr, "all 2 kernels were skipped (no end time)")


def test_a_trace_that_never_had_a_kernel_still_reports(tmp_path: Path) -> None:
    # One memset [0, 100) ns: no kernel row at all, so nothing was skipped. As before: a report.
    trace = write_trace(Scenario(memsets=[Memset(0, 100)]), tmp_path / "memset.sqlite")
    html, saved = tmp_path / "r.html", tmp_path / "r.json"
    result = runner.invoke(app, ["report", str(trace), "-o", str(html), "--json", str(saved)])
    assert result.exit_code == 0, result.stderr
    assert html.is_file()
    (gpu,) = json.loads(saved.read_text())["gpus"]
    assert (gpu["kernel_count"], gpu["span_ns"], gpu["busy_ns"]) == (0, 100, 100)
    query = runner.invoke(app, ["query", "gpu_breakdown", str(trace), "--csv"])
    assert query.exit_code == 0 and len(query.stdout.splitlines()) == 2  # header, one GPU
