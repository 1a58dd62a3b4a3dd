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
from nsysreport.sections.compute import Compute
from nsysreport.synth import (
    Gpu,
    Kernel,
    NvtxRange,
    Scenario,
    emit_nvtx_op,
    emit_nvtx_text,
    write_trace,
)
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
    """The report of a shaped trace of `steps`; no kernel family may run above its roofline
    (peak, or intensity x HBM bandwidth left of the ridge) unless `above_roof` says one does."""
    facts = kw.pop("facts", None)
    above_roof = kw.pop("above_roof", False)
    path = write_shaped_trace(ShapedTrace(steps, **kw), tmp_path / "ops.json")
    report = build_report(open_trace(path), path, facts=facts)
    if not above_roof:
        assert_under_roof(report.compute)
    return report


def assert_under_roof(c: Compute | None) -> None:
    for f in c.families if c else ():
        assert not f.above_roof, f"{f.family}: {f.tflops} TFLOP/s over its roof {f.roof_tflops}"


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
    # 2 B H (D + Dv) per (query, key) pair: 1024 x 1024 pairs unmasked, under the causal mask
    # query i sees keys 0..i, 1 + 2 + ... + 1024 = 1024 x 1025 / 2 = 524,800 pairs.
    assert c.families[0].flops == 2 * 2 * 16 * 256 * (1024 * 1024 + 524_800)
    assert c.families[0].kernel_class == "attention"


def test_attention_backward_is_two_and_a_half_forwards_and_an_unrecorded_mask_is_noted() -> None:
    q = json.dumps([[1, 8, 512, 64]] * 4)  # grad_out, q, k, v
    bwd = op_work("aten::_scaled_dot_product_flash_attention_backward", q, None, None)
    assert bwd is not None
    assert bwd.flops == 2.5 * 4 * 8 * 512 * 512 * 64
    assert "counted unmasked" in bwd.note
    # [batch, length, heads, dim] for the kernels' own ops; grouped-query k/v with 2 heads.
    # FlashAttention's causal mask is bottom-right: query i of 256 sees keys 0..i + 44 of 300,
    # 45 + 46 + ... + 300 = 256 x 300 - 256 x 255 / 2 = 44,160 pairs, 2 x (64 + 64) FLOPs each.
    work = op_work(
        "aten::_flash_attention_forward",
        json.dumps([[1, 256, 8, 64], [1, 300, 2, 64], [1, 300, 2, 64]]),
        None,
        json.dumps(["", "", "", "", "", "", "", "0.", "True"]),
    )
    assert work is not None and work.flops == 8 * 44_160 * 2 * 128


SDPA_BACKWARDS = {
    # op: the index of is_causal in its scalar inputs (native_functions.yaml)
    "aten::_scaled_dot_product_flash_attention_backward": 11,
    "aten::_scaled_dot_product_efficient_attention_backward": 11,
    "aten::_scaled_dot_product_cudnn_attention_backward": 14,
}


@pytest.mark.parametrize("op", sorted(SDPA_BACKWARDS))
def test_attention_backward_counts_its_own_products_when_v_has_another_head_size(op: str) -> None:
    # D = 192 for Q and K, Dv = 128 for V (DeepSeek's MLA): per (query, key) pair the backward
    # recomputes Q·Kᵀ (2·192), and does dV = Pᵀ·dO (2·128), dP = dO·Vᵀ (2·128), dQ = dS·K
    # (2·192) and dK = dSᵀ·Q (2·192): 2 x (3 x 192 + 2 x 128) = 1,664 FLOPs, over 1 x 8 x
    # 512 x 512 pairs: 3,489,660,928. 2.5 forwards, 2.5 x 2 x (192 + 128) = 1,600 per pair,
    # were 3.8 % short.
    grad_out, q, k, v = [1, 8, 512, 128], [1, 8, 512, 192], [1, 8, 512, 192], [1, 8, 512, 128]
    flags = [""] * 15
    flags[SDPA_BACKWARDS[op]] = "False"
    work = op_work(op, json.dumps([grad_out, q, k, v]), None, json.dumps(flags))
    assert work is not None and work.flops == 8 * 512 * 512 * 1_664 == 3_489_660_928
    assert work.note == ""


