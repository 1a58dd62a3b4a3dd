"""Simulate tensor- x data-parallel training steps as one synthetic nsys trace (never a capture).

Job. `tp * dp` ranks in one node, one process per rank (pid 1000 + rank, device = rank), as
`nsys profile torchrun` records them: rank r is TP rank r % tp of TP group r // tp and DP rank
r // tp of DP group r % tp (Megatron's order: TP groups are consecutive ranks). Each step runs
the forward and backward pass of `layers` Llama-style layers (Megatron's tensor parallelism:
the attention output and MLP down projections all-reduce their activations in the forward
pass, the QKV and gate/up projections their input gradients in the backward pass), then the
optimizer. TP all-reduces run on their process group's NCCL stream (23) and the compute
stream (7) waits for each: they sit on the critical path. Each layer's gradients, once its
backward pass is done, are all-reduced across the DP group in DDP's 25 MB buckets on the DP
group's stream (31) while the backward pass of the layers below runs: only the last layer's
buckets, and any time a bucket runs while the compute stream waits for a TP all-reduce, are
exposed. The optimizer waits for every bucket.

Ground truth. NSYSREPORT_SIMULATION holds the configuration and `groups`: for each role (tp,
dp) its stream and the ranks of each of its communicators, so a test can check what the
report infers from the trace alone. Durations use nsysreport.synth.simulate's cost models
(roofline GEMMs and attention on an H100, NCCL ring all-reduce over NVLink); the backward
pass's GEMMs are the forward's twice (input and weight gradients), FlashAttention's backward
2.5x its forward (assumption). A collective ends on every member at its last arrival plus its
duration. `jitter` scales every compute kernel (drawn per rank) and every collective (drawn
per communicator instance) by a seeded uniform factor in [1 - jitter, 1 + jitter].
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from nsysreport.synth import ApiCall, Gpu, Kernel, NvtxRange, Scenario, write_trace
from nsysreport.synth.simulate import (
    _ATTENTION,
    _GEMM,
    ADD_RMS_NORM,
    ALLREDUCE,
    GPU_NAME,
    GPUS,
    LINKS,
    MODELS,
    ROTARY,
    SILU_AND_MUL,
    START_NS,
    allreduce_ns,
    attention_ns,
    gemm_ns,
    memory_ns,
)

COMPUTE_STREAM, TP_STREAM, DP_STREAM = 7, 23, 31
BUCKET_BYTES = 25 * 1024 * 1024  # DDP's default bucket_cap_mb
FLASH_BWD = (
    "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<(int)128,"
    " (int)64, (int)128, (int)8, (int)2, (int)4, (int)2, (bool)0, (bool)0, cutlass::bfloat16_t"
    ">, (bool)0, (bool)1, (bool)0, (bool)0, (bool)0, (bool)0, (bool)0>(flash::Flash_bwd_params)"
)
WGRAD = "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
NORM_BWD = "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<c10::BFloat16>"
ACT_BWD = "void at::native::vectorized_elementwise_kernel<(int)4, silu_backward_kernel>"
EMBED = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long>"
LOSS = "void at::native::cunn_SoftMaxForward<(int)4, c10::BFloat16, float, float>"
ADAM = "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<c10::BFloat16, (int)4>>"


@dataclass(frozen=True, slots=True)
class TrainingConfig:
    """One simulated TP x DP training run."""

    model: str = "llama8b"
    tp: int = 4
    dp: int = 2
    seq_len: int = 4096  # tokens per micro-batch (batch 1)
    layers: int = 6
    steps: int = 2
    link: str = "nvlink"
    jitter: float = 0.02
    seed: int = 0


def _pid(rank: int) -> int:
    return 1000 + rank


def groups(config: TrainingConfig) -> dict[str, list[list[int]]]:
    """The ranks of each TP and each DP communicator."""
    tp, dp = config.tp, config.dp
    return {
        "tp": [[g * tp + i for i in range(tp)] for g in range(dp)],
        "dp": [[d * tp + i for d in range(dp)] for i in range(tp)],
    }


class _Job:
    """Every rank's host clock and stream ends; collectives end together on their members."""

    def __init__(self, config: TrainingConfig) -> None:
        self.c = config
        self.rng = random.Random(config.seed)
        self.ranks = range(config.tp * config.dp)
        self.clock = [START_NS] * len(self.ranks)
        self.free = [{COMPUTE_STREAM: 0, TP_STREAM: 0, DP_STREAM: 0} for _ in self.ranks]
        self.kernels: list[Kernel] = []
        self.api_calls: list[ApiCall] = []
        self.ranges: list[NvtxRange] = []
        self.groups = groups(config)

    def _noise(self) -> float:
        j = self.c.jitter
        return 1.0 + self.rng.uniform(-j, j) if j else 1.0

    def _launch(self, r: int) -> tuple[int, int]:
        start = self.clock[r]
        self.clock[r] = start + 3_000 + 2_000  # the launch call, then Python until the next
        return start, start + 3_000

    @contextmanager
    def nvtx(self, text: str) -> Iterator[None]:
        starts = list(self.clock)
        self.clock = [t + 200 for t in self.clock]
        yield
        for r in self.ranks:
            self.ranges.append(NvtxRange(starts[r], self.clock[r], text, pid=_pid(r)))
            self.clock[r] += 200

    def kernel(self, name: str, ns: int) -> None:
        for r in self.ranks:
            launch = self._launch(r)
            start = max(launch[1] + 1_500, self.free[r][COMPUTE_STREAM])
            end = start + round(ns * self._noise())
            self.free[r][COMPUTE_STREAM] = end
            self.kernels.append(Kernel(start, end, name, r, COMPUTE_STREAM, _pid(r), launch=launch))

    def _collective(self, role: str, message_bytes: int, blocking: bool) -> None:
        """One all-reduce on every communicator of `role`; `blocking`: the compute stream waits
        for it (TP), else it runs beside the compute stream's later work (DP)."""
        stream = TP_STREAM if role == "tp" else DP_STREAM
        size = self.c.tp if role == "tp" else self.c.dp
        if size == 1:
            return  # a communicator of one rank: nothing to exchange
        ns = allreduce_ns(message_bytes, size, LINKS[self.c.link])
        arrivals: dict[int, int] = {}
        launches: dict[int, tuple[int, int]] = {}
        for r in self.ranks:
            begin = self.clock[r]
            self.clock[r] += 4_000  # NCCL's enqueue
            launches[r] = self._launch(r)
            self.ranges.append(
                NvtxRange(begin, launches[r][1] + 500, "ncclAllReduce", pid=_pid(r),
                          registered=True, domain="NCCL", payload=message_bytes)
            )  # fmt: skip
            # The comm stream waits for the compute stream's result (an event) and its own
            # previous collective.
            arrivals[r] = max(
                launches[r][1] + 1_500, self.free[r][COMPUTE_STREAM], self.free[r][stream]
            )
        for members in self.groups[role]:
            finish = max(arrivals[r] for r in members) + round(ns * self._noise())
            for r in members:
                self.free[r][stream] = finish
                if blocking:
                    self.free[r][COMPUTE_STREAM] = finish
                self.kernels.append(
                    Kernel(arrivals[r], finish, ALLREDUCE, r, stream, _pid(r),
                           launch=launches[r], api="cuLaunchKernelEx", event_class=1)
                )  # fmt: skip

    def tp_allreduce(self, message_bytes: int) -> None:
        self._collective("tp", message_bytes, blocking=True)

    def dp_allreduce(self, message_bytes: int) -> None:
        self._collective("dp", message_bytes, blocking=False)

    def wait_for(self, stream: int) -> None:
        """cudaStreamWaitEvent: the compute stream waits for `stream`'s work so far."""
        for r in self.ranks:
            self.free[r][COMPUTE_STREAM] = max(self.free[r][COMPUTE_STREAM], self.free[r][stream])

    def synchronize(self) -> None:
        for r in self.ranks:
            start = self.clock[r]
            end = max(start + 1_000, *self.free[r].values()) + 1_000
            self.api_calls.append(ApiCall(start, end, "cudaStreamSynchronize_v3020", pid=_pid(r)))
            self.clock[r] = end + 40_000  # the training loop between steps


