"""What a sweep costs in DuckDB: the segment sweep's window against the sort it needs.

Usage: python benchmarks/bench_window.py [--events 10000000] [--gpus 8] [--repeat 3]
The events are gpu_sweep's shape (queries/derived/gpu_sweep.sql): a GPU, a time, a signed
counter delta and an activity key, 5M kernels' starts and ends at the default. Timed, each as
CREATE TABLE in one connection (best of --repeat): the sort alone (ORDER BY the sweep's keys);
the sweep's four window functions (row_number, the running sum, two leads) over PARTITION BY
the GPU; each function alone; the same window one GPU per statement; and the running sum as
numpy's cumsum over the sorted rows fetched as Arrow (what a sweep outside SQL would pay).
Figures for choosing how the interval engine sweeps, not tests.
"""

from __future__ import annotations

import argparse
import time

import duckdb
import numpy as np

KEYS = "t, delta, activity_key"
SWEEP = (
    "row_number() OVER w AS seq, sum(delta) OVER w AS packed, lead(t) OVER w AS next_t, "
    "lead(activity_key) OVER w AS next_key"
)


def best(con: duckdb.DuckDBPyConnection, sql: str, repeat: int, params: object = None) -> float:
    times = []
    for _ in range(repeat):
        con.execute("DROP TABLE IF EXISTS out")
        began = time.perf_counter()
        con.execute(f"CREATE TABLE out AS {sql}", params)
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    con = duckdb.connect()
    # Starts and ends interleaved across GPUs, times scattered (a prime stride), deltas signed.
    con.execute(
        f"""CREATE TABLE events AS
        SELECT 1000 + i % {args.gpus} AS pid, i % {args.gpus} AS device_id,
            (i * 7919 % {args.events}) * 1000 AS t,
            (CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END) * (CASE WHEN i % 5 = 0 THEN 1073741824
                ELSE 1 END) AS delta,
            i // 2 AS activity_key
        FROM range({args.events}) AS r(i)"""
    )
    window = f"PARTITION BY pid, device_id ORDER BY {KEYS} ROWS UNBOUNDED PRECEDING"
    rows: list[tuple[str, float]] = [
        (
            "ORDER BY the sweep's keys",
            best(con, f"SELECT * FROM events ORDER BY pid, device_id, {KEYS}", args.repeat),
        ),
        (
            "the sweep's window, PARTITION BY GPU",
            best(
                con,
                f"SELECT pid, device_id, t, {SWEEP} FROM events WINDOW w AS ({window})",
                args.repeat,
            ),
        ),
    ]
    for name, fn in (
        ("row_number", "row_number()"),
        ("running sum", "sum(delta)"),
        ("lead", "lead(t)"),
    ):
        sql = f"SELECT pid, device_id, t, {fn} OVER ({window}) AS x FROM events"
        rows.append((f"  {name} alone", best(con, sql, args.repeat)))
    gpus = con.execute("SELECT DISTINCT pid, device_id FROM events ORDER BY ALL").fetchall()
    one = (
        f"SELECT pid, device_id, t, {SWEEP} FROM events "
        f"WHERE pid = $pid AND device_id = $device_id "
        f"WINDOW w AS (ORDER BY {KEYS} ROWS UNBOUNDED PRECEDING)"
    )
    began = time.perf_counter()
    for pid, device_id in gpus:
        best(con, one, 1, {"pid": pid, "device_id": device_id})
    rows.append(("the sweep's window, one GPU a statement", time.perf_counter() - began))
    sums = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        table = con.sql(
            f"SELECT pid, device_id, delta FROM events ORDER BY pid, device_id, {KEYS}"
        ).to_arrow_table()
        delta = table.column("delta").to_numpy()
        gpu = table.column("pid").to_numpy() * (1 << 32) + table.column("device_id").to_numpy()
        packed = np.cumsum(delta)
        firsts = np.flatnonzero(np.r_[True, gpu[1:] != gpu[:-1]])  # each GPU's sum restarts
        packed -= np.repeat(packed[firsts] - delta[firsts], np.diff(np.r_[firsts, len(gpu)]))
        sums.append(time.perf_counter() - began)
    rows.append(("ORDER BY to Arrow, then numpy's cumsum", min(sums)))
    by_window = con.sql(
        f"SELECT sum(delta) OVER ({window})::BIGINT AS p FROM events "
        f"ORDER BY pid, device_id, {KEYS}"
    )
    same = np.array_equal(by_window.to_arrow_table().column("p").to_numpy(), packed)
    print(
        f"{args.events:,} events, {args.gpus} GPUs, DuckDB {duckdb.__version__}, "
        f"best of {args.repeat}:"
    )
    for name, seconds in rows:
        print(f"  {name:<42} {seconds:6.2f} s  x{seconds / rows[0][1]:4.1f} the sort")
    print(f"  numpy's running sums equal the window's: {same}")


if __name__ == "__main__":
    main()
