"""Simulate tensor-parallel transformer inference as synthetic nsys traces (never GPU captures).

Model. Every TP rank runs the same Llama-style forward pass (vLLM's layout, eager mode, no CUDA
graphs): per step an input copy, the vocab-parallel embedding and its all-reduce, then per layer
input norm, QKV GEMM (column-parallel), rotary, KV-cache write, attention, output projection
(row-parallel) -> all-reduce, post-attention norm, gate/up GEMM, SiLU-and-mul, down projection
(row-parallel) -> all-reduce; then final norm, LM head on the last token, all-gather of the
logits, argmax, a copy of the token ids back and a stream synchronize. Weights are sharded by TP.

Durations. A GEMM takes max(FLOPs / achievable FLOP/s, bytes / achievable HBM bytes/s) with
FLOPs = 2·tokens·n·k and bytes = (n·k + tokens·k + tokens·n)·dtype; attention is the same
roofline at FlashAttention's efficiency; norms and activations are memory-bound; no kernel runs
shorter than `min_kernel_ns`. An all-reduce of M bytes on TP ranks takes
base + 2(TP-1)·per-step latency + 2(TP-1)/TP·M / bus bandwidth (an all-gather: TP-1 steps and
(TP-1)/TP·M), the ring cost model of NCCL's tuner with bus bandwidth as nccl-tests defines it.

Time line. Each rank (pid 1000 + rank, device = rank) has one host thread that launches kernels
(`launch_ns` per call, `gap_ns` of Python between calls) and a compute stream (7) where a kernel
starts at max(previous kernel end, launch end + `queue_ns`): kernels shorter than the launch
cadence leave gaps (launch-bound decode of small models), long ones let the host run ahead.
A collective starts on each rank when that rank reaches it and ends on every rank at the last
arrival + its duration, so early ranks wait inside the NCCL kernel for the last one, as in
real traces. With `overlap`, NCCL runs on stream 31 and the compute stream goes on up to and
including the next GEMM before waiting for the all-reduce: the schedule of an idealised
two-micro-batch pipeline (NanoFlow, SGLang two-batch overlap) whose data dependencies and SM
contention are not modelled, so it bounds what overlap can hide from above.
A straggler rank's compute kernels are `straggler_slowdown` times longer; `jitter` scales every
kernel and host gap by a seeded uniform factor in [1 - jitter, 1 + jitter].

CUDA graphs (`cuda_graphs`, decode only, as vLLM and SGLang decode). Step 0 runs eagerly (the
warm-up); then, outside any step, the forward pass (embedding to final norm) is captured: the
host walks the layers inside their NVTX ranges and calls every launch, which creates a graph
node and runs nothing, and cudaGraphInstantiate clones every node into the executable graph.
Each later step launches that graph with one cudaGraphLaunch: its kernels run back to back,
with no host launch in between, and the LM head, logits all-gather and
sampling stay eager. `graph`: nsys's default --cuda-graph-trace=graph records one
CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per launch and GPU, and none of the replayed kernels;
`node`: every replayed kernel with its graphNodeId, and the node creation and cloning events.

Figures (assumptions are marked as such):
- H100 SXM5: 989 TFLOP/s dense BF16, 3.35 TB/s HBM3, NVLink 4 at 900 GB/s both directions
  (NVIDIA H100 Tensor Core GPU datasheet). Achievable: GEMMs 70 % of peak (large BF16 cuBLAS
  GEMMs on H100 reach ~650–750 TFLOP/s), attention 40 % (FlashAttention-2 forward on H100,
  ~350–400 TFLOP/s, per the FlashAttention-3 paper, Shah et al. 2024), HBM 85 % (assumption).
- NVLink: 450 GB/s bus bandwidth (the per-direction NVLink 4 rate; nccl-tests all_reduce_perf
  on 8xH100 NVSwitch nodes reports roughly 350–480 GB/s busbw for large messages), latency
  3 µs + 0.5 µs per ring step (NCCL's tuner, src/graph/tuning.cc, charges ~0.5–0.6 µs per
  NVLink ring-LL step; the 3 µs base is an assumption; ~10 µs in all at TP=8).
- PCIe: 20 GB/s bus bandwidth (H100 PCIe Gen5 x16 is 64 GB/s per direction in theory; rings
  through PCIe switches and the CPU without NVLink reach a fraction of it, assumption) and 10 µs +
  6 µs per ring step (small messages staged through host memory, tens of µs, assumption).
- Host: 3 µs per launch call, 2 µs of Python between launches, 1.5 µs from launch to an idle
  stream, 4 µs of NCCL enqueue per collective, 0.2 µs per NVTX push or pop, 40 µs of scheduler
  between steps (assumptions in the range eager PyTorch shows).
- Models: the shapes of Meta Llama 3 8B and 70B (`config.json` on Hugging Face).
Kernel names are those of BF16 H100 kernels (cuBLAS nvjet/xmma, FlashAttention-2, vLLM, NCCL
≥ 2.23) whatever `dtype_bytes` is. Every trace carries an NSYSREPORT_SIMULATED metadata row.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from nsysreport.synth import (
    ApiCall,
    Gpu,
    GraphLaunch,
    GraphNode,
    Kernel,
    Memcpy,
    NvtxRange,
    Scenario,
    write_trace,
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A Llama-style decoder's shape: GQA attention and a gated MLP."""

    name: str
    hidden: int
    layers: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int = 128_256


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """A GPU-to-GPU path as an NCCL ring sees it."""

    name: str
    bus_bytes_per_s: float
    base_ns: int  # per collective
    step_ns: int  # per ring step: 2(TP-1) steps in an all-reduce, TP-1 in an all-gather


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """Peak rates, the share of them kernels reach, and the shortest kernel."""

    name: str
    peak_flops: float
    peak_hbm_bytes_per_s: float
    gemm_efficiency: float
    attention_efficiency: float
    hbm_efficiency: float
    min_kernel_ns: int


