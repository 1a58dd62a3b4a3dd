"""FLOPs and bytes of one framework operator call, from the input shapes the trace records.

Only operators whose work follows from their shapes alone have a formula: matrix products and
attention. Every other operator, and any call whose shapes do not fit its signature, is
unknown (None), never guessed. FLOPs count a multiply-add as two; bias adds and epilogues are
not counted (they are O(M·N) against O(M·N·K)). Bytes are the least traffic the operator can
make, each input read once and the output written once, in its element size: what the
roofline's arithmetic intensity divides by. docs/metrics.md "Compute efficiency" has each
formula with its source.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

# Matrix products: (batch dims, M, K, N) from the shapes; operands from the signatures in
# PyTorch's native_functions.yaml.
GEMM_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::linear",
    "aten::matmul",
    "aten::_scaled_mm",
)
# Attention: (op, layout of q/k/v, index of the first of q/k/v, index of the causal flag in
# the scalar inputs, backward). Layout "bhld": [batch, heads, length, dim] (the
# scaled_dot_product_* ops); "blhd": [batch, length, heads, dim] (the kernels' own ops).
ATTENTION_OPS: dict[str, tuple[str, int, int, bool]] = {
    "aten::scaled_dot_product_attention": ("bhld", 0, 5, False),
    "aten::_scaled_dot_product_flash_attention": ("bhld", 0, 4, False),
    "aten::_scaled_dot_product_efficient_attention": ("bhld", 0, 6, False),
    "aten::_scaled_dot_product_cudnn_attention": ("bhld", 0, 6, False),
    "aten::_flash_attention_forward": ("blhd", 0, 8, False),
    "aten::_efficient_attention_forward": ("blhd", 0, 9, False),
    "aten::_scaled_dot_product_flash_attention_backward": ("bhld", 1, 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bhld", 1, 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bhld", 1, 14, True),
    "aten::_flash_attention_backward": ("blhd", 1, 11, True),
    "aten::_efficient_attention_backward": ("blhd", 1, 14, True),
}
SHAPED_OPS = GEMM_OPS + tuple(ATTENTION_OPS)

# The backward pass of attention does five matrix products of the forward's two (dQ, dK, dV,
# and the recomputed scores and dP): 2.5 times the forward's FLOPs (Dao, FlashAttention-2,
# 2023, section 4.1; the FlashAttention benchmarks count it so).
ATTENTION_BACKWARD = 2.5

# PyTorch's dtype names (the profiler's `Input type`) to the dtypes peaks are listed by.
DTYPES = {
    "float": "fp32",
    "double": "fp64",
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "c10::Float4_e2m1fn_x2": "fp4",
}
ELEMENT_BYTES = {"fp64": 8.0, "fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0,
                 "fp4": 0.5}  # fmt: skip

# An FP32 operator's kernel that runs on tensor cores in TF32: cuBLAS's `tf32` names, CUTLASS's
# `s1688gemm` (the m16n8k8 TF32 MMA, `cutlass_80_tensorop_s1688gemm_*`).
TF32_KERNEL = re.compile(r"tf32|s1688", re.IGNORECASE)
# A kernel name's dtype, for traces that record shapes but no dtypes (emit_nvtx) and to tell
# TF32 tensor-core GEMMs from FP32 ones: cuBLAS/CUTLASS names spell the element type
# (`ampere_bf16_s16816gemm_bf16_...`, `sm80_xmma_gemm_f32f32_tf32f32_f32_...`, `..._e4m3...`).
# First match wins; TF32 before FP32 because TF32 kernels name FP32 operands too.
NAME_DTYPES = (
    ("fp8", re.compile(r"e4m3|e5m2|fp8", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16", re.IGNORECASE)),
    ("fp16", re.compile(r"f16|fp16|half|hgemm", re.IGNORECASE)),
    ("tf32", TF32_KERNEL),
    ("fp32", re.compile(r"sgemm|f32", re.IGNORECASE)),
)


@dataclass(frozen=True, slots=True)
class OpWork:
    """What one call does: FLOPs, the least elements it moves (bytes once the element size is
    known), its dtype (None: not recorded) and a note on what the count assumes ('' when
    nothing)."""

    flops: float
    elements: int
    dtype: str | None
    note: str = ""


def op_work(name: str, dims: str | None, types: str | None, concrete: str | None) -> OpWork | None:
    """One call's work, from the trace's text fields (JSON, as op_call keeps them); None when
    the operator has no formula or its shapes do not fit it."""
    shapes = _shapes(dims)
    if shapes is None:
        return None
    dtype = _dtype(_json(types))
    if name in GEMM_OPS:
        return _gemm(name, shapes, dtype)
    if name in ATTENTION_OPS:
        return _attention(name, shapes, _json(concrete), dtype)
    return None


def dtype_of_kernel(kernel_name: str) -> str | None:
    """The dtype a GEMM or attention kernel's name spells, None when it spells none."""
    return next((d for d, pattern in NAME_DTYPES if pattern.search(kernel_name)), None)


