"""The kernel-name patterns that put each kernel in one class: comm, attention, gemm or other."""

from __future__ import annotations

# (class, case-insensitive regular expression); the first rule that matches wins, and a kernel
# no rule matches is `other`. Memcpys and memsets are `memcpy` by table, never by name.
# Attention is tested before GEMM because FlashAttention and xFormers names carry `cutlass`;
# communication comes first because NCCL often runs on the compute stream, so it is never
# recognised by stream.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    ("comm", r"nccl"),  # ncclKernel_*, ncclDevKernel_*, ncclSymDevKernel_*, RCCL
    ("comm", r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce"),  # PyTorch symm-mem
    ("comm", r"cross_device_reduce"),  # vLLM custom all-reduce
    ("comm", r"nvshmem"),
    ("comm", r"deep_ep|dpsk::ep"),  # DeepEP expert-parallel all-to-all
    ("attention", r"flash|fmha|sdpa|attention"),
    ("other", r"splitKreduce"),  # cuBLAS split-K epilogue: a reduction, not a GEMM
    ("gemm", r"gemm|xmma|nvjet|gemv|cutlass.*tensorop|cublaslt|GemmUniversal"),
)
CLASSES = ("comm", "attention", "gemm", "other")