@dataclass(frozen=True, slots=True)
class HostSpec:
    """Host-side costs of an eager PyTorch process launching work."""

    launch_ns: int = 3_000
    gap_ns: int = 2_000
    queue_ns: int = 1_500
    nccl_ns: int = 4_000
    nvtx_ns: int = 200
    step_ns: int = 40_000
    copy_latency_ns: int = 1_500
    copy_bytes_per_s: float = 25e9


MODELS = {
    "llama8b": ModelSpec("llama8b", hidden=4096, layers=32, ffn=14336, heads=32, kv_heads=8),
    "llama70b": ModelSpec("llama70b", hidden=8192, layers=80, ffn=28672, heads=64, kv_heads=8),
}
LINKS = {
    "nvlink": LinkSpec("nvlink", bus_bytes_per_s=450e9, base_ns=3_000, step_ns=500),
    "pcie": LinkSpec("pcie", bus_bytes_per_s=20e9, base_ns=10_000, step_ns=6_000),
}
GPUS = {"h100": GpuSpec("h100", 989.4e12, 3.35e12, 0.70, 0.40, 0.85, min_kernel_ns=2_000)}
GPU_NAME = "NVIDIA H100 80GB HBM3"
Phase = Literal["prefill", "decode"]
GraphTrace = Literal["off", "graph", "node"]
# Host costs of CUDA graphs (assumptions; constants, not HostSpec fields, so that the samples
# written before CUDA graphs keep their bytes): a cudaGraphLaunch, and cudaGraphInstantiate of
# the captured forward pass.
GRAPH_LAUNCH_NS = 6_000
INSTANTIATE_NS = 400_000


@dataclass(frozen=True, slots=True)
class TensorParallelConfig:
    """One simulated run: `seq_len` is the prompt (prefill) or the KV cache at step 0 (decode)."""

    model: ModelSpec = MODELS["llama70b"]
    phase: Phase = "decode"
    seq_len: int = 2048
    tokens: int = 1  # decode: new tokens per sequence per step
    batch: int = 1
    dtype_bytes: int = 2
    tp: int = 8
    link: LinkSpec = LINKS["nvlink"]
    gpu: GpuSpec = GPUS["h100"]
    steps: int = 4
    layers_simulated: int | None = None  # None: all of model.layers
    overlap: bool = False
    straggler_rank: int | None = None
    straggler_slowdown: float = 1.0
    jitter: float = 0.0
    seed: int = 0
    host: HostSpec = field(default_factory=HostSpec)
    # decode as CUDA graph replays after an eager step 0, traced graph- or node-level
    cuda_graphs: GraphTrace = "off"


def gemm_ns(tokens: int, n: int, k: int, gpu: GpuSpec, dtype_bytes: int) -> int:
    """Roofline time of a [tokens, k] x [k, n] GEMM."""
    flops = 2 * tokens * n * k
    moved = (n * k + tokens * k + tokens * n) * dtype_bytes
    return _roofline(flops, gpu.gemm_efficiency, moved, gpu)


def attention_ns(
    batch: int, q: int, ctx: int, heads: int, kv_heads: int, head_dim: int, gpu: GpuSpec,
    dtype_bytes: int, causal: bool,
) -> int:  # fmt: skip
    """Roofline time of `q` query tokens attending to `ctx` keys (causal: half the pairs)."""
    pairs = q * ctx // 2 if causal else q * ctx
    flops = 4 * batch * pairs * heads * head_dim
    moved = batch * (2 * q * heads + 2 * ctx * kv_heads) * head_dim * dtype_bytes
    return _roofline(flops, gpu.attention_efficiency, moved, gpu)


