"""What an interval engine would save where the segments never leave it (#34): the SQL sweep
and the report queries that read its segments, against one read of the activities and numpy.

Usage: python benchmarks/bench_engine.py [--cases 1000000 5000000] [--repeat 3]

A case is the 8-GPU export benchmarks/bench_report.py makes (KERNELS kernels, NVTX steps and
layers), loaded once by nsysreport into a DuckDB file in the temp folder. Then, side by side in
fresh processes, --repeat rounds of:
- SQL: `gpu_sweep` built as its file does (into a temporary table), then the four report
  queries that read the segments of the file's own `gpu_sweep` (gpu_breakdown, step_breakdown,
  gap_summary, gap_histogram): what the cold report spends on them today;
- engine: one SELECT of the GPU's activities and of its step windows, one GPU at a time, then
  numpy alone: one stable sort and a running sum give the segments, prefix sums of each part's
  time and two binary searches give the GPU's and each step's breakdown, the idle segments give
  the gaps; nothing is written back.
Each engine round is checked equal, figure for figure, to the SQL queries' rows first.
Medians, peak RSS. Figures, not tests: the prototype here is not the package's code (the
engine built into nsysreport, 347682f, wrote its segments back and lost; README, Benchmarks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_report import make_trace  # the same exports

CHILD = r"""
import json, math, resource, sys, time
from pathlib import Path
import numpy as np
from nsysreport.database import connect
from nsysreport.queries import run_query, view_files

con = connect(Path(sys.argv[1]), read_only=True)
mode = sys.argv[2]
SWEEP = {v.name: v for v in view_files()}["gpu_sweep"].sql
QUERIES = ("gpu_breakdown", "step_breakdown", "gap_summary", "gap_histogram")
PARTS = ("busy", "compute", "gemm", "attention", "comm", "exposed_comm", "memcpy",
         "exposed_memcpy", "graph", "graph_opaque")
FIELDS = ("compute", "gemm", "attention", "comm", "memcpy", "graph")
INCREMENTS = [1, 1 + (1 << 10), 1 + (1 << 20), 1 << 30, 1 << 40, 1 << 50]
DELTAS = np.array(sorted([-i for i in INCREMENTS] + INCREMENTS), np.int64)
# The sweep's own input (gpu_sweep.sql's `timed`: each activity's key and counter delta), for
# one GPU.
TIMED = SWEEP[SWEEP.index("WITH timed AS ("):SWEEP.index("),\nevents AS")] + ")"
ACTIVITIES = TIMED + '''
SELECT start_ns, end_ns, activity_key, delta FROM timed
WHERE pid = $pid AND device_id = $device_id
'''
WINDOWS = '''
SELECT range_id, start_ns, end_ns FROM step_window
WHERE pid = $pid AND device_id = $device_id AND end_ns > start_ns
'''
BUCKETS = (0, 10_000, 100_000, 1_000_000, 10_000_000)


def engine(pid, device_id):
    rows = con.execute(ACTIVITIES, {"pid": pid, "device_id": device_id}).fetchnumpy()
    steps = con.execute(WINDOWS, {"pid": pid, "device_id": device_id}).fetchnumpy()
    start, end = np.asarray(rows["start_ns"]), np.asarray(rows["end_ns"])
    key, delta = np.asarray(rows["activity_key"]), np.asarray(rows["delta"])
    by_key = np.argsort(key, kind="stable")
    t = np.concatenate([start[by_key], end[by_key]])
    d = np.concatenate([delta[by_key], -delta[by_key]])
    low = int(t.min())
    order = np.argsort(((t - low) << 5) | np.searchsorted(DELTAS, d), kind="stable")
    t = t[order]
    packed = np.cumsum(d[order])
    cut = np.flatnonzero(t[1:] > t[:-1])
    seg_start, seg_end, packed = t[cut], t[cut + 1], packed[cut]
    length = seg_end - seg_start
    n = {f: (packed >> (10 * i)) & 1023 > 0 for i, f in enumerate(FIELDS)}
    counted = {
        "busy": packed != 0, "exposed_comm": n["comm"] & ~n["compute"],
        "exposed_memcpy": n["memcpy"] & ~n["compute"] & ~n["comm"],
        "graph_opaque": n["graph"] & ~n["compute"] & ~n["comm"] & ~n["memcpy"], **n,
    }
    lo = np.r_[seg_start[0], np.asarray(steps["start_ns"])]
    hi = np.r_[seg_end[-1], np.asarray(steps["end_ns"])]
    i_lo = np.searchsorted(seg_start, lo, side="right") - 1
    i_hi = np.searchsorted(seg_start, hi, side="right") - 1
    parts = {}
    for part in PARTS:
        c = counted[part]
        prefix = np.r_[0, np.cumsum(np.where(c, length, 0))]
        def upto(x, i):  # the part's time before x: prefix + x's segment's share
            j = np.maximum(i, 0)
            inside = np.where(c[j], np.minimum(x, seg_end[j]) - seg_start[j], 0)
            return np.where(i < 0, 0, prefix[j] + inside)
        parts[part] = upto(hi, i_hi) - upto(lo, i_lo)
    gaps = np.sort(length[packed == 0])
    def disc(q):
        return int(gaps[max(math.ceil(q * gaps.size) - 1, 0)]) if gaps.size else None
    hist = [int(np.count_nonzero((gaps >= a) & (gaps < b))) for a, b in
            zip(BUCKETS, (*BUCKETS[1:], 1 << 62))]
    return {
        "gpu": {p: int(v[0]) for p, v in parts.items()},
        "steps": {(int(a), int(b)): {p: int(v[k + 1]) for p, v in parts.items()}
                  for k, (a, b) in enumerate(zip(lo[1:], hi[1:]))},
        "gaps": [int(gaps.size), int(gaps.sum()), disc(0.5), disc(0.99),
                 int(gaps.max()) if gaps.size else None],
        "histogram": hist,
    }


