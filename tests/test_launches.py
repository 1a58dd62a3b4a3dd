"""How the host fed each stream (#36): kernels launched eagerly or replayed from CUDA graphs,
launch latency and queue depth (queries/report/launch_summary.sql, sections/launches.py).

Scenario, stream 7 of one GPU: three kernels launched by calls ending at 10, 30 and 50 that run
[100, 200), [200, 300), [300, 400): latencies 90, 170, 250 (median 170; p90 170 + 0.8 x 80 =
234; p99 170 + 0.98 x 80 = 248.4); queued ahead at each launch 0, 1, 2 (mean 1, max 2). Then a
CUDA graph replays two kernels [500, 600) and [600, 700) on it: 5 kernels, 2 from graphs. A
graph traced whole runs on stream 8: 1 graph launch, no kernel counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.report_builder import build_report
from nsysreport.sections.launches import launch_sentence
from nsysreport.synth import GraphLaunch, Kernel, NvtxRange, OsCall, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"


def report_of(tmp_path: Path) -> Report:
    kernels = [
        Kernel(100 * (i + 1), 100 * (i + 2), GEMM, launch=(20 * i, 20 * i + 10)) for i in range(3)
    ]
    replay = [Kernel(500, 600, GEMM, graph_node_id=1), Kernel(600, 700, GEMM, graph_node_id=2)]
    scenario = Scenario(
        kernels=kernels,
        graph_launches=[
            GraphLaunch(500, 700, launch=(450, 460), kernels=replay),
            GraphLaunch(800, 900, stream=8, graph_id=2, launch=(700, 710)),
        ],
        nvtx=[NvtxRange(-10, 1_000, "step 1")],
    )
    path = write_trace(scenario, tmp_path / "t.sqlite")
    return build_report(open_trace(path), path)


def test_each_stream_s_launches_latency_and_queue_depth(tmp_path: Path) -> None:
    report = report_of(tmp_path)
    seven, eight = report.launches
    assert (seven.stream_id, seven.kernels, seven.graph_kernels, seven.launched) == (7, 5, 2, 3)
    assert (seven.latency_p50_ns, seven.latency_p90_ns) == (170.0, 234.0)
    assert seven.latency_p99_ns == pytest.approx(248.4)
    assert (seven.queue_mean, seven.queue_max, seven.eager_pct) == (1.0, 2, 60.0)
    assert (eight.stream_id, eight.kernels, eight.graph_launches, eight.launched) == (8, 0, 1, 0)
    assert (eight.latency_p50_ns, eight.queue_mean) == (None, None)
    assert as_json(report)["launches"][0]["queue_max"] == 2
    assert Report.from_json(as_json(report), "r.json").launches == report.launches


def test_the_sentence_names_the_busiest_stream(tmp_path: Path) -> None:
    assert launch_sentence(report_of(tmp_path).launches) == (
        "Kernels launched eagerly: 60.0% (40.0% replayed from CUDA graphs); 1 CUDA graph "
        "launches traced whole. On the busiest stream (rank 0, stream 7) a kernel started 170 ns "
        "after its launch returned (median; p99 248 ns), with 1.0 kernels queued ahead of it on "
        "average."
    )
    assert launch_sentence(()) is None


def test_a_gap_names_the_nvtx_range_its_next_kernel_was_launched_from(tmp_path: Path) -> None:
    """A GEMM [0, 100), then the GPU idles until a GEMM [1000, 1100) launched at (900, 910)
    inside `optimizer.step` [850, 950) (a registered string), itself inside `step 1`: the gap's
    host range is the innermost loaded one, `optimizer.step` (the inline-text op range inside
    it is one the loader leaves out, nvtx_roleless). A gap whose next kernel was launched
    outside any range: none."""
    scenario = Scenario(
        kernels=[
            Kernel(0, 100, GEMM, launch=(-20, -10)),
            Kernel(1_000, 1_100, GEMM, launch=(900, 910)),
            Kernel(3_000, 3_100, GEMM, launch=(2_900, 2_910)),
        ],
        nvtx=[
            NvtxRange(-50, 1_200, "step 1"),
            NvtxRange(850, 950, "optimizer.step", registered=True),
            # An inline text no role pattern matches (emit_nvtx's): not loaded, never named.
            NvtxRange(880, 940, "aten::add_, seq = 7"),
        ],
    )
    path = write_trace(scenario, tmp_path / "gaps.sqlite")
    (gpu,) = build_report(open_trace(path), path).gpus
    assert [(g.duration_ns, g.host_range) for g in gpu.gaps.top] == [
        (1_900, None),
        (900, "optimizer.step"),
    ]


def test_a_gap_names_the_os_runtime_call_the_launching_thread_sat_in(tmp_path: Path) -> None:
    """nsys 2024.5 with OS runtime tracing: the thread that launches the GEMM at (900, 910) sat
    in `poll` [150, 880) during the gap [100, 1000): the gap's host call is `poll`, the OS
    call overlapping it most (a `write` [120, 140) overlaps it less)."""
    scenario = Scenario(
        kernels=[
            Kernel(0, 100, GEMM, launch=(-20, -10)),
            Kernel(1_000, 1_100, GEMM, launch=(900, 910)),
        ],
        os_calls=[OsCall(120, 140, "write"), OsCall(150, 880, "poll")],
        nvtx=[NvtxRange(-50, 1_200, "step 1")],
    )
    path = write_trace(scenario, tmp_path / "osrt.sqlite", version="2024.5")
    (gpu,) = build_report(open_trace(path), path).gpus
    (gap,) = gpu.gaps.top
    assert (gap.duration_ns, gap.os_call, gap.sync_call) == (900, "poll", None)
