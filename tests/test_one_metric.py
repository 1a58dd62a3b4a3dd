"""One metric, one value: the overview, the terminal, the JSON, gate and compare read each
number from the same place in the model, and the two exposed-comm shares are named apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.compare import compare
from nsysreport.gate import gate_report
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


@pytest.fixture
def steps(tmp_path: Path) -> Path:
    """One GPU, three steps from 1000, 3000 and 5000 ns: a GEMM, then an all-reduce on the same
    stream, of (800, 200), (900, 300) and (500, 1500) ns. Step times 1000, 1200 and 2000
    (median 1200); exposed comm 20, 25 and 75 % of each step (median 25 %), but 2000 of the
    6000 ns span, 33.3 %, over the whole trace: the time between steps is idle."""
    kernels, ranges = [], []
    for i, (base, gemm, comm) in enumerate(((1000, 800, 200), (3000, 900, 300), (5000, 500, 1500))):
        kernels += [Kernel(base, base + gemm, GEMM), Kernel(base + gemm, base + gemm + comm, NCCL)]
        ranges.append(NvtxRange(base - 10, base + gemm, f"step {i}"))
    return write_trace(Scenario(kernels=kernels, nvtx=ranges), tmp_path / "steps.sqlite")


def report_of(path: Path) -> Report:
    return build_report(open_trace(path), path)


def test_step_time_is_one_median_for_the_overview_gate_and_compare(steps: Path) -> None:
    report = report_of(steps)
    assert report.median_step_ns == 1200
    assert report.overview.key.median_step_ns == report.overview.steps.median_ns == 1200  # type: ignore[union-attr]
    checked = gate_report(report, {"max": {"step_time_ns": 1200}})
    assert checked.checks[0].measured == 1200 and checked.passed
    (config, _) = compare([("a", report), ("b", report)]).configs
    assert config.step_time_ns == 1200.0


def test_exposed_comm_shows_the_whole_trace_share_and_the_median_step_named_apart(
    steps: Path, tmp_path: Path
) -> None:
    report = report_of(steps)
    key = report.overview.key
    assert key.shares_pct["exposed comm"] == pytest.approx(100 * 2000 / 6000)
    assert key.step_exposed_comm_pct == 25.0 and key.step_exposed_comm_rank == 0
    # what gate measures is the median step's share
    assert gate_report(report, {"max": {"exposed_comm_pct": 25}}).checks[0].measured == 25.0
    (stats,) = as_json(report)["step_stats"]
    assert stats["median_step_shares_pct"]["exposed comm"] == 25.0
    assert stats["shares_pct"]["exposed comm"] == pytest.approx(100 * 2000 / 4200)  # in steps
    html = " ".join(render_html(report, "now").split())
    assert 'exposed comm</dt><dd>33.3%<span class="sub">of all GPUs\' time' in html
    assert 'exposed comm, median step</dt><dd>25.0%<span class="sub">on rank 0' in html
    out = CliRunner().invoke(app, ["report", str(steps), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    assert (
        "Exposed comm: 33.3% of all GPUs' time (whole trace); median step 25.0% on rank 0"
        in out.stdout
    )


def test_a_trace_without_steps_shows_only_the_whole_trace_share(tmp_path: Path) -> None:
    path = write_trace(
        Scenario(kernels=[Kernel(0, 100, GEMM), Kernel(100, 150, NCCL)]), tmp_path / "t.sqlite"
    )
    report = report_of(path)
    assert report.overview.key.step_exposed_comm_pct is None
    assert "median step" not in render_html(report, "now")
    (gpu,) = json.loads(json.dumps(as_json(report)))["gpus"]
    assert gpu["exposed_comm_pct"] == pytest.approx(100 * 50 / 150)
