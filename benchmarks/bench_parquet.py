"""Loading one capture from nsys's Parquet export against its SQLite export, side by side.

Usage: python benchmarks/bench_parquet.py [--kernels 5000000] [--repeat 3] [--trace T.sqlite]

Makes (once, cached in the temp dir) the synthetic 8-GPU export of bench_load.py, or takes
--trace (e.g. the emit_nvtx export bench_report.py makes, ~5 NVTX ranges per kernel), writes its
Parquet form once (nsysreport.synth.parquet), then in fresh processes, alternating, times:
the sqlite3 floor (a count and sum over the kernel table), copying the raw tables from each
form (nsysreport.sqlite_copy, nsysreport.parquet_dir), and the whole load of each
(load.open_trace: the copy, the derived tables and views). Prints medians, the ratio of each to
the floor and Parquet's to SQLite's, and peak RSS. Figures, not assertions: not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import make_trace

CHILD = """
import json, resource, sys, time
from pathlib import Path
from nsysreport.database import connect
from nsysreport.patterns import Patterns
from nsysreport.trace_file import inspect_trace
path, step = Path(sys.argv[1]), sys.argv[2]
t = time.perf_counter()
if step == "open":
    from nsysreport.load import open_trace
    open_trace(path)
else:
    con = connect()
    schema = inspect_trace(path)
    roles = Patterns().role_pattern()
    if schema.kind == "parquetdir":
        from nsysreport.parquet_dir import copy_parquet
        copy_parquet(con, path, schema, nvtx_roles=roles)
    else:
        from nsysreport.sqlite_copy import copy_tables
        copy_tables(con, path, schema, nvtx_roles=roles)
print(json.dumps({"s": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def floor(path: Path) -> float:
    """The sqlite3 floor, as bench_report.py takes it: a count and sum over the kernel table."""
    t = time.perf_counter()
    query = 'select count(*), sum("end"-start) from CUPTI_ACTIVITY_KIND_KERNEL'
    subprocess.run(["sqlite3", str(path), query], check=True, capture_output=True)
    return time.perf_counter() - t


def child(path: Path, step: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), step], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", type=Path, help="an existing SQLite export to use instead")
    parser.add_argument(
        "--steps", default="copy,open", help="which to time: copy, open or both (default)"
    )
    args = parser.parse_args()
    from nsysreport.synth.parquet import write_parquet_dir

    sqlite = args.trace or make_trace(args.kernels)
    folder = Path(tempfile.gettempdir()) / f"{sqlite.stem}_pqtdir"
    if not folder.exists():
        t = time.perf_counter()
        write_parquet_dir(sqlite, folder.with_name(folder.name + ".tmp"))
        folder.with_name(folder.name + ".tmp").rename(folder)
        print(f"wrote {folder} in {time.perf_counter() - t:.1f} s")
    size = sum(f.stat().st_size for f in folder.iterdir())
    mb = sqlite.stat().st_size / 1e6
    print(f"{sqlite.name}: {mb:.0f} MB as SQLite, {size / 1e6:.0f} MB as Parquet")
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        runs.setdefault("floor", []).append({"s": floor(sqlite), "rss_mb": 0.0})
        for step in args.steps.split(","):
            for name, path in (("sqlite", sqlite), ("parquet", folder)):
                runs.setdefault(f"{step} {name}", []).append(child(path, step))
    base = statistics.median(r["s"] for r in runs.pop("floor"))
    print(f"  {'sqlite3 floor':<16} median {base:6.2f} s")
    medians = {k: statistics.median(r["s"] for r in v) for k, v in runs.items()}
    for name, rows in runs.items():
        rss = max(r["rss_mb"] for r in rows)
        print(
            f"  {name:<16} median {medians[name]:6.2f} s  x{medians[name] / base:5.1f} floor  "
            f"peak RSS {rss:5.0f} MB"
        )
    for step in args.steps.split(","):
        ratio = medians[f"{step} parquet"] / medians[f"{step} sqlite"]
        print(f"  {step}: Parquet / SQLite x{ratio:.2f}")


if __name__ == "__main__":
    main()
