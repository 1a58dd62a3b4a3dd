"""Time the critical path (#36) on the benchmark exports: its cost on top of a loaded trace.

Usage: python benchmarks/bench_critical_path.py [--cases 1000000:5 5000000] [--repeat 3]
A case is KERNELS[:EMIT], the 8-GPU export of benchmarks/bench_report.py (made once, cached in
the temp dir). In --repeat fresh processes each: the trace loaded in memory (not timed into
the path), then the median step's window (step_span), path_node.sql over it, the walk, the
what-if recomputations, and the whole of nsysreport.critical_path.critical_path (path_node
again); medians, the nodes read and the segments walked, and the process's peak RSS. Figures,
not tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_report import make_trace

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from nsysreport.critical_path import critical_path, walk, with_what_ifs
from nsysreport.file_frames import activity_middle
from nsysreport.load import open_trace
from nsysreport.queries import run_query
from nsysreport.sections.timeline import choose_window

con = open_trace(Path(sys.argv[1]))
t = time.perf_counter()
spans = run_query(con, "step_span").to_dicts()
_, _, lo, hi = choose_window(spans, activity_middle(con, not spans), None, None, None)
window = time.perf_counter() - t
t = time.perf_counter()
nodes = run_query(con, "path_node", {"start_ns": lo, "end_ns": hi})
query = time.perf_counter() - t
t = time.perf_counter()
path = walk(nodes, lo, hi)
walked = time.perf_counter() - t
t = time.perf_counter()
with_what_ifs(path, nodes)
what_ifs = time.perf_counter() - t
t = time.perf_counter()
critical_path(con, lo, hi)
whole = time.perf_counter() - t
print(json.dumps({
    "window": window, "path_node": query, "walk": walked, "critical_path": whole,
    "what_ifs": what_ifs, "nodes": nodes.height, "segments": len(path.segments),
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["1000000:5", "5000000"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for case in args.cases:
        kernels, _, emit = case.partition(":")
        path = make_trace(int(kernels), int(emit or 0))
        runs = [
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
        print(f"{path.name}: {runs[0]['nodes']:,} nodes read, {runs[0]['segments']:,} segments")
        for key in ("window", "path_node", "walk", "what_ifs", "critical_path"):
            print(f"  {key:<14} median {statistics.median(r[key] for r in runs):6.2f} s")
        print(f"  peak RSS (trace loaded) {max(r['rss_mb'] for r in runs):.0f} MB")


if __name__ == "__main__":
    main()
