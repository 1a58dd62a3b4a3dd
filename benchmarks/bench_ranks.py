"""Time a report over N per-rank exports serially, with 2 local jobs and on a 2-worker Dask cluster.

Usage: python benchmarks/bench_ranks.py [--kernels 1000000] [--files 8 ...] [--repeat 1]
                                        [--dask] [--make-only]
For each N of --files (default 8), makes (once, cached in the temp dir, one folder per kernels
and N) N exports of --kernels kernels each, one per rank, 8 ranks per host, each on its own
clock: every rank runs steps of 40 NVTX layers of 4 compute kernels (stream 7) and one
all-reduce (stream 31) whose end is the same true time on every rank; rank 5 computes 1.25x
slower, so it reaches each all-reduce last and the others wait inside it. Each file's times are
shifted by a known clock shift and its session start is off by a known error (as NTP leaves
hosts; `injected_clocks(N, 0)`), so the report's clock alignment can be checked against the
truth within 1 µs. Then, side by side in fresh processes: `nsysreport report FILES --json
--no-cache -q` with --jobs 1, --jobs 2 and --scheduler on a LocalCluster this script starts
(only for N <= 8 unless --dask; skipped without `distributed`).
Wall time is a median over --repeat. Two memory figures, maxima over --repeat: the merging
(main) process's own peak RSS (its VmHWM and getrusage ru_maxrss at exit, read by a small
wrapper that runs the CLI in-process, and its VmRSS sampled every 50 ms; workers excluded; with
--jobs 1 that process also analyses every file itself), and the whole tree's peak, VmRSS summed
over the process tree every 50 ms (the Dask row also counts the workers and the scheduler,
which live under this script, less this script's own RSS before the cluster started). The
table also shows GPUs x collectives (N times the all-reduces per file), the quantity the
merging process's memory should grow with. Figures, not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nsysreport.synth import Gpu, Kernel, NvtxRange, Scenario, write_trace
from nsysreport.synth.rank_files import BASE_UTC_NS, injected_clocks, true_offsets

REPO = Path(__file__).resolve().parents[1]
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
OTHER = "void at::native::vectorized_elementwise_kernel<(int)4>(int)"
SLOW_RANK, SLOWDOWN, RANKS_PER_HOST = 5, 1.25, 8
LAYERS_PER_STEP = 40
KERNELS_PER_LAYER = 5  # 4 compute + 1 all-reduce
COMPUTE_NS = (20_000, 3_000, 20_000, 3_000)
GAP_NS, ALLREDUCE_NS, STEP_GAP_NS, START_NS = 1_000, 8_000, 50_000, 1_000_000_000
SEED = 0


def compute_ns(rank: int, k: int) -> int:
    return int(COMPUTE_NS[k] * SLOWDOWN) if rank == SLOW_RANK else COMPUTE_NS[k]


# Ranks run in lockstep: a layer lasts as long as the slowest rank's compute plus the all-reduce.
LAYER_NS = sum(compute_ns(SLOW_RANK, k) + GAP_NS for k in range(4)) + ALLREDUCE_NS + GAP_NS


def timeline(rank: int, layers: int, shift: int) -> Iterator[tuple[list[Kernel], list[NvtxRange]]]:
    """Per layer, rank `rank`'s kernels and NVTX ranges on its clock (true time + `shift`)."""
    pid, t, step_start = 1000 + rank, START_NS, START_NS
    for layer in range(layers):
        index = layer % LAYERS_PER_STEP
        if index == 0:
            step_start = t
        ks, at = [], t
        for k in range(4):
            dur = compute_ns(rank, k)
            name = GEMM if k % 2 == 0 else OTHER
            launch = (at - 3_000 + shift, at - 2_000 + shift)
            ks.append(Kernel(at + shift, at + dur + shift, name, rank, 7, pid, launch=launch))
            at += dur + GAP_NS
        end = t + LAYER_NS - GAP_NS  # the same true end on every rank: the slowest arrival + AR
        launch = (at - 3_000 + shift, at - 2_000 + shift)
        ks.append(Kernel(at + shift, end + shift, NCCL, rank, 31, pid, launch=launch))
        # NVTX ranges time the host: from the first launch to the end of the last one.
        rs = [NvtxRange(t - 3_000 + shift, at - 2_000 + shift, f"model.layers.{index}", pid=pid)]
        t += LAYER_NS
        if index == LAYERS_PER_STEP - 1 or layer == layers - 1:
            text = f"step {layer // LAYERS_PER_STEP}"
            rs.append(NvtxRange(step_start - 4_000 + shift, at - 1_500 + shift, text, pid=pid))
            t += STEP_GAP_NS
        yield ks, rs


