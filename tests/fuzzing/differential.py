"""Differential fuzzing (issue #39): mutations whose effect on the numbers is known.

Each case damages a copy of a seed trace (nsys SQLite or PyTorch profiler JSON) and makes a
second copy, the reference, whose numbers the damaged one must give:
- a neutral mutation (row order, added columns or tables, duplicated metadata, unknown keys)
  has the unmutated seed as its reference and adds nothing to the ledger;
- a harmful one (a NULL key, a time outside the capture, a device the trace does not list, a
  duplicate row, an end before the start, a metadata value that is not JSON, a GPU list that
  numbers the GPUs otherwise than the rows...) has as its
  reference the seed without the damaged rows (or with them in the form the ledger says they
  are counted in), and must add exactly its rows to the ledger, under its class and table.
Every report number (per GPU, step, layer and collective: oracle.fingerprint) must equal the
reference's, and the ledger must equal the reference's plus the mutation's rows. A damaged
trace may instead end in a clean error (one line, nsysreport's own error) only where the
reference does too, or where the mutation leaves no usable kernel. Anything else (a
traceback, a number moved, a ledger row missing or extra) is a failure.

Reports are built in this process (the Python API), so a case costs two in-memory analyses.
`benchmarks/fuzz.py --differential N` runs N cases; tests/test_fuzz.py runs a seeded slice.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import sqlite3
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzing import mutate, seeds
from fuzzing.oracle import fingerprint, first_difference

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
SQLITE_SEEDS = ("synth", "synth_2022", "sample", "rtx3080")
KINETO_SEEDS = ("kineto",)
Ledger = Counter[tuple[str, str]]  # (class, table) -> rows


@dataclass(frozen=True)
class Effect:
    """What a mutation did and what it must do to the report: `reference` turns a copy of the
    seed into the trace whose numbers the mutant must give (None: the seed as it is);
    `ledger` the rows it must add; `may_fail`: it left no usable kernel, so a clean error is
    right too."""

    what: str
    reference: Callable[[Path], None] | None = None
    ledger: dict[tuple[str, str], int] = field(default_factory=dict)
    may_fail: bool = False
    # How much of the reference's numbers must hold (oracle.fingerprint): `full`; `steps` (per
    # GPU, step and layer, not the collectives' counts); `gpus` (per-GPU times only).
    level: str = "full"
    # What capture.facts must count beyond the reference's: {"pdl_overlaps": 1}.
    facts: dict[str, int] = field(default_factory=dict)


Mutation = Callable[[Path, random.Random], Effect | None]  # None: does not apply to this seed


# nsys SQLite ----------------------------------------------------------------------------------


def _sql(path: Path, *statements: str, args: list[Any] | None = None) -> None:
    with mutate.writable(path) as con:
        for s in statements:
            con.execute(s, args or [])


def _tables(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def _one(path: Path, sql: str) -> Any:
    con = sqlite3.connect(path)
    try:
        row = con.execute(sql).fetchone()
        return None if row is None else row[0]
    finally:
        con.close()


def _kernel_rows(path: Path, rng: random.Random) -> tuple[list[int], bool]:
    """Some kernel rowids: one, a few, or (rarely) all; and whether all were taken."""
    con = sqlite3.connect(path)
    try:
        ids = [r[0] for r in con.execute(f"SELECT rowid FROM {KERNEL} ORDER BY rowid")]
    finally:
        con.close()
    mode = rng.choices(["one", "few", "all"], [6, 3, 1])[0]
    if mode == "all":
        return ids, True
    count = 1 if mode == "one" else rng.randint(2, max(2, len(ids) // 4))
    chosen = sorted(rng.sample(ids, min(count, len(ids))))
    return chosen, len(chosen) == len(ids)


def _marks(rows: list[int]) -> str:
    return ", ".join(str(r) for r in rows)


def _delete(rows: list[int], table: str = KERNEL) -> Callable[[Path], None]:
    def reference(path: Path) -> None:
        _sql(path, f'DELETE FROM "{table}" WHERE rowid IN ({_marks(rows)})')

    return reference


def shuffle_rows(path: Path, rng: random.Random) -> Effect | None:
    present = _tables(path)
    tables = (KERNEL, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
    choices = [t for t in tables if t in present]
    table = rng.choice(choices)
    with mutate.writable(path) as con:
        mutate.rebuild(con, table, shuffle=rng)
    return Effect(f"rows of {table} in another order")


def added_column(path: Path, rng: random.Random) -> Effect | None:
    table = rng.choice(sorted(t for t in _tables(path) if t.startswith("CUPTI_")))
    _sql(path, f'ALTER TABLE "{table}" ADD COLUMN fuzzExtra{rng.randint(0, 99)} INTEGER DEFAULT 7')
    return Effect(f"a column added to {table}")


def added_table(path: Path, rng: random.Random) -> Effect | None:
    _sql(path, "CREATE TABLE FUZZ_FUTURE_TABLE (id INTEGER, value TEXT)")
    _sql(path, "INSERT INTO FUZZ_FUTURE_TABLE VALUES (1, 'x')")
    return Effect("an unknown table added")


def duplicated_metadata(path: Path, rng: random.Random) -> Effect | None:
    present = _tables(path) & {
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        "TARGET_INFO_SYSTEM_ENV",
        "TARGET_INFO_GPU",
        "ANALYSIS_DETAILS",
        "TARGET_INFO_SESSION_START_TIME",
    }
    if not present:
        return None
    table = rng.choice(sorted(present))
    with mutate.writable(path) as con:
        mutate.rebuild(con, table)  # no unique key refuses the copies
        con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}"')
    return Effect(f"every row of {table} twice")


NULL_CLASSES = {
    "start": "missing_start",
    "end": "missing_end",
    "deviceId": "missing_device",
    "globalPid": "missing_process",
    "streamId": "missing_stream",
}


def null_key(path: Path, rng: random.Random) -> Effect | None:
    column = rng.choice(sorted(NULL_CLASSES))
    rows, every = _kernel_rows(path, rng)
    mutate.set_values(path, KERNEL, column, "null", rows)
    return Effect(
        f"{KERNEL}.{column} NULL on {len(rows)} rows",
        _delete(rows),
        {(NULL_CLASSES[column], KERNEL): len(rows)},
        may_fail=every,
    )


def negative_time(path: Path, rng: random.Random) -> Effect | None:
    rows, every = _kernel_rows(path, rng)
    column = rng.choice(["start", "end"])
    mutate.set_values(path, KERNEL, column, "negative", rows)
    return Effect(
        f"{KERNEL}.{column} negative on {len(rows)} rows",
        _delete(rows),
        {("negative_time", KERNEL): len(rows)},
        may_fail=every,
    )


def outside_capture(path: Path, rng: random.Random) -> Effect | None:
    """A few kernels (under a quarter: the median start stays among the others) moved beyond
    the capture: 10 s, or more than the capture's length, before its first row or after its
    last."""
    rows, every = _kernel_rows(path, rng)
    if every or len(rows) * 4 > (_one(path, f"SELECT count(*) FROM {KERNEL}") or 0):
        rows = rows[:1]
    length = _one(path, "SELECT max(duration) FROM ANALYSIS_DETAILS") or 0
    first = _one(path, f"SELECT min(start) FROM {KERNEL}") or 0
    last = _one(path, f'SELECT max("end") FROM {KERNEL}') or 0
    distance = 2 * length + 10_000_000_000
    if rng.random() < 0.5 and first > distance + 10**9:
        shift = f"- {last - first + distance}"  # every moved row ends before the first start
        side = "before"
    else:
        shift, side = f"+ {last - first + distance}", "after"
    _sql(
        path,
        f'UPDATE {KERNEL} SET start = start {shift}, "end" = "end" {shift} '
        f"WHERE rowid IN ({_marks(rows)})",
    )
    return Effect(
        f"{len(rows)} kernels moved {side} the capture",
        _delete(rows),
        {("outside_capture", KERNEL): len(rows)},
    )


def unlisted_device(path: Path, rng: random.Random) -> Effect | None:
    """Kernels moved to a device the list lacks. Every seed's listed GPUs keep rows (copies,
    at least), so the device would be one GPU more than the list holds: a stray, whatever its
    rows (queries/load/gpu_list_match.sql)."""
    if "TARGET_INFO_GPU" not in _tables(path) or not _one(
        path, "SELECT count(*) FROM TARGET_INFO_GPU"
    ):
        return None
    rows, every = _kernel_rows(path, rng)
    device = (_one(path, "SELECT max(id) FROM TARGET_INFO_GPU") or 0) + rng.randint(1, 40)
    _sql(path, f"UPDATE {KERNEL} SET deviceId = {device} WHERE rowid IN ({_marks(rows)})")
    return Effect(
        f"{len(rows)} kernels on device {device}, which the trace does not list",
        _delete(rows),
        {("unlisted_device", KERNEL): len(rows)},
        may_fail=every,
    )


def renumbered_gpu_list(path: Path, rng: random.Random) -> Effect | None:
    """The GPU list numbers the GPUs otherwise than the rows, one to one (as a ROCm profiler
    trace of one visible GPU lists it as 0 while its kernels carry 2): every listed id moves
    past the rows' ids, in the same order. The list is matched back: the seed's numbers, and
    one ledger row per listed GPU."""
    if "TARGET_INFO_GPU" not in _tables(path):
        return None
    con = sqlite3.connect(path)
    try:
        listed = {r[0] for r in con.execute("SELECT id FROM TARGET_INFO_GPU")}
        used = {
            r[0]
            for table in (KERNEL, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
            if table in _tables(path)
            for r in con.execute(f"SELECT DISTINCT deviceId FROM {table}")
        }
    finally:
        con.close()
    if not listed or listed != used:  # a list with an idle GPU matches no row one to one
        return None
    shift = max(used) + 1 + rng.randint(0, 9)
    _sql(path, f"UPDATE TARGET_INFO_GPU SET id = id + {shift}")
    return Effect(
        f"the GPU list's ids {sorted(listed)} moved by {shift}",
        None,
        {("renumbered_device", "TARGET_INFO_GPU"): len(listed)},
    )


def unlisted_process(path: Path, rng: random.Random) -> Effect | None:
    if "PROCESSES" not in _tables(path) or not _one(path, "SELECT count(*) FROM PROCESSES"):
        return None
    rows, every = _kernel_rows(path, rng)
    pid = rng.randint(60000, 70000)  # a well-formed id of no listed process
    _sql(
        path,
        f"UPDATE {KERNEL} SET globalPid = (globalPid >> 48 << 48) | ({pid} << 24) "
        f"WHERE rowid IN ({_marks(rows)})",
    )
    return Effect(
        f"{len(rows)} kernels of process {pid}, which the trace does not list",
        _delete(rows),
        {("unlisted_process", KERNEL): len(rows)},
        may_fail=every,
    )


def duplicate_rows(path: Path, rng: random.Random) -> Effect | None:
    rows, _ = _kernel_rows(path, rng)
    with mutate.writable(path) as con:
        mutate.rebuild(con, KERNEL)  # no primary key refuses the copies
        con.execute(f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE rowid IN ({_marks(rows)})")
    return Effect(f"{len(rows)} kernel rows twice", None, {("duplicate_row", KERNEL): len(rows)})


def end_before_start(path: Path, rng: random.Random) -> Effect | None:
    rows, _ = _kernel_rows(path, rng)
    _sql(path, f'UPDATE {KERNEL} SET "end" = start - 5 WHERE rowid IN ({_marks(rows)})')

    def reference(ref: Path) -> None:  # counted, with no time: as a row of length 0
        _sql(ref, f'UPDATE {KERNEL} SET "end" = start WHERE rowid IN ({_marks(rows)})')

    return Effect(
        f"{len(rows)} kernels end 5 ns before they start",
        reference,
        {("end_before_start", KERNEL): len(rows)},
    )


def missing_correlation(path: Path, rng: random.Random) -> Effect | None:
    rows, _ = _kernel_rows(path, rng)
    mutate.set_values(path, KERNEL, "correlationId", "null", rows)

    def reference(ref: Path) -> None:  # a kernel whose launch the capture did not record
        _sql(
            ref,
            f"UPDATE {KERNEL} SET correlationId = 900000000 + rowid "
            f"WHERE rowid IN ({_marks(rows)})",
        )

    return Effect(
        f"{KERNEL}.correlationId NULL on {len(rows)} rows",
        reference,
        {("missing_correlation", KERNEL): len(rows)},
    )


def unparsed_metadata(path: Path, rng: random.Random) -> Effect | None:
    table = "META_DATA_EXPORT"
    if table not in _tables(path) or not _one(
        path, f"SELECT count(*) FROM {table} WHERE name = 'NSYSREPORT_SIMULATION'"
    ):
        return None
    value = rng.choice(["<html><body>x</body></html>", "<!-- c -->", "a\x00b", '{"link": ', "[1,"])
    _sql(path, f"UPDATE {table} SET value = ? WHERE name = 'NSYSREPORT_SIMULATION'", args=[value])

    def reference(ref: Path) -> None:
        _sql(ref, f"DELETE FROM {table} WHERE name = 'NSYSREPORT_SIMULATION'")

    return Effect(
        f"{table} NSYSREPORT_SIMULATION := {value!r}",
        reference,
        {("unparsed_metadata", table): 1},
    )


def _lanes(path: Path) -> list[tuple[int, int, int, int, int, int, int]]:
    """Each kernel with time and its successor on its stream: (rowid, start, end, next rowid,
    next start, next end, whether both have one name and it is not a communication kernel's:
    a sum of communication time would count the stretch), in start order."""
    con = sqlite3.connect(path)
    try:
        return con.execute(
            f"""SELECT rowid, start, "end", next_id, next_start, next_end,
                demangledName = next_name AND lower(s.value) NOT LIKE '%nccl%'
            FROM (
                SELECT rowid, start, "end", demangledName,
                    lead(rowid) OVER w AS next_id, lead(start) OVER w AS next_start,
                    lead("end") OVER w AS next_end, lead(demangledName) OVER w AS next_name
                FROM {KERNEL}
                WHERE "end" > start
                WINDOW w AS (PARTITION BY globalPid, deviceId, streamId ORDER BY start, rowid)
            )
            JOIN StringIds AS s ON s.id = demangledName
            WHERE next_id IS NOT NULL ORDER BY start, rowid"""
        ).fetchall()
    finally:
        con.close()


def overlapping_durations(path: Path, rng: random.Random) -> Effect | None:
    """A kernel's end stretched past its successor's start on its stream (a kernel of the same
    name, so of the same class): into it, as programmatic dependent launch overlaps, or to its
    end, a duration that cannot be. Its reference ends the kernel where the successor starts:
    the union of every class is the same, so every per-GPU time must be (the overlap counted
    once); steps and layers may differ, the kernel's end being later in one than the other."""
    pairs = [r for r in _lanes(path) if r[6] and r[2] <= r[4] and r[5] - r[4] >= 2]
    if not pairs:
        return None
    row, _, _, _, next_start, next_end, _ = rng.choice(pairs)
    impossible = rng.random() < 0.5
    end = next_end if impossible else next_start + (next_end - next_start) // 2
    _sql(path, f'UPDATE {KERNEL} SET "end" = {end} WHERE rowid = {row}')

    def reference(ref: Path) -> None:
        _sql(ref, f'UPDATE {KERNEL} SET "end" = {next_start} WHERE rowid = {row}')

    kind = "impossible" if impossible else "pdl"
    return Effect(
        f"kernel {row} ends at {end}, {end - next_start} ns into its successor ({kind})",
        reference,
        {("impossible_duration", KERNEL): 1} if impossible else {},
        level="gpus",
        facts={f"{kind}_overlaps": 1},
    )


