"""Measure loading an nsys export into DuckDB: rows/s for each offline loader, side by side.

Usage: python benchmarks/bench_load.py [--kernels 1000000] [--repeat 3] [--emit-nvtx 5]
Makes (once, cached in the temp dir) a synthetic 8-GPU export with the given number of kernels
via nsysreport.synth, then loads it in fresh processes with the sqlite_scanner fast path and the
ADBC fallback, and prints medians, rows/s and peak RSS. With --emit-nvtx N, every launch sits
in N nested ranges as PyTorch's emit_nvtx(record_shapes=True) writes them (each text unique,
most of them GEMM ops with `sizes = [[...]]`), and the load leaves out the ranges that can play
no role as a report's does (their op calls go to op_call). Figures, not assertions: not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
NAMES = [
    GEMM,
    NCCL,
    "void at::native::vectorized_elementwise_kernel<(int)4>(int)",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128>>(flash::Flash_fwd_params)",
]


# emit_nvtx's ops around a launch, outermost first, and their input sizes (M, K, N vary).
EMIT_OPS = (
    ("aten::linear", lambda m, k, n: [[m, k], [n, k], [n]]),
    ("aten::matmul", lambda m, k, n: [[m, k], [k, n]]),
    ("aten::addmm", lambda m, k, n: [[n], [m, k], [k, n], [], []]),
    ("aten::mm", lambda m, k, n: [[m, k], [k, n]]),
    ("aten::add_", lambda m, k, n: [[m, n], [m, n], []]),
)


def make_trace(kernels: int, emit_nvtx: int = 0) -> Path:
    from nsysreport.synth import Kernel, NvtxRange, Scenario, emit_nvtx_text, write_trace

    suffix = f"-emitshapes{emit_nvtx}" if emit_nvtx else ""
    path = Path(tempfile.gettempdir()) / f"nsysreport-bench-{kernels}{suffix}.sqlite"
    if path.exists():
        return path
    per_gpu = kernels // 8

    def gen():  # type: ignore[no-untyped-def]
        for dev in range(8):
            t = 1_000
            for i in range(per_gpu):
                name = NAMES[i % len(NAMES)]
                yield Kernel(
                    t,
                    t + 5_000,
                    name,
                    device=dev,
                    pid=1000 + dev,
                    stream=31 if name is NCCL else 7,
                    launch=(t - 1_000, t - 500),
                )
                t += 6_000 + (i % 7) * 300

    def ranges():  # type: ignore[no-untyped-def]
        for dev in range(8):
            t = 1_000
            for i in range(per_gpu):
                m, k, n = 64 * (1 + i % 16), 128 * (1 + i % 8), 256 * (1 + i % 4)
                for depth in range(emit_nvtx):
                    op, sizes = EMIT_OPS[depth % len(EMIT_OPS)]
                    seq = i * emit_nvtx + depth
                    yield NvtxRange(
                        t - 1_000 - (emit_nvtx - depth),
                        t - 500 + (emit_nvtx - depth),
                        emit_nvtx_text(op, sizes(m, k, n), seq, seq + 1),
                        pid=1000 + dev,
                    )
                t += 6_000 + (i % 7) * 300

    write_trace(Scenario(kernels=gen(), nvtx=ranges() if emit_nvtx else ()), path)
    return path


CHILD = """
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from nsysreport.database import connect
from nsysreport.sqlite_copy import copy_tables
from nsysreport.trace_file import inspect_trace
from nsysreport.patterns import Patterns
path = Path(sys.argv[1])
schema = inspect_trace(path)
con = connect()
loader = copy_tables(con, path, schema, nvtx_roles=Patterns().role_pattern())
elapsed = time.perf_counter() - t0
rows = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
runtime = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
nvtx = con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
# Before op_call (or to time an older checkout: PYTHONPATH=its folder), none is counted.
ops = con.execute("SELECT count(*) FROM op_call").fetchone()[0] if "op_call" in tables else -1
print(json.dumps({"loader": loader, "s": elapsed, "kernels": rows, "rows": rows + runtime,
                  "nvtx": nvtx, "op_call": ops,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(path: Path, loader: str) -> dict[str, float]:
    env = dict(os.environ)
    if loader == "adbc":
        env["NSYSREPORT_LOADER"] = "adbc"
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--emit-nvtx", type=int, default=0, help="emit_nvtx ranges per launch")
    args = parser.parse_args()
    t = time.perf_counter()
    path = make_trace(args.kernels, args.emit_nvtx)
    print(
        f"trace: {path} ({path.stat().st_size / 1e6:.0f} MB, "
        f"made/found in {time.perf_counter() - t:.1f} s)"
    )
    floor = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        subprocess.run(
            [
                "sqlite3",
                str(path),
                'select count(*), sum("end"-start) from CUPTI_ACTIVITY_KIND_KERNEL',
            ],
            check=True,
            capture_output=True,
        )
        floor.append(time.perf_counter() - t)
    print(f"{'sqlite3 floor':<16} median {statistics.median(floor):6.2f} s")
    # Alternate loaders so both see the same machine state (2-core VMs are noisy).
    results: dict[str, list[dict[str, float]]] = {"sqlite_scanner": [], "adbc": []}
    for _ in range(args.repeat):
        for loader in results:
            results[loader].append(run(path, loader))
    base = statistics.median(r["s"] for r in results["sqlite_scanner"])
    for loader, runs in results.items():
        s = statistics.median(r["s"] for r in runs)
        rows = runs[0]["rows"]
        print(
            f"{loader:<16} median {s:6.2f} s  {rows / s / 1e6:5.2f} M rows/s "
            f"({runs[0]['kernels'] / s / 1e6:5.2f} M kernels/s)  peak RSS "
            f"{max(r['rss_mb'] for r in runs):5.0f} MB  x{s / base:4.2f} vs sqlite_scanner  "
            f"(NVTX loaded {runs[0]['nvtx']:,}, op_call {runs[0]['op_call']:,})"
        )


if __name__ == "__main__":
    main()
