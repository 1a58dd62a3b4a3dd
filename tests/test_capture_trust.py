"""When the capture cannot be taken at its word (#35): nsys's own warnings, GPUs listed that ran
nothing, a capture with next to no GPU work, and copies named by their kind (a memset is never a
host-to-device copy).

Every scenario is small enough that the expected sentence follows from it by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import escape
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.multi import build_multi_report
from nsysreport.patterns import Patterns
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.synth import (
    Diagnostic,
    Gpu,
    Kernel,
    Memcpy,
    Memset,
    NvtxRange,
    Scenario,
    write_trace,
)
from nsysreport.synth.rank_files import BASE_UTC_NS

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
SECOND = 1_000_000_000


def report_of(scenario: Scenario, tmp_path: Path, name: str = "t.sqlite") -> Any:
    path = write_trace(scenario, tmp_path / name)
    return build_report(open_trace(path), path)


def test_a_memset_alone_is_named_a_memset_never_a_host_to_device_copy(tmp_path: Path) -> None:
    # One memset of 1.5 ms and nothing else: the time is all exposed memset.
    report = report_of(Scenario(memsets=[Memset(0, 1_500_000)]), tmp_path)
    assert report.bottleneck.stage == "memcpy"
    assert "(all of it memsets)" in report.bottleneck.summary
    for surface in (report.bottleneck.summary, render_html(report, "now"), str(as_json(report))):
        assert "host-to-device" not in surface.lower() and "htod" not in surface.lower()


def test_the_memcpy_verdict_names_each_kind_by_its_share_of_the_exposed_time(
    tmp_path: Path,
) -> None:
    # h2d 300 µs, memset 100 µs, d2h 1 µs (under 1% of the 401 µs: left out), one kernel of
    # 10 µs: exposed copies 401 of 411 µs.
    report = report_of(
        Scenario(
            kernels=[Kernel(500_000, 510_000, GEMM)],
            memcpys=[Memcpy(0, 300_000, copy_kind=1), Memcpy(400_000, 401_000, copy_kind=2)],
            memsets=[Memset(300_000, 400_000)],
        ),
        tmp_path,
    )
    verdict = report.bottleneck
    assert verdict.stage == "memcpy"
    assert "Memory copies and memsets are the bottleneck" in verdict.summary
    assert "(host-to-device copies 75%, memsets 25%)" in verdict.summary
    assert "device-to-host" not in verdict.summary


def test_a_capture_with_next_to_no_gpu_work_says_so_and_what_to_capture(tmp_path: Path) -> None:
    # 2 kernels of 2 µs and a memset of 1.5 µs in a 2 s capture (an NVTX range spans it):
    # busy 5.5 µs, under 1 ms and under 1% of the capture.
    scenario = Scenario(
        kernels=[
            Kernel(SECOND, SECOND + 2_000, GEMM),
            Kernel(SECOND + 10_000, SECOND + 12_000, GEMM),
        ],
        memsets=[Memset(SECOND + 20_000, SECOND + 21_500)],
        nvtx=[NvtxRange(0, 2 * SECOND, "main")],
    )
    report = report_of(scenario, tmp_path)
    verdict = report.bottleneck
    assert verdict.stage == "little_gpu_work"
    assert verdict.share_pct == 5_500 / (2 * SECOND) * 100 and verdict.gain_pct == 0.0
    assert verdict.summary.startswith(
        "Next to no GPU work was captured: the GPU was busy 5.5 µs in all (2 kernels, 1 copy "
        "or memset) over a capture of 2 s"
    )
    assert "--capture-range=cudaProfilerApi" in verdict.summary
    assert as_json(report)["bottleneck"]["stage"] == "little_gpu_work"
    assert str(escape(verdict.summary)) in render_html(report, "now")


def test_a_short_capture_that_is_all_gpu_work_is_judged_as_usual(tmp_path: Path) -> None:
    # 5.5 µs of work, but the capture is the work itself: the shares mean something.
    report = report_of(
        Scenario(kernels=[Kernel(0, 2_000, GEMM), Kernel(2_000, 5_500, GEMM)]), tmp_path
    )
    assert report.bottleneck.stage == "compute"


def test_a_gpu_listed_but_never_used_is_named(tmp_path: Path) -> None:
    # The export lists GPUs 0-3; only GPU 0 ran anything.
    gpus = [Gpu(d, name="NVIDIA A100-SXM4-80GB") for d in range(4)]
    report = report_of(Scenario(kernels=[Kernel(0, 1_000, GEMM)], gpus=gpus), tmp_path)
    assert [g.device_id for g in report.capture.unused_gpus] == [1, 2, 3]
    hint = next(h for h in report.capture.hints if h.topic == "unused_gpus")
    assert hint.finding.startswith(
        "GPUs 1, 2, 3 (NVIDIA A100-SXM4-80GB) are listed by the trace but ran nothing in it"
    )
    assert as_json(report)["capture"]["unused_gpus"][0] == {
        "host": "synth-host",
        "device_id": 1,
        "gpu_name": "NVIDIA A100-SXM4-80GB",
    }
    used = report_of(Scenario(kernels=[Kernel(0, 1_000, GEMM)], gpus=gpus[:1]), tmp_path, "u")
    assert used.capture.unused_gpus == () and "unused_gpus" not in str(used.capture.hints)


def test_a_gpu_another_rank_file_used_is_not_unused(tmp_path: Path) -> None:
    # Two rank files of one host, each listing the node's three GPUs and using its own: only
    # GPU 2 ran nothing in either.
    gpus = [Gpu(0), Gpu(1), Gpu(2)]
    files = [
        write_trace(
            Scenario(
                kernels=[Kernel(0, 1_000, GEMM, device=rank, pid=100 + rank)],
                gpus=gpus,
                capture_env={"RANK": str(rank)},
                utc_at_zero_ns=BASE_UTC_NS,
            ),
            tmp_path / f"rank{rank}.sqlite",
        )
        for rank in (0, 1)
    ]
    report = build_multi_report(files, Patterns(), cache=False)
    assert [(g.host, g.device_id) for g in report.capture.unused_gpus] == [("synth-host", 2)]


def test_nsys_warnings_and_errors_are_listed_and_its_infos_are_not(tmp_path: Path) -> None:
    driver = "Installed CUDA driver version (12.0) is not supported by this build."
    dropped = "CUPTI dropped 12 records: buffers full.\nIncrease --cuda-buffer-size."
    scenario = Scenario(
        kernels=[Kernel(0, 1_000, GEMM)],
        diagnostics=[
            Diagnostic(0, "Number of CUDA events collected: 12.", severity=1, source=3),
            Diagnostic(10, driver, severity=2, source=1),
            Diagnostic(20, driver, severity=2, source=1, pid=101),
            Diagnostic(30, dropped, severity=3, source=1),
        ],
    )
    report = report_of(scenario, tmp_path)
    got = [(d.severity, d.source, d.text, d.count) for d in report.capture.diagnostics]
    assert got == [("error", "injection", dropped, 1), ("warning", "injection", driver, 2)]
    html = render_html(report, "now")
    assert "nsys's warnings about this capture" in html
    assert driver in html and str(escape(dropped)) in html
    assert "Number of CUDA events" not in html
    out = CliRunner().invoke(
        app, ["report", str(tmp_path / "t.sqlite"), "-o", str(tmp_path / "r.html")]
    )
    assert "nsys recorded 1 error and 1 warning about the capture" in out.output