def _shift_times(path: Path, delta: int) -> None:
    """Every time of every table (columns start, end, timestamp) `delta` ns later."""
    with mutate.writable(path) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for name, _ in mutate._columns(con, table):
                if name in ("start", "end", "timestamp"):
                    con.execute(f'UPDATE "{table}" SET "{name}" = "{name}" + {delta}')


def late_starting_rank(path: Path, rng: random.Random) -> Effect | None:
    """One GPU's rank starts seconds late: every other GPU's first communication kernel is
    launched that much earlier and spins until it arrives (its start moved back, its end kept;
    what ended before it moved back alike; the capture's duration grows to hold it). Its
    reference is the seed with each such GPU's rows clipped to start where that kernel ends,
    as the report clips them: every time per GPU, step and layer must be the same, and the
    ledger must count each wait and each row that ended before it. The collectives' counts
    differ (the wait is no instance there)."""
    con = sqlite3.connect(path)
    try:
        firsts = con.execute(
            f"""SELECT globalPid, deviceId, min(start) FROM {KERNEL} AS k
            JOIN StringIds AS s ON s.id = k.demangledName
            WHERE lower(s.value) LIKE '%nccl%' AND "end" > start
            GROUP BY globalPid, deviceId ORDER BY globalPid, deviceId"""
        ).fetchall()
    finally:
        con.close()
    if len(firsts) < 2:
        return None
    late = rng.randrange(len(firsts))
    delay = rng.choice([2, 5, 16]) * 1_000_000_000
    _shift_times(path, delay)  # room before the capture for the waits (no negative time)
    firsts = [(gpid, device, start + delay) for gpid, device, start in firsts]
    ledger: Counter[tuple[str, str]] = Counter()
    clips = []
    present = _tables(path)
    tables = (KERNEL, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", GRAPH)
    with mutate.writable(path) as con:
        for i, (gpid, device, start) in enumerate(firsts):
            if i == late:
                continue
            row, cut = con.execute(
                f'SELECT rowid, "end" FROM {KERNEL} WHERE globalPid = ? AND deviceId = ? '
                "AND start = ? ORDER BY rowid LIMIT 1",
                [gpid, device, start],
            ).fetchone()
            con.execute(f"UPDATE {KERNEL} SET start = start - {delay} WHERE rowid = {row}")
            ledger[("late_start", KERNEL)] += 1
            gpu = "(globalPid >> 24) & 16777215 = ? AND deviceId = ?"
            key = [(gpid >> 24) & 16777215, device]
            for table in (t for t in tables if t in present):
                (ended,) = con.execute(
                    f'SELECT count(*) FROM "{table}" WHERE {gpu} AND "end" <= ? AND rowid <> ?',
                    [*key, cut, row if table == KERNEL else -1],
                ).fetchone()
                if ended:
                    ledger[("late_start", table)] += ended
                clips.append((table, gpu, key, cut))
                # The rank ran what came before its first collective that much earlier too (so
                # no kernel of the wait's stream runs inside it); what runs across the cut
                # stays, as the reference clips it alike.
                con.execute(
                    f'UPDATE "{table}" SET start = start - {delay}, "end" = "end" - {delay} '
                    f'WHERE {gpu} AND start < ? AND "end" <= ? AND rowid <> ?',
                    [*key, start, cut, row if table == KERNEL else -1],
                )
        if "ANALYSIS_DETAILS" in present:
            con.execute(f"UPDATE ANALYSIS_DETAILS SET duration = duration + {delay}")

    def reference(ref: Path) -> None:
        _shift_times(ref, delay)
        with mutate.writable(ref) as c:
            for table, gpu, args, cut in clips:
                c.execute(
                    f'UPDATE "{table}" SET start = max(start, {cut}), "end" = max("end", {cut}) '
                    f"WHERE {gpu}",
                    args,
                )

    return Effect(
        f"GPU {late} of {len(firsts)} starts {delay // 10**9} s late",
        reference,
        dict(ledger),
        level="steps",
    )


SQLITE_MUTATIONS: dict[str, tuple[Mutation, int]] = {
    "shuffle_rows": (shuffle_rows, 3),
    "added_column": (added_column, 1),
    "added_table": (added_table, 1),
    "duplicated_metadata": (duplicated_metadata, 2),
    "null_key": (null_key, 5),
    "negative_time": (negative_time, 2),
    "outside_capture": (outside_capture, 3),
    "unlisted_device": (unlisted_device, 2),
    "unlisted_process": (unlisted_process, 2),
    "renumbered_gpu_list": (renumbered_gpu_list, 2),
    "duplicate_rows": (duplicate_rows, 2),
    "end_before_start": (end_before_start, 2),
    "missing_correlation": (missing_correlation, 2),
    "unparsed_metadata": (unparsed_metadata, 1),
    "overlapping_durations": (overlapping_durations, 2),
    "late_starting_rank": (late_starting_rank, 2),
}


# PyTorch profiler JSON -----------------------------------------------------------------------


def _doc(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return dict(json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data))


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc))


