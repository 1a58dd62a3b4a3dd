"""Steps are process-wide: a step holds what its process launched during it, on any thread."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import pytest

from nsysreport.load import open_trace
from nsysreport.queries import run_query
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

from conftest import SHARED_TRACES

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
KINETO = SHARED_TRACES / "kineto"
KINETO_FILES = (
    "a100_ddp_rank0_nccl_data",
    "v100_ddp_rank1",
    "mi300_rccl_rank0",
    "recsys128_sampled_rank-0",
    "recsys128_sampled_rank-1",
)


def step_of(con: duckdb.DuckDBPyConnection) -> dict[int, tuple[str, str]]:
    """GPU start of each kernel -> (its step's label, how it was placed); kernels in no step
    are absent."""
    rows = con.sql(
        "SELECT start_ns, label, placed_by FROM activity_step WHERE source = 'kernel'"
    ).fetchall()
    return {start: (label, placed_by) for start, label, placed_by in rows}


def test_a_step_holds_kernels_launched_during_it_from_another_thread(
    write_and_open: Any,
) -> None:
    # The step and a layer are ranges [100, 200) on thread 100; thread 101 launches too (the
    # autograd or DDP thread). A launch that starts inside the span counts even if it ends
    # after it (199..205); one that starts at the step's end (200) does not.
    scenario = Scenario(
        kernels=[
            Kernel(210, 290, GEMM, launch=(120, 121)),
            Kernel(300, 350, GEMM, tid=101, launch=(150, 151)),
            Kernel(360, 420, ALLREDUCE, stream=31, tid=101, launch=(199, 205)),
            Kernel(500, 550, GEMM, tid=101, launch=(200, 201)),
        ],
        nvtx=[NvtxRange(100, 200, "ProfilerStep#1"), NvtxRange(100, 200, "layers.0")],
    )
    con = write_and_open(scenario)
    assert step_of(con) == {
        210: ("ProfilerStep#1", "launch"),
        300: ("ProfilerStep#1", "launch"),
        360: ("ProfilerStep#1", "launch"),
    }
    (step,) = run_query(con, "step_breakdown").to_dicts()
    assert (step["start_ns"], step["end_ns"], step["step_time_ns"]) == (210, 420, 210)
    assert (step["kernel_count"], step["comm_kernel_count"], step["comm_sum_ns"]) == (3, 1, 60)
    # compute [210,290) + [300,350); the all-reduce [360,420) overlaps nothing; idle
    # [290,300) + [350,360).
    assert (step["compute_ns"], step["exposed_comm_ns"], step["idle_ns"]) == (130, 60, 20)
    # Layers stay same-thread: only thread 100's kernel is in layers.0.
    layers = {r["layer"]: r["kernel_count"] for r in run_query(con, "layer_summary").to_dicts()}
    assert layers == {"layers.0": 1, "(outside layers)": 3}


def test_a_kernel_whose_launch_is_not_in_the_trace_is_placed_by_its_gpu_start(
    tmp_path: Path,
) -> None:
    scenario = Scenario(
        kernels=[
            Kernel(150, 180, GEMM, launch=(140, 141)),
            Kernel(120, 130, GEMM, launch=(5, 6)),
            Kernel(260, 270, GEMM, launch=(7, 8)),
        ],
        nvtx=[NvtxRange(100, 200, "ProfilerStep#1")],
    )
    path = write_trace(scenario, tmp_path / "unlaunched.sqlite")
    # The launches at 5 and 7 happened before the capture: their runtime rows are not there.
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start IN (5, 7)")
    con = open_trace(path)
    assert step_of(con) == {
        120: ("ProfilerStep#1", "gpu_start"),
        150: ("ProfilerStep#1", "launch"),
    }
    (step,) = run_query(con, "step_breakdown").to_dicts()
    assert (step["start_ns"], step["end_ns"], step["kernel_count"]) == (120, 180, 2)


def test_each_process_has_its_own_steps(write_and_open: Any) -> None:
    # Process 200's step [150, 300) covers the instant 250 at which process 100 launches: that
    # kernel is in no step, since its own process's step ended at 200.
    scenario = Scenario(
        kernels=[
            Kernel(300, 320, GEMM, pid=100, tid=105, launch=(170, 171)),
            Kernel(400, 450, GEMM, pid=100, launch=(250, 251)),
            Kernel(410, 460, GEMM, device=1, pid=200, tid=201, launch=(160, 161)),
        ],
        nvtx=[
            NvtxRange(100, 200, "ProfilerStep#1", pid=100),
            NvtxRange(150, 300, "ProfilerStep#7", pid=200),
        ],
    )
    con = write_and_open(scenario)
    assert step_of(con) == {300: ("ProfilerStep#1", "launch"), 410: ("ProfilerStep#7", "launch")}
    rows = run_query(con, "step_breakdown").to_dicts()
    assert [(r["pid"], r["device_id"], r["name"], r["kernel_count"]) for r in rows] == [
        (100, 0, "ProfilerStep#1", 1),
        (200, 1, "ProfilerStep#7", 1),
    ]


def test_overlapping_steps_give_each_instant_to_the_latest_starting_one(
    write_and_open: Any,
) -> None:
    # step 1 [0, 1000) on thread 100 holds step 2 [100, 200) of thread 101 and steps 4
    # [300, 400) and 5 [300, 350) (same start: the one ending first wins); step 3 [900, 1100)
    # on thread 102 overlaps its end.
    launches = {50: "step 1", 150: "step 2", 320: "step 5", 370: "step 4", 500: "step 1"}
    launches |= {950: "step 3", 1050: "step 3", 1150: ""}
    scenario = Scenario(
        kernels=[Kernel(2000 + t, 2001 + t, GEMM, tid=103, launch=(t, t + 1)) for t in launches],
        nvtx=[
            NvtxRange(0, 1000, "step 1"),
            NvtxRange(100, 200, "step 2", tid=101),
            NvtxRange(900, 1100, "step 3", tid=102),
            NvtxRange(300, 400, "step 4"),
            NvtxRange(300, 350, "step 5", tid=101),
        ],
    )
    placed = {t - 2000: label for t, (label, _) in step_of(write_and_open(scenario)).items()}
    assert placed == {t: label for t, label in launches.items() if label}


def test_a_launch_where_one_step_ends_and_the_next_begins_is_in_the_next(
    write_and_open: Any,
) -> None:
    scenario = Scenario(
        kernels=[Kernel(500, 510, GEMM, tid=101, launch=(200, 201))],
        nvtx=[NvtxRange(100, 200, "step 1"), NvtxRange(200, 300, "step 2")],
    )
    assert step_of(write_and_open(scenario)) == {500: ("step 2", "launch")}


def test_backtrace_twins_of_launch_calls_do_not_place_a_kernel_twice(write_and_open: Any) -> None:
    scenario = Scenario(
        kernels=[Kernel(300, 350, GEMM, tid=101, launch=(150, 151))],
        nvtx=[NvtxRange(100, 200, "ProfilerStep#1")],
        backtrace_duplicates=True,
    )
    con = write_and_open(scenario)
    assert con.sql("SELECT count(*) FROM activity_step").fetchone() == (1,)
    (step,) = run_query(con, "step_breakdown").to_dicts()
    assert step["kernel_count"] == 1


# --- The real PyTorch profiler traces: every kernel, checked straight from the JSON ---


def _ns(us: Decimal) -> int:
    return int((us * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def independent_kernel_steps(path: Path) -> Counter[tuple[str, int, int, str | None]]:
    """(kernel name, GPU start, GPU end, step) of every kernel, from the JSON alone: the
    step is the ProfilerStep annotation of the process whose span holds the start of the
    kernel's launch (the cuda_runtime/cuda_driver event with its correlation id), else its GPU
    start when no launch has that id."""
    with gzip.open(path, "rt") as f:
        events = [e for e in json.load(f, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    steps = [
        e
        for e in events
        if e.get("cat") == "user_annotation" and re.match(r"ProfilerStep#\d+", e["name"])
    ]
    (pid,) = {e["pid"] for e in steps}
    spans = sorted(
        (_ns(Decimal(e["ts"])), _ns(Decimal(e["ts"])) + _ns(Decimal(e["dur"])), e["name"])
        for e in steps
    )
    assert all(a[1] <= b[0] for a, b in pairwise(spans)), "steps overlap"
    launch = {
        e["args"]["correlation"]: _ns(Decimal(e["ts"]))
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and e["pid"] == pid
        and "correlation" in e.get("args", {})
    }
    out: Counter[tuple[str, int, int, str | None]] = Counter()
    for k in events:
        if k.get("cat") != "kernel":
            continue
        start = _ns(Decimal(k["ts"]))
        end = start + max(_ns(Decimal(k["dur"])), 0)
        t = launch.get(k["args"].get("correlation"), start)
        step = next((name for s, e, name in spans if s <= t < e), None)
        out[(k["name"], start, end, step)] += 1
    return out


@pytest.mark.parametrize("name", KINETO_FILES)
def test_every_nccl_kernel_belongs_to_the_step_its_launch_falls_in(name: str) -> None:
    path = KINETO / f"{name}.json.gz"
    expected = independent_kernel_steps(path)
    rows = (
        open_trace(path)
        .sql(
            "SELECT k.name, k.start_ns, k.end_ns, s.label FROM kernel AS k "
            "LEFT JOIN activity_step AS s ON s.source = 'kernel' AND s.activity_id = k.kernel_id"
        )
        .fetchall()
    )
    # All kernels, so every NCCL kernel among them; some NCCL kernels are in a step.
    assert Counter(rows) == expected
    in_steps = sum(n for k, n in expected.items() if "nccl" in k[0].lower() and k[3] is not None)
    assert in_steps > 0


def test_v100_ddp_steps_hold_their_all_reduces_and_htas_kernel_count() -> None:
    # Every all-reduce is launched from DDP's own thread: per-step communication is not 0, and
    # each of the 5 steps holds 3,874 kernels (19,370 / 5), HTA's figure.
    con = open_trace(KINETO / "v100_ddp_rank1.json.gz")
    rows = run_query(con, "step_breakdown").to_dicts()
    assert [(r["kernel_count"], r["comm_kernel_count"]) for r in rows] == [(3874, 404)] * 5
    assert all(r["comm_sum_ns"] > 0 for r in rows)
