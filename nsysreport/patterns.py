"""The name patterns that classify kernels and NVTX ranges: defaults here, users override."""

from __future__ import annotations

from dataclasses import dataclass, field

from nsysreport.errors import OptionError

# (class, case-insensitive regular expression); the first rule that matches wins, and a kernel
# no rule matches is `other`. Memcpys and memsets are `memcpy` by table, never by name.
# Attention is tested before GEMM because FlashAttention and xFormers names carry `cutlass`;
# communication comes first because NCCL often runs on the compute stream, so it is never
# recognised by stream.
DEFAULT_KERNEL_RULES: tuple[tuple[str, str], ...] = (
    ("comm", r"nccl"),  # ncclKernel_*, ncclDevKernel_*, ncclSymDevKernel_*, RCCL
    ("comm", r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce"),  # PyTorch symm-mem
    ("comm", r"cross_device_reduce"),  # vLLM custom all-reduce
    ("comm", r"nvshmem"),
    ("comm", r"deep_ep|dpsk::ep"),  # DeepEP expert-parallel all-to-all
    ("attention", r"flash|fmha|sdpa|attention"),
    ("other", r"splitKreduce"),  # cuBLAS split-K epilogue: a reduction, not a GEMM
    # `gemm` not as the end of `fbgemm`: FBGEMM's embedding, permute and quantisation kernels
    # (fbgemm_gpu::..., and templates naming it) do no matrix product; its GEMMs say gemm again.
    (
        "gemm",
        r"(^|[^b])gemm|(^|[^f])bgemm|xmma|nvjet|gemv|cutlass.*tensorop|cublaslt"
        r"|GemmUniversal",
    ),
    # ROCm: Tensile's kernels (rocBLAS, hipBLASLt) are named by their contraction, C[i,j,k] =
    # A[i,l,k]·B[l,j,k] spelled Cijk_Ailk_Bljk_... (ROCm/Tensile, KernelWriter naming).
    ("gemm", r"^Cijk_"),
)
KERNEL_CLASSES = ("comm", "attention", "gemm", "other")

# NVTX ranges that mark a training/inference step: PyTorch's `ProfilerStep#N`, or a name that
# is, or starts with, step/iteration/iter and a number (`step 3`, `iteration_12`).
DEFAULT_STEP_PATTERN = r"(?i)^(ProfilerStep#\d+|(step|iteration|iter)[\s_#:.-]*\d+)"
# A layer or block word and an index, with the module path before it: `layer 3`, `layers.3`,
# `TransformerLayer_3`, `block_7`, `decoder.layers.12`. The matched text names the layer, so
# PyTorch's `, op_id = ...` suffixes do not split one layer into many.
DEFAULT_LAYER_PATTERN = r"(?i)[\w.]*(layers?|blocks?)[\s_#:.-]*\d+"
# Collective NVTX ranges: PyTorch's `nccl:<op>` record_function ranges, and NCCL's own API
# ranges (group start/end excluded); the matched text is the op.
TORCH_COLLECTIVE_PATTERN = r"^nccl:\w+"
NCCL_COLLECTIVE_PATTERN = (
    r"^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Bcast|Reduce|Send|Recv|AllToAll|AlltoAll)"
)

# A PyTorch DataLoader fetching the next batch: the record_function range its iterator opens in
# __next__ (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, or the
# multiprocessing iterator's), a Kineto user annotation or, under emit_nvtx, an NVTX range
# (`..., op_id = 12` after the name: getNvtxStr); or the Python frame of that method
# (`torch/utils/data/dataloader.py(733): __next__`, with_stack). docs/export-format.md.
# `\s`, not a space: gap_top.sql states it as its parameter's default, one word.
DATA_LOADER_RANGE_PATTERN = r"^enumerate\(DataLoader\)#\w+\.__next__(,|$)"
DATA_LOADER_PATTERN = (
    DATA_LOADER_RANGE_PATTERN + r"|(^|/)torch/utils/data/dataloader\.py\(\d+\):\s__next__$"
)


@dataclass(frozen=True, slots=True)
class Patterns:
    """Every name pattern the analysis uses; the CLI builds one from its options."""

    kernel_rules: tuple[tuple[str, str], ...] = DEFAULT_KERNEL_RULES
    step: str = DEFAULT_STEP_PATTERN
    layer: str = DEFAULT_LAYER_PATTERN
    comm_bytes: dict[str, int] = field(default_factory=dict)  # collective op -> message bytes

    def view_params(self) -> dict[str, str]:
        """Parameters of the views that take options (see nvtx_role_range.sql)."""
        return {
            "step_pattern": self.step,
            "layer_pattern": self.layer,
            "torch_collective_pattern": TORCH_COLLECTIVE_PATTERN,
            "nccl_collective_pattern": NCCL_COLLECTIVE_PATTERN,
        }

    def role_pattern(self) -> str:
        """One expression any NVTX range playing a role matches (step, layer, collective, a
        DataLoader fetching a batch: what an idle gap's host cause names): the loader keeps only
        those ranges' rows, since no analysis reads the others."""
        roles = (
            self.step,
            self.layer,
            TORCH_COLLECTIVE_PATTERN,
            NCCL_COLLECTIVE_PATTERN,
            DATA_LOADER_RANGE_PATTERN,  # the frame's form is never a range, and costs a scan
        )
        return "|".join(f"(?:{p})" for p in roles)


def parse_patterns(
    step: str | None, layer: str | None, kernel_classes: list[str], comm_bytes: list[str]
) -> Patterns:
    """Build Patterns from CLI option values, checking each regular expression with RE2."""
    rules = []
    for item in kernel_classes:
        cls, sep, pattern = item.partition("=")
        if not sep or cls not in KERNEL_CLASSES or not pattern:
            classes = ", ".join(KERNEL_CLASSES)
            raise OptionError(f"--kernel-class {item!r}: expected CLASS=REGEX, CLASS in {classes}")
        rules.append((cls, _checked(pattern, "--kernel-class")))
    sizes = {}
    for item in comm_bytes:
        op, sep, value = item.partition("=")
        if not sep or not op or not value.isdigit():
            raise OptionError(f"--comm-bytes {item!r}: expected OP=BYTES, e.g. AllReduce=16777216")
        sizes[op] = int(value)
    return Patterns(
        kernel_rules=(*rules, *DEFAULT_KERNEL_RULES),  # user rules first: the first match wins
        step=_checked(step, "--step-pattern") if step else DEFAULT_STEP_PATTERN,
        layer=_checked(layer, "--layer-pattern") if layer else DEFAULT_LAYER_PATTERN,
        comm_bytes=sizes,
    )


def _checked(pattern: str, option: str) -> str:
    """`pattern` if DuckDB's RE2 engine compiles it (it, not Python's re, runs the match)."""
    import duckdb  # lazy: 0.08 s of start-up (python -X importtime), only for a --*-pattern

    try:
        duckdb.execute("SELECT regexp_matches('', $p)", {"p": pattern})
    except duckdb.Error as exc:
        raise OptionError(f"{option} {pattern!r}: not a valid regular expression ({exc})") from exc
    return pattern
