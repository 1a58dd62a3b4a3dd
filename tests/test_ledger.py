"""The data-quality ledger (issue #39): rows the numbers leave out or take with a caveat, by
class, table, rows and treatment, on every surface (report JSON, query, gate); the capture
window bounds rows on both sides; a device the trace does not list is no GPU of its own."""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.queries import run_query
from nsysreport.report_builder import build_report
from nsysreport.synth import Gpu, Kernel, Memcpy, NvtxRange, Scenario, write_trace

runner = CliRunner()
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
T0 = 1_000_000  # the capture starts here, so that a row can lie before it


def capture(tmp_path: Path, name: str = "t.sqlite") -> Path:
    """A GEMM [T0+100, T0+200), an all-reduce [T0+150, T0+250) and a copy [T0+300, T0+340);
    the step range [T0+50, T0+400) makes the capture 350 ns long (ANALYSIS_DETAILS.duration,
    the writer's extent of every row). The GPU rows' median start is T0+150."""
    scenario = Scenario(
        kernels=[Kernel(T0 + 100, T0 + 200, GEMM), Kernel(T0 + 150, T0 + 250, NCCL, stream=31)],
        memcpys=[Memcpy(T0 + 300, T0 + 340)],
        nvtx=[NvtxRange(T0 + 50, T0 + 400, "step 1")],
    )
    return write_trace(scenario, tmp_path / name)


def mutated(path: Path, sql: str) -> Path:
    """`path` after the statements of `sql` (one, or several separated by `;`)."""
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.close()
    return path


def gpu_numbers(path: Path) -> list[tuple[int, int, int, int]]:
    rows = run_query(open_trace(path), "gpu_breakdown").to_dicts()
    return [(r["kernel_count"], r["span_ns"], r["busy_ns"], r["idle_ns"]) for r in rows]


@pytest.mark.parametrize(
    ("start", "end"),
    [
        # 2,000 ns before the median start: within 10x the 350 ns capture (the old bound), but
        # more than the capture's length from any row of it.
        (T0 + 150 - 2_000, T0 + 150 - 1_900),
        (T0 + 150 + 1_000, T0 + 150 + 1_100),  # after: the other side
        # One ns past the bound: with the all-reduce moved below, the median start is the
        # GEMM's, T0+100, and the bound T0+100-350.
        (T0 - 251, T0 + 49),
    ],
)
def test_a_row_outside_the_capture_on_either_side_is_skipped_and_noted(
    tmp_path: Path, start: int, end: int
) -> None:
    path = mutated(
        capture(tmp_path), f'UPDATE {KERNEL} SET start = {start}, "end" = {end} WHERE streamId = 31'
    )
    # The GEMM [100, 200) and the copy [300, 340) are left: span 240, busy 140, idle 100; with
    # the all-reduce counted the span would stretch to thousands of ns.
    assert gpu_numbers(path) == [(1, 240, 140, 100)]
    report = build_report(open_trace(path), path)
    assert [i.ledger_row() for i in report.quality.items] == [
        {
            "file": "t.sqlite",
            "class": "outside_capture",
            "table": KERNEL,
            "rows": 1,
            "treatment": "skipped",
            "reason": "time outside the capture",
        }
    ]


def test_a_row_just_inside_the_capture_bound_counts(tmp_path: Path) -> None:
    # The all-reduce at [T0-250, T0+50): the median start is now the GEMM's, T0+100, and
    # T0-250 is exactly the capture's 350 ns below it: kept.
    sql = f'UPDATE {KERNEL} SET start = {T0 - 250}, "end" = {T0 + 50} WHERE streamId = 31'
    path = mutated(capture(tmp_path), sql)
    # Span T0-250 .. T0+340 = 590; busy: the all-reduce 300, the GEMM 100, the copy 40.
    assert gpu_numbers(path) == [(2, 590, 440, 150)]
    assert build_report(open_trace(path), path).quality.items == ()


def four_gpus(tmp_path: Path) -> Path:
    """Process 100 drives devices 0, 2, 4 and 6 (each one GEMM [100·(d+1), 100·(d+1) + 50)); the
    export lists the four (TARGET_INFO_GPU)."""
    kernels = [Kernel(100 * (d + 1), 100 * (d + 1) + 50, GEMM, device=d) for d in (0, 2, 4, 6)]
    scenario = Scenario(kernels=kernels, gpus=[Gpu(device=d) for d in (0, 2, 4, 6)])
    return write_trace(scenario, tmp_path / "four.sqlite")