def make_files(kernels: int, files: int) -> list[Path]:
    """The `files` cached per-rank exports of about `kernels` kernels each (written if missing)."""
    folder = Path(tempfile.gettempdir()) / f"nsysreport-bench-ranks-{kernels}x{files}"
    folder.mkdir(exist_ok=True)
    shifts, errors = injected_clocks(files, SEED)
    layers = kernels // KERNELS_PER_LAYER
    paths = []
    for rank in range(files):
        path = folder / f"rank{rank}.sqlite"
        paths.append(path)
        if path.exists():
            continue
        shift = shifts[rank]
        # Two passes over the same deterministic time line, so no list is built here.
        scenario = Scenario(
            kernels=(k for ks, _ in timeline(rank, layers, shift) for k in ks),
            nvtx=(r for _, rs in timeline(rank, layers, shift) for r in rs),
            gpus=[Gpu(rank, pid=1000 + rank)],
            host=f"node{rank // RANKS_PER_HOST}",
            metadata={"NSYSREPORT_SIMULATED": f"benchmarks/bench_ranks.py rank {rank} of {files}"},
            capture_env={"RANK": str(rank)},
            utc_at_zero_ns=BASE_UTC_NS - shift + errors[rank],
        )
        write_trace(scenario, path)  # atomic: a killed run leaves no file taken as made
    return paths


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:  # the process has just exited
        pass
    return 0


def tree_rss_kb(root: int) -> int:
    """VmRSS summed over `root` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # comm may hold spaces
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss_kb(pid)
        todo += children.get(pid, [])
    return total


@dataclass
class Run:
    wall_s: float
    merging_peak_kb: int  # the command's own process: VmHWM / ru_maxrss at exit, or sampled
    tree_peak_kb: int


# Runs the CLI inside the measured process, so that process's own peak (VmHWM, ru_maxrss:
# this process alone, its workers excluded) is the merging process's; printed on stderr at exit.
PEAK_MARK = "bench_ranks-peak-kb"
CLI_WRAPPER = f"""
import re, resource, sys
from pathlib import Path
from nsysreport.cli import main
try:
    main(sys.argv[1:])
finally:
    hwm = re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text())
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("{PEAK_MARK}", hwm.group(1) if hwm else 0, maxrss, file=sys.stderr)
"""


def measure(args: list[str], whole_bench: bool, baseline_kb: int = 0) -> Run:
    """Wall time and peaks of `nsysreport ARGS`; `whole_bench` samples this script's tree."""
    own_peak, tree_peak, stop = 0, 0, threading.Event()
    cmd = [sys.executable, "-c", CLI_WRAPPER, *args]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = os.getpid() if whole_bench else proc.pid

    def sample() -> None:
        nonlocal own_peak, tree_peak
        while not stop.is_set():
            own_peak = max(own_peak, rss_kb(proc.pid))
            tree_peak = max(tree_peak, tree_rss_kb(root))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t
    stop.set()
    sampler.join()
    if proc.returncode:
        sys.exit(f"nsysreport {' '.join(args)} exited {proc.returncode}:\n{err.decode()}")
    for line in err.decode().splitlines():
        if line.startswith(PEAK_MARK):
            own_peak = max(own_peak, *map(int, line.split()[1:]))
    return Run(wall, own_peak, tree_peak - baseline_kb)


def alignment_error(json_path: Path, paths: list[Path], shifts: list[int]) -> str:
    """The worst |offset_ns - truth| over the JSON's alignment.files, as a line of text."""
    alignment = json.loads(json_path.read_text()).get("alignment")
    if not alignment or not alignment.get("files"):
        return "no alignment in JSON"
    rank = {p.name: r for r, p in enumerate(paths)}
    ref = rank.get(Path(str(alignment.get("reference", paths[0]))).name, 0)
    worst, name = -1, ""
    for entry in alignment["files"]:
        r = rank[Path(entry["file"]).name]
        error = abs(entry["offset_ns"] - (shifts[ref] - shifts[r]))
        if error > worst:
            worst, name = error, Path(entry["file"]).name
    verdict = "OK" if worst <= 1_000 else "MORE THAN 1 µs"
    files = len(alignment["files"])
    return f"worst |offset - truth| {worst} ns ({name}) over {files} files: {verdict}"


