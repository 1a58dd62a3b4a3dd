"""A synthetic PyTorch profiler (Kineto) trace of operators with recorded shapes, each launching
one kernel and calling the operators nested in it: the ground truth of the Compute efficiency
section (FLOPs, MFU, roofline) is then known exactly from the shapes and durations given."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PID, TID, STREAM = 100, 100, 7


@dataclass(frozen=True, slots=True)
class ShapedOp:
    """One operator call: its name, recorded input shapes and dtypes, and the kernel it launches
    (`kernel_us` long, started `gap_us` after the previous kernel ended; none when `kernel` is
    empty), then the calls nested in it (`inner`, each after its own gap), inside its range:
    aten::matmul's copies (aten::copy_) and its aten::bmm."""

    name: str
    dims: list[list[int]]
    types: list[str]
    kernel: str
    kernel_us: int
    concrete: list[str] | None = None
    gap_us: int = 10
    layer: str | None = None  # an NVTX-style annotation around the call (a layer range)
    inner: tuple[ShapedOp, ...] = ()


@dataclass(frozen=True, slots=True)
class ShapedTrace:
    steps: Sequence[Sequence[ShapedOp]]  # the calls of each ProfilerStep
    gpu_name: str | None = "NVIDIA H100 80GB HBM3"
    extra: dict[str, Any] = field(default_factory=dict)
    device: int = 0  # the device the kernels carry (args.device, pid)
    # deviceProperties' id for it; None: `device`. A ROCm trace taken with one GPU visible
    # lists it as 0 while its kernels carry 2 (docs/export-format.md, "GPU list").
    listed_as: int | None = None


def write_shaped_trace(trace: ShapedTrace, path: Path) -> Path:
    """Write `trace` as a Kineto JSON (gzip when `path` ends in .gz); times in µs."""
    events: list[dict[str, Any]] = []
    t = 1000
    correlation = 1

    def call(op: ShapedOp, t: int) -> int:
        """Emit `op` after its gap from `t`; return when its last kernel ends. Its range (4 µs
        without nested calls) covers its launch and its nested calls' ranges."""
        nonlocal correlation
        t += op.gap_us
        args: dict[str, Any] = {
            "External id": correlation,
            "Input Dims": op.dims,
            "Input type": op.types,
        }
        if op.concrete is not None:
            args["Concrete Inputs"] = op.concrete
        ranges: list[dict[str, Any]] = [{"ph": "X", "cat": "cpu_op", "name": op.name, "args": args}]
        if op.layer is not None:
            ranges.append({"ph": "X", "cat": "user_annotation", "name": op.layer})
        for event in ranges:
            event.update({"pid": PID, "tid": TID, "ts": t, "dur": 4})
            events.append(event)
        start = t
        if op.kernel:
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": PID,
                    "tid": TID,
                    "ts": t + 1,
                    "dur": 2,
                    "args": {"correlation": correlation, "External id": correlation},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": op.kernel,
                    "pid": trace.device,
                    "tid": STREAM,
                    "ts": t + 5,
                    "dur": op.kernel_us,
                    "args": {"device": trace.device, "stream": STREAM, "correlation": correlation},
                }
            )
            t += 5 + op.kernel_us
            correlation += 1
        for child in op.inner:
            t = call(child, t)
        if op.inner:
            for event in ranges:  # past the last nested range, which ends before its kernel
                event["dur"] = t + 1 - start
        return t

    for index, calls in enumerate(trace.steps, start=1):
        step_start = t
        for op in calls:
            t = call(op, t)
        t += 10
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{index}",
                "pid": PID,
                "tid": TID,
                "ts": step_start,
                "dur": t - step_start,
            }
        )
        t += 10
    document: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events, **trace.extra}
    if trace.gpu_name is not None:
        listed = trace.device if trace.listed_as is None else trace.listed_as
        document["deviceProperties"] = [{"id": listed, "name": trace.gpu_name}]
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path