def sql():
    con.execute("CREATE TEMP TABLE sweep AS" + SWEEP.split("CREATE TABLE gpu_sweep AS", 1)[1])
    return {q: run_query(con, q) for q in QUERIES}


def check(results, frames):
    gpu = {(r["pid"], r["device_id"]): r for r in frames["gpu_breakdown"].to_dicts()}
    for key, mine in results.items():
        assert all(mine["gpu"][p] == gpu[key][f"{p}_ns"] for p in PARTS), key
    for r in frames["step_breakdown"].to_dicts():
        mine = results[(r["pid"], r["device_id"])]
        step = mine["steps"][(r["start_ns"], r["end_ns"])]
        assert all(step[p] == r[f"{p}_ns"] for p in PARTS), r
    assert sum(len(m["steps"]) for m in results.values()) == frames["step_breakdown"].height
    for r in frames["gap_summary"].to_dicts():
        mine = results[(r["pid"], r["device_id"])]["gaps"]
        assert mine == [r["gap_count"], r["gap_ns"], r["p50_ns"], r["p99_ns"], r["max_ns"]], r
    hist = {}
    for r in frames["gap_histogram"].to_dicts():
        hist.setdefault((r["pid"], r["device_id"]), []).append(r["gap_count"])
    for key, mine in results.items():
        assert mine["histogram"] == hist[key], key


gpus = con.execute("SELECT DISTINCT pid, device_id FROM gpu_sweep ORDER BY ALL").fetchall()
t = time.perf_counter()
if mode == "sql":
    sql()
else:
    results = {g: engine(*g) for g in gpus}
seconds = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if mode == "check":
    check(results, {q: run_query(con, q) for q in QUERIES})
print(json.dumps({"s": seconds, "rss_mb": rss}))
"""


def loaded(kernels: int) -> Path:
    """The export of `kernels` loaded by nsysreport into a DuckDB file (made once)."""
    target = Path(tempfile.gettempdir()) / f"nsysreport-bench-engine-{kernels}.duckdb"
    if target.exists():
        return target
    trace = make_trace(kernels)
    code = "\n".join(
        [
            "import sys",
            "from pathlib import Path",
            "from nsysreport.database import connect, load_into",
            "from nsysreport.patterns import Patterns",
            "from nsysreport.trace_file import inspect_trace",
            "p = Path(sys.argv[1]); con = connect(Path(sys.argv[2]))",
            "load_into(con, p, inspect_trace(p), None, Patterns()); con.close()",
        ]
    )
    subprocess.run([sys.executable, "-c", code, str(trace), str(target)], check=True)
    return target


def child(db: Path, mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), mode], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", type=int, default=[1_000_000, 5_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for kernels in args.cases:
        db = loaded(kernels)
        child(db, "check")  # the engine's figures equal the SQL queries' rows
        runs: dict[str, list[dict[str, float]]] = {"sql": [], "engine": []}
        for _ in range(args.repeat):
            for mode in runs:
                runs[mode].append(child(db, mode))
        print(f"\n{kernels / 1e6:g}M kernels, 8 GPUs ({db}), figures checked equal:")
        base = statistics.median(r["s"] for r in runs["sql"])
        for mode, label in (
            ("sql", "SQL: gpu_sweep + 4 queries"),
            ("engine", "engine: one read, numpy"),
        ):
            s = statistics.median(r["s"] for r in runs[mode])
            rss = max(r["rss_mb"] for r in runs[mode])
            print(f"  {label:<30} median {s:6.2f} s  x{s / base:4.2f}  peak RSS {rss:5.0f} MiB")


if __name__ == "__main__":
    main()
