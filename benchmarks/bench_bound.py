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
import json
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


def _sums(columns: str, total: str) -> str:
    """Every value read whole: `total` (sqlite3's total, DuckDB's sum) of an integer, of a
    text's length."""
    names = [c.strip() for c in columns.split(",")]
    return ", ".join(f"{total}(length({n}))" if n == "text" else f"{total}({n})" for n in names)


def sqlite_read(path: Path) -> float:
    sql = "\n".join(f"SELECT count(*), {_sums(c, 'total')} FROM {t};" for t, c in TABLES)
    t = time.perf_counter()
    subprocess.run(["sqlite3", str(path), sql], check=True, capture_output=True)
    return time.perf_counter() - t


# Run in a fresh process: python -c CHILD <job as JSON>; prints its seconds, DuckDB's import
# included. The parent writes the statements: the child imports nothing but DuckDB, connected
# as the report connects it (every thread, nothing downloaded).
CHILD = """
import json, sys, time
t = time.perf_counter()
import duckdb
job = json.loads(sys.argv[1])
con = duckdb.connect(
    config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
)
con.load_extension(job["extension"])
for sql, params in job["statements"]:
    con.execute(sql, params).fetchall()
print(time.perf_counter() - t)
"""

# Each GPU's busy union: the reach of every earlier kernel, one window pass.
BUSY_UNION = """
WITH k AS (SELECT globalPid AS pid, deviceId AS dev, start AS s, "end" AS e
           FROM nsys.CUPTI_ACTIVITY_KIND_KERNEL),
reached AS (SELECT pid, dev, s, e, max(e) OVER (PARTITION BY pid, dev ORDER BY s, e
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM k)
SELECT pid, dev, sum(e - greatest(s, coalesce(reach, s)))
FROM reached WHERE reach IS NULL OR e > reach GROUP BY ALL
"""


def duckdb_child(path: Path, what: str) -> float:
    """`what`: read the columns, read them keeping the ranges the role patterns match (as the
    loader does), or the busy union."""
    from nsysreport.patterns import Patterns
    from nsysreport.sqlite_copy import _scanner_extension_path, _sql_string

    # DuckDB's ATTACH takes no parameter: the file's name is a quoted literal.
    attach = f"ATTACH '{_sql_string(str(path.resolve()))}' AS nsys (TYPE sqlite, READ_ONLY)"
    statements: list[tuple[str, dict[str, str]]] = [(attach, {})]
    if what == "union":
        statements.append((BUSY_UNION, {}))
    for table, columns in TABLES if what != "union" else ():
        keep, params = "", {}
        if what == "read + roles" and table == "NVTX_EVENTS":
            keep = "WHERE text IS NULL OR regexp_matches(text, $roles)"
            params = {"roles": Patterns().role_pattern()}
        read = f"SELECT {columns} FROM nsys.{table} {keep}"
        statements.append((f"SELECT count(*), {_sums(columns, 'sum')} FROM ({read})", params))
    job = {"extension": str(_scanner_extension_path()), "statements": statements}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job)], check=True, capture_output=True, text=True
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
