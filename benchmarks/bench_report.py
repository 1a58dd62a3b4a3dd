"""Time a full report on large synthetic 8-GPU exports, against the sqlite3 floor and nsys-ai.

Usage: python benchmarks/bench_report.py [--cases 1000000 1000000:5 5000000] [--repeat 3]
           [--peer-python /path/to/python] [--stages]
A case is KERNELS[:EMIT]: an 8-GPU export made once (cached in the temp dir) via
nsysreport.synth, where every GPU runs steps of 40 layers, each layer an NVTX range around 4
GEMM/elementwise kernels and one all-reduce on a second stream (1M kernels: ~200k NVTX
ranges); EMIT adds PyTorch emit_nvtx's load, EMIT nested op ranges with unique texts around
every launch (5: 5.2M ranges at 1M kernels). Then, side by side in fresh processes, --repeat
rounds of: the sqlite3 floor (a count and sum over the kernel table), sqlite3 reading every
column the loaders copy (what no loader can go below), the report end to end
cold (empty caches; matplotlib's font list is built once, before the first run), warm
(report cache), warm with another --top (the report cache misses, the trace cache hits),
--no-cache, and, with --peer-python, nsys-ai 0.3.0's per-GPU report
(benchmarks/peer_nsys_ai.py); medians, ratios to the floor and to the peer, peak RSS (and
the picture worker's, nsysreport.picture_worker). With --stages, in memory: loading, each
derived table, each report query as the model runs it, the model, HTML and JSON. Figures, not
tests.
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
from collections.abc import Iterator
from pathlib import Path

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
OTHER = "void at::native::vectorized_elementwise_kernel<(int)4>(int)"
LAYERS_PER_STEP = 40
KERNELS_PER_LAYER = 5  # 4 compute + 1 all-reduce


# PyTorch `emit_nvtx` pushes one range per autograd op around each launch, nested (module call,
# op, its callees), each text unique through its sequence number and op id.
EMIT_NVTX_OPS = ("aten::linear", "aten::addmm", "aten::mm", "aten::matmul", "aten::add_")


def make_trace(kernels: int, emit_nvtx: int = 0) -> Path:
    """The benchmark export; `emit_nvtx` nested op ranges (unique texts) around every launch."""
    from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

    suffix = f"-emit{emit_nvtx}" if emit_nvtx else ""
    path = Path(tempfile.gettempdir()) / f"nsysreport-bench-nvtx-{kernels}{suffix}.sqlite"
    if path.exists():
        return path
    layers_per_gpu = kernels // 8 // KERNELS_PER_LAYER

    def op_ranges(pid: int, host: int, seq: int) -> list[NvtxRange]:
        # Nested inside [host, host + 1_400], around the launch at host + 10 .. host + 1_000.
        return [
            NvtxRange(
                host + 2 * i,
                host + 1_400 - 2 * i,
                f"{EMIT_NVTX_OPS[i % len(EMIT_NVTX_OPS)]}, seq = {seq}, op_id = {seq * 8 + i}",
                pid=pid,
            )
            for i in range(emit_nvtx)
        ]

    def timeline(dev: int) -> Iterator[tuple[list[Kernel], list[NvtxRange]]]:
        pid, t, host = 1000 + dev, 1_000_000, 0
        for layer in range(layers_per_gpu):
            if layer % LAYERS_PER_STEP == 0:
                step_start = host
            ks, rs = [], []
            first_launch = host
            for k in range(4):
                dur = 20_000 if k % 2 == 0 else 3_000
                rs.extend(op_ranges(pid, host, layer * 5 + k))
                ks.append(
                    Kernel(
                        t,
                        t + dur,
                        GEMM if k % 2 == 0 else OTHER,
                        pid=pid,
                        device=dev,
                        launch=(host + 10, host + 1_000),
                    )
                )
                host += 1_500
                t += dur + 1_000
            ar = 8_000 + 300 * (dev == 3)
            ks.append(
                Kernel(
                    t - 5_000,
                    t - 5_000 + ar,
                    NCCL,
                    pid=pid,
                    device=dev,
                    stream=31,
                    launch=(host + 10, host + 1_000),
                )
            )
            rs.extend(op_ranges(pid, host, layer * 5 + 4))
            host += 1_500
            t += ar
            rs.append(
                NvtxRange(first_launch, host, f"model.layers.{layer % LAYERS_PER_STEP}", pid=pid)
            )
            if layer % LAYERS_PER_STEP == LAYERS_PER_STEP - 1:
                rs.append(NvtxRange(step_start, host, f"step {layer // LAYERS_PER_STEP}", pid=pid))
                host += 50_000
                t = max(t, host) + 20_000
            yield ks, rs

    # Two passes over the same deterministic timeline, so nothing is held in memory at once.
    def kernels_of() -> Iterator[Kernel]:
        for dev in range(8):
            for ks, _ in timeline(dev):
                yield from ks

    def ranges_of() -> Iterator[NvtxRange]:
        for dev in range(8):
            for _, rs in timeline(dev):
                yield from rs

    write_trace(Scenario(kernels=kernels_of(), nvtx=ranges_of()), path)
    return path


CHILD = """
import json, resource, sys, time
from pathlib import Path
times = {}
t = time.perf_counter()
from nsysreport.database import connect
from nsysreport.sqlite_copy import copy_tables
from nsysreport.trace_file import inspect_trace
from nsysreport.patterns import Patterns
from nsysreport.queries import create_views, resource_dir
import nsysreport.queries
path = Path(sys.argv[1])
p = Patterns()
con = connect()
copy_tables(con, path, inspect_trace(path), None, p.role_pattern())
times["load"] = time.perf_counter() - t
derived = {q.stem for q in (resource_dir("queries") / "derived").glob("*.sql")}