@pytest.mark.parametrize(
    ("op", "flags", "pairs"),
    [
        # PyTorch's is_causal, top-left (torch.nn.attention.bias.causal_upper_left): of a 3 x 4
        # mask [[1,0,0,0],[1,1,0,0],[1,1,1,0]], 6 pairs; of 4 x 3, 1 + 2 + 3 + 3 = 9.
        ("aten::scaled_dot_product_attention", {5: "True"}, {(3, 4): 6, (4, 3): 9}),
        ("aten::_scaled_dot_product_efficient_attention", {6: "True"}, {(3, 4): 6, (4, 3): 9}),
        ("aten::_scaled_dot_product_cudnn_attention", {6: "True"}, {(3, 4): 6, (4, 3): 9}),
        # FlashAttention-2 (2.1+), bottom-right (causal_lower_right): of 3 x 4
        # [[1,1,0,0],[1,1,1,0],[1,1,1,1]], 9 pairs; of 4 x 3 the first query sees none, 6.
        ("aten::_scaled_dot_product_flash_attention", {4: "True"}, {(3, 4): 9, (4, 3): 6}),
        # custom_mask_type 1 is top-left, 2 bottom-right; 0 none.
        ("aten::_efficient_attention_forward", {9: "1"}, {(3, 4): 6, (4, 3): 9}),
        ("aten::_efficient_attention_forward", {9: "2"}, {(3, 4): 9, (4, 3): 6}),
        ("aten::_efficient_attention_forward", {9: "0"}, {(3, 4): 12, (4, 3): 12}),
        # 256 queries, 1024 keys: top-left 256 x 257 / 2 = 32,896; bottom-right
        # 256 x 1024 - 256 x 255 / 2 = 229,504.
        ("aten::scaled_dot_product_attention", {5: "True"}, {(256, 1024): 32_896}),
        ("aten::_flash_attention_forward", {8: "True"}, {(256, 1024): 229_504}),
    ],
)
def test_a_causal_mask_with_other_query_and_key_lengths_counts_the_pairs_it_leaves(
    op: str, flags: dict[int, str], pairs: dict[tuple[int, int], int]
) -> None:
    concrete = [""] * 12
    for index, value in flags.items():
        concrete[index] = value
    blhd = op in ("aten::_flash_attention_forward", "aten::_efficient_attention_forward")
    for (lq, lk), count in pairs.items():
        q, k = ([2, lq, 4, 64], [2, lk, 4, 64]) if blhd else ([2, 4, lq, 64], [2, 4, lk, 64])
        work = op_work(op, json.dumps([q, k, k]), None, json.dumps(concrete))
        # 2 x (64 + 64) FLOPs a pair, 2 x 4 heads.
        assert work is not None and work.flops == 8 * count * 256


def test_a_mask_type_of_unknown_alignment_is_unknown_not_guessed() -> None:
    concrete = [""] * 9 + ["3"]  # custom_mask_type 3: no alignment PyTorch defines
    q = [1, 128, 4, 64]
    work = op_work(
        "aten::_efficient_attention_forward", json.dumps([q] * 3), None, json.dumps(concrete)
    )
    assert work is None


COPY = "void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>(int)"
BHLD = [4, 16, 256, 64]  # batch, heads, length, head dim
BHDL = [4, 16, 64, 256]