def memory_ns(moved_bytes: int, gpu: GpuSpec) -> int:
    """Time of a memory-bound kernel (norms, activations, gathers) moving `moved_bytes`."""
    return _roofline(0, 1.0, moved_bytes, gpu)


def allreduce_ns(message_bytes: int, tp: int, link: LinkSpec) -> int:
    """Ring all-reduce of a `message_bytes` tensor over `tp` ranks (0 for a single rank)."""
    steps = 2 * (tp - 1)
    return _ring_ns(steps, 2 * (tp - 1) * message_bytes / tp if tp > 1 else 0, link)


def allgather_ns(total_bytes: int, tp: int, link: LinkSpec) -> int:
    """Ring all-gather whose gathered result is `total_bytes`."""
    return _ring_ns(tp - 1, (tp - 1) * total_bytes / tp if tp > 1 else 0, link)


def _roofline(flops: int, efficiency: float, moved: int, gpu: GpuSpec) -> int:
    compute_s = flops / (gpu.peak_flops * efficiency)
    memory_s = moved / (gpu.peak_hbm_bytes_per_s * gpu.hbm_efficiency)
    return max(gpu.min_kernel_ns, round(max(compute_s, memory_s) * 1e9))


def _ring_ns(steps: int, bus_bytes: float, link: LinkSpec) -> int:
    if steps <= 0:
        return 0
    return link.base_ns + steps * link.step_ns + round(bus_bytes / link.bus_bytes_per_s * 1e9)


# Real kernel names of a BF16 H100 vLLM run: (prefill, decode) where cuBLAS picks differently.
_GEMM = {
    "qkv": ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"),
    "o": (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
        "_execute_segment_k_off_kernel__5x_cublas",
        "nvjet_tst_64x8_64x16_4x1_v_bz_TNT",
    ),
    "gate_up": ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"),
    "down": (
        "nvjet_tst_192x208_64x4_1x1_h_bz_coopB_TNT",
        "nvjet_tst_64x8_64x16_2x1_v_bz_splitK_TNT",
    ),
    "lm_head": ("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"),
}
_FLASH_TRAITS = (
    "Flash_fwd_kernel_traits<(int)128, (int){m}, (int){n}, (int)4, (bool)0, (bool)0, "
    "cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int){m}, (int){n}, (int)4, "
    "cutlass::bfloat16_t>>"
)
_ATTENTION = (
    f"void flash::flash_fwd_kernel<{_FLASH_TRAITS.format(m=128, n=64)}, (bool)1, (bool)0, "
    "(bool)0, (bool)0, (bool)0, (bool)1, (bool)0, (bool)0>(flash::Flash_fwd_params)",
    f"void flash::flash_fwd_splitkv_kernel<{_FLASH_TRAITS.format(m=64, n=128)}, (bool)1, "
    "(bool)0, (bool)0, (bool)0, (bool)1, (bool)1, (bool)0, (bool)0>(flash::Flash_fwd_params)",
)
_T = "c10::BFloat16"
EMBED = "void at::native::vectorized_gather_kernel<(int)16, long>(char *, char *, T2 *, int, long, long, long, long, bool)"  # noqa: E501
RMS_NORM = f"void vllm::rms_norm_kernel<{_T}>(T1 *, const T1 *, const T1 *, float, int, int)"
ADD_RMS_NORM = (
    f"void vllm::fused_add_rms_norm_kernel<{_T}, (int)8>(T1 *, T1 *, const T1 *, float, int, int)"
)
ROTARY = f"void vllm::rotary_embedding_kernel<{_T}, (bool)1>(const long *, T1 *, T1 *, const T1 *, int, long, long, long, int, int, int)"  # noqa: E501
CACHE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(const T1 *, const T1 *, T2 *, T2 *, const long *, long, long, long, long, int, int, int, const float *, const float *)"  # noqa: E501
SILU_AND_MUL = (
    f"void vllm::act_and_mul_kernel<{_T}, &vllm::silu_kernel<{_T}>, (bool)1>(T1 *, const T1 *, int)"
)
ARGMAX = "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, (int)4, (int)4>>(T3)"  # noqa: E501
_NCCL_ARGS = "(ncclDevKernelArgsStorage<(unsigned long)4096>)"
ALLREDUCE = f"ncclDevKernel_AllReduce_Sum_bf16_RING_LL{_NCCL_ARGS}"
ALLGATHER = f"ncclDevKernel_AllGather_RING_LL{_NCCL_ARGS}"
COMPUTE_STREAM, COMM_STREAM = 7, 31
START_NS = 1_000_000_000  # a second into the capture, as after warm-up