def test_a_device_the_trace_does_not_list_is_a_ledger_entry_not_a_rank(tmp_path: Path) -> None:
    # A copy of device 2's kernel on device 3, which the export does not list: it would sort
    # between devices 2 and 4 and move their ranks.
    path = mutated(
        four_gpus(tmp_path),
        f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE deviceId = 2;"
        f'UPDATE {KERNEL} SET deviceId = 3, start = start + 1, "end" = "end" + 1'
        f" WHERE rowid = (SELECT max(rowid) FROM {KERNEL});",
    )
    report = build_report(open_trace(path), path)
    assert [(g.device_id, g.rank) for g in report.gpus] == [(0, 0), (2, 1), (4, 2), (6, 3)]
    assert [(i.ledger_class, i.source, i.count, i.treatment) for i in report.quality.items] == [
        ("unlisted_device", KERNEL, 1, "skipped")
    ]


def test_the_json_ledger_has_every_item_with_class_table_rows_and_treatment(
    tmp_path: Path,
) -> None:
    path = mutated(
        capture(tmp_path), f'UPDATE {KERNEL} SET "end" = start - 10 WHERE start < {T0 + 120}'
    )
    path = mutated(path, f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    report = build_report(open_trace(path), path)
    data = as_json(report)
    assert data["schema_version"] == 2
    assert data["ledger"] == [
        {
            "file": "t.sqlite",
            "class": "outside_capture",
            "table": KERNEL,
            "rows": 1,
            "treatment": "skipped",
            "reason": "time outside the capture",
        },
        {
            "file": "t.sqlite",
            "class": "end_before_start",
            "table": KERNEL,
            "rows": 1,
            "treatment": "counted, with no time",
            "reason": "end before start: counted, with no time",
        },
    ]
    # The notes say the same items as sentences, and a saved report reads them back.
    assert data["data_quality"] == [
        "1 kernel skipped: time outside the capture",
        "1 kernel with end before start: counted, with no time",
    ]
    again = Report.from_json(json.loads(json.dumps(data)), "saved.json")
    assert again.quality == report.quality


def test_a_ledger_row_whose_class_its_reason_does_not_give_is_refused(tmp_path: Path) -> None:
    path = mutated(capture(tmp_path), f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    data = as_json(build_report(open_trace(path), path))
    data["ledger"][0]["class"] = "duplicate_row"
    with pytest.raises(TraceError, match=r"saved.json: .*ledger\[0\]"):
        Report.from_json(data, "saved.json")


def test_a_schema_version_1_report_is_still_read_from_its_notes(tmp_path: Path) -> None:
    path = mutated(capture(tmp_path), f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    report = build_report(open_trace(path), path)
    data: dict[str, Any] = {k: v for k, v in as_json(report).items() if k != "ledger"}
    data["schema_version"] = 1
    assert Report.from_json(data, "old.json").quality == report.quality


def test_query_prints_the_ledger_on_stderr_and_the_rows_unchanged(tmp_path: Path) -> None:
    path = mutated(capture(tmp_path), f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    clean = runner.invoke(
        app, ["query", "gpu_breakdown", str(capture(tmp_path, "clean.sqlite")), "--csv"]
    )
    result = runner.invoke(app, ["query", "gpu_breakdown", str(path), "--csv"])
    assert result.exit_code == 0 and clean.exit_code == 0
    assert (
        result.stderr == "t.sqlite: 1 kernel skipped: time outside the capture [outside_capture]\n"
    )
    assert clean.stderr == ""
    rows = result.stdout.splitlines()
    assert len(rows) == 2 and rows[0] == clean.stdout.splitlines()[0]


def gate(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, ["gate", *map(str, args)], env={"COLUMNS": "240"})
    return result.exit_code, result.stdout


def test_gate_shows_the_ledger_and_strict_fails_on_any_row_past_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject budget of the project's own
    path = mutated(capture(tmp_path), f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    code, out = gate(path, "--max", "idle_pct=100")
    assert code == 0
    assert "data quality: 1 kernel skipped: time outside the capture [outside_capture" in out
    code, out = gate(path, "--strict", "--json", "g.json", "--junit", "g.xml", "--markdown", "g.md")
    assert code == 1 and "strict data quality" in out
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["schema_version"] == 2 and data["passed"] is False
    (check,) = data["checks"]
    assert (check["metric"], check["limit"], check["measured"], check["verdict"]) == (
        "unclean_rows",
        0,
        1,
        "fail",
    )
    assert [(r["class"], r["rows"]) for r in data["ledger"]] == [("outside_capture", 1)]
    assert "- data quality: 1 kernel skipped" in (tmp_path / "g.md").read_text()
    suite = ET.parse(tmp_path / "g.xml").getroot()
    assert suite.get("failures") == "1"
    assert "outside_capture" in (suite.findtext("system-out") or "")
    code, _ = gate(path, "--strict", "--strict-max-rows", "1")  # at the limit: passes
    assert code == 0
    code, _ = gate(capture(tmp_path, "clean.sqlite"), "--strict")
    assert code == 0


def test_compare_names_each_configurations_ledger(tmp_path: Path) -> None:
    from nsysreport.compare import as_json as comparison_json
    from nsysreport.compare import compare

    clean = capture(tmp_path, "a.sqlite")
    unclean = mutated(capture(tmp_path), f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    reports = [
        (label, build_report(open_trace(p), p)) for label, p in (("a", clean), ("b", unclean))
    ]
    data = comparison_json(compare(reports))
    assert "b: t.sqlite: 1 kernel skipped: time outside the capture" in data["notes"]
    assert [(r["label"], r["class"], r["rows"]) for r in data["ledger"]] == [
        ("b", "outside_capture", 1)
    ]


def test_missing_correlation_is_kept_without_a_launch_and_noted(tmp_path: Path) -> None:
    path = mutated(  # a copy without NOT NULL constraints, so that correlationId may be NULL
        capture(tmp_path),
        f"CREATE TABLE loose AS SELECT * FROM {KERNEL}; DROP TABLE {KERNEL};"
        f"ALTER TABLE loose RENAME TO {KERNEL};"
        f"UPDATE {KERNEL} SET correlationId = NULL WHERE streamId = 31;",
    )
    assert gpu_numbers(path) == [(2, 240, 190, 50)]  # every kernel counts, with its time
    report = build_report(open_trace(path), path)
    assert [i.ledger_row() for i in report.quality.items] == [
        {
            "file": "t.sqlite",
            "class": "missing_correlation",
            "table": KERNEL,
            "rows": 1,
            "treatment": "counted, with no launch",
            "reason": "no correlation id: counted, with no launch",
        }
    ]


def _event(cat: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": ts,
            "dur": dur, "args": {"device": 0, "stream": 7, "correlation": 11, **args}}  # fmt: skip


def test_a_profiler_trace_feeds_the_same_ledger(tmp_path: Path) -> None:
    host = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42, "tid": 43}
    events = [
        {**host, "ts": 100, "dur": 1000, "args": {"correlation": 11}},  # the host: 1 ms
        _event("kernel", 200, 100),  # [200, 300) µs: counted
        _event("kernel", 400, 100, stream=None),  # kept on its tid, 7
        {**_event("kernel", 600, 100), "cat": None},  # no category: skipped
        # 500 s after the host's 1 ms: past every bound of a trace without a capture length
        # (the host's extent, 20 median deviations of the GPU starts, 10 s).
        _event("kernel", 500_000_000, 100),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    # Two kernels of 100 µs on stream 7: span [200, 500) µs, busy 200 µs.
    assert gpu_numbers(path) == [(2, 300_000, 200_000, 100_000)]
    rows = [i.ledger_row() for i in build_report(open_trace(path), path).quality.items]
    assert [(r["class"], r["table"], r["rows"], r["treatment"]) for r in rows] == [
        ("outside_capture", KERNEL, 1, "skipped"),
        ("missing_category", "traceEvents", 1, "skipped"),
        ("defaulted_stream", KERNEL, 1, "the event's tid as its stream"),
    ]


def test_a_process_the_trace_does_not_list_is_a_ledger_entry_not_a_gpu(tmp_path: Path) -> None:
    # The all-reduce's globalPid names process 555 (a well-formed id), which PROCESSES lacks.
    sql = (
        f"UPDATE {KERNEL} SET globalPid = (globalPid >> 48 << 48) | (555 << 24) WHERE streamId = 31"
    )
    path = mutated(capture(tmp_path), sql)
    report = build_report(open_trace(path), path)
    assert [(g.pid, g.device_id, g.rank) for g in report.gpus] == [(100, 0, 0)]
    assert [(i.ledger_class, i.count) for i in report.quality.items] == [("unlisted_process", 1)]


def test_the_capture_section_holds_the_ledger_table(tmp_path: Path) -> None:
    from nsysreport.render import render_html

    path = mutated(capture(tmp_path), f"UPDATE {KERNEL} SET start = 5 WHERE streamId = 31")
    html = render_html(build_report(open_trace(path), path), "fixed")
    ledger = html[html.index("<h3>Data-quality ledger</h3>") :]
    row = ledger[ledger.index("<tbody>") : ledger.index("</tbody>")]
    cells = [c.rsplit("<td", 1)[1].split(">", 1)[1] for c in row.split("</td>")[:-1]]
    assert cells == ["<code>outside_capture</code>", KERNEL, "1", "skipped"]