def nested_matmul() -> ShapedOp:
    """TimeSformer's attention scores: aten::matmul of [4, 16, 256, 64] by [4, 16, 64, 256]
    makes its inputs contiguous with two copies (aten::copy_, 1 µs each, no formula), then
    calls aten::bmm of [64, 256, 64] by [64, 64, 256], one 8 µs GEMM. Both calls have the
    formula for the same 2 x 64 x 256 x 64 x 256 = 2^29 FLOPs."""
    copies = tuple(ShapedOp("aten::copy_", [BHLD, BHLD], BF16, COPY, 1, gap_us=1) for _ in "ab")
    bmm = ShapedOp("aten::bmm", [[64, 256, 64], [64, 64, 256]], BF16, GEMM, 8, gap_us=1)
    return ShapedOp("aten::matmul", [BHLD, BHDL], BF16, "", 0, inner=(*copies, bmm))


def test_an_op_s_flops_count_once_on_the_kernels_of_the_innermost_op_with_a_formula(
    tmp_path: Path,
) -> None:
    r = _report(tmp_path, [nested_matmul()])
    c = r.compute
    assert c is not None
    # One call, bmm's, on its GEMM: 2^29 FLOPs in 8 µs, 67.108864 TFLOP/s. The matmul's own
    # copies carry none: counted on them too (as before), the FLOPs were 2^30, and the copy
    # family ran at 2^29 / 2 µs = 268.4 TFLOP/s, above its roof (intensity 2^29 FLOPs over
    # 2 x (64 x (256 x 64 + 256 x 256) + 64 x 64 x 256) = 12,582,912 bytes, 42.67 FLOP/byte,
    # x 3.35 TB/s: 142.9 TFLOP/s).
    assert c.flops == 2**29 and c.calls == 1 and c.unknown_calls == 0
    (f,) = c.families
    assert (f.family, f.ops, f.time_ns) == (GEMM, "aten::bmm", 8_000)
    assert f.tflops == pytest.approx(2**29 / 8e-6 / 1e12)
    assert f.intensity == pytest.approx(2**29 / 12_582_912)
    assert f.roof_tflops == pytest.approx(2**29 / 12_582_912 * H100_HBM / 1e12, rel=1e-3)
    # The step's GPU window runs from the first copy's start to the GEMM's end: 1016 to
    # 1038 µs (kineto_ops: each call's kernel starts 5 µs after the call, 1 µs gaps), 22 µs.
    (step,) = c.steps
    assert step.flops == 2**29 and step.step_time_ns == 22_000
    assert c.step_mfu_pct == pytest.approx(100 * 2**29 / (22e-6 * H100_BF16 * 1e12))
    assert [i.ledger_class for i in r.quality.items] == []


def test_an_emit_nvtx_op_around_another_counts_its_flops_once(tmp_path: Path) -> None:
    # The same matmul as emit_nvtx records it: its range holds a copy's launch and the range
    # of the bmm that launches the GEMM.
    copy = Kernel(1_000_000, 1_001_000, COPY, launch=(900_000, 900_010))
    gemm = Kernel(1_002_000, 1_010_000, GEMM, launch=(950_000, 950_010))
    matmul = NvtxRange(899_000, 960_000, emit_nvtx_text("aten::matmul", [BHLD, BHDL], 1, 1))
    bmm = emit_nvtx_op(gemm, "aten::bmm", [[64, 256, 64], [64, 64, 256]], seq=2, op_id=2)
    scenario = Scenario(gpus=[Gpu(0)], kernels=[copy, gemm], nvtx=[matmul, bmm])
    path = write_trace(scenario, tmp_path / "nested.sqlite")
    c = build_report(open_trace(path), path).compute
    assert_under_roof(c)
    assert c is not None and c.flops == 2**29 and c.calls == 1
    (f,) = c.families
    assert (f.family, f.time_ns) == (GEMM, 8_000)


