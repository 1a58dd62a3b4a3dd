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
# Where a causal mask's diagonal starts when the query and key lengths differ (docs/metrics.md,
# "Compute efficiency"): PyTorch's is_causal is top-left (query i sees keys 0..i);
# FlashAttention-2 from 2.1 on, which PyTorch's flash ops run, bottom-right (the last query sees
# every key); the efficient ops' custom_mask_type says which (1 top-left, 2 bottom-right).
TOP_LEFT, BOTTOM_RIGHT, MASK_TYPE = "top-left", "bottom-right", "mask type"
# Attention: (op, layout of q/k/v, index of the first of q/k/v, index of the causal flag in
# the scalar inputs, backward, alignment of the causal mask). Layout "bhld": [batch, heads,
# length, dim] (the scaled_dot_product_* ops); "blhd": [batch, length, heads, dim] (the
# kernels' own ops).
ATTENTION_OPS: dict[str, tuple[str, int, int, bool, str]] = {
    "aten::scaled_dot_product_attention": ("bhld", 0, 5, False, TOP_LEFT),
    "aten::_scaled_dot_product_flash_attention": ("bhld", 0, 4, False, BOTTOM_RIGHT),
    "aten::_scaled_dot_product_efficient_attention": ("bhld", 0, 6, False, TOP_LEFT),
    "aten::_scaled_dot_product_cudnn_attention": ("bhld", 0, 6, False, TOP_LEFT),
    "aten::_flash_attention_forward": ("blhd", 0, 8, False, BOTTOM_RIGHT),
    "aten::_efficient_attention_forward": ("blhd", 0, 9, False, MASK_TYPE),
    "aten::_scaled_dot_product_flash_attention_backward": ("bhld", 1, 11, True, BOTTOM_RIGHT),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bhld", 1, 11, True, TOP_LEFT),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bhld", 1, 14, True, TOP_LEFT),
    "aten::_flash_attention_backward": ("blhd", 1, 11, True, BOTTOM_RIGHT),
    "aten::_efficient_attention_backward": ("blhd", 1, 14, True, MASK_TYPE),
}
SHAPED_OPS = GEMM_OPS + tuple(ATTENTION_OPS)

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
    """The matrix products over the (query, key) pairs the mask leaves: the forward's Q·Kᵀ
    (2·D per pair) and P·V (2·Dv); the backward's recomputed Q·Kᵀ, dV = Pᵀ·dO, dP = dO·Vᵀ,
    dQ = dS·K and dK = dSᵀ·Q (2·(3·D + 2·Dv) per pair). None when the mask's pairs are not
    known."""
    layout, first, causal_at, backward, alignment = ATTENTION_OPS[name]
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
    mask = _mask(concrete, causal_at, alignment)
    note = ""
    if mask is None:
        note, mask = "no causal flag recorded: counted unmasked", ""
    pairs = _pairs(lq, s, mask)
    if pairs is None:
        return None
    per_pair = 2 * (3 * d + 2 * dv) if backward else 2 * (d + dv)
    flops = float(b * h * pairs * per_pair)
    elements = b * h * lq * (d + dv) + b * hk * s * (dk + dv)  # q, o, k, v
    if backward:
        elements *= 2  # dO, dQ, dK, dV besides q, k, v, o
    return OpWork(flops, elements, dtype, note)


def _mask(concrete: Any, index: int, alignment: str) -> str | None:
    """The call's causal mask: '' none, TOP_LEFT, BOTTOM_RIGHT, 'unknown' (a mask type no
    alignment is known for); None when the flag is not recorded."""
    flag = _flag(concrete, index)
    if flag is None:
        return None
    if alignment == MASK_TYPE:  # custom_mask_type: 0 none, 1 top-left, 2 bottom-right
        return {0: "", 1: TOP_LEFT, 2: BOTTOM_RIGHT}.get(flag, "unknown")
    return alignment if flag else ""


def _pairs(lq: int, lk: int, mask: str) -> int | None:
    """The (query, key) pairs a mask leaves of lq x lk: top-left, query i sees keys 0..i,
    sum over i < lq of min(i + 1, lk); bottom-right, keys 0..i + lk - lq, the sum of
    clamp(i + lk - lq + 1, 0, lk). None for a mask of unknown alignment."""
    if not mask:
        return lq * lk
    if mask == TOP_LEFT:
        n = min(lq, lk)
        return n * (n + 1) // 2 + max(lq - lk, 0) * lk
    if mask == BOTTOM_RIGHT:
        if lq <= lk:
            return lq * lk - lq * (lq - 1) // 2
        return lk * (lk + 1) // 2  # the first lq - lk queries see no key
    return None


def _flag(concrete: Any, index: int) -> int | None:
    """A boolean or integer scalar input as the profiler recorded it ('True', 'False', '2'):
    1 or 0 for a boolean, the integer itself; None when not recorded."""
    if not isinstance(concrete, list) or len(concrete) <= index:
        return None
    value = concrete[index]
    if isinstance(value, str):
        value = value.strip().lower()
        if value in ("true", "false"):
            return int(value == "true")
        if value.isdigit():
            return int(value)
    return None
