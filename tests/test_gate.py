"""`nsysreport gate`: limits, regressions, budgets, exit codes and the JUnit/Markdown/JSON files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.gate_metrics import METRICS
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

runner = CliRunner()
SAMPLES = Path(__file__).parents[1] / "sample_traces"
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


def gate(*args: str | Path) -> tuple[int, str, str]:
    """Run `nsysreport gate ARGS` on a wide terminal: (exit code, stdout, stderr)."""
    result = runner.invoke(app, ["gate", *map(str, args)], env={"COLUMNS": "240"})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True)
def _away_from_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty folder, so a [tool.nsysreport.gate] in the project's own pyproject.toml
    never adds checks to these tests."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def two_gpus(tmp_path: Path) -> Path:
    """Two GPUs, no steps, each with span 1000 ns.

    GPU 0 (pid 100): GEMM [1000,1600), all-reduce [1600,1800) on the same stream, a gap
    [1800,1900), GEMM [1900,2000): compute 700 (70 %), exposed comm 200 (20 %), idle 100 (10 %),
    overlap 0 %, one 100 ns gap.
    GPU 1 (pid 101): GEMM [1000,1900), all-reduce [1800,2000) on stream 31: compute 900 (90 %),
    exposed comm 100 (10 %), idle 0, overlap 50 %.
    The all-reduce starts at 1600 on GPU 0 and 1800 on GPU 1: GPU 0 waits 200 ns (20 %).
    Layer ranges: the all-reduces are launched in `layers.1` (exposed 200 and 100: mean 150), the
    first GEMMs in `layers.0` (exposed 0).
    """
    scenario = Scenario(
        kernels=[
            Kernel(1000, 1600, GEMM),
            Kernel(1600, 1800, NCCL),
            Kernel(1900, 2000, GEMM),
            Kernel(1000, 1900, GEMM, pid=101, device=1),
            Kernel(1800, 2000, NCCL, pid=101, device=1, stream=31),
        ],
        nvtx=[
            NvtxRange(990, 1010, "layers.0"),
            NvtxRange(1590, 1610, "layers.1"),
            NvtxRange(990, 1010, "layers.0", pid=101),
            NvtxRange(1790, 1810, "layers.1", pid=101),
        ],
    )
    return write_trace(scenario, tmp_path / "two_gpus.sqlite")


def three_steps(path: Path, steps: tuple[tuple[int, int], ...]) -> Path:
    """One GPU, three steps starting at 1000, 3000 and 5000: each a GEMM of `gemm` ns, then an
    all-reduce of `comm` ns on the same stream, so a step lasts gemm + comm, its exposed comm
    share is comm / (gemm + comm), and it has no idle time (the idle is between steps).
    """
    kernels, ranges = [], []
    for i, (base, (gemm, comm)) in enumerate(zip((1000, 3000, 5000), steps, strict=True)):
        kernels += [Kernel(base, base + gemm, GEMM), Kernel(base + gemm, base + gemm + comm, NCCL)]
        ranges.append(NvtxRange(base - 10, base + gemm, f"step {i}"))
    return write_trace(Scenario(kernels=kernels, nvtx=ranges), path)


@pytest.fixture
def now(tmp_path: Path) -> Path:
    """Steps of 1000, 1200 and 2000 ns (median 1200); exposed comm 20, 25, 50 % (median 25);
    compute 80, 75, 50 % (median 75). Between the steps the GPU idles 1800 of 6000 ns (30 %).
    """
    return three_steps(tmp_path / "now.sqlite", ((800, 200), (900, 300), (1000, 1000)))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """Steps of 1000, 1000 and 2000 ns (median 1000); exposed comm median 20 %, compute 80 %.
    Against `now`: step time +20 %, exposed comm share +25 %, compute share -6.25 %.
    """
    return three_steps(tmp_path / "base.sqlite", ((800, 200), (800, 200), (1000, 1000)))


@pytest.mark.parametrize(
    ("option", "check", "at_limit", "past_limit"),
    [
        ("--max", "exposed_comm_pct", "20", "19.99"),
        ("--max", "idle_pct", "10", "9.99"),
        ("--max", "exposed_comm_ns", "200", "199"),
        ("--max", "idle_ns", "100", "99"),
        ("--max", "gap_p99_ns", "100", "99"),
        ("--max", "straggler_wait_pct", "20", "19.99"),
        ("--max", "layer_exposed_comm_ns", "150", "149"),
        ("--max", "layer_exposed_comm_ns[layers.0]", "0", "-1"),
        ("--max", "step_time_ns", "1000", "999"),  # no steps: the median GPU span
        ("--min", "compute_pct", "70", "70.01"),
        ("--min", "overlap_pct", "0", "0.01"),
    ],
)
def test_a_limit_passes_at_its_exact_value_and_fails_just_past_it(
    two_gpus: Path, option: str, check: str, at_limit: str, past_limit: str
) -> None:
    code, out, _ = gate(two_gpus, option, f"{check}={at_limit}")
    assert code == 0, out
    assert "PASS" in out and "1 check, 0 failed" in out
    code, out, _ = gate(two_gpus, option, f"{check}={past_limit}")
    assert code == 1, out
    assert "FAIL" in out and "1 check, 1 failed" in out


def test_shares_are_judged_on_the_median_step_not_on_the_idle_time_between_steps(
    now: Path, tmp_path: Path
) -> None:
    out_json = tmp_path / "gate.json"
    code, out, _ = gate(
        now, "--max", "idle_pct=0", "--max", "exposed_comm_pct=25", "--json", out_json
    )
    assert code == 0, out
    checks = {c["check"]: c for c in json.loads(out_json.read_text())["checks"]}
    idle, comm = checks["max idle_pct"], checks["max exposed_comm_pct"]
    assert idle["measured"] == 0  # 30 % of the whole span, but 0 % of every step
    assert comm["measured"] == 25 and comm["spread"]["min"] == 20 and comm["spread"]["max"] == 50
    assert "median of 3 steps" in comm["note"]


def test_step_time_is_the_median_step_and_the_spread_is_printed(now: Path) -> None:
    code, out, _ = gate(now, "--max", "step_time_ns=1200")
    assert code == 0, out
    assert "1.2 µs" in out and "1 µs – 2 µs" in out


def test_a_regression_against_a_json_baseline_passes_at_the_limit_and_fails_past_it(
    now: Path, base: Path, tmp_path: Path
) -> None:
    baseline = tmp_path / "base.json"
    written = runner.invoke(
        app, ["report", str(base), "-o", str(tmp_path / "b.html"), "--json", str(baseline), "-q"]
    )
    assert written.exit_code == 0, written.output
    code, out, _ = gate(
        now,
        *("--baseline", baseline),
        *("--max-regression", "step_time_ns=20"),
        *("--max-regression", "exposed_comm_pct=25"),
        *("--max-regression", "compute_pct=6.25"),  # lower is worse: a drop of 6.25 %
    )
    assert code == 0, out
    assert "+20.0%" in out and "+25.0%" in out and "-6.25%" in out
    code, out, _ = gate(now, "--baseline", baseline, "--max-regression", "step_time_ns=19.99")
    assert code == 1, out
    assert "base 1 µs – 2 µs" in out  # the baseline's own spread, to tell noise from change


def test_a_regression_against_a_sqlite_baseline_is_judged_the_same_way(
    now: Path, base: Path
) -> None:
    code, out, _ = gate(now, "--baseline", base, "--max-regression", "compute_pct=6.25")
    assert code == 0, out
    code, out, _ = gate(now, "--baseline", base, "--max-regression", "compute_pct=6.2")
    assert code == 1, out
    assert "-6.25%" in out


def test_a_regression_without_a_baseline_is_a_usage_error(now: Path) -> None:
    code, _, err = gate(now, "--max-regression", "step_time_ns=5")
    assert code == 2
    assert err.startswith("Error: --max-regression needs --baseline")


def test_too_few_steps_is_a_failed_check_of_its_own(now: Path) -> None:
    code, out, _ = gate(now, "--min-steps", "4", "--max", "step_time_ns=1e9")
    assert code == 1, out
    assert "not enough steps to judge (3 < 4)" in out and "2 checks, 1 failed" in out
    code, out, _ = gate(now, "--min-steps", "3")
    assert code == 0, out


def test_budgets_are_read_from_a_toml_file(two_gpus: Path, tmp_path: Path) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text(
        '[max]\nexposed_comm_pct = 20\n"layer_exposed_comm_ns[layers.1]" = 150\n'
        "[min]\ncompute_pct = 70.5\n"
    )
    code, out, _ = gate(two_gpus, "--budget", budget)
    assert code == 1, out
    assert "3 checks, 1 failed" in out
    # The command line wins over the file for the same check.
    code, out, _ = gate(two_gpus, "--budget", budget, "--min", "compute_pct=70")
    assert code == 0, out


def test_a_budget_baseline_is_relative_to_the_budget_file(
    now: Path, base: Path, tmp_path: Path
) -> None:
    budget = tmp_path / "ci" / "budget.toml"
    budget.parent.mkdir()
    budget.write_text(
        'baseline = "../base.sqlite"\nmin-steps = 3\n[max-regression]\nstep_time_ns = 20\n'
    )
    code, out, _ = gate(now, "--budget", budget)
    assert code == 0, out
    assert "3 checks, 0 failed" in out  # min-steps of the trace and of the baseline, and one


def test_budgets_are_read_from_pyproject_in_the_current_folder(
    two_gpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.nsysreport.gate.max]\nidle_pct = 5\n'
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = gate(two_gpus)
    assert code == 1, out
    assert "max idle_pct" in out and "10.0%" in out
    code, out, _ = gate(two_gpus, "--max", "idle_pct=10")
    assert code == 0, out


def test_a_pyproject_without_a_gate_table_gives_nothing_to_check(
    two_gpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = gate(two_gpus)
    assert code == 2 and err.startswith("Error: nothing to check")


def test_an_unknown_metric_is_a_usage_error_that_lists_the_valid_ones(two_gpus: Path) -> None:
    code, _, err = gate(two_gpus, "--max", "exposed_comm=5")
    assert code == 2
    assert err.startswith("Error: --max 'exposed_comm=5': unknown metric 'exposed_comm'")
    assert all(name in err for name in METRICS)
    assert "Traceback" not in err


def test_an_unknown_key_or_metric_in_a_budget_file_names_the_file_and_key(
    two_gpus: Path, tmp_path: Path
) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text("[maximum]\nidle_pct = 5\n")
    code, _, err = gate(two_gpus, "--budget", budget)
    assert code == 2
    assert err.startswith(f"Error: {budget}: unknown key 'maximum'")
    budget.write_text("[max]\nidle = 5\n")
    code, _, err = gate(two_gpus, "--budget", budget)
    assert code == 2 and f"{budget}: [max] unknown metric 'idle'" in err
    budget.write_text("[max\n")
    code, _, err = gate(two_gpus, "--budget", budget)
    assert code == 2 and f"{budget}: not valid TOML" in err


def test_a_layer_the_trace_does_not_have_is_a_usage_error(two_gpus: Path) -> None:
    code, _, err = gate(two_gpus, "--max", "layer_exposed_comm_ns[layers.9]=5")
    assert code == 2
    assert "no layer named 'layers.9'; its layers: layers.1, layers.0" in err


def test_a_missing_trace_is_an_input_error_with_exit_2(tmp_path: Path) -> None:
    code, _, err = gate(tmp_path / "nope.sqlite", "--max", "idle_pct=5")
    assert code == 2
    assert err.startswith("Error: ") and "nope.sqlite" in err and "Traceback" not in err


def test_overlap_is_skipped_not_failed_when_no_gpu_communicates(tmp_path: Path) -> None:
    trace = write_trace(Scenario(kernels=[Kernel(0, 100, GEMM)]), tmp_path / "solo.sqlite")
    code, out, _ = gate(trace, "--min", "overlap_pct=50")
    assert code == 0, out
    assert "SKIP" in out and "no GPU has communication" in out and "1 skipped" in out


def test_junit_xml_has_one_testcase_per_check_and_a_failure_for_each_failed_one(
    two_gpus: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "out" / "gate.xml"
    code, _, _ = gate(
        two_gpus,
        *("--max", "exposed_comm_pct=5", "--max", "idle_pct=10", "--min", "compute_pct=80"),
        *("--junit", junit),
    )
    assert code == 1
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("name") == "nsysreport gate"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"max exposed_comm_pct", "max idle_pct", "min compute_pct"}
    assert all(case.get("classname") == "nsysreport.gate" for case in cases.values())
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"max exposed_comm_pct", "min compute_pct"}
    failure = cases["max exposed_comm_pct"].find("failure")
    assert failure is not None
    assert failure.get("message") == "measured 20.0%, limit ≤ 5.0%"


def test_markdown_and_json_give_the_same_verdicts_as_the_terminal(
    two_gpus: Path, tmp_path: Path
) -> None:
    md, js = tmp_path / "gate.md", tmp_path / "gate.json"
    code, out, _ = gate(
        two_gpus,
        *("--max", "exposed_comm_pct=5", "--max", "idle_pct=10"),
        *("--markdown", md, "--json", js),
    )
    assert code == 1
    rows = [line for line in md.read_text().splitlines() if line.startswith("| ")][2:]
    verdicts = {row.split(" | ")[1].strip("`"): row.split(" | ")[0] for row in rows}
    assert verdicts == {"max exposed_comm_pct": "| ❌ FAIL", "max idle_pct": "| ✅ PASS"}
    data = json.loads(js.read_text())
    assert data["schema_version"] == 2 and data["passed"] is False
    assert data["trace"] == str(two_gpus)
    assert [(c["check"], c["passed"]) for c in data["checks"]] == [
        ("max exposed_comm_pct", False),
        ("max idle_pct", True),
    ]
    first = data["checks"][0]
    assert set(first) >= {"check", "metric", "kind", "limit", "measured", "baseline", "spread"}
    assert (first["metric"], first["kind"], first["limit"], first["measured"]) == (
        "exposed_comm_pct",
        "max",
        5,
        20,
    )
    assert out.index("max exposed_comm_pct") < out.index("max idle_pct")


def test_help_lists_every_metric() -> None:
    result = runner.invoke(app, ["gate", "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0
    assert all(name in result.stdout for name in METRICS)


def test_a_trace_with_exposed_communication_above_the_budget_fails_with_a_table() -> None:
    code, out, _ = gate(SAMPLES / "llama70b_decode_tp8_pcie.sqlite", "--max", "exposed_comm_pct=5")
    assert code == 1, out
    row = next(line for line in out.splitlines() if "max exposed_comm_pct" in line)
    assert row.split()[:2] == ["FAIL", "max"]
    assert "≤ 5.0%" in row and "67.7%" in row
    assert "1 check, 1 failed" in out


# --- saved reports that are not quite reports, and PyTorch profiler traces --------------------


def saved_report(trace: Path, tmp_path: Path) -> dict[str, object]:
    """`report --json` of `trace`, read back."""
    path = tmp_path / "saved.json"
    written = runner.invoke(
        app, ["report", str(trace), "-o", str(tmp_path / "r.html"), "--json", str(path), "-q"]
    )
    assert written.exit_code == 0, written.output
    data: dict[str, object] = json.loads(path.read_text())
    return data


def one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_saved_report_holding_nan_or_infinity_is_one_line(
    two_gpus: Path, tmp_path: Path, word: str
) -> None:
    data = saved_report(two_gpus, tmp_path)
    gpus = data["gpus"]
    assert isinstance(gpus, list)
    gpus[0]["idle_ns"] = "@@"  # the first GPU: max() over a NaN first never finds its key
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data).replace('"@@"', word))
    code, _, err = gate(path, "--max", "idle_ns=5")
    assert code == 2
    one_error_line(err, f"{path}: not valid JSON", f"{word.lstrip('-')}")


def test_a_saved_report_with_no_gpus_is_an_error_not_a_pass(two_gpus: Path, tmp_path: Path) -> None:
    data = saved_report(two_gpus, tmp_path)
    data.update(
        gpus=[], steps=[], layers=[], stragglers={"matched": 0, "unmatched": [], "gpus": []}
    )
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(data))
    code, _, err = gate(path, "--max", "idle_pct=5")
    assert code == 2
    one_error_line(err, f"{path}: has no GPUs")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"schema_version": 1, "gpus": [{"rank": 0}]', "not valid JSON"),  # truncated
        ('{"schema_version": 1, "gpus": [{"rank": 0}]}', "not a complete"),
        ('{"schema_version": 1, "gpus": {"rank": 0}}', "has no GPUs"),
        ("[1, 2]", "not a report of JSON schema_version 2"),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),  # too deep for the parser
        ('{"schema_version": 1, "gpus": [1e999999999999999999999]}', "not valid JSON"),
    ],
)
def test_any_other_malformed_report_is_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, _, err = gate(path, "--max", "idle_pct=5")
    assert code == 2
    one_error_line(err, str(path), fragment)


def _negative_idle(data: dict[str, Any]) -> None:
    data["steps"][0]["idle_ns"] = -5


def _overlap_over_100(data: dict[str, Any]) -> None:
    data["gpus"][0]["overlap_pct"] = 150.0


def _no_compute(data: dict[str, Any]) -> None:
    del data["steps"][1]["compute_ns"]


def _null_wait(data: dict[str, Any]) -> None:
    data["stragglers"]["gpus"] = [{**data["gpus"][0], "wait_ns": None}]


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (_negative_idle, "steps[0] idle_ns is -5, which no report holds"),
        (_overlap_over_100, "gpus[0] overlap_pct is 150, which no report holds"),
        # Read as 0 before: the step would have judged as all idle or exposed communication.
        (_no_compute, "not a complete `nsysreport report --json` file (steps[1] compute_ns is"),
        (_null_wait, "(stragglers.gpus[0] wait_ns is not a number)"),
    ],
)  # fmt: skip
def test_a_saved_report_with_an_impossible_or_missing_gated_number_is_refused(
    now: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None], fragment: str
) -> None:
    data = saved_report(now, tmp_path)
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    # Every limit passes on the unedited report: only the edit can fail it.
    code, _, err = gate(path, "--max", "idle_pct=100", "--min", "compute_pct=0")
    assert code == 2
    one_error_line(err, str(path), fragment)


def kineto_trace(path: Path, comm_us: float) -> Path:
    """A PyTorch profiler trace of one GPU: a GEMM [1000,2000) ns, then an all-reduce of
    `comm_us` µs on the same stream, all of it exposed."""
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7}
    args = {"device": 0, "stream": 7}
    events = [
        {**kernel, "name": GEMM, "ts": 1, "dur": 1, "args": {**args, "correlation": 1}},
        {**kernel, "name": NCCL, "ts": 2, "dur": comm_us, "args": {**args, "correlation": 2}},
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_a_pytorch_profiler_json_is_analysed_as_a_trace_and_as_a_baseline(tmp_path: Path) -> None:
    now = kineto_trace(tmp_path / "now.json", 0.5)  # exposed comm 500 ns
    base = kineto_trace(tmp_path / "base.json", 0.4)  # 400 ns: now is 25 % worse
    code, out, err = gate(now, "--max", "exposed_comm_ns=500")
    assert code == 0, err + out
    assert gate(now, "--max", "exposed_comm_ns=499")[0] == 1
    checks = ("--baseline", base, "--max-regression", "exposed_comm_ns")
    assert gate(now, *checks[:3], f"{checks[3]}=25")[0] == 0
    assert gate(now, *checks[:3], f"{checks[3]}=24.9")[0] == 1


def test_a_kineto_trace_whose_events_come_first_is_still_a_trace(tmp_path: Path) -> None:
    path = kineto_trace(tmp_path / "t.json", 0.5)
    doc = json.loads(path.read_text())
    # Keys the head sniffing does not see until the whole file is parsed (a padded header).
    path.write_text(json.dumps({"padding": "x" * 100_000, "traceEvents": doc["traceEvents"]}))
    code, out, err = gate(path, "--max", "exposed_comm_ns=500")
    assert code == 0, err + out