def test_attention_backward_and_a_causal_mask_of_other_lengths_in_a_trace(
    tmp_path: Path,
) -> None:
    # A decode-style causal forward, 256 new queries over 1,024 keys, run by the efficient
    # kernel (PyTorch's is_causal: top-left, 256 x 257 / 2 = 32,896 pairs), and its backward
    # with D = 192, Dv = 128 (2 x (3 x 192 + 2 x 128) = 1,664 FLOPs a pair), 1 x 8 heads.
    q, k = [1, 8, 256, 192], [1, 8, 1024, 192]
    v, o = [1, 8, 1024, 128], [1, 8, 256, 128]
    forward = ShapedOp(
        "aten::_scaled_dot_product_efficient_attention",
        [q, k, v, []],
        BF16,
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80",
        10,
        ["", "", "", "", "True", "0.", "True"],
    )
    backward = ShapedOp(
        "aten::_scaled_dot_product_efficient_attention_backward",
        [o, q, k, v, [], o, [1, 8, 256], [], []],
        BF16,
        "fmha_cutlassB_bf16_aligned_64x64_k128_sm80",
        40,
        ["", "", "", "", "", "", "", "", "", "0.", "", "True"],
    )
    c = _report(tmp_path, [forward, backward]).compute
    assert c is not None
    flops = {f.ops: f.flops for f in c.families}
    # Forward: 2 x (192 + 128) = 640 FLOPs a pair: 8 x 32,896 x 640 = 168,427,520.
    assert flops["aten::_scaled_dot_product_efficient_attention"] == 168_427_520
    # Backward: 8 x 32,896 x 1,664 = 437,911,552.
    assert flops["aten::_scaled_dot_product_efficient_attention_backward"] == 437_911_552
    assert c.flops == 168_427_520 + 437_911_552


def test_a_family_above_its_roof_is_a_data_quality_line(tmp_path: Path) -> None:
    # A GEMV of 2 x 8192^2 FLOPs over 2 x (8192 + 8192^2 + 8192) bytes, about 1 FLOP/byte:
    # its roof is about 3.35 TFLOP/s (the HBM's 3.35 TB/s), but it ran at 134 in 1 µs.
    r = _report(tmp_path, [mm(1, 8192, 8192, 1)], above_roof=True)
    assert r.compute is not None
    (f,) = r.compute.families
    assert f.above_roof and f.tflops == pytest.approx(134.217728)
    assert f.roof_tflops == pytest.approx(H100_HBM / 1e12 * 8192**2 / (8192 + 8192**2 + 8192))
    (item,) = r.quality.items
    assert item.sentence == (
        f"1 operator call with FLOP/s above the roofline of kernel family {GEMM}: "
        "counted as the shapes give"
    )
    assert (item.ledger_class, item.treatment, item.file) == (
        "above_roof",
        "counted as the shapes give",
        "ops.json",
    )
    again = Report.from_json(json.loads(json.dumps(as_json(r))), "r.json")
    assert again.quality == r.quality


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


def test_mfu_above_a_peak_given_too_low_survives_the_json_round_trip(tmp_path: Path) -> None:
    # 2 x 512^3 FLOPs in 10 us = 26.8 TFLOP/s against a given peak of 10: MFU 268 %, which the
    # report holds as measured (and the roof check names); its JSON must read back.
    given = Facts(peak_tflops={"bf16": 10.0})
    r = _report(tmp_path, [mm(512, 512, 512, 10)], gpu_name=None, facts=given, above_roof=True)
    assert r.compute is not None and r.compute.families[0].above_roof
    assert r.compute.families[0].mfu_pct == pytest.approx(100 * 2 * 512**3 / 10e-6 / 1e12 / 10)
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
    innermost shaped operator around each kernel's launch on the launching thread, unless
    another shaped operator runs inside it (its FLOPs are counted there)."""
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
    parents = {
        id(o)
        for o in ops
        for inner in ops
        if inner is not o
        and (inner["pid"], inner["tid"]) == (o["pid"], o["tid"])
        and o["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= o["ts"] + o["dur"]
        and (inner["ts"], -inner["dur"]) > (o["ts"], -o["dur"])
    }
    total = 0.0
    for o in ops:
        if id(o) in owners - parents:
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