def tensor_parallel(config: TensorParallelConfig) -> Scenario:
    """The trace of `config`: every rank of one node in one export, as `nsys profile torchrun`."""
    c, m = config, config.model
    if m.heads % c.tp or m.ffn % c.tp or m.hidden % m.heads:
        raise ValueError(f"TP={c.tp} must divide {m.name}'s {m.heads} heads and FFN size {m.ffn}")
    if c.straggler_rank is not None and not 0 <= c.straggler_rank < c.tp:
        raise ValueError(f"straggler rank {c.straggler_rank} is not a rank of TP={c.tp}")
    graphs = c.cuda_graphs != "off"
    if graphs and (c.phase != "decode" or c.overlap):
        raise ValueError("CUDA graphs are simulated for decode without overlap only")
    sim = _Timeline(c)
    new = c.seq_len if c.phase == "prefill" else c.tokens
    rows = c.batch * new  # tokens through every GEMM
    act = rows * m.hidden * c.dtype_bytes  # one activation tensor, the all-reduce message
    vocab = -(-m.vocab // c.tp)
    for step in range(c.steps):
        ctx = c.seq_len if c.phase == "prefill" else c.seq_len + step * c.tokens + c.tokens
        if graphs and step == 1:  # after the eager warm-up step, outside every step range
            with sim.capturing():
                _forward(sim, c, rows, ctx, act)
        with sim.nvtx(f"step {step}"):
            sim.copy(1, rows * 8)  # token ids in
            if graphs and step >= 1:
                sim.replay()
            else:
                _forward(sim, c, rows, ctx, act)
            lm_head = gemm_ns(c.batch, vocab, m.hidden, c.gpu, c.dtype_bytes)  # last token only
            sim.kernel(_GEMM["lm_head"][0], lm_head, gemm=True)
            logits = c.batch * vocab * c.tp * c.dtype_bytes
            sim.collective(ALLGATHER, "ncclAllGather", logits, allgather_ns(logits, c.tp, c.link))
            sim.kernel(ARGMAX, memory_ns(logits, c.gpu))
            sim.copy(2, c.batch * 8)  # sampled token ids out
            sim.synchronize()
        sim.idle(c.host.step_ns)
    return Scenario(
        kernels=sim.kernels,
        memcpys=sim.memcpys,
        api_calls=sim.api_calls,
        graph_launches=sim.graph_launches,
        graph_nodes=sim.graph_nodes,
        nvtx=sim.ranges,
        gpus=[Gpu(device=r, name=GPU_NAME, pid=_pid(r)) for r in range(c.tp)],
        host=f"simulated-{c.gpu.name}x{c.tp}",
        metadata={"NSYSREPORT_SIMULATED": describe(c), "NSYSREPORT_SIMULATION": _as_json(c)},
    )


def _forward(sim: _Timeline, c: TensorParallelConfig, rows: int, ctx: int, act: int) -> None:
    """Embedding to final norm: the part of a step that vLLM captures as a CUDA graph."""
    sim.kernel(EMBED, memory_ns(2 * act, c.gpu))
    sim.allreduce(act)
    for layer in range(c.model.layers if c.layers_simulated is None else c.layers_simulated):
        _layer(sim, c, layer, rows, ctx, act)
    sim.kernel(ADD_RMS_NORM, memory_ns(4 * act, c.gpu))


def _layer(
    sim: _Timeline, c: TensorParallelConfig, layer: int, rows: int, ctx: int, act: int
) -> None:
    m, gpu, b = c.model, c.gpu, c.dtype_bytes
    head_dim = m.hidden // m.heads
    heads, kv_heads = m.heads // c.tp, max(1, m.kv_heads // c.tp)  # KV heads replicate past TP
    ffn, decode = m.ffn // c.tp, int(c.phase == "decode")
    with sim.nvtx(f"model.layers.{layer}"):
        sim.kernel(
            RMS_NORM if layer == 0 else ADD_RMS_NORM, memory_ns((2 if layer == 0 else 4) * act, gpu)
        )
        with sim.nvtx("self_attn"):
            qkv = (heads + 2 * kv_heads) * head_dim
            sim.kernel(_GEMM["qkv"][decode], gemm_ns(rows, qkv, m.hidden, gpu, b), gemm=True)
            sim.kernel(ROTARY, memory_ns(2 * rows * (heads + kv_heads) * head_dim * b, gpu))
            sim.kernel(CACHE, memory_ns(4 * rows * kv_heads * head_dim * b, gpu))
            q = rows // c.batch
            attn = attention_ns(c.batch, q, ctx, heads, kv_heads, head_dim, gpu, b, not decode)
            sim.kernel(_ATTENTION[decode], attn)
            sim.kernel(
                _GEMM["o"][decode], gemm_ns(rows, m.hidden, heads * head_dim, gpu, b), gemm=True
            )
            sim.allreduce(act)
        sim.kernel(ADD_RMS_NORM, memory_ns(4 * act, gpu))
        with sim.nvtx("mlp"):
            sim.kernel(
                _GEMM["gate_up"][decode], gemm_ns(rows, 2 * ffn, m.hidden, gpu, b), gemm=True
            )
            sim.kernel(SILU_AND_MUL, memory_ns(3 * rows * ffn * b, gpu))
            sim.kernel(_GEMM["down"][decode], gemm_ns(rows, m.hidden, ffn, gpu, b), gemm=True)
            sim.allreduce(act)


def _pid(rank: int) -> int:
    return 1000 + rank


class _Timeline:
    """Every rank's host clock and streams, advanced in lock step: all ranks run the same calls."""

    def __init__(self, config: TensorParallelConfig) -> None:
        self.c, self.h = config, config.host
        self.rng = random.Random(config.seed)  # never the global generator: files must reproduce
        self.ranks = range(config.tp)
        self.clock = [START_NS] * config.tp  # each rank's host thread
        self.free = [{COMPUTE_STREAM: 0, COMM_STREAM: 0} for _ in self.ranks]
        # Overlap: end of the all-reduce in flight, and whether its GEMM is still to come.
        self.pending: int | None = None
        self.gemm_free = False
        self.kernels: list[Kernel] = []
        self.memcpys: list[Memcpy] = []
        self.api_calls: list[ApiCall] = []
        self.ranges: list[NvtxRange] = []
        self.graph_launches: list[GraphLaunch] = []
        self.graph_nodes: list[GraphNode] = []
        # CUDA graphs: while capturing, launches become nodes of `captured` (name, ns, stream
        # kind, op, bytes) instead of GPU work; each rank numbers its nodes from 1.
        self.capture = False
        self.captured: list[tuple[str, int, str, str, int]] = []

    def _noise(self) -> float:
        j = self.c.jitter
        return 1.0 + self.rng.uniform(-j, j) if j else 1.0

    def _call(self, rank: int, ns: int, name: str | None = None) -> tuple[int, int]:
        """A host API call of `ns` on `rank`, then the Python gap before the next one."""
        start = self.clock[rank]
        end = start + ns
        self.clock[rank] = end + round(self.h.gap_ns * self._noise())
        if name is not None:
            self.api_calls.append(ApiCall(start, end, name, pid=_pid(rank)))
        return start, end

    def _dependency(self, gemm: bool) -> int | None:
        """The all-reduce end the next compute kernel must wait for (overlap only)."""
        if self.pending is None:
            return None
        if self.gemm_free:  # kernels up to and including the next GEMM run beside it
            self.gemm_free = not gemm
            return None
        pending, self.pending = self.pending, None
        return pending

    @contextmanager
    def nvtx(self, text: str) -> Iterator[None]:
        starts = list(self.clock)
        self.clock = [t + self.h.nvtx_ns for t in self.clock]  # the push call itself
        yield
        for r in self.ranks:
            self.ranges.append(NvtxRange(starts[r], self.clock[r], text, pid=_pid(r)))
            self.clock[r] += self.h.nvtx_ns  # the pop call ends the range, then returns

    @contextmanager
    def capturing(self) -> Iterator[None]:
        """Stream capture of what runs inside: host calls and NVTX ranges, nodes, no GPU work;
        then cudaGraphInstantiate clones every node into the executable graph."""
        for r in self.ranks:
            self._call(r, 2_000, "cudaStreamBeginCapture_v10000")
        self.capture = True
        yield
        self.capture = False
        nodes = len(self.captured)
        for r in self.ranks:
            self._call(r, 2_000, "cudaStreamEndCapture_v10000")
            start, end = self._call(r, INSTANTIATE_NS, "cudaGraphInstantiate_v12000")
            if self.c.cuda_graphs == "node":
                self.graph_nodes += [
                    GraphNode(start, end, nodes + i, original=i, pid=_pid(r),
                              api="cudaGraphInstantiate_v12000")
                    for i in range(1, nodes + 1)
                ]  # fmt: skip

    def _capture_node(self, r: int, launch: tuple[int, int], api: str) -> None:
        """The launch `launch` on rank `r` during capture: a node, created at that call."""
        self.api_calls.append(ApiCall(*launch, api, pid=_pid(r)))
        if self.c.cuda_graphs == "node":
            node = len(self.captured) + 1
            self.graph_nodes.append(GraphNode(*launch, node, pid=_pid(r), api=api))

    def replay(self) -> None:
        """One cudaGraphLaunch per rank of the captured forward pass: its kernels run back to
        back on the compute stream; collectives wait for the last rank, as when eager."""
        c = self.c
        launches = [self._call(r, GRAPH_LAUNCH_NS) for r in self.ranks]
        cursor = [
            max(launches[r][1] + self.h.queue_ns, self.free[r][COMPUTE_STREAM]) for r in self.ranks
        ]
        replayed: list[list[Kernel]] = [[] for _ in self.ranks]
        for node, (name, ns, kind, _, _) in enumerate(self.captured, 1):
            if kind == "comm":
                duration = round(ns * self._noise())
                finish = max(cursor) + duration
                spans = [(cursor[r], finish) for r in self.ranks]
            else:
                spans = []
                for r in self.ranks:
                    slow = c.straggler_slowdown if r == c.straggler_rank else 1.0
                    spans.append((cursor[r], cursor[r] + round(ns * slow * self._noise())))
            for r in self.ranks:
                start, end = spans[r]
                replayed[r].append(
                    Kernel(start, end, name, r, COMPUTE_STREAM, _pid(r),
                           graph_node_id=len(self.captured) + node, graph_id=1)
                )  # fmt: skip
                cursor[r] = end
                self.free[r][COMPUTE_STREAM] = end
        for r in self.ranks:
            kernels = replayed[r]
            start, end = kernels[0].start, kernels[-1].end
            self.graph_launches.append(
                GraphLaunch(start, end, device=r, stream=COMPUTE_STREAM, pid=_pid(r),
                            launch=launches[r],
                            kernels=tuple(kernels) if c.cuda_graphs == "node" else ())
            )  # fmt: skip

    def kernel(self, name: str, ns: int, gemm: bool = False) -> None:
        if self.capture:
            for r in self.ranks:
                self._capture_node(r, self._call(r, self.h.launch_ns), "cudaLaunchKernel_v7000")
            self.captured.append((name, ns, "compute", "", 0))
            return
        wait = self._dependency(gemm)
        c = self.c
        for r in self.ranks:
            slow = c.straggler_slowdown if r == c.straggler_rank else 1.0
            duration = round(ns * slow * self._noise())
            if wait is not None:
                self._call(r, 1_000, "cudaStreamWaitEvent_v3020")
            launch = self._call(r, self.h.launch_ns)
            start = max(launch[1] + self.h.queue_ns, self.free[r][COMPUTE_STREAM])
            start = start if wait is None else max(start, wait)
            self.free[r][COMPUTE_STREAM] = start + duration
            self.kernels.append(
                Kernel(start, start + duration, name, r, COMPUTE_STREAM, _pid(r), launch=launch)
            )

    def allreduce(self, message_bytes: int) -> None:
        ns = allreduce_ns(message_bytes, self.c.tp, self.c.link)
        self.collective(ALLREDUCE, "ncclAllReduce", message_bytes, ns, next_gemm_overlaps=True)

    def collective(
        self, name: str, op: str, message_bytes: int, ns: int, next_gemm_overlaps: bool = False
    ) -> None:
        """One NCCL call on every rank: it ends everywhere at the last arrival + `ns`."""
        if self.c.tp == 1:
            return
        if self.capture:  # NCCL enqueues its kernel into the capturing stream: one node
            for r in self.ranks:
                begin = self.clock[r]
                self.clock[r] += self.h.nccl_ns
                launch = self._call(r, self.h.launch_ns)
                self._capture_node(r, launch, "cuLaunchKernelEx")
                self.ranges.append(
                    NvtxRange(begin, launch[1] + 500, op, pid=_pid(r), registered=True,
                              domain="NCCL", payload=message_bytes)
                )  # fmt: skip
                self.clock[r] += 500
            self.captured.append((name, ns, "comm", op, message_bytes))
            return
        overlap = self.c.overlap
        stream = COMM_STREAM if overlap else COMPUTE_STREAM
        duration = round(ns * self._noise())  # one transfer, seen by every rank
        arrivals, launches = [], []
        for r in self.ranks:
            if overlap:  # the comm stream waits for the compute stream's result
                self._call(r, 1_000, "cudaEventRecord_v3020")
                self._call(r, 1_000, "cudaStreamWaitEvent_v3020")
            begin = self.clock[r]
            self.clock[r] += self.h.nccl_ns
            start, end = self.clock[r], self.clock[r] + self.h.launch_ns
            self.clock[r] = end + 500  # NCCL returns right after its launch
            self.ranges.append(
                NvtxRange(begin, self.clock[r], op, pid=_pid(r), registered=True, domain="NCCL",
                          payload=message_bytes)
            )  # fmt: skip
            self.clock[r] += round(self.h.gap_ns * self._noise())
            ready = [end + self.h.queue_ns, self.free[r][stream], self.free[r][COMPUTE_STREAM]]
            if self.pending is not None:
                ready.append(self.pending)
            arrivals.append(max(ready))
            launches.append((start, end))
        finish = max(arrivals) + duration
        for r in self.ranks:
            self.free[r][stream] = finish
            self.kernels.append(
                Kernel(arrivals[r], finish, name, r, stream, _pid(r), launch=launches[r],
                       api="cuLaunchKernelEx", event_class=1)
            )  # fmt: skip
        if overlap:
            self.pending = finish
            self.gemm_free = next_gemm_overlaps

    def copy(self, kind: int, size: int) -> None:
        """A small cudaMemcpyAsync (1 HtoD, 2 DtoH) on the compute stream."""
        ns = self.h.copy_latency_ns + round(size / self.h.copy_bytes_per_s * 1e9)
        for r in self.ranks:
            launch = self._call(r, self.h.launch_ns)
            start = max(launch[1] + self.h.queue_ns, self.free[r][COMPUTE_STREAM])
            self.free[r][COMPUTE_STREAM] = start + ns
            self.memcpys.append(
                Memcpy(start, start + ns, size, kind, r, COMPUTE_STREAM, _pid(r), launch=launch)
            )

    def synchronize(self) -> None:
        """cudaStreamSynchronize: the host waits for its GPU (the step's output token)."""
        for r in self.ranks:
            start = self.clock[r]
            end = max(start + 1_000, *self.free[r].values()) + 1_000
            self.api_calls.append(ApiCall(start, end, "cudaStreamSynchronize_v3020", pid=_pid(r)))
            self.clock[r] = end

    def idle(self, ns: int) -> None:
        for r in self.ranks:
            self.clock[r] += round(ns * self._noise())


def describe(config: TensorParallelConfig) -> str:
    """The one sentence the NSYSREPORT_SIMULATED metadata row holds."""
    c, m = config, config.model
    work = (
        f"prefill of {c.seq_len} tokens"
        if c.phase == "prefill"
        else f"decode of {c.tokens} token(s) per step after a {c.seq_len}-token context"
    )
    layers = m.layers if c.layers_simulated is None else c.layers_simulated
    extras = [f"{layers} of {m.layers} layers", f"{c.steps} steps"]
    if c.overlap:
        extras.append("all-reduce overlapped with the next GEMM")
    if c.straggler_rank is not None:
        extras.append(f"rank {c.straggler_rank} {c.straggler_slowdown:g}x slower")
    if c.cuda_graphs != "off":
        trace = f"--cuda-graph-trace={c.cuda_graphs}"
        extras.append(f"steps from 1 on replayed as CUDA graphs, traced with {trace}")
    return (
        f"{m.name} {work}, batch {c.batch}, {c.dtype_bytes}-byte dtype, TP={c.tp} over "
        f"{c.link.name} on {c.gpu.name} ({', '.join(extras)}), jitter {c.jitter:g}, seed "
        # The module's name before it moved into nsysreport.synth: the committed samples and
        # the golden reports of two of them hold this sentence byte for byte.
        f"{c.seed}: simulated by nsysreport.simulate, not captured on a GPU."
    )


def _as_json(config: TensorParallelConfig) -> str:
    fields = asdict(config)
    if fields["cuda_graphs"] == "off":
        del fields["cuda_graphs"]  # the samples written before CUDA graphs keep their bytes
    return json.dumps(fields, sort_keys=True)


def sample_name(config: TensorParallelConfig) -> str:
    """`<model>_<phase>_tp<N>_<link>[_overlap][_straggler][_graphs_<trace>].sqlite`."""
    c = config
    name = f"{c.model.name}_{c.phase}_tp{c.tp}_{c.link.name}"
    name += "_overlap" if c.overlap else ""
    name += "_straggler" if c.straggler_rank is not None else ""
    name += f"_graphs_{c.cuda_graphs}" if c.cuda_graphs != "off" else ""
    return name + ".sqlite"


def sample_configs() -> list[TensorParallelConfig]:
    """What sample_traces/ holds: Llama-70B-like decode and prefill at TP 2/4/8, shortened."""
    decode = TensorParallelConfig(steps=4, layers_simulated=8, jitter=0.02)
    prefill = replace(decode, phase="prefill", seq_len=4096, steps=2)
    nvlink, pcie = LINKS["nvlink"], LINKS["pcie"]
    return [
        *(replace(decode, tp=tp, link=link) for link in (nvlink, pcie) for tp in (2, 4, 8)),
        *(replace(prefill, tp=tp) for tp in (2, 4, 8)),
        replace(prefill, link=pcie),
        replace(prefill, overlap=True),
        replace(decode, straggler_rank=3, straggler_slowdown=1.3),
        # One vLLM-style TP=4 decode run (an eager step, then two graph replays) as nsys records
        # it by default (graph-level) and with --cuda-graph-trace=node.
        *(replace(decode, tp=4, steps=3, cuda_graphs=trace) for trace in ("graph", "node")),
    ]


# Developer command-line flags of the plain fields: (flag, field).
_FLAGS: tuple[tuple[str, str], ...] = (
    ("--seq-len", "seq_len"), ("--tokens", "tokens"), ("--batch", "batch"),
    ("--dtype-bytes", "dtype_bytes"), ("--tp", "tp"), ("--steps", "steps"),
    ("--layers", "layers_simulated"), ("--straggler-rank", "straggler_rank"),
    ("--straggler-slowdown", "straggler_slowdown"), ("--jitter", "jitter"), ("--seed", "seed"),
)  # fmt: skip
PROG = "python -m nsysreport.synth.simulate"


def sample_command(config: TensorParallelConfig, folder: str = "sample_traces") -> str:
    """The command line that writes `config`'s file (flags only where they differ from defaults)."""
    c, d = config, TensorParallelConfig()
    flags = f"--model {c.model.name} --phase {c.phase} --tp {c.tp} --link {c.link.name}".split(" ")
    flags += [f"--gpu {c.gpu.name}"] if c.gpu != d.gpu else []
    for flag, name in _FLAGS:
        value = getattr(c, name)
        if value != getattr(d, name) and flag != "--tp":
            flags.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
    flags += ["--overlap"] if c.overlap else []
    flags += [f"--cuda-graphs {c.cuda_graphs}"] if c.cuda_graphs != "off" else []
    return f"{PROG} {' '.join(flags)} --out {folder}/{sample_name(c)}"


def _one_of(names: Iterable[str]) -> Callable[[str], str]:
    """An option check: the value must be one of `names`."""
    allowed = tuple(names)

    def check(value: str) -> str:
        if value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}.")
        return value

    return check


