"""What no report can go below: reading the columns an NVTX projection needs, in DuckDB.

Usage: python benchmarks/bench_bound.py [--cases 1000000 1000000:5 5000000] [--repeat 3]
The cases are bench_report.py's exports (made once, cached in the temp dir). Side by side in
fresh processes, --repeat rounds of: the sqlite3 floor (bench_report.py's: a count and sum
over the kernel table); sqlite3 reading the columns any NVTX projection needs (kernels: times,
GPU, stream, process, correlation id, name id; CUDA API calls: times, thread, correlation id;
NVTX: times, thread, type, text); DuckDB (the engine the report runs on, every thread, its
import included) reading the same columns through sqlite_scanner; the same, with the NVTX
texts matched against the role patterns as the loader does (a pattern must see every text:
PyTorch's emit_nvtx writes five unique ones per kernel); and DuckDB computing each GPU's busy
union (one window over the kernels) straight from the file, the least an interval report is.
Medians and ratios to the floor: a cold target below one of these lines cannot be met by a
report that reads the trace file with DuckDB. Figures, not tests.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_report import floor, make_trace

KERNEL_COLUMNS = 'start, "end", deviceId, streamId, globalPid, correlationId, shortName'
RUNTIME_COLUMNS = 'start, "end", globalTid, correlationId'
NVTX_COLUMNS = 'start, "end", globalTid, eventType, textId, text'
TABLES = (
    ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_COLUMNS),
    ("NVTX_EVENTS", NVTX_COLUMNS),
)


def _sums(columns: str) -> str:
    """Every value read whole: total() of an integer, of a text's length."""
    names = [c.strip() for c in columns.split(",")]
    return ", ".join(f"total(length({n}))" if n == "text" else f"total({n})" for n in names)


def sqlite_read(path: Path) -> float:
    sql = "\n".join(f"SELECT count(*), {_sums(c)} FROM {t};" for t, c in TABLES)
    t = time.perf_counter()
    subprocess.run(["sqlite3", str(path), sql], check=True, capture_output=True)
    return time.perf_counter() - t


# Run in a fresh process: python -c CHILD <benchmarks dir> <trace> <what>; prints its seconds,
# imports included. DuckDB connected as the report does (every thread, nothing downloaded).
CHILD = """
import sys, time
t = time.perf_counter()
import duckdb
sys.path.insert(0, sys.argv[1])
from bench_bound import TABLES
from nsysreport.patterns import Patterns
from nsysreport.sqlite_copy import _scanner_extension_path
path, what = sys.argv[2], sys.argv[3]
con = duckdb.connect(
    config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
)
con.load_extension(str(_scanner_extension_path()))
con.execute(f"ATTACH '{path}' AS nsys (TYPE sqlite, READ_ONLY)")
if what in ("read", "read + roles"):
    for table, columns in TABLES:
        keep = ""
        if what == "read + roles" and table == "NVTX_EVENTS":
            keep = "WHERE text IS NULL OR regexp_matches(text, $roles)"
        names = [c.strip() for c in columns.split(",")]
        sums = ", ".join(f"sum(length({c}))" if c == "text" else f"sum({c})" for c in names)
        sql = f"SELECT count(*), {sums} FROM (SELECT {columns} FROM nsys.{table} {keep})"
        con.execute(sql, {"roles": Patterns().role_pattern()} if keep else {}).fetchall()
else:  # each GPU's busy union: the reach of every earlier kernel, one window pass
    con.execute(
        "WITH k AS (SELECT globalPid AS pid, deviceId AS dev, start AS s, \\"end\\" AS e "
        "FROM nsys.CUPTI_ACTIVITY_KIND_KERNEL), "
        "reached AS (SELECT pid, dev, s, e, max(e) OVER (PARTITION BY pid, dev ORDER BY s, e "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM k) "
        "SELECT pid, dev, sum(e - greatest(s, coalesce(reach, s))) "
        "FROM reached WHERE reach IS NULL OR e > reach GROUP BY ALL"
    ).fetchall()
print(time.perf_counter() - t)
"""


def duckdb_child(path: Path, what: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(Path(__file__).parent), str(path), what],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


MEASURES = {
    "sqlite3 floor": floor,
    "sqlite3, the projection's columns": sqlite_read,
    "DuckDB, the projection's columns": lambda p: duckdb_child(p, "read"),
    "DuckDB, those + the role patterns": lambda p: duckdb_child(p, "read + roles"),
    "DuckDB, kernels' busy union per GPU": lambda p: duckdb_child(p, "union"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["1000000", "1000000:5", "5000000"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for case in args.cases:
        kernels, _, emit = case.partition(":")
        path = make_trace(int(kernels), int(emit or 0))
        label = f"{int(kernels) / 1e6:g}M kernels" + (f", emit_nvtx x{emit}" if emit else "")
        print(f"\n{label}: {path}")
        runs: dict[str, list[float]] = {name: [] for name in MEASURES}
        for _ in range(args.repeat):  # one round of every measurement, then the next round
            for name, measure in MEASURES.items():
                runs[name].append(measure(path))
        base = statistics.median(runs["sqlite3 floor"])
        for name, seconds in runs.items():
            s = statistics.median(seconds)
            print(f"  {name:<38} median {s:6.2f} s  x{s / base:5.1f} floor")


if __name__ == "__main__":
    main()
