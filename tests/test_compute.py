"""Compute efficiency: FLOPs from recorded shapes, peaks, MFU and the roofline, checked by hand
against synthetic Kineto traces (nsysreport.synth.kineto_ops) and one real trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.flops import op_work
from nsysreport.gate_metrics import metric_of
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.report_builder import build_report
from nsysreport.synth import Gpu, Kernel, Scenario, emit_nvtx_op, write_trace
from nsysreport.synth.kineto_ops import ShapedOp, ShapedTrace, write_shaped_trace
from nsysreport.synth.simulate import TensorParallelConfig, tensor_parallel
from nsysreport.user_facts import Facts, parse_model_shape

from conftest import SHARED_TRACES

BF16 = ["c10::BFloat16", "c10::BFloat16"]
FP32 = ["float", "float"]
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_tn"
H100_BF16 = 989.5  # NVIDIA H100 datasheet, SXM: 1,979 TFLOP/s BF16 with sparsity, halved
H100_HBM = 3350e9


def _report(tmp_path: Path, *steps: list[ShapedOp], **kw: Any) -> Report:
    facts = kw.pop("facts", None)
    path = write_shaped_trace(ShapedTrace(steps, **kw), tmp_path / "ops.json")
    return build_report(open_trace(path), path, facts=facts)


def mm(m: int, k: int, n: int, us: int, types: list[str] = BF16, kernel: str = GEMM) -> ShapedOp:
    return ShapedOp("aten::mm", [[m, k], [k, n]], types, kernel, us)


def test_a_gemm_of_known_shape_and_time_gives_exact_flops_and_mfu(tmp_path: Path) -> None:
    # 2 x 4096 x 8192 x 1024 FLOPs in 500 µs: 137.438953472 TFLOP/s.
    c = _report(tmp_path, [mm(4096, 8192, 1024, 500)]).compute
    assert c is not None
    (f,) = c.families
    assert f.flops == 2 * 4096 * 8192 * 1024
    assert f.tflops == pytest.approx(2 * 4096 * 8192 * 1024 / 500e-6 / 1e12)
    assert f.peak_tflops == H100_BF16 and f.dtype == "bf16"
    assert f.mfu_pct == pytest.approx(100 * f.tflops / H100_BF16)
    # Least traffic: A, B and C once, 2 bytes each.
    nbytes = 2 * (4096 * 8192 + 8192 * 1024 + 4096 * 1024)
    assert f.intensity == pytest.approx(f.flops / nbytes)
    assert f.ridge == pytest.approx(H100_BF16 * 1e12 / H100_HBM)
    assert f.bound == "compute"
    assert c.covered_pct == 100.0


def test_a_skinny_gemm_is_memory_bound(tmp_path: Path) -> None:
    # A decode GEMV: M = 1, intensity about 1 FLOP/byte, far left of the ridge (295).
    c = _report(tmp_path, [mm(1, 8192, 8192, 50)]).compute
    assert c is not None and c.families[0].bound == "memory"
    assert c.families[0].intensity == pytest.approx(
        2 * 8192 * 8192 / (2 * (8192 + 8192 * 8192 + 8192))
    )


@pytest.mark.parametrize(
    ("types", "kernel", "dtype", "peak"),
    [
        (BF16, GEMM, "bf16", 989.5),
        (["c10::Half", "c10::Half"], "sm90_xmma_gemm_f16f16", "fp16", 989.5),
        (FP32, "ampere_sgemm_128x64_nn", "fp32", 67.0),
        (FP32, "sm80_xmma_gemm_f32f32_tf32f32_f32_tn", "tf32", 494.5),
        (FP32, "cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4", "tf32", 494.5),
    ],
)
def test_the_dtype_picks_the_peak(
    tmp_path: Path, types: list[str], kernel: str, dtype: str, peak: float
) -> None:
    c = _report(tmp_path, [mm(256, 256, 256, 10, types, kernel)]).compute
    assert c is not None and c.families[0].dtype == dtype
    assert c.families[0].peak_tflops == peak


def test_fp8_scaled_mm_is_measured_against_the_fp8_peak(tmp_path: Path) -> None:
    op = ShapedOp(
        "aten::_scaled_mm",
        [[1024, 2048], [2048, 512], [], []],
        ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"],
        "sm90_xmma_gemm_e4m3e4m3_bf16f32",
        20,
    )
    c = _report(tmp_path, [op]).compute
    assert c is not None
    (f,) = c.families
    assert (f.dtype, f.peak_tflops, f.flops) == ("fp8", 1979.0, 2 * 1024 * 2048 * 512)


def test_attention_flops_follow_the_documented_formula(tmp_path: Path) -> None:
    q = [2, 16, 1024, 128]  # batch, heads, length, head dim
    causal = ["", "", "", "0.", "True", "False", ""]
    full = ["", "", "", "0.", "False", "False", ""]
    fwd = "aten::_scaled_dot_product_flash_attention"
    ops = [
        ShapedOp(fwd, [q, q, q], BF16, "flash_fwd_kernel", 100, full),
        ShapedOp(fwd, [q, q, q], BF16, "flash_fwd_kernel", 100, causal),
    ]
    c = _report(tmp_path, ops).compute
    assert c is not None
    # 4 B H L S D unmasked, half of it causal: 4 x 2 x 16 x 1024 x 1024 x 128 x 1.5 in all.
    assert c.families[0].flops == 4 * 2 * 16 * 1024 * 1024 * 128 * 1.5
    assert c.families[0].kernel_class == "attention"


def test_attention_backward_is_two_and_a_half_forwards_and_an_unrecorded_mask_is_noted() -> None:
    q = json.dumps([[1, 8, 512, 64]] * 4)  # grad_out, q, k, v
    bwd = op_work("aten::_scaled_dot_product_flash_attention_backward", q, None, None)
    assert bwd is not None
    assert bwd.flops == 2.5 * 4 * 8 * 512 * 512 * 64
    assert "counted unmasked" in bwd.note
    # [batch, length, heads, dim] for the kernels' own ops; grouped-query k/v with 2 heads.
    work = op_work(
        "aten::_flash_attention_forward",
        json.dumps([[1, 256, 8, 64], [1, 300, 2, 64], [1, 300, 2, 64]]),
        None,
        json.dumps(["", "", "", "", "", "", "", "0.", "True"]),
    )
    assert work is not None and work.flops == 4 * 8 * 256 * 300 * 64 / 2


@pytest.mark.parametrize(
    ("name", "dims", "flops"),
    [
        ("aten::linear", [[4, 10, 64], [32, 64], [32]], 2 * 40 * 64 * 32),
        ("aten::matmul", [[3, 1, 5, 6], [4, 6, 7]], 2 * 12 * 5 * 6 * 7),
        ("aten::matmul", [[6], [6, 7]], 2 * 6 * 7),
        ("aten::bmm", [[3, 5, 6], [3, 6, 7]], 2 * 3 * 5 * 6 * 7),
        ("aten::baddbmm", [[3, 5, 7], [3, 5, 6], [3, 6, 7]], 2 * 3 * 5 * 6 * 7),
        ("aten::addmm", [[7], [5, 6], [6, 7]], 2 * 5 * 6 * 7),
    ],
)
def test_each_gemm_signature(name: str, dims: list[list[int]], flops: int) -> None:
    work = op_work(name, json.dumps(dims), None, None)
    assert work is not None and work.flops == flops


@pytest.mark.parametrize(
    ("name", "dims"),
    [
        ("aten::mm", [[2, 3], [4, 5]]),  # K does not match
        ("aten::mm", [[2, 3, 4], [4, 5]]),  # mm takes matrices
        ("aten::relu", [[2, 3]]),  # no formula
        ("aten::bmm", [[2, 3], [3, 4]]),  # bmm takes batches
        ("aten::_flash_attention_forward", [[100, 8, 64]] * 3),  # packed variable length
        ("aten::mm", "not json"),
    ],
)
def test_ops_without_usable_shapes_are_unknown(name: str, dims: Any) -> None:
    assert op_work(name, dims if isinstance(dims, str) else json.dumps(dims), None, None) is None


def test_calls_whose_shapes_fit_no_formula_are_counted_unknown_not_guessed(tmp_path: Path) -> None:
    bad = ShapedOp("aten::mm", [[64, 32], [16, 8]], BF16, GEMM, 40)
    c = _report(tmp_path, [mm(64, 64, 64, 10), bad]).compute
    assert c is not None
    assert c.unknown_calls == 1 and c.calls == 1
    assert c.flops == 2 * 64**3
    # The unknown call's 40 µs of GEMM time is not covered: 10 of 50 µs.
    assert c.covered_pct == pytest.approx(20.0)


def test_no_shapes_no_section(tmp_path: Path) -> None:
    relu = ShapedOp("aten::relu", [[64, 64]], BF16, "elementwise_kernel", 10)
    assert _report(tmp_path, [relu]).compute is None


def test_an_unknown_gpu_has_no_mfu_until_the_user_gives_the_peak(tmp_path: Path) -> None:
    c = _report(tmp_path, [mm(512, 512, 512, 10)], gpu_name=None).compute
    assert c is not None and c.families[0].mfu_pct is None and c.step_mfu_pct is None
    assert "--peak-tflops" in c.peak_source
    assert c.sentence is not None and "not the peak" in c.sentence
    given = Facts(peak_tflops={"bf16": 100.0})
    c = _report(tmp_path, [mm(512, 512, 512, 10)], gpu_name=None, facts=given).compute
    assert c is not None and c.peak_source == "--peak-tflops"
    assert c.families[0].mfu_pct == pytest.approx(100 * 2 * 512**3 / 10e-6 / 1e12 / 100.0)


def test_step_and_span_mfu_divide_the_flops_by_their_time_at_peak(tmp_path: Path) -> None:
    r = _report(tmp_path, [mm(2048, 2048, 2048, 100)], [mm(2048, 2048, 2048, 100)] * 2)
    c = r.compute
    assert c is not None and len(c.steps) == 2
    flops = 2 * 2048**3
    for step, calls in zip(c.steps, (1, 2), strict=True):
        assert step.flops == calls * flops
        mine = next(s for s in r.steps if s.ordinal == step.ordinal)
        assert step.step_time_ns == mine.step_time_ns
        assert step.mfu_pct == pytest.approx(
            100 * calls * flops / (mine.step_time_ns * 1e-9 * H100_BF16 * 1e12)
        )
    span = r.gpus[0].span_ns
    assert c.span_mfu_pct == pytest.approx(100 * 3 * flops / (span * 1e-9 * H100_BF16 * 1e12))


def test_layers_get_their_calls(tmp_path: Path) -> None:
    a = ShapedOp("aten::mm", [[128, 128], [128, 128]], BF16, GEMM, 10, layer="layers.0")
    b = ShapedOp("aten::mm", [[256, 128], [128, 128]], BF16, GEMM, 10, layer="layers.1")
    c = _report(tmp_path, [a, b, a]).compute
    assert c is not None
    layers = {x.layer: x for x in c.layers}
    assert layers["layers.0"].calls == 2 and layers["layers.0"].flops == 2 * 2 * 128**3
    assert layers["layers.1"].flops == 2 * 256 * 128 * 128


def test_the_section_survives_the_json_round_trip(tmp_path: Path) -> None:
    r = _report(tmp_path, [mm(512, 512, 512, 10)])
    again = Report.from_json(json.loads(json.dumps(as_json(r))), "r.json")
    assert again.compute == r.compute


def test_the_gate_checks_mfu(tmp_path: Path) -> None:
    r = _report(tmp_path, [mm(4096, 4096, 4096, 1000)])
    metric, selector = metric_of("mfu_pct")
    assert r.compute is not None
    assert metric.compute(r, selector).value == r.compute.step_mfu_pct
    family, selector = metric_of("mfu_pct[xmma]")
    assert family.compute(r, selector).value == pytest.approx(r.compute.families[0].mfu_pct)
    assert family.compute(r, "nomatch").value is None


def test_the_terminal_and_the_page_say_it(tmp_path: Path) -> None:
    path = write_shaped_trace(ShapedTrace([[mm(4096, 4096, 4096, 1000)]]), tmp_path / "t.json")
    html = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(html)])
    assert result.exit_code == 0, result.output
    assert "Compute efficiency: MFU" in result.output
    page = html.read_text()
    assert 'id="compute"' in page and 'id="figure-roofline"' in page


def test_a_bad_peak_is_one_line(tmp_path: Path) -> None:
    path = write_shaped_trace(ShapedTrace([[mm(64, 64, 64, 1)]]), tmp_path / "t.json")
    result = CliRunner().invoke(app, ["report", str(path), "--peak-tflops", "bf17=3"])
    assert result.exit_code != 0
    assert "--peak-tflops 'bf17=3': expected DTYPE=TFLOPS" in result.output


def _independent_flops(path: Path) -> float:
    """Every known operator's FLOPs that launched a kernel, found without the loader: the
    innermost shaped operator around each kernel's launch on the launching thread."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    ops = [
        e
        for e in events
        if e.get("cat") == "cpu_op"
        and "Input Dims" in e.get("args", {})
        and op_work(e["name"], json.dumps(e["args"]["Input Dims"]), None, None)
    ]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    owners = set()
    for k in events:
        if k.get("cat") != "kernel" or "nccl" in k["name"].lower():
            continue
        launch = launches.get(k["args"].get("correlation"))
        if launch is None:
            continue
        around = [
            o
            for o in ops
            if o["tid"] == launch["tid"]
            and o["pid"] == launch["pid"]
            and o["ts"] <= launch["ts"]
            and launch["ts"] + launch["dur"] <= o["ts"] + o["dur"]
        ]
        if around:
            owners.add(id(max(around, key=lambda o: (o["ts"], -o["dur"]))))
    total = 0.0
    for o in ops:
        if id(o) in owners:
            work = op_work(o["name"], json.dumps(o["args"]["Input Dims"]), None, None)
            assert work is not None
            total += work.flops
    return total


