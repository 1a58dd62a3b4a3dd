"""The layer chart when the layers hold a tiny share of the time: it says so and draws them on
their own scale (overview.TINY_LAYER_SHARE_PCT)."""

from __future__ import annotations

import re
from pathlib import Path

from nsysreport.load import open_trace
from nsysreport.model import Report
from nsysreport.render import pictures, render_html
from nsysreport.report_builder import build_report
from nsysreport.sections.layers import OUTSIDE
from nsysreport.sections.overview import TINY_LAYER_SHARE_PCT
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

from conftest import real_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"


def one_layer(tmp_path: Path, layer_ns: int, outside_ns: int) -> Report:
    """One GPU: a GEMM of `layer_ns` launched inside `layers.0` [0, 100), then one of
    `outside_ns` launched outside any layer."""
    start = 1000 + layer_ns
    scenario = Scenario(
        kernels=[
            Kernel(1000, start, GEMM, launch=(10, 12)),
            Kernel(start, start + outside_ns, GEMM, launch=(200, 202)),
        ],
        nvtx=[NvtxRange(0, 100, "layers.0")],
    )
    path = write_trace(scenario, tmp_path / "t.sqlite")
    return build_report(open_trace(path), path)


def caption(html: str) -> str:
    found = re.search(
        r'<figure class="chart" id="figure-layers">.*?<figcaption>(.*?)</figcaption>', html, re.S
    )
    assert found is not None
    return " ".join(found.group(1).split())


def test_layers_under_the_threshold_are_drawn_alone_and_the_caption_says_why(
    tmp_path: Path,
) -> None:
    # 10 ns in the layer next to 9,990 ns outside: 0.1% of 10 µs, under 1%.
    report = one_layer(tmp_path, 10, 9_990)
    facts = report.overview.layers
    assert facts is not None and TINY_LAYER_SHARE_PCT == 1.0
    assert (facts.inside_ns, facts.total_ns, facts.inside_pct, facts.tiny) == (
        10,
        10_000,
        0.1,
        True,
    )
    assert [x.layer for x in facts.layers] == ["layers.0", OUTSIDE]
    assert [x.layer for x in facts.drawn] == ["layers.0"]
    text = caption(render_html(report, "now"))
    assert text.startswith("Compute and exposed communication of each of the 1 layers")
    assert (
        "The 1 layer holds 10 ns of 10 µs per GPU (0.1%); the rest is outside layer ranges" in text
    )
    assert "layer ranges only, (outside layers) left out" in pictures(report)["layers"]


def test_layers_over_the_threshold_are_drawn_beside_the_time_outside_them(tmp_path: Path) -> None:
    report = one_layer(tmp_path, 5_000, 5_000)
    facts = report.overview.layers
    assert facts is not None and (facts.inside_pct, facts.tiny) == (50.0, False)
    assert [x.layer for x in facts.drawn] == ["layers.0", OUTSIDE]
    assert "outside layer ranges" not in caption(render_html(report, "now"))
    assert "left out" not in pictures(report)["layers"]


def test_a_real_pytorch_trace_with_tiny_layers_says_how_little_they_hold() -> None:
    path = real_trace("mfu_2gpu_before.sqlite")
    report = build_report(open_trace(path), path)
    facts = report.overview.layers
    assert facts is not None and facts.tiny
    inside = [x for x in report.layers_across if x.layer != OUTSIDE]
    assert facts.inside_count == len(inside) == 17
    assert facts.inside_ns == sum(x.compute_mean_ns + x.exposed_comm_mean_ns for x in inside)
    assert facts.inside_pct is not None and facts.inside_pct < 1.0
    assert "The 17 layers hold 2.22 ms of 268 ms per GPU (0.8%)" in caption(
        render_html(report, "now")
    )
