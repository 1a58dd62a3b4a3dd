"""The interval engine against a brute force that looks at every nanosecond: small random
timelines on several GPUs of one batch, whose answers can be counted tick by tick."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from nsysreport import engine
from nsysreport.engine import MEMBERS, PARTS, Batch, Timeline, batches

# The packed counters' increment of each class (gpu_sweep.sql): gemm and attention kernels are
# compute kernels too.
DELTA = {
    "other": 1,
    "gemm": 1 + (1 << 10),
    "attention": 1 + (1 << 20),
    "comm": 1 << 30,
    "memcpy": 1 << 40,
    "graph": 1 << 50,
}
GPUS = ((7, 0), (7, 1), (9, 0))  # (pid, device_id), sorted as gpu_keys gives them


def random_activities(seed: int, n: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        start = rng.randrange(0, 150)
        pid, device_id = rng.choice(GPUS)
        rows.append(
            {
                "pid": pid,
                "device_id": device_id,
                "start_ns": start,
                "end_ns": start + rng.randrange(1, 40),
                "activity_key": i * 4,
                "cls": rng.choice(list(DELTA)),
            }
        )
    return rows


def batch_of(rows: list[dict[str, Any]]) -> Batch:
    times = [r["start_ns"] for r in rows] + [r["end_ns"] for r in rows]
    gpus = [(p, d, 1, min(times), max(times)) for p, d in GPUS]
    (batch,) = batches(gpus)
    return batch


def swept(rows: list[dict[str, Any]]) -> pa.Table:
    random.Random(0).shuffle(rows)  # the engine takes rows in any order
    table = pa.table(
        {
            **{c: [r[c] for r in rows] for c in ("pid", "device_id", "start_ns", "end_ns")},
            "activity_key": [r["activity_key"] for r in rows],
            "delta": [DELTA[r["cls"]] for r in rows],
        }
    )
    return engine.sweep(table, batch_of(rows))


def running_at(rows: list[dict[str, Any]], gpu: tuple[int, int], t: int) -> set[str]:
    """The parts the nanosecond [t, t + 1) of `gpu` counts in, by brute force."""
    on = [
        r["cls"]
        for r in rows
        if (r["pid"], r["device_id"]) == gpu and r["start_ns"] <= t < r["end_ns"]
    ]
    compute = any(c in ("other", "gemm", "attention") for c in on)
    comm, memcpy, graph = "comm" in on, "memcpy" in on, "graph" in on
    parts = {
        "busy": bool(on),
        "compute": compute,
        "gemm": "gemm" in on,
        "attention": "attention" in on,
        "comm": comm,
        "exposed_comm": comm and not compute,
        "memcpy": memcpy,
        "exposed_memcpy": memcpy and not compute and not comm,
        "graph": graph,
        "graph_opaque": graph and not (compute or comm or memcpy),
    }
    return {name for name, yes in parts.items() if yes}


@pytest.mark.parametrize("seed", range(8))
def test_the_sweep_s_segments_tile_each_gpu_with_the_classes_running_in_them(seed: int) -> None:
    rows = random_activities(seed)
    segments = swept(list(rows)).to_pylist()
    for gpu in GPUS:
        mine = [s for s in segments if (s["pid"], s["device_id"]) == gpu]
        times = [
            t
            for r in rows
            if (r["pid"], r["device_id"]) == gpu
            for t in (r["start_ns"], r["end_ns"])
        ]
        assert mine[0]["start_ns"] == min(times) and mine[-1]["end_ns"] == max(times)
        for before, after in itertools.pairwise(mine):
            assert before["end_ns"] == after["start_ns"] and before["seq"] < after["seq"]
        for s in mine:
            runs = engine.running(np.array([s["packed"]]))
            for t in range(s["start_ns"], s["end_ns"]):
                expected = running_at(rows, gpu, t)
                assert {p for p in PARTS if engine.in_part(runs, p)[0]} == expected


@pytest.mark.parametrize("seed", range(8))
def test_any_window_s_breakdown_equals_the_nanoseconds_counted_one_by_one(seed: int) -> None:
    rows = random_activities(seed)
    batch = batch_of(rows)
    segments = swept(list(rows))
    timeline = Timeline({c: segments[c].to_numpy() for c in segments.column_names}, batch)
    rng = random.Random(seed)
    # Windows anywhere: before a GPU's first activity, after its last, across all of it.
    windows = [(gpu, a, a + rng.randrange(0, 120)) for gpu in GPUS for a in (-20, 0, 37, 90, 180)]
    table = pa.table(
        {
            "pid": [g[0] for g, _, _ in windows],
            "device_id": [g[1] for g, _, _ in windows],
            "start_ns": [a for _, a, _ in windows],
            "end_ns": [b for _, _, b in windows],
        }
    )
    result = engine.window_parts(table, timeline).to_pylist()
    for (gpu, a, b), row in zip(windows, result, strict=True):
        for part in PARTS:
            expected = sum(part in running_at(rows, gpu, t) for t in range(a, b))
            assert row[f"{part}_ns"] == expected, (gpu, a, b, part)


@pytest.mark.parametrize("seed", range(8))
def test_group_unions_and_their_exposed_time_equal_the_nanoseconds_counted(seed: int) -> None:
    rows = random_activities(seed)
    batch = batch_of(rows)
    segments = swept(list(rows))
    timeline = Timeline({c: segments[c].to_numpy() for c in segments.column_names}, batch)
    rng = random.Random(seed)
    # Members of random groups among the GPU's activities: a layer's compute, an op's comm, a
    # communicator's comm (every piece kept), a copy stage.
    members = []
    for r in rows:
        member = {
            "other": 0,
            "gemm": 0,
            "attention": 0,
            "comm": rng.choice([2, 4, 5]),
            "memcpy": rng.choice([3, 6]),
            "graph": None,
        }[r["cls"]]
        if member is not None:
            members.append({**r, "member": member, "group_key": rng.choice(["a", "b", None])})
    table = pa.table(
        {
            c: [m[c] for m in members]
            for c in ("pid", "device_id", "member", "group_key", "start_ns", "end_ns")
        }
    )
    result = engine.group_pieces(table, timeline).to_pylist()
    for gpu in GPUS:
        for member, (grouping, part) in enumerate(MEMBERS):
            for key in ("a", "b", None):
                mine = [
                    m
                    for m in members
                    if (m["pid"], m["device_id"]) == gpu
                    and m["member"] == member
                    and m["group_key"] == key
                ]
                got = [
                    r
                    for r in result
                    if (r["pid"], r["device_id"]) == gpu
                    and (r["grouping"], r["part"]) == (grouping, part)
                    and r["group_key"] == key
                ]
                ticks = {t for m in mine for t in range(m["start_ns"], m["end_ns"])}
                assert sum(r["duration_ns"] for r in got) == len(ticks)
                if not mine:
                    continue
                assert min(r["start_ns"] for r in got) == min(ticks)
                assert max(r["end_ns"] for r in got) == max(ticks) + 1
                hidden_by = engine.EXPOSED_BY.get(part)
                exposed = [r["exposed_ns"] for r in got]
                if hidden_by is None:
                    assert exposed == [None] * len(got)
                else:
                    assert sum(exposed) == sum(hidden_by in running_at(rows, gpu, t) for t in ticks)
                if grouping in engine.EVERY_PIECE:  # each piece: disjoint, in order
                    spans = sorted((r["start_ns"], r["end_ns"]) for r in got)
                    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
                else:
                    assert len(got) == 1


def test_batches_hold_at_most_the_row_budget_but_never_split_a_gpu(monkeypatch: Any) -> None:
    monkeypatch.setattr(engine, "BATCH_ACTIVITIES", 10)
    gpus = [(1, 0, 4, 0, 100), (1, 1, 4, 0, 100), (1, 2, 4, 0, 100), (2, 0, 25, 0, 100)]
    assert [b.device_ids for b in batches(gpus)] == [(0, 1), (2,), (0,)]
    assert [b.pids for b in batches(gpus)] == [(1, 1), (1,), (2,)]


def test_a_time_axis_too_wide_for_many_gpus_takes_them_one_at_a_time() -> None:
    # Times spanning 2^56 ns leave a 62-bit key room for the 5-bit delta rank and one GPU.
    gpus = [(1, d, 1, 0, 1 << 56) for d in range(3)]
    assert [b.device_ids for b in batches(gpus)] == [(0,), (1,), (2,)]


def test_reach_and_group_order_agree_when_groups_and_times_do_not_fit_one_integer() -> None:
    rng = np.random.default_rng(3)
    group = np.sort(rng.integers(0, 4, 50)).astype(np.int64)
    end = rng.integers(0, 1000, 50).astype(np.int64)
    wide = group << 55  # (group, end) no longer fits in 62 bits: ends go by rank
    assert np.array_equal(engine._reach(wide, end), engine._reach(group, end))
    start = rng.integers(0, 1000, 50).astype(np.int64)
    assert np.array_equal(engine._group_order(wide, start, end), np.lexsort((end, start, group)))
