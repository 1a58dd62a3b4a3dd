"""The fuzzer's unmutated inputs: tiny synth exports, two small real exports, a Kineto trace.

Every case copies a seed into its own folder; nothing in the repository is ever mutated.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsysreport.synth import Gpu, Kernel, Memcpy, Memset, NvtxRange, Scenario, write_trace

REPO = Path(__file__).resolve().parents[2]
SHARED_NSYS = REPO.parent / "shared" / "traces" / "nsys"

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
FLASH = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128>>(flash::Flash_fwd_params)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<(int)4>(int)"


@dataclass(frozen=True, slots=True)
class Seed:
    """One unmutated input: its file name inside a case folder and how to make it."""

    name: str
    filename: str  # every case names its copy like this, so reports name the same file
    kind: str  # "sqlite" or "kineto"


SEEDS = {
    s.name: s
    for s in (
        Seed("synth", "t.sqlite", "sqlite"),  # 2 GPUs, steps, layers, comm, memcpy, memset
        Seed("synth_b", "t.sqlite", "sqlite"),  # the same shape and file size, other numbers
        Seed("synth_2022", "t.sqlite", "sqlite"),  # the synth scenario in nsys 2022.2's schema
        Seed("sample", "t.sqlite", "sqlite"),  # sample_traces: llama70b prefill, TP2
        Seed("rtx3080", "t.sqlite", "sqlite"),  # a real nsys 2026.1 export, two kernels
        Seed("kineto", "t.json", "kineto"),
        Seed("kineto_gz", "t.json.gz", "kineto"),
    )
}
SQLITE_SEEDS = tuple(s for s in SEEDS if SEEDS[s].kind == "sqlite" and s != "synth_b")


def synth_scenario(stretch: int = 0) -> Scenario:
    """Two GPUs (pids 100, 101), two ProfilerStep ranges each with layers.0 (GEMM + flash)
    and layers.1 (an all-reduce half hidden behind elementwise work), a copy and a memset."""
    kernels: list[Kernel] = []
    nvtx: list[NvtxRange] = []
    memcpys: list[Memcpy] = []
    memsets: list[Memset] = []
    for device, pid in ((0, 100), (1, 101)):
        for step in range(2):
            t = 1000 + step * 1000 + device * 7
            nvtx.append(NvtxRange(t - 60, t + 900, f"ProfilerStep#{step}", pid=pid))
            nvtx.append(NvtxRange(t - 50, t + 390, "layers.0", pid=pid))
            nvtx.append(NvtxRange(t + 395, t + 850, "layers.1", pid=pid))
            kernels += [
                Kernel(t, t + 200 + stretch, GEMM, device=device, pid=pid),
                Kernel(t + 210, t + 380, FLASH, device=device, pid=pid),
                Kernel(t + 400, t + 600, NCCL, device=device, pid=pid, stream=20),
                Kernel(t + 500, t + 650, ELEMENTWISE, device=device, pid=pid),
            ]
            memcpys.append(Memcpy(t + 700, t + 760 + stretch, device=device, pid=pid))
            memsets.append(Memset(t + 780, t + 800, device=device, pid=pid))
    return Scenario(
        kernels=kernels,
        memcpys=memcpys,
        memsets=memsets,
        nvtx=nvtx,
        gpus=[Gpu(0, pid=100), Gpu(1, pid=101)],
    )


def kineto_document() -> dict[str, Any]:
    """A one-process PyTorch profiler trace: two ProfilerSteps on device 0, GEMM, NCCL
    all-reduce on its own stream, elementwise kernels and a copy; times in µs with decimals."""
    host = {"pid": 42, "tid": 43}
    events: list[dict[str, Any]] = []
    corr = 0

    def launch(ts: float, cat: str, name: str, dur: float, stream: int, **args: Any) -> None:
        nonlocal corr
        corr += 1
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                **host,
                "ts": ts - 1.5,
                "dur": 1.0,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": ts,
                "dur": dur,
                "args": {"device": 0, "stream": stream, "correlation": corr, **args},
            }
        )

    for step in range(2):
        t = 100.0 + step * 100
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                **host,
                "ts": t - 5,
                "dur": 90.25,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "layers.0",
                **host,
                "ts": t - 4,
                "dur": 80.5,
            }
        )
        launch(t, "kernel", GEMM, 20.125, 7)
        launch(
            t + 21,
            "kernel",
            NCCL,
            30.5,
            20,
            **{"Collective name": "allreduce", "In msg nelems": 4096, "dtype": "BFloat16"},
        )
        launch(t + 30, "kernel", ELEMENTWISE, 10.001, 7)
        launch(t + 60, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 4.5, 7, bytes=1 << 20)
    events.append({"ph": "i", "cat": "cpu_op", "name": "marker", **host, "ts": 1.0, "s": "t"})
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {"rank": 0, "backend": "nccl"},
        "traceEvents": events,
    }


def build(seed: str, folder: Path) -> Path:
    """Write (or copy) the unmutated seed into `folder` under its case file name."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SEEDS[seed].filename
    if seed in ("synth", "synth_b"):
        write_trace(synth_scenario(stretch=40 if seed == "synth_b" else 0), path)
    elif seed == "synth_2022":
        write_trace(synth_scenario(), path, version="2022.2")
    elif seed == "sample":
        shutil.copyfile(REPO / "sample_traces" / "llama70b_prefill_tp2_nvlink.sqlite", path)
    elif seed == "rtx3080":
        source = SHARED_NSYS / "rtx3080_tiny_2026.1.sqlite"
        if not source.is_file():
            raise FileNotFoundError(f"{source}: the fuzz seeds need ../shared/traces")
        shutil.copyfile(source, path)
    elif seed == "kineto":
        path.write_text(json.dumps(kineto_document()))
    elif seed == "kineto_gz":
        path.write_bytes(gzip.compress(json.dumps(kineto_document()).encode(), mtime=0))
    else:
        raise KeyError(seed)
    return path


@dataclass(frozen=True, slots=True)
class SqliteShape:
    """What a SQLite seed holds: columns per table and row ids per table (for planning)."""

    columns: dict[str, tuple[str, ...]]
    rowids: dict[str, tuple[int, ...]]
    kernel_names: tuple[int, ...]  # StringIds ids that name kernels


def sqlite_shape(path: Path) -> SqliteShape:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        columns = {t: tuple(r[1] for r in con.execute(f'PRAGMA table_info("{t}")')) for t in tables}
        rowids = {
            t: tuple(r[0] for r in con.execute(f'SELECT rowid FROM "{t}" ORDER BY rowid'))
            for t in tables
        }
        names: tuple[int, ...] = ()
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            names = tuple(
                r[0]
                for r in con.execute(
                    "SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1"
                )
            )
    finally:
        con.close()
    return SqliteShape(columns, rowids, names)