def timed(name, seconds):
    if name in derived:  # the derived tables (materialised), not the views (no work until read)
        times["table " + name] = seconds


create_views(con, p, timed)
from nsysreport.model import as_json
from nsysreport.report_builder import build_report
from nsysreport.render import render_html
real = nsysreport.queries.run_query


def run_query(con, name, params=None):  # each report query as the model runs it
    t = time.perf_counter()
    try:
        return real(con, name, params)
    finally:
        times["query " + name] = times.get("query " + name, 0) + time.perf_counter() - t


for module in list(sys.modules.values()):
    if getattr(module, "run_query", None) is real:
        module.run_query = run_query
t = time.perf_counter()
model = build_report(con, path)
times["model (all queries)"] = time.perf_counter() - t
t = time.perf_counter(); render_html(model, "fixed"); times["html"] = time.perf_counter() - t
t = time.perf_counter(); json.dumps(as_json(model)); times["json"] = time.perf_counter() - t
ranges = con.execute("SELECT count(*) FROM nvtx_range").fetchone()[0]
kernels = con.execute("SELECT count(*) FROM kernel").fetchone()[0]
times["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
times["kernels"] = kernels
times["nvtx_ranges"] = ranges
print(json.dumps(times))
"""


# matplotlib's font list, built once per machine (0.35 s), not once per run: an empty
# XDG_CACHE_HOME would hold it too and every "cold" run would rebuild it, which no user's
# first report on a new trace pays.
MPL_HOME = Path(tempfile.gettempdir()) / "nsysreport-bench-matplotlib"


def warm_matplotlib() -> None:
    """Build matplotlib's font list in MPL_HOME before the first timed run."""
    env = {**os.environ, "MPLCONFIGDIR": str(MPL_HOME)}
    subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True, env=env)