def math_dtype(op_dtype: str | None, kernel_name: str) -> tuple[str | None, bool]:
    """The dtype whose peak a call is measured against, and whether the kernel's name gave
    it: the operator's recorded dtype (FP32 run as TF32 when the kernel says so), else the
    kernel name's."""
    if op_dtype == "fp32" and TF32_KERNEL.search(kernel_name):
        return "tf32", False
    if op_dtype is not None:
        return op_dtype, False
    named = dtype_of_kernel(kernel_name)
    return named, named is not None


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _shapes(dims: str | None) -> list[list[int]] | None:
    value = _json(dims)
    if not isinstance(value, list):
        return None
    shapes = []
    for shape in value:
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            return None
        shapes.append(shape)
    return shapes


def _dtype(types: Any) -> str | None:
    """The first input's dtype (the operands share it; _scaled_mm's scales come after them)."""
    if isinstance(types, list) and types and isinstance(types[0], str) and types[0] in DTYPES:
        return DTYPES[types[0]]
    return None


def _gemm(name: str, shapes: list[list[int]], dtype: str | None) -> OpWork | None:
    """M, K, N and the batch from the operands; the output is batch x M x N."""
    operands = {
        "aten::addmm": shapes[1:3],
        "aten::baddbmm": shapes[1:3],
    }.get(name, shapes[:2])
    if len(operands) != 2:
        return None
    a, b = operands
    if name == "aten::linear":
        # input [..., K], weight [N, K]: the weight is used transposed.
        if len(a) < 1 or len(b) != 2 or a[-1] != b[1]:
            return None
        batch, m, k, n = math.prod(a[:-1]), 1, a[-1], b[0]
    else:
        shape = _matmul(a, b, batched=name in ("aten::bmm", "aten::baddbmm"))
        if shape is None or (
            name in ("aten::mm", "aten::addmm", "aten::_scaled_mm") and (len(a) != 2 or len(b) != 2)
        ):
            return None
        batch, m, k, n = shape
    flops = 2.0 * batch * m * k * n
    elements = batch * (m * k + m * n) + _b_elements(a, b, name, k, n)
    return OpWork(flops, elements, dtype)


def _b_elements(a: list[int], b: list[int], name: str, k: int, n: int) -> int:
    """The second operand's elements (a broadcast weight is read once, not per batch)."""
    if name == "aten::linear":
        return k * n
    return math.prod(b)


def _matmul(a: list[int], b: list[int], batched: bool) -> tuple[int, int, int, int] | None:
    """torch.matmul's (batch, M, K, N): 1-D operands are a row or a column, batch dims
    broadcast; None when the shapes do not multiply."""
    if not a or not b or (batched and (len(a) != 3 or len(b) != 3)):
        return None
    m, ka = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
    kb, n = (b[0], 1) if len(b) == 1 else (b[-2], b[-1])
    if ka != kb:
        return None
    batch_a, batch_b = a[:-2], b[:-2]
    batch = []
    for x, y in zip(
        [1] * (len(batch_b) - len(batch_a)) + batch_a,
        [1] * (len(batch_a) - len(batch_b)) + batch_b,
        strict=True,
    ):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    return math.prod(batch), m, ka, n


def _attention(
    name: str, shapes: list[list[int]], concrete: Any, dtype: str | None
) -> OpWork | None:
    """4·B·H·L·S·D for the forward (Q·Kᵀ and P·V, each 2·B·H·L·S·D, with D of V for the
    second), half of it under a causal mask, 2.5 times it for the backward."""
    layout, first, causal_at, backward = ATTENTION_OPS[name]
    if len(shapes) < first + 3:
        return None
    q, k, v = shapes[first : first + 3]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None  # variable-length (packed) attention: the lengths are not in the shapes
    if layout == "bhld":
        (b, h, lq, d), (_, hk, s, dk), (_, _, sv, dv) = q, k, v
    else:
        (b, lq, h, d), (_, s, hk, dk), (_, sv, _, dv) = q, k, v
    if d != dk or s != sv or k[0] != b or v[0] != b or hk == 0 or h % hk:
        return None
    flops = 2.0 * b * h * lq * s * (d + dv)
    causal = _flag(concrete, causal_at)
    note = ""
    if causal:
        flops /= 2  # the masked half is skipped (FlashAttention's count)
    elif causal is None:
        note = "no causal flag recorded: counted unmasked"
    if backward:
        flops *= ATTENTION_BACKWARD
    elements = b * h * lq * (d + dv) + b * hk * s * (dk + dv)  # q, o, k, v
    if backward:
        elements *= 2  # dO, dQ, dK, dV besides q, k, v, o
    return OpWork(flops, elements, dtype, note)


def _flag(concrete: Any, index: int) -> bool | None:
    """A boolean (or mask-type integer) scalar input as the profiler recorded it ('True',
    'False', '1'), None when not recorded."""
    if not isinstance(concrete, list) or len(concrete) <= index:
        return None
    value = concrete[index]
    if isinstance(value, str):
        value = value.strip().lower()
        if value in ("true", "false"):
            return value == "true"
        if value.isdigit():
            return int(value) != 0
    return None
