"""Synthetic copies as a PyTorch profiler (Kineto) trace: each `Memcpy` of a scenario as the
`cudaMemcpyAsync` call and the `gpu_memcpy` event libkineto writes, named as it names them
(`Memcpy DtoH (Device -> Pageable)`: copy kind, then source and destination memory), so that one
set of copies reads as an nsys export (write_trace) and as a Kineto trace with one ground truth."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nsysreport.synth.trace import Memcpy

# ENUM_CUDA_MEMCPY_OPER id -> libkineto's copy kind, and which side of it is host memory.
_KINDS = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
_SIDES = {1: ("host", "Device"), 2: ("Device", "host"), 8: ("Device", "Device"),
          9: ("host", "host"), 10: ("Device", "Device")}  # fmt: skip


def copy_name(m: Memcpy) -> str:
    """libkineto's name of the copy: `Memcpy HtoD (Pinned -> Device)`."""
    host = "Pinned" if m.pinned else "Pageable"
    src, dst = (host if side == "host" else side for side in _SIDES[m.copy_kind])
    return f"Memcpy {_KINDS[m.copy_kind]} ({src} -> {dst})"


def write_kineto_copies(
    memcpys: Sequence[Memcpy], path: Path, gpu_name: str = "NVIDIA H100 80GB HBM3"
) -> Path:
    """Write the copies as a Kineto JSON trace (µs, with ns kept as decimals); each copy's call
    starts 2 µs before it on the host thread of its process."""
    events: list[dict[str, Any]] = []
    for correlation, m in enumerate(memcpys, start=1):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaMemcpyAsync",
                "pid": m.pid,
                "tid": m.pid if m.tid is None else m.tid,
                "ts": (m.start - 2_000) / 1000,
                "dur": 1.0,
                "args": {"correlation": correlation},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": copy_name(m),
                "pid": m.device,
                "tid": m.stream,
                "ts": m.start / 1000,
                "dur": (m.end - m.start) / 1000,
                "args": {
                    "device": m.device,
                    "stream": m.stream,
                    "correlation": correlation,
                    "bytes": m.bytes,
                },
            }
        )
    devices = sorted({m.device for m in memcpys})
    document = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": d, "name": gpu_name} for d in devices],
        "traceEvents": events,
    }
    path.write_text(json.dumps(document))
    return path