def end_to_end(path: Path, cache_home: Path, *extra: str) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and the picture worker's peak RSS (MB; 0 without one,
    nsysreport.picture_worker) of `nsysreport TRACE --json` in a fresh process."""
    out = Path(tempfile.gettempdir())
    cmd = [
        sys.executable,
        "-c",
        RUN,
        str(path),
        str(out / "bench.report.html"),
        str(out / "bench.json"),
        *extra,
    ]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "MPLCONFIGDIR": str(MPL_HOME)}
    result = json.loads(
        subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    )
    return result["s"], result["rss_mb"], result["worker_mb"]


RUN = """
import json, resource, sys, time
t = time.perf_counter()
from nsysreport.cli import main
try:
    main([sys.argv[1], "-o", sys.argv[2], "--json", sys.argv[3], "-q", *sys.argv[4:]])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps({"s": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def floor(path: Path) -> float:
    t = time.perf_counter()
    subprocess.run(
        ["sqlite3", str(path), 'select count(*), sum("end"-start) from CUPTI_ACTIVITY_KIND_KERNEL'],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t


def read_floor(path: Path) -> float:
    """sqlite3 reading every column the loaders copy (nsysreport.raw_tables), one table after
    another: the part of a cold run no loader into another engine can go below."""
    from nsysreport.raw_tables import RAW_TABLES
    from nsysreport.trace_file import inspect_trace

    present = inspect_trace(path).columns
    reads = []
    for table, columns in RAW_TABLES.items():
        # total() of an integer column, length() of a text column: every value read, whole.
        sums = [
            f'total("{name}")' if type_ == "BIGINT" else f'total(length("{name}"))'
            for name, type_, _ in columns
            if name in present.get(table, ())
        ]
        if sums:
            reads.append(f'SELECT count(*), {", ".join(sums)} FROM "{table}";')
    t = time.perf_counter()
    subprocess.run(["sqlite3", str(path), "\n".join(reads)], check=True, capture_output=True)
    return time.perf_counter() - t


def peer(python: str, path: Path) -> tuple[float, float]:
    """nsys-ai's per-GPU report, cold, in a fresh process: wall seconds and peak RSS (MB)."""
    script = Path(__file__).with_name("peer_nsys_ai.py")
    done = subprocess.run(
        [python, str(script), str(path)], check=True, capture_output=True, text=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["s"], result["rss_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["1000000", "1000000:5", "5000000"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer-python", help="a Python with nsys-ai 0.3.0 installed")
    parser.add_argument("--stages", action="store_true", help="also time each stage")
    args = parser.parse_args()
    warm_matplotlib()
    for case in args.cases:
        kernels, _, emit = case.partition(":")
        t = time.perf_counter()
        path = make_trace(int(kernels), int(emit or 0))
        size = path.stat().st_size / 1e6
        label = f"{int(kernels) / 1e6:g}M kernels" + (f", emit_nvtx x{emit}" if emit else "")
        print(f"\n{label}: {path} ({size:.0f} MB, made/found in {time.perf_counter() - t:.0f} s)")
        runs: dict[str, list[tuple[float, ...]]] = {}
        for _ in range(args.repeat):  # one round of every measurement, then the next round
            runs.setdefault("floor", []).append((floor(path),))
            runs.setdefault("read floor", []).append((read_floor(path),))
            with tempfile.TemporaryDirectory() as home:
                runs.setdefault("cold (builds the caches)", []).append(end_to_end(path, Path(home)))
                runs.setdefault("warm (report cache)", []).append(end_to_end(path, Path(home)))
                # Another display option: the report cache misses, the trace cache hits.
                runs.setdefault("warm, another --top", []).append(
                    end_to_end(path, Path(home), "--top", "9")
                )
            with tempfile.TemporaryDirectory() as home:
                runs.setdefault("--no-cache", []).append(end_to_end(path, Path(home), "--no-cache"))
            if args.peer_python:
                runs.setdefault("nsys-ai 0.3.0 per-GPU report", []).append(
                    peer(args.peer_python, path)
                )
        base = statistics.median(r[0] for r in runs.pop("floor"))
        read = statistics.median(r[0] for r in runs.pop("read floor"))
        peer_runs = runs.get("nsys-ai 0.3.0 per-GPU report", [])
        peer_s = statistics.median(s for s, _ in peer_runs) if peer_runs else 0.0
        print(f"  {'sqlite3 floor':<32} median {base:6.2f} s")
        name = "sqlite3 reading what is loaded"
        print(f"  {name:<32} median {read:6.2f} s  x{read / base:5.1f} floor")
        for name, measured in runs.items():
            s = statistics.median(r[0] for r in measured)
            rss = max(r[1] for r in measured)
            worker = max(r[2] if len(r) > 2 else 0.0 for r in measured)
            also = f" (+ picture worker {worker:3.0f} MB)" if worker else ""
            vs = f"  peer/this {peer_s / s:4.1f}x" if peer_s and "nsys-ai" not in name else ""
            print(
                f"  {name:<32} median {s:6.2f} s  x{s / base:5.1f} floor  "
                f"peak RSS {rss:5.0f} MB{also}{vs}"
            )
        if args.stages:
            stages = [
                json.loads(
                    subprocess.run(
                        [sys.executable, "-c", CHILD, str(path)],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                )
                for _ in range(args.repeat)
            ]
            print(
                f"  stages (in memory; {stages[0]['kernels']:,} kernels, "
                f"{stages[0]['nvtx_ranges']:,} NVTX ranges loaded):"
            )
            for key in stages[0]:
                if key not in ("kernels", "nvtx_ranges", "rss_mb"):
                    value = statistics.median(r[key] for r in stages)
                    print(f"    {key:<32} median {value:6.2f} s")
            print(f"    {'peak RSS':<32} {max(r['rss_mb'] for r in stages):6.0f} MB")


if __name__ == "__main__":
    main()