def print_clocks(files: int) -> None:
    shifts, errors = injected_clocks(files, SEED)
    print("\nrank | clock shift ns | session error ns | true offset to rank 0 ns | coarse ns")
    for r, offset in enumerate(true_offsets(shifts)):
        print(f"{r} | {shifts[r]} | {errors[r]} | {offset} | {offset + errors[r] - errors[0]}")


def mb(kb: int) -> str:
    return f"{kb * 1024 / 1e6:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000, help="kernels per rank file")
    parser.add_argument("--files", type=int, nargs="+", default=[8], help="rank file counts")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dask", action="store_true", help="the Dask row for N > 8 files too")
    parser.add_argument("--make-only", action="store_true", help="only make the files")
    args = parser.parse_args()
    sets: dict[int, list[Path]] = {}
    for files in args.files:
        t = time.perf_counter()
        paths = sets[files] = make_files(args.kernels, files)
        size = sum(p.stat().st_size for p in paths) / 1e6
        print(f"{files} files of {args.kernels:,} kernels in {paths[0].parent} ({size:.0f} MB, "
              f"made/found in {time.perf_counter() - t:.0f} s)")  # fmt: skip
        if files <= 8 or args.make_only:
            print_clocks(files)
    if args.make_only:
        return

    out = Path(tempfile.mkdtemp(prefix="nsysreport-bench-ranks-"))
    local = {"1": ["--jobs", "1"], "2": ["--jobs", "2"]}
    runs: dict[int, dict[str, list[str]]] = {n: dict(local) for n in sets}
    own_kb = rss_kb(os.getpid())  # before the cluster: the scheduler's share counts in its row
    cluster = None
    if any(n <= 8 or args.dask for n in sets):
        try:
            from distributed import LocalCluster
        except ImportError:
            print("\ndistributed is not installed: skipping the --scheduler rows")
        else:
            cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address=None,
            )  # fmt: skip
            for n in sets:
                if n <= 8 or args.dask:
                    runs[n]["dask (2 workers)"] = ["--scheduler", cluster.scheduler_address]
    results: dict[tuple[int, str], list[Run]] = {(n, j): [] for n in runs for j in runs[n]}
    checks: dict[tuple[int, str], str] = {}
    try:
        for n, paths in sets.items():
            shifts, _ = injected_clocks(n, SEED)
            base = ["report", *map(str, paths), "--no-cache", "-q"]
            for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits every row
                for i, (jobs, extra) in enumerate(runs[n].items()):
                    json_path = out / f"run{n}-{i}.json"
                    html = out / "bench.report.html"
                    cmd = [*base, "-o", str(html), "--json", str(json_path), *extra]
                    dask = jobs.startswith("dask")
                    results[(n, jobs)].append(measure(cmd, dask, own_kb if dask else 0))
                    checks[(n, jobs)] = alignment_error(json_path, paths, shifts)
    finally:
        if cluster is not None:
            cluster.close()
        shutil.rmtree(out, ignore_errors=True)

    collectives = args.kernels // KERNELS_PER_LAYER  # one all-reduce per layer, per file
    print(f"\n{args.kernels:,} kernels per file; wall s: median of {args.repeat}; "
          "peaks: the largest, MB = 10^6 bytes")  # fmt: skip
    print("files | jobs | wall s | / jobs 1 | merging process peak RSS MB | tree peak RSS MB "
          "| GPUs x collectives")  # fmt: skip
    print("---: | --- | ---: | ---: | ---: | ---: | ---:")
    for (n, jobs), rows in results.items():
        wall = statistics.median(r.wall_s for r in rows)
        serial = statistics.median(r.wall_s for r in results[(n, "1")])
        ratio = "" if jobs == "1" else f"{wall / serial:.2f}"
        own = mb(max(r.merging_peak_kb for r in rows))
        tree = mb(max(r.tree_peak_kb for r in rows))
        print(f"{n} | {jobs} | {wall:.2f} | {ratio} | {own} | {tree} | "
              f"{n} x {collectives:,} = {n * collectives:,}")  # fmt: skip
    print("\nclock alignment against the injected shifts:")
    for (n, jobs), line in checks.items():
        print(f"  {n} files, jobs {jobs}: {line}")


if __name__ == "__main__":
    main()