def training(config: TrainingConfig) -> Scenario:
    """The trace of `config`: every rank of the node in one export."""
    c, m, gpu = config, MODELS[config.model], GPUS["h100"]
    if m.heads % c.tp or m.ffn % c.tp:
        raise ValueError(f"TP={c.tp} must divide {m.name}'s {m.heads} heads and FFN {m.ffn}")
    job, b, rows = _Job(c), 2, c.seq_len
    head_dim = m.hidden // m.heads
    heads, kv_heads = m.heads // c.tp, max(1, m.kv_heads // c.tp)
    ffn = m.ffn // c.tp
    qkv = (heads + 2 * kv_heads) * head_dim
    act = rows * m.hidden * b  # a TP all-reduce's message: one activation (or its gradient)
    layer_params = m.hidden * qkv + heads * head_dim * m.hidden + 3 * m.hidden * ffn
    grad_bytes = layer_params * b  # one layer's gradient shard on a rank
    gemms = {
        "qkv": gemm_ns(rows, qkv, m.hidden, gpu, b),
        "o": gemm_ns(rows, m.hidden, heads * head_dim, gpu, b),
        "gate_up": gemm_ns(rows, 2 * ffn, m.hidden, gpu, b),
        "down": gemm_ns(rows, m.hidden, ffn, gpu, b),
    }
    attn = attention_ns(1, rows, rows, heads, kv_heads, head_dim, gpu, b, True)
    norm = memory_ns(4 * act, gpu)
    for step in range(c.steps):
        with job.nvtx(f"step {step}"):
            job.kernel(EMBED, memory_ns(2 * act, gpu))
            job.tp_allreduce(act)  # the vocab-parallel embedding's partial sums
            for layer in range(c.layers):
                with job.nvtx(f"model.layers.{layer}"):
                    job.kernel(ADD_RMS_NORM, norm)
                    job.kernel(_GEMM["qkv"][0], gemms["qkv"])
                    job.kernel(ROTARY, memory_ns(2 * rows * (heads + kv_heads) * head_dim * b, gpu))
                    job.kernel(_ATTENTION[0], attn)
                    job.kernel(_GEMM["o"][0], gemms["o"])
                    job.tp_allreduce(act)
                    job.kernel(ADD_RMS_NORM, norm)
                    job.kernel(_GEMM["gate_up"][0], gemms["gate_up"])
                    job.kernel(SILU_AND_MUL, memory_ns(3 * rows * ffn * b, gpu))
                    job.kernel(_GEMM["down"][0], gemms["down"])
                    job.tp_allreduce(act)
            job.kernel(LOSS, memory_ns(4 * act, gpu))
            for layer in reversed(range(c.layers)):
                with job.nvtx(f"model.layers.{layer}.backward"):
                    job.kernel(_GEMM["down"][0], gemms["down"])  # input gradient
                    job.kernel(WGRAD, gemms["down"])  # weight gradient
                    job.kernel(ACT_BWD, memory_ns(3 * rows * ffn * b, gpu))
                    job.kernel(_GEMM["gate_up"][0], gemms["gate_up"])
                    job.kernel(WGRAD, gemms["gate_up"])
                    job.tp_allreduce(act)  # the column-parallel input gradient
                    job.kernel(NORM_BWD, norm)
                    job.kernel(_GEMM["o"][0], gemms["o"])
                    job.kernel(WGRAD, gemms["o"])
                    job.kernel(FLASH_BWD, round(2.5 * attn))
                    job.kernel(ROTARY, memory_ns(2 * rows * (heads + kv_heads) * head_dim * b, gpu))
                    job.kernel(_GEMM["qkv"][0], gemms["qkv"])
                    job.kernel(WGRAD, gemms["qkv"])
                    job.tp_allreduce(act)
                    job.kernel(NORM_BWD, norm)
                # DDP's hook: the layer's gradients are ready, all-reduce them bucket by bucket
                left = grad_bytes
                while left > 0:
                    job.dp_allreduce(min(left, BUCKET_BYTES))
                    left -= BUCKET_BYTES
            job.wait_for(DP_STREAM)  # the optimizer needs every gradient
            job.kernel(ADAM, memory_ns(16 * layer_params * c.layers, gpu))
            job.synchronize()
    return Scenario(
        kernels=job.kernels,
        api_calls=job.api_calls,
        nvtx=job.ranges,
        gpus=[Gpu(device=r, name=GPU_NAME, pid=_pid(r)) for r in job.ranks],
        host=f"simulated-h100x{len(job.ranks)}",
        metadata={"NSYSREPORT_SIMULATED": describe(c), "NSYSREPORT_SIMULATION": simulation(c)},
    )


