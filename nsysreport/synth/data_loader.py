"""A training loop that stalls on its data loader: bursts of kernels with the GPU idle between
them while the launching thread sits in the DataLoader's `__next__`, as a PyTorch profiler
(Kineto) trace and as nsys exports.

Every step (one ProfilerStep) loads a batch on the main thread, launches a burst of `KERNELS`
kernels in quick succession (a deep launch queue), then waits for them in
cudaStreamSynchronize. The GPU therefore runs each burst back to back, with GAP_US between
kernels, and idles while the next batch loads: the steps after the first open a STALL_US gap.
Times in µs (the nsys exports in ns, the same instants x 1000):

- burst s (s = 0..STEPS-1) starts at B_s = FIRST_US + s * (BURST_US + STALL_US); its kernel k
  runs [B_s + k * (KERNEL_US + GAP_US), ... + KERNEL_US), so the burst ends at
  E_s = B_s + BURST_US, BURST_US = KERNELS * KERNEL_US + (KERNELS - 1) * GAP_US;
- kernel k is launched by cudaLaunchKernel [B_s - 20 + 5k, B_s - 16 + 5k);
- cudaStreamSynchronize [B_s + 500, E_s + 5);
- the batch of step s loads in [B_s - STALL_US + 10, B_s - 25): `enumerate(DataLoader)#
  _SingleProcessDataLoaderIter.__next__` (the record_function range PyTorch's DataLoader
  iterator opens in __next__) inside the Python frame `torch/utils/data/dataloader.py(733):
  __next__` one µs wider each side, with `_next_data` and `fetch` frames inside it and
  BATCH `__getitem__` frames filling it;
- `ProfilerStep#s+1` runs from the load's start to the sync's end.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from nsysreport.synth.trace import Kernel, NvtxRange, OsCall, Scenario, write_trace

PID, TID, STREAM = 100, 100, 7
STEPS = 5
KERNELS = 100
KERNEL_US = 1_000
GAP_US = 10
STALL_US = 120_000
FIRST_US = 200_000
BATCH = 60  # __getitem__ frames per batch
BURST_US = KERNELS * KERNEL_US + (KERNELS - 1) * GAP_US
CONV = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64"
ANNOTATION = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
# With worker processes (num_workers > 0) the iterator is the multiprocessing one, and the main
# thread polls the workers' queue while it waits.
WORKERS_ANNOTATION = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
NEXT_FRAME = "torch/utils/data/dataloader.py(733): __next__"
INNER_FRAMES = (
    "torch/utils/data/dataloader.py(789): _next_data",
    "torch/utils/data/_utils/fetch.py(52): fetch",
)
ITEM_FRAME = "torchvision/datasets/folder.py(245): __getitem__"
SHORT_FRAME = "torchvision/transforms/functional.py(140): to_tensor"


def burst_start(step: int) -> int:
    """B_s: when burst `step` (from 0) starts, µs."""
    return FIRST_US + step * (BURST_US + STALL_US)


def load_window(step: int) -> tuple[int, int]:
    """The DataLoader range of `step` (from 0), µs."""
    return burst_start(step) - STALL_US + 10, burst_start(step) - 25


def write_kineto_stall(path: Path, with_stack: bool = True, annotate: bool = True) -> Path:
    """The stalling loop as a Kineto JSON (gzip when `path` ends in .gz): with `with_stack`, the
    Python frames `with_stack=True` records (per step one more, of 99.999 µs, inside the first
    `__getitem__`: too short to keep); with `annotate`, the DataLoader's record_function range
    (PyTorch always records it; without, only its frame says the thread was loading data)."""
    events: list[dict[str, Any]] = []

    def cpu(cat: str, name: str, ts: float, dur: float, **args: Any) -> None:
        event = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts}
        events.append({**event, "dur": dur, **({"args": args} if args else {})})

    first, _ = load_window(0)
    last_end = burst_start(STEPS - 1) + BURST_US + 5
    frames: list[tuple[str, float, float]] = [
        ("train.py(12): <module>", first - 100, last_end - first + 200),
        ("train.py(30): train", first - 50, last_end - first + 100),
    ]
    correlation = 1
    for step in range(STEPS):
        lo, hi = load_window(step)
        b = burst_start(step)
        cpu("user_annotation", f"ProfilerStep#{step + 1}", lo, b + BURST_US + 5 - lo)
        if annotate:
            cpu("user_annotation", ANNOTATION, lo, hi - lo)
        frames.append((NEXT_FRAME, lo - 1, hi - lo + 2))
        for depth, frame in enumerate(INNER_FRAMES, start=1):
            frames.append((frame, lo + depth, hi - lo - 2 * depth))
        item = (hi - lo - 10) // BATCH
        for i in range(BATCH):
            frames.append((ITEM_FRAME, lo + 5 + i * item, item - 1))
        frames.append((SHORT_FRAME, lo + 6, 99.999))
        for k in range(KERNELS):
            start = b + k * (KERNEL_US + GAP_US)
            ids = {"correlation": correlation, "External id": correlation}
            cpu("cuda_runtime", "cudaLaunchKernel", b - 20 + 5 * k, 4, **ids)
            kernel_args = {"device": 0, "stream": STREAM, "correlation": correlation}
            events.append(
                {"ph": "X", "cat": "kernel", "name": CONV, "pid": 0, "tid": STREAM,
                 "ts": start, "dur": KERNEL_US, "args": kernel_args}
            )  # fmt: skip
            correlation += 1
        cpu("cuda_runtime", "cudaStreamSynchronize", b + 500, BURST_US - 495)
    if with_stack:
        for name, ts, dur in frames:
            cpu("python_function", name, ts, dur)
    document = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
        "traceEvents": events,
    }
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def stall_scenario(nvtx: bool = True, os_call: bool = True) -> Scenario:
    """The stalling loop as an nsys scenario (ns), loading with worker processes: with `nvtx`,
    the DataLoader's range as PyTorch's record_function writes it under emit_nvtx (inline
    text) over the load window, with `os_call` the `poll` the main thread sits in inside it,
    20 µs in from each end, waiting on the workers' queue; `ProfilerStep#N` ranges always."""
    ns = 1_000
    kernels, ranges, calls = [], [], []
    for step in range(STEPS):
        lo, hi = load_window(step)
        b = burst_start(step)
        ranges.append(NvtxRange(lo * ns, (b + BURST_US + 5) * ns, f"ProfilerStep#{step + 1}"))
        if nvtx:
            text = f"{WORKERS_ANNOTATION}, op_id = {1000 + step}"  # as emit_nvtx writes it
            ranges.append(NvtxRange(lo * ns, hi * ns, text))
        if os_call:
            calls.append(OsCall((lo + 20) * ns, (hi - 20) * ns, "poll"))
        for k in range(KERNELS):
            start = b + k * (KERNEL_US + GAP_US)
            launch = ((b - 20 + 5 * k) * ns, (b - 16 + 5 * k) * ns)
            kernels.append(Kernel(start * ns, (start + KERNEL_US) * ns, CONV, launch=launch))
    return Scenario(kernels=kernels, nvtx=ranges, os_calls=calls)


def write_nsys_stall(path: Path, nvtx: bool = True, os_call: bool = True) -> Path:
    """stall_scenario as an nsys 2024.5 export (a version that writes OSRT_API)."""
    return write_trace(stall_scenario(nvtx, os_call), path, version="2024.5")