def test_a_real_trace_reports_mfu_per_gemm_family_with_its_sources() -> None:
    path = SHARED_TRACES / "kineto" / "recsys128_sampled_rank-0.json.gz"
    given = Facts(peak_tflops={"tf32": 156.0, "fp32": 19.5})  # A100: the kernels are sm80
    c = build_report(open_trace(path), path, facts=given).compute
    assert c is not None
    assert c.flops == pytest.approx(_independent_flops(path))
    gemms = [f for f in c.families if f.kernel_class == "gemm"]
    assert gemms and all(f.mfu_pct is not None for f in gemms)
    assert all(f.source == "shapes recorded by the PyTorch profiler" for f in gemms)
    assert {f.dtype for f in gemms} == {"tf32", "fp32"}


def test_without_shapes_model_flops_per_layer_come_from_model(tmp_path: Path) -> None:
    from_sim = TensorParallelConfig(tp=2, steps=2, layers_simulated=2, phase="prefill")
    path = write_trace(tensor_parallel(from_sim), tmp_path / "tp2.sqlite")
    shape = parse_model_shape("hidden=8192,tokens=4096,heads=64,kv_heads=8,ffn=28672,gated=1")
    assert shape is not None
    # Per layer and token: Q, K, V, O 2·h·(2h + 2·1024), MLP 3 matrices 2·h·28672.
    per_layer = 4096 * (2 * 8192 * (2 * 8192 + 2 * 1024) + 3 * 2 * 8192 * 28672)
    assert shape.layer_flops == per_layer
    r = build_report(open_trace(path), path, facts=Facts(model=shape))
    c = r.compute
    assert c is not None and c.flops_source == "model" and c.families == ()
    rows = [x for x in r.layers if x.layer != "(outside layers)"]
    for x in c.layers:
        mine = [y for y in rows if y.layer == x.layer]
        # Each GPU does half of each occurrence (TP = 2, the group of its all-reduces).
        assert x.flops == sum(y.occurrences for y in mine) * per_layer / 2
        time = sum(y.gpu_time_ns or 0 for y in mine)
        assert x.mfu_pct == pytest.approx(100 * x.flops / (time * 1e-9 * H100_BF16 * 1e12))
    spans = sum(g.span_ns for g in r.gpus)
    assert c.span_mfu_pct == pytest.approx(100 * c.flops / (spans * 1e-9 * H100_BF16 * 1e12))
    assert c.sentence is not None and "from --model's FLOPs per layer" in c.sentence


