"""Ranks that start apart: an early rank's first collective spins for seconds until the late
rank arrives. The wait is detected (queries/derived/late_start_wait.sql) and kept out of the
GPU's times, its steps, the stragglers and the critical path, with a ledger line and a Capture
hint naming the late rank (docs/metrics.md, "Ranks that start apart").

The scenario, in ms (MS ns), three ranks (pids 100, 101, 102), a compute stream 7 and an NCCL
stream 20. Step 0: ranks 0 and 1 run a GEMM [1000, 1060) and launch the first all-reduce at
1060; rank 2 starts late: GEMM [2940, 3000), all-reduce [3000, 3020). The all-reduce ends at
3020 on every rank, so ranks 0 and 1 spin in it [1060, 3020): 1960 ms. Then every rank runs an
elementwise kernel [3020, 3030). Steps 1 and 2 (T = 3100, 3200): GEMM [T, T+60), all-reduce
[T+60, T+80), elementwise [T+80, T+90); in step 1 rank 1's GEMM runs 5 ms longer, so it
reaches the all-reduce at 3165 and ranks 0 and 2 wait 5 ms for it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nsysreport.analysis import analyse
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.queries import run_query
from nsysreport.synth import Gpu, Kernel, NvtxRange, Scenario, write_trace
from nsysreport.synth.lies import late_starting_rank
from nsysreport.synth.rank_files import write_rank_files

MS = 1_000_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<(int)4>(int)"
PIDS = (100, 101, 102)


def scenario(delay_ms: int = 1940) -> Scenario:
    """The module's scenario, rank 2 reaching the first all-reduce `delay_ms` after ranks 0
    and 1 (built as every rank on time, then late_starting_rank moving ranks 0 and 1 early)."""
    kernels: list[Kernel] = []
    nvtx: list[NvtxRange] = []
    for device, pid in enumerate(PIDS):
        t = 2940  # step 0, every rank as the late one runs it
        nvtx.append(NvtxRange((t - 1) * MS, 3035 * MS, "ProfilerStep#0", pid=pid))
        kernels += [
            Kernel(t * MS, (t + 60) * MS, GEMM, device=device, pid=pid),
            Kernel((t + 60) * MS, 3020 * MS, NCCL, device=device, pid=pid, stream=20),
            Kernel(3020 * MS, 3030 * MS, ELEMENTWISE, device=device, pid=pid),
        ]
        for step, t in ((1, 3100), (2, 3200)):
            late = 5 if (pid, step) == (101, 1) else 0
            nvtx.append(NvtxRange((t - 1) * MS, (t + 95) * MS, f"ProfilerStep#{step}", pid=pid))
            kernels += [
                Kernel(t * MS, (t + 60 + late) * MS, GEMM, device=device, pid=pid),
                Kernel(
                    (t + 60 + late) * MS, (t + 80) * MS, NCCL, device=device, pid=pid, stream=20
                ),
                Kernel((t + 80) * MS, (t + 90) * MS, ELEMENTWISE, device=device, pid=pid),
            ]
    on_time = Scenario(kernels=kernels, nvtx=nvtx, gpus=[Gpu(d, pid=p) for d, p in enumerate(PIDS)])
    return late_starting_rank(on_time, late_pid=102, delay_ns=delay_ms * MS)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace(scenario(), tmp_path_factory.mktemp("late") / "late.sqlite")


@pytest.fixture(scope="module")
def report(trace: Path) -> Report:
    return analyse(trace)


def gpu(report: Report, pid: int) -> dict[str, int]:
    g = next(x for x in as_json(report)["gpus"] if x["pid"] == pid)
    return {k: g[k] for k in ("span_ns", "compute_ns", "exposed_comm_ns", "idle_ns", "busy_ns")}


def test_the_early_ranks_first_all_reduce_is_a_wait_and_the_late_ranks_is_not(trace: Path) -> None:
    rows = run_query(open_trace(trace), "analysed_start").to_dicts()
    # Ranks 0 and 1: [1060, 3020) = 1960 ms >= 1 s and >= 10 x their other all-reduces'
    # median (20 and 17.5 ms); rank 2's first all-reduce lasts 20 ms.
    assert rows == [
        {"pid": 100, "device_id": 0, "cut_ns": 3020 * MS, "wait_ns": 1960 * MS},
        {"pid": 101, "device_id": 1, "cut_ns": 3020 * MS, "wait_ns": 1960 * MS},
    ]


def test_an_early_ranks_times_start_when_its_wait_ends(report: Report) -> None:
    # Rank 0 from 3020: elementwise 10, steps 1-2 (60 + 10) x 2 compute, 20 x 2 exposed
    # all-reduce; idle [3030, 3100) and [3190, 3200). Before: span [1000, 3290) = 2290 ms,
    # exposed comm 1960 + 40 = 2000 ms (87%), compute 60 more.
    assert gpu(report, 100) == {
        "span_ns": 270 * MS,
        "compute_ns": 150 * MS,
        "exposed_comm_ns": 40 * MS,
        "idle_ns": 80 * MS,
        "busy_ns": 190 * MS,
    }
    # Rank 1: its step 1 GEMM 5 ms longer, its all-reduce 5 ms shorter.
    assert gpu(report, 101) == {
        "span_ns": 270 * MS,
        "compute_ns": 155 * MS,
        "exposed_comm_ns": 35 * MS,
        "idle_ns": 80 * MS,
        "busy_ns": 190 * MS,
    }


def test_the_late_rank_keeps_all_its_time(report: Report) -> None:
    # Rank 2 from 2940: GEMMs 3 x 60, elementwise 3 x 10; all-reduces 3 x 20, each exposed
    # (in step 1 it waits from 3160 for rank 1); idle [3030, 3100) and [3190, 3200).
    assert gpu(report, 102) == {
        "span_ns": 350 * MS,
        "compute_ns": 210 * MS,
        "exposed_comm_ns": 60 * MS,
        "idle_ns": 80 * MS,
        "busy_ns": 270 * MS,
    }


def test_a_step_holding_the_wait_starts_when_the_wait_ends(report: Report) -> None:
    steps = {(s.pid, s.name): s for s in report.steps}
    # Rank 0's step 0 holds its GEMM and the wait (both at the cut, no time) and the
    # elementwise kernel [3020, 3030): 10 ms, 3 kernels, its all-reduce of no time.
    s = steps[(100, "ProfilerStep#0")]
    assert (s.start_ns, s.step_time_ns, s.kernel_count) == (3020 * MS, 10 * MS, 3)
    assert (s.comm_kernel_count, s.comm_sum_ns) == (1, 0)
    # Rank 2's step 0 is whole: [2940, 3030).
    assert steps[(102, "ProfilerStep#0")].step_time_ns == 90 * MS
    assert steps[(100, "ProfilerStep#1")].step_time_ns == 90 * MS
    assert len(steps) == 9


def test_the_stragglers_leave_the_first_instance_out(report: Report) -> None:
    by_rank = {g.rank: g for g in report.stragglers.gpus}
    # AllReduce #1 (rank 2 arriving 1940 ms late) matches nothing; #2: rank 1 arrives 5 ms
    # after ranks 0 and 2 (caused 10 ms); #3: no skew. Before: rank 2 the straggler, having
    # caused 2 x 1940 ms.
    assert {r: g.matched_instances for r, g in by_rank.items()} == {0: 2, 1: 2, 2: 2}
    assert (by_rank[1].last_arrivals, by_rank[1].caused_wait_ns) == (1, 10 * MS)
    assert (by_rank[0].wait_ns, by_rank[2].wait_ns, by_rank[2].caused_wait_ns) == (
        5 * MS,
        5 * MS,
        0,
    )
    assert report.stragglers.straggler is not None and report.stragglers.straggler.rank == 1


def test_the_collective_statistics_leave_the_wait_out(report: Report) -> None:
    counts = {(c.pid, c.op): (c.count, c.total_ns) for c in report.collectives}
    assert counts == {
        (100, "AllReduce"): (2, 40 * MS),
        (101, "AllReduce"): (2, 35 * MS),
        (102, "AllReduce"): (3, 60 * MS),
    }


def test_the_ledger_and_the_capture_say_who_started_late(report: Report) -> None:
    rows = {(i.ledger_class, i.reason): i.count for i in report.quality.items}
    assert rows == {
        ("late_start", "a wait for a late-starting rank: left out of the times"): 2,
        # ranks 0 and 1: the step 0 GEMM ended at 1060, before the cut
        ("late_start", "an end before a late-starting rank arrived: left out of the times"): 2,
    }
    assert report.capture is not None
    hint = next(h for h in report.capture.hints if h.topic == "late_start")
    # rank 2 reached the all-reduce at 3000, 1940 ms after ranks 0 and 1 (1060)
    assert hint.finding.startswith(
        "rank 2 started 1.94 s after the first rank: the first collective of ranks 0,1 waited "
        "1.96 s for it"
    )


def test_the_critical_path_never_walks_before_every_rank_arrived(
    report: Report, tmp_path: Path
) -> None:
    path = report.critical_path
    assert path is not None and path.start_ns >= 3020 * MS  # the median step: after the cut
    # Without steps the window is the middle of the trace, from rank 0's first kernel at
    # 1000 ms: it starts at the cut instead, and no cause holds the wait's seconds (its launch
    # 1960 ms before the cut would otherwise read as launch latency).
    bare = replace(scenario(), nvtx=[])
    path = analyse(write_trace(bare, tmp_path / "bare.sqlite")).critical_path
    assert path is not None and path.start_ns == 3020 * MS
    assert path.length_ns == path.end_ns - 3020 * MS
    assert all(c.ns < 1000 * MS for c in path.causes)
    assert all(w.wait_ns < 1000 * MS for w in path.waits)


def test_a_wait_under_a_second_is_an_ordinary_straggler(tmp_path: Path) -> None:
    # Rank 2 800 ms late: ranks 0 and 1 wait [2200, 3020) = 820 ms < 1 s: no wait, the
    # numbers as recorded: rank 0's exposed comm 820 + 40 ms, rank 2 the straggler.
    report = analyse(write_trace(scenario(delay_ms=800), tmp_path / "t.sqlite"))
    assert gpu(report, 100)["exposed_comm_ns"] == 860 * MS
    assert report.stragglers.straggler is not None and report.stragglers.straggler.rank == 2
    assert not report.quality.items
    assert report.capture is not None
    assert "late_start" not in {h.topic for h in report.capture.hints}


def test_per_rank_files_name_the_late_rank_across_files(tmp_path: Path) -> None:
    # One file per rank, each on a clock of its own (the collectives align them).
    paths = write_rank_files(scenario(), tmp_path, [0, 7 * MS, -3 * MS])
    report = analyse(paths)
    assert gpu(report, 100)["span_ns"] == 270 * MS
    assert gpu(report, 102)["exposed_comm_ns"] == 60 * MS
    assert report.stragglers.straggler is not None and report.stragglers.straggler.rank == 1
    assert report.capture is not None
    hint = next(h for h in report.capture.hints if h.topic == "late_start")
    assert hint.finding.startswith("rank 2 started 1.94 s after the first rank")
    waits = sorted((i.file, i.count) for i in report.quality.items if "wait" in i.reason)
    assert waits == [("rank0.sqlite", 1), ("rank1.sqlite", 1)]
    path = report.critical_path
    assert path is not None and path.start_ns >= 3020 * MS  # rank 0's clock: the reference