def describe(config: TrainingConfig) -> str:
    c = config
    return (
        f"{c.model} training, {c.seq_len} tokens per micro-batch, TP={c.tp} x DP={c.dp} over "
        f"{c.link} on h100 ({c.layers} layers, {c.steps} steps; TP all-reduces on the critical "
        f"path, DP gradient buckets overlapped with the backward pass), jitter {c.jitter:g}, "
        f"seed {c.seed}: simulated by nsysreport.synth.training, not captured on a GPU."
    )


def simulation(config: TrainingConfig) -> str:
    """NSYSREPORT_SIMULATION: the configuration, the link as the data path reads it, and the
    ground truth of the communicators."""
    link = LINKS[config.link]
    truth = {
        "tp": {"stream": TP_STREAM, "ranks": groups(config)["tp"]},
        "dp": {"stream": DP_STREAM, "ranks": groups(config)["dp"]},
    }
    fields = {
        **asdict(config),
        "kind": "training",
        "link": {"name": link.name, "bus_bytes_per_s": link.bus_bytes_per_s},
        "groups": truth,
    }
    return json.dumps(fields, sort_keys=True)


SAMPLE = TrainingConfig()
SAMPLE_NAME = "llama8b_train_tp4_dp2_nvlink.sqlite"
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def main(
    out: Annotated[Path, typer.Option(help="File to write.")] = Path(SAMPLE_NAME),
    tp: int = SAMPLE.tp,
    dp: int = SAMPLE.dp,
    layers: int = SAMPLE.layers,
    steps: int = SAMPLE.steps,
    jitter: float = SAMPLE.jitter,
    seed: int = SAMPLE.seed,
) -> None:
    """Write one simulated TP x DP training trace (the sample: the defaults)."""
    config = TrainingConfig(tp=tp, dp=dp, layers=layers, steps=steps, jitter=jitter, seed=seed)
    try:
        scenario = training(config)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(f"{write_trace(scenario, out)}: {describe(config)}")


if __name__ == "__main__":
    app(prog_name="python -m nsysreport.synth.training")
