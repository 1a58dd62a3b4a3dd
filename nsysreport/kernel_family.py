"""A kernel's family: the name that groups its instantiations, read from its demangled name.

A demangled kernel name is `[return type] qualified::name<template arguments>(parameters)`,
and every part but the name can hold brackets, spaces and commas:
`std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, ...>(...)`,
`void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, ...>(...)`,
`at::native::vectorized_elementwise_kernel<4, ...::{lambda(float)#1}, ...>(int, ...)`. The
family is the qualified name: the return type and the parameters dropped, and each template
argument list folded away (types, numbers, lambdas: `vllm::rms_norm_kernel<c10::BFloat16>` is
`vllm::rms_norm_kernel`), except one that is a single configuration, a name with a tile shape or
a template itself (CUTLASS names its kernel so:
`cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nn_align4>`,
`cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<...>>`), which stays, folded in
turn. Tile shapes (`128x128`, `MT64x64x32`) fold to `*`. A plain name (Triton's
`triton_poi_fused_add_0`, Tensile's `Cijk_...`, cuBLAS's `sm90_xmma_gemm_...`) only has its
tiles folded; a name whose brackets do not balance (cut short) only loses its parameters.
"""

from __future__ import annotations

import re
from functools import cache

TILE = re.compile(r"\d+x\d+(?:x\d+)*")
PARAMS = re.compile(r"\(.*\)\s*$")
# An operator's name (operator(), operator<, operator<<=, ...): its symbols are no brackets.
OPERATOR = re.compile(
    r"\boperator\s*(?:\(\)|\[\]|->\*?|<=>|<<=?|>>=?|&&|\|\||\+\+|--|[-+*/%^&|~!=<>,]=?"
    r"|new\b|delete\b)"
)
OPERATOR_END = re.compile(OPERATOR.pattern + "$")
CLOSING = {"(": ")", "<": ">", "[": "]", "{": "}"}
# A template argument list of one name, outside its own brackets: `cutlass_80_..._128x128_...`,
# `cutlass::gemm::kernel::GemmUniversal<>`; not a type list, a number or a lambda.
CONFIGURATION = re.compile(r"[A-Za-z_][\w:]*(?:<>)?")
QUALIFIERS = re.compile(r"(?:\s+(?:const|volatile)|\s*&&?)+$")


@cache
def family_of(kernel: str) -> str:
    """The family of a kernel name: its qualified name, template arguments folded, tile
    shapes as `*`."""
    text = QUALIFIERS.sub("", kernel.strip())
    groups = _groups(text)
    if groups is None:  # brackets that do not balance: a name cut short
        return TILE.sub("*", PARAMS.sub("", text)).strip()
    if text.endswith(")") and groups and groups[-1][1] == len(text) - 1:
        text = text[: groups[-1][0]].rstrip()  # the parameter list
        groups = groups[:-1]
    name = text[_name_start(text, groups) :]
    return TILE.sub("*", _fold(name)).strip() or kernel.strip()


def _groups(text: str) -> list[tuple[int, int]] | None:
    """The outermost bracket groups of `text` as (open, close) indices; None when they do not
    balance. `<` and `>` inside parentheses compare (`enable_if<!(1 < 2)>`), and an operator's
    symbols are part of its name."""
    groups: list[tuple[int, int]] = []
    stack: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        operator = OPERATOR.match(text, i) if text.startswith("operator", i) else None
        if operator is not None:
            i = operator.end()
            continue
        c = text[i]
        in_parens = bool(stack) and stack[-1][0] == "("
        if c in CLOSING and not (c == "<" and in_parens):
            stack.append((c, i))
        elif stack and c == CLOSING[stack[-1][0]]:
            opened = stack.pop()[1]
            if not stack:
                groups.append((opened, i))
        elif c in ")]}" or (c == ">" and not in_parens and text[i - 1 : i] != "-"):
            return None
        i += 1
    return None if stack else groups


def _name_start(text: str, groups: list[tuple[int, int]]) -> int:
    """Where the qualified name starts: after the last space outside every bracket (the
    return type before it), `operator new` kept whole."""
    inside = {i for start, end in groups for i in range(start, end + 1)}
    start = 0
    for i, c in enumerate(text):
        if c == " " and i not in inside and not text[:i].endswith("operator"):
            start = i + 1
    return start


def _fold(name: str) -> str:
    """`name` with each template argument list dropped, but one of a single name, folded."""
    groups = _groups(name) or []
    out, at = [], 0
    for start, end in groups:
        if name[start] != "<":
            continue
        before = name[:start]
        if not (before[-1:].isalnum() or before[-1:] == "_" or OPERATOR_END.search(before)):
            continue  # no name before it: `<unnamed>`, a namespace, as `(anonymous namespace)`
        out.append(name[at:start])
        inner = name[start + 1 : end].strip()
        top = _outside(inner)
        # One configuration, named (a tile shape in it) or itself a template: kept, folded.
        if CONFIGURATION.fullmatch(top) and (top.endswith("<>") or TILE.search(inner)):
            out.append(f"<{_fold(inner)}>")
        at = end + 1
    return "".join(out) + name[at:]


def _outside(text: str) -> str:
    """`text` with every bracket group emptied (`a<b, c>::d(e)` is `a<>::d()`): its top level."""
    kept, at = [], 0
    for start, end in _groups(text) or []:
        kept.append(text[at : start + 1])
        at = end
    return "".join(kept) + text[at:]