def _choice(names: Iterable[str], what: str) -> Any:
    allowed = tuple(names)
    return typer.Option(callback=_one_of(allowed), help=f"{what}: {', '.join(allowed)}.")


# The developer command line (not the user CLI). Click rewraps help paragraphs; \b keeps each of
# the docstring's as written (its lists and formulas).
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
_HELP = "\n\n".join(f"\b\n{paragraph}" for paragraph in (__doc__ or "").strip().split("\n\n"))
_D = TensorParallelConfig()


@app.command(help=_HELP)
def simulate(
    ctx: typer.Context,
    model: Annotated[str, _choice(MODELS, "Model shape")] = _D.model.name,
    link: Annotated[str, _choice(LINKS, "Interconnect")] = _D.link.name,
    gpu: Annotated[str, _choice(GPUS, "GPU")] = _D.gpu.name,
    phase: Annotated[str, _choice(("prefill", "decode"), "Phase")] = _D.phase,
    seq_len: int = _D.seq_len,
    tokens: int = _D.tokens,
    batch: int = _D.batch,
    dtype_bytes: int = _D.dtype_bytes,
    tp: int = _D.tp,
    steps: int = _D.steps,
    layers_simulated: Annotated[int | None, typer.Option("--layers")] = _D.layers_simulated,
    straggler_rank: int | None = _D.straggler_rank,
    straggler_slowdown: float = _D.straggler_slowdown,
    jitter: float = _D.jitter,
    seed: int = _D.seed,
    overlap: Annotated[
        bool, typer.Option("--overlap", help="All-reduce beside the next GEMM.")
    ] = _D.overlap,
    cuda_graphs: Annotated[
        str,
        typer.Option(
            callback=_one_of(("off", "graph", "node")),
            help="Decode steps after the first as CUDA graph replays, traced graph- or "
            "node-level: off, graph, node.",
        ),
    ] = _D.cuda_graphs,
    out: Annotated[
        Path | None, typer.Option(help="File to write (default: its sample name here).")
    ] = None,
    samples: Annotated[
        Path | None, typer.Option(help="Write every sample trace into this folder.")
    ] = None,
) -> None:
    """Write one simulated trace, or with --samples every file of sample_traces/."""
    if samples is not None:
        samples.mkdir(parents=True, exist_ok=True)
        for config in sample_configs():
            path = write_trace(tensor_parallel(config), samples / sample_name(config))
            typer.echo(f"{path}  <-  {sample_command(config, str(samples))}")
        return
    # ctx.params holds every flag above by its name, which is its configuration field's.
    config = config_from_args(ctx.params)
    path = write_trace(simulated_or_exit(config), out or Path(sample_name(config)))
    typer.echo(f"{path}: {describe(config)}")


def simulated_or_exit(config: TensorParallelConfig) -> Scenario:
    """`tensor_parallel(config)`; a configuration it refuses is a usage error, not a traceback."""
    try:
        return tensor_parallel(config)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def parse_args(argv: Sequence[str]) -> dict[str, Any]:
    """The flags of a developer command line by name, parsed without running it."""
    with typer.main.get_command(app).make_context(PROG, list(argv)) as ctx:
        return dict(ctx.params)


def config_from_args(params: Mapping[str, Any]) -> TensorParallelConfig:
    """The configuration the parsed flags describe."""
    plain: dict[str, Any] = {name: params[name] for _, name in _FLAGS}
    specs = TensorParallelConfig(
        model=MODELS[params["model"]], link=LINKS[params["link"]], gpu=GPUS[params["gpu"]],
        phase=params["phase"], overlap=params["overlap"], cuda_graphs=params["cuda_graphs"],
    )  # fmt: skip
    return replace(specs, **plain)


if __name__ == "__main__":
    app(prog_name=PROG)
