"""The Capture section: what the trace recorded, and what to record to sharpen the report.

Each scenario lacks one thing (or has it), so the expected hint and its count follow from it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.sections.capture import build_capture, summed
from nsysreport.synth import GraphLaunch, Kernel, NvtxRange, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
GRAPH_SAMPLE = Path(__file__).parents[1] / "sample_traces"
GRAPH_SAMPLE /= "llama70b_decode_tp4_nvlink_graphs_graph.sqlite"


def report_of(scenario: Scenario, tmp_path: Path, name: str = "t.sqlite") -> Any:
    path = write_trace(scenario, tmp_path / name)
    return build_report(open_trace(path), path)


def topics(report: Any) -> list[str]:
    return [h.topic for h in report.capture.hints]


def test_a_trace_without_nvtx_says_so_and_gives_the_nvtx_trace_flag(tmp_path: Path) -> None:
    report = report_of(Scenario(kernels=[Kernel(100, 200, GEMM)]), tmp_path)
    assert report.capture.facts.nvtx_ranges == 0
    nvtx = next(h for h in report.capture.hints if h.topic == "nvtx")
    assert "--trace=cuda,nvtx" in nvtx.command
    # no NVTX at all: one hint, not also "no steps" and "no layers"
    assert "steps" not in topics(report) and "layers" not in topics(report)


def test_nccl_kernels_without_call_ranges_or_sizes_get_both_hints(tmp_path: Path) -> None:
    kernels = [Kernel(100, 200, GEMM), Kernel(300, 400, NCCL), Kernel(500, 600, NCCL)]
    steps = [NvtxRange(0, 1000, "step 1"), NvtxRange(10, 900, "layers.0")]
    report = report_of(Scenario(kernels=kernels, nvtx=steps), tmp_path)
    facts = report.capture.facts
    assert (facts.comm_kernels, facts.comm_kernels_sized, facts.collective_ranges) == (2, 0, 0)
    assert (facts.step_ranges, facts.layer_ranges) == (1, 1)
    assert topics(report) == ["nccl_ranges", "message_sizes", "gpu_metrics"]
    sizes = report.capture.hints[1]
    assert sizes.finding.startswith("2 of 2 communication kernels have no message size")
    assert "--comm-bytes" in sizes.command


def test_a_kernel_launched_before_the_capture_began_is_named_as_a_cut_window(
    tmp_path: Path,
) -> None:
    path = write_trace(
        Scenario(kernels=[Kernel(100, 200, GEMM), Kernel(300, 400, GEMM)]), tmp_path / "t.sqlite"
    )
    with sqlite3.connect(path) as db:  # the first launch happened before the window
        db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start < 100")
    report = build_report(open_trace(path), path)
    assert report.capture.facts.unlaunched_activities == 1
    window = next(h for h in report.capture.hints if h.topic == "window")
    assert window.finding.startswith("the capture window cuts the run: 1 GPU activities")
    assert "--capture-range" in window.command


def test_gpu_metric_samples_in_the_file_silence_the_gpu_metrics_hint(tmp_path: Path) -> None:
    path = write_trace(Scenario(kernels=[Kernel(100, 200, GEMM)]), tmp_path / "t.sqlite")
    assert "gpu_metrics" in topics(build_report(open_trace(path), path))
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER, "
            "metricId INTEGER, value INTEGER)"
        )
    report = build_report(open_trace(path), path)
    assert report.capture.facts.gpu_metrics
    assert "gpu_metrics" not in topics(report)


def test_graphs_traced_as_a_whole_give_their_share_and_the_node_level_command(
    tmp_path: Path,
) -> None:
    # gemm [100,200); graph [200,500): span 400, 300 of it opaque = 75%
    scenario = Scenario(
        kernels=[Kernel(100, 200, GEMM)],
        graph_launches=[GraphLaunch(200, 500)],
        nvtx=[NvtxRange(0, 1000, "step 1"), NvtxRange(0, 1000, "layers.0")],
    )
    report = report_of(scenario, tmp_path)
    graphs = report.capture.hints[0]
    assert graphs.topic == "cuda_graphs"
    assert graphs.finding.startswith("75.0% of the GPUs' time is inside 1 CUDA graph launches")
    assert graphs.command == "nsys profile --cuda-graph-trace=node ..."
    data = as_json(report)["capture"]
    assert data["facts"]["graph_launches"] == 1 and data["hints"][0]["topic"] == "cuda_graphs"
    html = render_html(report, "now")
    assert 'id="capture"' in html and "--cuda-graph-trace=node" in html


def test_the_graph_level_sample_names_the_re_capture_flag_in_its_capture_section() -> None:
    report = build_report(open_trace(GRAPH_SAMPLE), GRAPH_SAMPLE)
    assert topics(report)[0] == "cuda_graphs"
    assert report.capture.facts.graph_launches == 8


def test_several_files_sum_their_facts_and_need_metrics_in_every_file(tmp_path: Path) -> None:
    a = report_of(Scenario(kernels=[Kernel(100, 200, NCCL)]), tmp_path, "a.sqlite")
    b = report_of(Scenario(kernels=[Kernel(100, 200, NCCL)] * 1), tmp_path, "b.sqlite")
    facts = summed([a.capture.facts, b.capture.facts])
    assert (facts.comm_kernels, facts.activities, facts.gpu_metrics) == (2, 2, False)
    capture = build_capture(facts, None, kineto=False)
    assert capture.hints[0].topic == "nvtx"
