"""nsys's own pauses (PROFILER_OVERHEAD, #35): time a GPU has nothing to run while nsys pauses
its process is the breakdown's `profiler overhead` part, neither idle nor a gap.

Hand-checkable scenario: one GPU of process 100 runs a GEMM [0, 1000) and one [3000, 4000);
nsys flushes its buffers on a thread of that process in [1500, 2500). Span 4000 = compute 2000
+ profiler overhead 1000 + idle 1000 (the gaps [1000, 1500) and [2500, 3000), 500 each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, NvtxRange, ProfilerOverhead, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
KERNELS = [Kernel(0, 1_000, GEMM), Kernel(3_000, 4_000, GEMM)]


def report_of(tmp_path: Path, overheads: list[ProfilerOverhead], version: str = "2026.2") -> Any:
    scenario = Scenario(
        kernels=KERNELS, overheads=overheads, nvtx=[NvtxRange(-10, 4_010, "step 1")]
    )
    path = write_trace(scenario, tmp_path / f"{version}.sqlite", version=version)
    return build_report(open_trace(path), path)


def parts(g: Any) -> tuple[int, ...]:
    return (g.span_ns, g.compute_ns, g.profiler_overhead_ns, g.idle_ns, g.busy_ns)


@pytest.mark.parametrize("version", ["2026.2", "2024.5", "2022.2"])
def test_a_buffer_flush_with_nothing_running_is_profiler_overhead_not_idle_or_a_gap(
    tmp_path: Path, version: str
) -> None:
    report = report_of(tmp_path, [ProfilerOverhead(1_500, 2_500, tid=101)], version)
    (g,) = report.gpus
    assert parts(g) == (4_000, 2_000, 1_000, 1_000, 2_000)
    assert (g.gaps.count, g.gaps.max_ns, sum(g.gaps.histogram_ns.values())) == (2, 500, 1_000)
    assert g.shares_pct["profiler overhead"] == 25.0 and sum(g.shares_pct.values()) == 100.0
    # What-ifs leave it alone: without idle time the span is 3000, not 2000.
    assert g.what_if.no_idle_ns == 3_000
    (step,) = report.steps
    assert (step.profiler_overhead_ns, step.idle_ns) == (1_000, 1_000)
    data = as_json(report)
    assert data["gpus"][0]["profiler_overhead_ns"] == 1_000
    assert data["steps"][0]["profiler_overhead_ns"] == 1_000
    assert "profiler overhead" in render_html(report, "now")


def test_overlapping_windows_count_once_and_a_running_kernel_is_never_overhead(
    tmp_path: Path,
) -> None:
    # [1500, 2000) and [1800, 2500) on two threads: one window [1500, 2500); [500, 1200) under
    # the first GEMM counts only its idle part [1000, 1200).
    windows = [
        ProfilerOverhead(1_500, 2_000, tid=101),
        ProfilerOverhead(1_800, 2_500, tid=102),
        ProfilerOverhead(500, 1_200),
    ]
    (g,) = report_of(tmp_path, windows).gpus
    assert parts(g) == (4_000, 2_000, 1_200, 800, 2_000)


def test_a_window_outside_the_span_or_of_another_process_changes_nothing(tmp_path: Path) -> None:
    windows = [
        ProfilerOverhead(-5_000, -1_000),  # before the GPU's first activity: clipped away
        ProfilerOverhead(5_000, 9_000),  # after its last
        ProfilerOverhead(1_500, 2_500, pid=200),  # another process, no GPU of its own
    ]
    (g,) = report_of(tmp_path, windows).gpus
    assert parts(g) == (4_000, 2_000, 0, 2_000, 2_000)
    assert (g.gaps.count, g.gaps.max_ns) == (1, 2_000)
    assert "profiler overhead" not in render_html(report_of(tmp_path, windows), "now")


def test_the_real_capture_s_buffer_flush_leaves_idle_time(tmp_path: Path) -> None:
    # mfu_2gpu_before: a 1.49 ms CUPTI buffer flush on rank 0's process; every part still sums
    # to the span on every GPU.
    real = Path(__file__).parents[2] / "shared" / "traces" / "nsys" / "mfu_2gpu_before.sqlite"
    report = build_report(open_trace(real), real)
    assert report.gpus[0].profiler_overhead_ns > 1_000_000
    for g in report.gpus:
        total = g.compute_ns + g.exposed_comm_ns + g.exposed_memcpy_ns + g.graph_opaque_ns
        assert total + g.profiler_overhead_ns + g.idle_ns == g.span_ns