def test_recorded_shapes_win_over_the_model(tmp_path: Path) -> None:
    shape = parse_model_shape("hidden=512,tokens=512")
    c = _report(tmp_path, [mm(512, 512, 512, 10)], facts=Facts(model=shape)).compute
    assert c is not None and c.flops_source == "shapes"


def test_compare_shows_each_configuration_s_mfu(tmp_path: Path) -> None:
    fast = write_shaped_trace(ShapedTrace([[mm(4096, 4096, 4096, 500)]]), tmp_path / "a.json")
    slow = write_shaped_trace(ShapedTrace([[mm(4096, 4096, 4096, 1000)]]), tmp_path / "b.json")
    out = tmp_path / "c.json"
    result = CliRunner().invoke(
        app, ["compare", str(fast), str(slow), "-o", str(tmp_path / "c.html"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    configs = json.loads(out.read_text())["configs"]
    reports = [_report(tmp_path, [mm(4096, 4096, 4096, us)]) for us in (500, 1000)]
    assert [c["mfu_pct"] for c in configs] == [
        pytest.approx(r.compute.step_mfu_pct) for r in reports if r.compute
    ]
    assert "MFU" in result.output


def test_rocm_tensile_gemms_are_gemms_and_measured_against_the_mi300x_peak() -> None:
    path = SHARED_TRACES / "kineto" / "mi300_rccl_rank0.json.gz"
    c = build_report(open_trace(path), path).compute
    assert c is not None and c.gpu_model == "Instinct MI300X"
    assert {f.kernel_class for f in c.families} == {"gemm"}
    assert all(f.family.startswith("Cijk_") and f.peak_tflops == 1307.4 for f in c.families)
    assert c.covered_pct is not None and c.covered_pct > 0


def test_an_nsys_emit_nvtx_trace_with_shapes_gets_flops_and_the_kernel_name_s_dtype(
    tmp_path: Path,
) -> None:
    # One 4096x8192 @ 8192x1024 GEMM of 500 µs under its emit_nvtx range, one without a range.
    gemm = Kernel(1_000_000, 1_500_000, GEMM, launch=(900_000, 910_000))
    other = Kernel(2_000_000, 2_100_000, GEMM, launch=(1_900_000, 1_910_000))
    scenario = Scenario(
        gpus=[Gpu(0)],
        kernels=[gemm, other],
        nvtx=[emit_nvtx_op(gemm, "aten::mm", [[4096, 8192], [8192, 1024]], seq=3, op_id=7)],
    )
    path = write_trace(scenario, tmp_path / "emit.sqlite")
    c = build_report(open_trace(path), path).compute
    assert c is not None
    (f,) = c.families
    assert f.flops == 2 * 4096 * 8192 * 1024 and f.time_ns == 500_000
    assert f.dtype == "bf16" and f.peak_tflops == H100_BF16
    assert f.source == "shapes recorded by emit_nvtx; dtype from the kernel name"
    # The GEMM outside any op range has FLOPs no trace records: 500 of 600 µs are covered.
    assert c.covered_pct == pytest.approx(100 * 500 / 600)


def test_fbgemm_embedding_kernels_are_not_gemms() -> None:
    path = SHARED_TRACES / "kineto" / "recsys128_sampled_rank-0.json.gz"
    con = open_trace(path)
    named = con.execute(
        "SELECT DISTINCT name FROM kernel WHERE class = 'gemm' AND name LIKE '%embedding%'"
    ).fetchall()
    assert named == []
    # Their GEMMs proper still are: CUTLASS's TF32 tensor-op kernels and cuBLAS's sgemm.
    (gemms,) = con.execute(
        "SELECT count(*) FROM kernel WHERE class = 'gemm' AND name LIKE '%s1688gemm%'"
    ).fetchone() or (0,)
    assert gemms > 0