def _kernels(doc: dict[str, Any]) -> list[int]:
    return [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel"]


def _events(doc: dict[str, Any], rng: random.Random) -> tuple[list[int], bool]:
    kernels = _kernels(doc)
    mode = rng.choices(["one", "few", "all"], [6, 3, 1])[0]
    if mode == "all":
        return kernels, True
    count = 1 if mode == "one" else rng.randint(2, max(2, len(kernels) // 4))
    chosen = sorted(rng.sample(kernels, min(count, len(kernels))))
    return chosen, len(chosen) == len(kernels)


def _drop_events(indices: list[int]) -> Callable[[Path], None]:
    def reference(path: Path) -> None:
        doc = _doc(path)
        doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in indices]
        _write(path, doc)

    return reference


def kineto_shuffle(path: Path, rng: random.Random) -> Effect | None:
    doc = _doc(path)
    rng.shuffle(doc["traceEvents"])
    _write(path, doc)
    return Effect("trace events in another order")


def kineto_unknown_keys(path: Path, rng: random.Random) -> Effect | None:
    doc = _doc(path)
    for e in doc["traceEvents"]:
        e["fuzzExtra"] = rng.randint(0, 9)
        if isinstance(e.get("args"), dict):
            e["args"]["fuzz arg"] = "x"
    doc["fuzzTopLevel"] = {"a": 1}
    _write(path, doc)
    return Effect("unknown keys in every event, its args and the document")


def kineto_null_stream(path: Path, rng: random.Random) -> Effect | None:
    doc = _doc(path)
    rows, _ = _events(doc, rng)
    for i in rows:
        doc["traceEvents"][i]["args"]["stream"] = None
    _write(path, doc)
    # The event's tid is its stream (the seed writes both alike): the same numbers.
    return Effect(
        f"{len(rows)} kernel events with a null stream",
        None,
        {("defaulted_stream", KERNEL): len(rows)},
    )


def kineto_no_category(path: Path, rng: random.Random) -> Effect | None:
    doc = _doc(path)
    rows, every = _events(doc, rng)
    for i in rows:
        del doc["traceEvents"][i]["cat"]
    _write(path, doc)
    return Effect(
        f"{len(rows)} kernel events with no cat",
        _drop_events(rows),
        {("missing_category", "traceEvents"): len(rows)},
        may_fail=every,
    )


def kineto_duplicate(path: Path, rng: random.Random) -> Effect | None:
    doc = _doc(path)
    rows, _ = _events(doc, rng)
    doc["traceEvents"] += [dict(doc["traceEvents"][i]) for i in rows]
    _write(path, doc)
    return Effect(f"{len(rows)} kernel events twice", None, {("duplicate_row", KERNEL): len(rows)})


def kineto_outside(path: Path, rng: random.Random) -> Effect | None:
    doc = _doc(path)
    rows, _ = _events(doc, rng)
    rows = rows[: max(1, len(_kernels(doc)) // 4 - 1)]
    last = max(e["ts"] + e.get("dur", 0) for e in doc["traceEvents"] if "ts" in e)
    for i in rows:
        doc["traceEvents"][i]["ts"] += last + 100_000_000  # µs: 100 s after the trace's end
    _write(path, doc)
    return Effect(
        f"{len(rows)} kernel events 100 s after the trace",
        _drop_events(rows),
        {("outside_capture", KERNEL): len(rows)},
    )


def kineto_renumbered_device(path: Path, rng: random.Random) -> Effect | None:
    """Every GPU event moves to device D while deviceProperties still lists the GPU as 0 (a
    ROCm profiler trace of one visible GPU: D = 2). The reference is the trace numbered
    alike, deviceProperties listing D: the same numbers, plus one ledger row."""
    doc = _doc(path)
    gpu = ("kernel", "gpu_memcpy", "gpu_memset")
    devices = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") in gpu}
    listed = [d.get("id") for d in doc.get("deviceProperties", [])]
    if devices != {0} or listed != [0]:
        return None
    device = rng.randint(1, 15)

    def move(target: Path, list_too: bool) -> None:
        moved = _doc(target)
        for e in moved["traceEvents"]:
            if e.get("cat") in gpu:
                e["pid"] = e["args"]["device"] = device
        if list_too:
            moved["deviceProperties"][0]["id"] = device
        _write(target, moved)

    move(path, list_too=False)
    return Effect(
        f"every GPU event on device {device}, deviceProperties listing it as 0",
        lambda ref: move(ref, list_too=True),
        {("renumbered_device", "TARGET_INFO_GPU"): 1},
    )


KINETO_MUTATIONS: dict[str, tuple[Mutation, int]] = {
    "kineto_shuffle": (kineto_shuffle, 2),
    "kineto_unknown_keys": (kineto_unknown_keys, 1),
    "kineto_null_stream": (kineto_null_stream, 2),
    "kineto_no_category": (kineto_no_category, 2),
    "kineto_duplicate": (kineto_duplicate, 2),
    "kineto_outside": (kineto_outside, 2),
    "kineto_renumbered_device": (kineto_renumbered_device, 2),
}


# Running a case ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    case: str  # "SEED:INDEX"
    what: str  # seed, mutation and what it did
    failures: tuple[str, ...]


def _analyse(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the report JSON, None), or (None, the clean error's message); a traceback raises."""
    from nsysreport.errors import NsysReportError
    from nsysreport.load import open_trace
    from nsysreport.model import as_json
    from nsysreport.report_builder import build_report

    try:
        return as_json(build_report(open_trace(path), path)), None
    except NsysReportError as exc:
        return None, str(exc)


def _ledger(report: dict[str, Any]) -> Ledger:
    out: Ledger = Counter()
    for r in report.get("ledger", []):  # one class and table may hold several reasons
        out[(r["class"], r["table"])] += r["rows"]
    return out


def plan(seed: int, index: int) -> tuple[str, str]:
    """Case `index` of run `seed`: its seed trace and mutation (by weight)."""
    rng = random.Random(f"nsysreport-differential/{seed}/{index}")
    kind = rng.choices(["sqlite", "kineto"], [3, 1])[0]
    if kind == "sqlite":
        names, weights = zip(*((n, w) for n, (_, w) in SQLITE_MUTATIONS.items()), strict=True)
        return rng.choice(SQLITE_SEEDS), rng.choices(names, weights)[0]
    names, weights = zip(*((n, w) for n, (_, w) in KINETO_MUTATIONS.items()), strict=True)
    return rng.choice(KINETO_SEEDS), rng.choices(names, weights)[0]


_SEED_ANALYSES: dict[Path, tuple[dict[str, Any] | None, str | None]] = {}


def run_case(workdir: Path, seed: int, index: int) -> Result:
    """Run case `index` of run `seed` in `workdir` (seed traces are made there once)."""
    trace_seed, name = plan(seed, index)
    case = f"{seed}:{index}"
    seed_file = workdir / "seeds" / trace_seed / seeds.SEEDS[trace_seed].filename
    if not seed_file.exists():
        seeds.build(trace_seed, seed_file.parent)
    folder = workdir / f"case-{seed}-{index}"
    shutil.rmtree(folder, ignore_errors=True)
    mutant = folder / "mutant" / seed_file.name
    reference = folder / "reference" / seed_file.name
    for copy in (mutant, reference):
        copy.parent.mkdir(parents=True)
        shutil.copyfile(seed_file, copy)
    mutations = {**SQLITE_MUTATIONS, **KINETO_MUTATIONS}
    rng = random.Random(f"nsysreport-differential/{seed}/{index}/mutation")
    try:
        effect = mutations[name][0](mutant, rng)
        if effect is None:  # not for this seed: a neutral reshuffle instead
            name = "shuffle_rows" if trace_seed in SQLITE_SEEDS else "kineto_shuffle"
            shutil.copyfile(seed_file, mutant)
            effect = mutations[name][0](mutant, rng)
            assert effect is not None
        if effect.reference is not None:
            effect.reference(reference)
        what = f"{trace_seed}: {name}: {effect.what}"
        # The unmutated seed's analysis is made once per process: about a third of the cases
        # (the neutral ones, the duplicates) have it as their reference.
        if effect.reference is None:
            if seed_file not in _SEED_ANALYSES:
                _SEED_ANALYSES[seed_file] = _analyse(seed_file)
            expected = _SEED_ANALYSES[seed_file]
        else:
            expected = _analyse(reference)
        failures = _judge(effect, _analyse(mutant), expected)
    except Exception:  # a traceback anywhere in nsysreport is a finding, never a crash
        lines = traceback.format_exc().strip().splitlines()
        return Result(case, f"{trace_seed}: {name}", (f"traceback: {' | '.join(lines[-3:])}",))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Result(case, what, tuple(failures))


def _judge(
    effect: Effect,
    mutant: tuple[dict[str, Any] | None, str | None],
    reference: tuple[dict[str, Any] | None, str | None],
) -> list[str]:
    (got, error), (want, want_error) = mutant, reference
    if error is not None:
        if "\n" in error:
            return [f"an error of several lines: {error[:200]!r}"]
        if want_error is not None or effect.may_fail:
            return []
        return [f"a clean error where the reference reports: {error[:200]}"]
    assert got is not None
    if want is None:
        return [f"a report where the reference fails: {want_error}"]
    failures = []
    a, b = fingerprint(want, effect.level), fingerprint(got, effect.level)
    if a != b:
        failures.append(f"numbers moved: {first_difference(a, b)}")
    for name, more in effect.facts.items():
        before, after = (r.get("capture", {}).get("facts", {}).get(name, 0) for r in (want, got))
        if after != before + more:
            failures.append(f"capture.facts.{name}: {after}, expected {before} + {more}")
    expected = _ledger(want) + Counter(effect.ledger)
    found = _ledger(got)
    if found != expected:
        missing = dict(expected - found)
        extra = dict(found - expected)
        failures.append(f"ledger: missing {missing}, unexpected {extra}")
    return failures
