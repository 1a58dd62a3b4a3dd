"""The command line: outputs, exit codes, messages, JSON contract and determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app, main
from nsysreport.synth import Kernel, Memcpy, Scenario, write_trace

from conftest import real_trace

runner = CliRunner()
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    scenario = Scenario(
        kernels=[Kernel(1_000, 101_000, GEMM), Kernel(101_000, 181_000, NCCL)],
        memcpys=[Memcpy(200_000, 220_000)],
    )
    return write_trace(scenario, tmp_path / "tp.sqlite")


def test_the_default_report_lands_beside_the_trace_with_a_summary(trace: Path) -> None:
    result = runner.invoke(app, ["report", str(trace)])
    assert result.exit_code == 0, result.output
    html = trace.with_name("tp.report.html")
    assert html.is_file()
    assert "Verdict:" in result.stdout and f"Wrote {html}" in result.stdout
    assert "rank 0" in result.stdout


def test_a_bare_trace_argument_means_report(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.html"
    with pytest.raises(SystemExit) as exit_info:
        main([str(trace), "-o", str(out), "--quiet"])
    assert exit_info.value.code == 0 and out.is_file()


def test_the_json_contract_has_every_section_and_metric(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    result = runner.invoke(
        app, ["report", str(trace), "-o", str(tmp_path / "r.html"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema_version"] == 2
    for key in (
        "tool_version",
        "traces",
        "gpus",
        "steps",
        "layers",
        "collectives",
        "stragglers",
        "bottleneck",
    ):
        assert key in data
    (gpu,) = data["gpus"]
    for key in (
        "file",
        "pid",
        "device_id",
        "rank",
        "host",
        "gpu_name",
        "span_ns",
        "busy_ns",
        "idle_ns",
        "compute_ns",
        "gemm_ns",
        "attention_ns",
        "comm_ns",
        "comm_sum_ns",
        "exposed_comm_ns",
        "overlapped_comm_ns",
        "overlap_pct",
        "memcpy_ns",
        "exposed_memcpy_ns",
        "kernel_count",
        "comm_kernel_count",
        "gaps",
        "what_if",
    ):
        assert key in gpu, key
    assert set(gpu["gaps"]) >= {"count", "p50_ns", "p99_ns", "max_ns", "histogram", "top"}
    assert set(gpu["what_if"]) == {
        "compute_2x_ns",
        "comm_2x_ns",
        "perfect_overlap_ns",
        "no_idle_ns",
    }
    # 100 µs GEMM, then 80 µs all-reduce on the same stream, then a 20 µs copy after 19 µs idle.
    assert (
        gpu["compute_ns"],
        gpu["exposed_comm_ns"],
        gpu["exposed_memcpy_ns"],
        gpu["idle_ns"],
    ) == (
        100_000,
        80_000,
        20_000,
        19_000,
    )
    assert data["bottleneck"]["stage"] == "communication"
    assert set(data["stragglers"]) == {"matched", "unmatched", "gpus"}


def test_json_to_stdout_is_pure_json(trace: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["report", str(trace), "-o", str(tmp_path / "r.html"), "--json", "-"]
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["gpus"][0]["kernel_count"] == 2


def test_the_mfu_trace_reports_the_issue_numbers(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = runner.invoke(
        app,
        [
            "report",
            str(real_trace("mfu_2gpu_before.sqlite")),
            "-o",
            str(tmp_path / "r.html"),
            "--json",
            str(out),
            "-q",
        ],
    )
    assert result.exit_code == 0 and result.stdout == ""
    gpus = {g["device_id"]: g for g in json.loads(out.read_text())["gpus"]}
    assert (gpus[0]["comm_sum_ns"], gpus[0]["exposed_comm_ns"]) == (17172652, 17172652)
    assert (gpus[1]["comm_sum_ns"], gpus[1]["exposed_comm_ns"]) == (8229100, 8229100)


def test_reports_are_byte_identical_for_the_same_trace(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    for out in (a, b):
        assert runner.invoke(app, ["report", str(trace), "-o", str(out), "-q"]).exit_code == 0
    assert a.read_bytes() == b.read_bytes()
    assert "2023-11-14 22:13 UTC" in a.read_text()


def test_a_pdf_is_written_on_request(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "only.pdf"
    assert runner.invoke(app, ["report", str(trace), "-o", str(out), "-q"]).exit_code == 0
    assert out.read_bytes().startswith(b"%PDF-")
    html = tmp_path / "both.html"
    assert runner.invoke(app, ["report", str(trace), "-o", str(html), "--pdf", "-q"]).exit_code == 0
    assert html.is_file() and html.with_suffix(".pdf").read_bytes().startswith(b"%PDF-")


def test_queries_lists_every_sql_file_with_its_summary() -> None:
    result = runner.invoke(app, ["queries"])
    assert result.exit_code == 0
    for name in ("gpu_breakdown", "gap_top", "gap_summary", "gap_histogram", "kernel_top"):
        assert name in result.stdout
    assert "$top=10" in result.stdout and "gpu_segment" in result.stdout


def test_query_prints_csv_with_parameters(trace: Path) -> None:
    result = runner.invoke(app, ["query", "gpu_breakdown", str(trace), "--csv"])
    assert result.exit_code == 0
    header, row = result.stdout.strip().splitlines()
    assert header.startswith("pid,device_id,first_start_ns")
    assert ",80000," in row  # exposed comm
    top = runner.invoke(app, ["query", "kernel_top", str(trace), "-p", "top=1"])
    assert top.exit_code == 0 and "ncclDevKernel_AllReduce" in top.stdout


def test_an_unknown_query_is_a_usage_error_that_lists_the_queries(trace: Path) -> None:
    result = runner.invoke(app, ["query", "nope", str(trace)])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: no query named 'nope'; the queries are: ")


def test_a_malformed_param_is_a_usage_error(trace: Path) -> None:
    result = runner.invoke(app, ["query", "gap_top", str(trace), "-p", "top"])
    assert result.exit_code == 2 and "expected NAME=VALUE" in result.stderr


def test_an_unwritable_output_is_one_line(trace: Path) -> None:
    result = runner.invoke(app, ["report", str(trace), "-o", "/proc/nsysreport/r.html"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: -o /proc/nsysreport/r.html: cannot write there")


def test_python_dash_m_and_version_work() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nsysreport", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("nsysreport ")


# What every input the loaders read looks like in the help (nsysreport.inputs, load).
INPUTS = (".nsys-rep", "SQLite export", "Parquet export folder", "PyTorch profiler", ".json.gz")


@pytest.mark.parametrize(
    ("args", "also"),
    [
        ([], ("folder", "glob")),
        (["report"], ("folder of per-rank files", "quoted glob")),
        (["gate"], ("folder of per-rank files", "report --json")),
        (["query"], ()),
    ],
)
def test_the_help_names_every_input_it_reads(args: list[str], also: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # lines wrapped anywhere
    missing = [word for word in (*INPUTS, *also) if word not in text]
    assert not missing, f"nsysreport {' '.join(args)} --help does not name {missing}"
