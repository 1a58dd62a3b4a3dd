"""Time each stage of a full report on a large synthetic export with NVTX steps and layers.

Usage: python benchmarks/bench_report.py [--kernels 1000000] [--repeat 3]
Makes (once, cached in the temp dir) an 8-GPU export via nsysreport.synth: every GPU runs
steps of 40 layers; each layer is an NVTX range around 4 GEMM/elementwise kernels and one
all-reduce on a second stream, so 1M kernels come with about 200k NVTX ranges. Then, in fresh
processes, it times loading, each derived table (the NVTX projection is `activity_range`), each
report query, the model, HTML and JSON, and prints medians and peak RSS. Figures, not tests.
"""

from __future__ import annotations

import argparse
import json
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


def make_trace(kernels: int) -> Path:
    from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

    path = Path(tempfile.gettempdir()) / f"nsysreport-bench-nvtx-{kernels}.sqlite"
    if path.exists():
        return path
    layers_per_gpu = kernels // 8 // KERNELS_PER_LAYER

    def timeline(dev: int) -> Iterator[tuple[list[Kernel], list[NvtxRange]]]:
        pid, t, host = 1000 + dev, 1_000_000, 0
        for layer in range(layers_per_gpu):
            if layer % LAYERS_PER_STEP == 0:
                step_start = host
            ks, rs = [], []
            first_launch = host
            for k in range(4):
                dur = 20_000 if k % 2 == 0 else 3_000
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

    kernels_out: list[Kernel] = []
    ranges: list[NvtxRange] = []
    for dev in range(8):
        for ks, rs in timeline(dev):
            kernels_out += ks
            ranges += rs
    write_trace(Scenario(kernels=kernels_out, nvtx=ranges), path)
    return path


CHILD = """
import json, resource, sys, time
from pathlib import Path
times = {}
t = time.perf_counter()
from nsysreport.load import connect, copy_tables, inspect_trace
from nsysreport.patterns import Patterns
from nsysreport.queries import _bind, _option_table, query_files, run_query, view_files
import duckdb
path = Path(sys.argv[1])
con = connect()
copy_tables(con, path, inspect_trace(path))
times["load"] = time.perf_counter() - t
p = Patterns()
_option_table(con, "kernel_class_rule", "priority INTEGER, class VARCHAR, pattern VARCHAR",
              [(i, c, pat) for i, (c, pat) in enumerate(p.kernel_rules)])
_option_table(con, "comm_bytes_option", "op VARCHAR, bytes BIGINT", [])
pending = list(view_files())
while pending:
    failed = []
    for v in pending:
        t = time.perf_counter()
        try:
            con.execute(v.sql, _bind(v, p.view_params()))
        except duckdb.CatalogException:
            failed.append(v)
            continue
        if "CREATE TABLE " + v.name in v.sql:  # the derived tables (materialised views)
            times["table " + v.name] = time.perf_counter() - t
    pending = failed
for q in query_files():
    t = time.perf_counter()
    run_query(con, q.name)
    times["query " + q.name] = time.perf_counter() - t
from nsysreport.model import as_json, build_report
from nsysreport.render import render_html
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    t = time.perf_counter()
    path = make_trace(args.kernels)
    size = path.stat().st_size / 1e6
    print(f"trace: {path} ({size:.0f} MB, made/found in {time.perf_counter() - t:.1f} s)")
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True, text=True
        )
        runs.append(json.loads(out.stdout))
    wall = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nsysreport",
                str(path),
                "-o",
                str(Path(tempfile.gettempdir()) / "bench.report.html"),
                "--json",
                str(Path(tempfile.gettempdir()) / "bench.json"),
                "-q",
            ],
            check=True,
        )
        wall.append(time.perf_counter() - t)
    print(f"kernels {runs[0]['kernels']:,}, NVTX ranges {runs[0]['nvtx_ranges']:,}")
    for key in runs[0]:
        if key in ("kernels", "nvtx_ranges", "rss_mb"):
            continue
        print(f"  {key:<32} median {statistics.median(r[key] for r in runs):6.2f} s")
    print(f"  {'peak RSS (stages)':<32} {max(r['rss_mb'] for r in runs):6.0f} MB")
    print(f"  {'nsysreport TRACE --json, end to end':<32} median {statistics.median(wall):6.2f} s")


if __name__ == "__main__":
    main()
