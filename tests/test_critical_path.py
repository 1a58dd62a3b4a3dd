"""The critical path (#36): what set the window's length, walked back from its last activity
to the predecessor ready last, across streams, host threads and ranks (docs/metrics.md
"Critical path"). Every scenario's numbers are worked out by hand in its docstring; on every
scenario and real trace the causes add up to the window exactly.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.compare import as_json as compare_json
from nsysreport.compare import compare_reports, critical_path_sentence
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.multi import build_multi_report
from nsysreport.path_across_files import local_walks
from nsysreport.patterns import Patterns
from nsysreport.report_builder import build_report
from nsysreport.synth import (
    ApiCall,
    GraphLaunch,
    Kernel,
    Memcpy,
    NvtxRange,
    Scenario,
    write_trace,
)

from conftest import SHARED_TRACES, real_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
LONG_GEMM = "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
COPY = "void at::native::elementwise_kernel<128, 4>(int)"
runner = CliRunner()
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096>)"


def report_of(tmp_path: Path, scenario: Scenario) -> Report:
    path = write_trace(scenario, tmp_path / "trace.sqlite")
    return build_report(open_trace(path), path)


def causes(report: Report) -> dict[str, int]:
    path = report.critical_path
    assert path is not None
    assert sum(c.ns for c in path.causes) == path.length_ns  # exactly, on every scenario
    return {c.cause: c.ns for c in path.causes if c.ns}


def test_the_path_switches_streams_at_an_event_wait(tmp_path: Path) -> None:
    """Stream 7 runs a GEMM [100, 1100); stream 8's copy kernel [1150, 1650) waits for it (an
    event), and stream 7's next GEMM [1700, 2000) waits for the copy. All three were launched
    long before (10-60). The step's GPU window is [100, 2000): the path is GEMM 300 <- wait 50
    <- copy kernel 500 (stream 8) <- wait 50 <- GEMM 1000: compute 1800 + GPU waiting 100."""
    kernels = [
        Kernel(100, 1_100, GEMM, launch=(10, 20)),
        Kernel(1_150, 1_650, COPY, stream=8, launch=(30, 40)),
        Kernel(1_700, 2_000, GEMM, launch=(50, 60)),
    ]
    report = report_of(tmp_path, Scenario(kernels=kernels, nvtx=[NvtxRange(0, 2_100, "step 1")]))
    assert causes(report) == {"compute": 1_800, "gpu_wait": 100}
    path = report.critical_path
    assert path is not None
    assert (path.basis, path.step, path.start_ns, path.end_ns) == (
        "median step",
        "step 1",
        100,
        2_000,
    )
    # The copy kernel on stream 8 is on the path; each wait is named by the kernel that waited.
    assert {(i.cause, i.what, i.ns) for i in path.items} == {
        ("compute", GEMM, 1_300),
        ("compute", COPY, 500),
        ("gpu_wait", COPY, 50),
        ("gpu_wait", GEMM, 50),
    }


def test_a_launch_bound_step_is_api_calls_host_time_and_launch_latency(tmp_path: Path) -> None:
    """One thread launches three 50 ns kernels with 800 ns calls, 200 ns apart: call i is
    [1000 i, 1000 i + 800), kernel i [1000 i + 850, 1000 i + 900). The GPU window is [850,
    2900). Path: kernel 3 (50) <- launch latency [2800, 2850) <- call 3 (800) <- host
    [1800, 2000) <- call 2 (800) <- host [850, 1000), cut at the window's start: compute 50,
    launch latency 50, CUDA API 1600, host 350."""
    kernels = [
        Kernel(1_000 * i + 850, 1_000 * i + 900, GEMM, launch=(1_000 * i, 1_000 * i + 800))
        for i in range(3)
    ]
    report = report_of(tmp_path, Scenario(kernels=kernels, nvtx=[NvtxRange(-10, 3_000, "step 1")]))
    assert causes(report) == {"compute": 50, "launch_latency": 50, "cuda_api": 1_600, "host": 350}
    path = report.critical_path
    assert path is not None and path.length_ns == 2_050
    (rank,) = path.ranks
    # The GPU is idle 2050 - 150 = 1900 in the window; the path's host side covers 2000 of
    # the window, of which the GPU was busy 100 (kernels 1 and 2): 1900, so no slack.
    assert (rank.idle_ns, rank.slack_ns) == (1_900, 0)
    assert "cuda_api" in {i.cause for i in path.items}


def late_rank_scenario() -> Scenario:
    """Ranks 0 and 1: GEMM [0, 1000), all-reduce [1000, 2500); rank 2: GEMM [0, 2000),
    all-reduce [2000, 2500); then a kernel [2500, 2600), rank 0's to 2700. Launched before 0."""
    kernels = []
    for rank, pid in enumerate((100, 101, 102)):
        gemm_end = 2_000 if rank == 2 else 1_000
        tail_end = 2_700 if rank == 0 else 2_600
        # All launched early, one after another, from each process's thread.
        kernels += [
            Kernel(0, gemm_end, LONG_GEMM if rank == 2 else GEMM, device=rank, pid=pid,
                   launch=(-90, -85)),
            Kernel(gemm_end, 2_500, ALL_REDUCE, device=rank, pid=pid, stream=9,
                   launch=(-80, -75)),
            Kernel(2_500, tail_end, COPY, device=rank, pid=pid, launch=(-70, -65)),
        ]  # fmt: skip
    nvtx = [NvtxRange(-100, 2_800, "step 1", pid=pid) for pid in (100, 101, 102)]
    return Scenario(kernels=kernels, nvtx=nvtx)


def test_the_path_crosses_to_the_rank_a_collective_waited_for_and_names_its_gemm(
    tmp_path: Path,
) -> None:
    """Three ranks: ranks 0 and 1 run a GEMM [0, 1000) then the all-reduce from 1000; rank 2's
    GEMM runs [0, 2000), so its all-reduce starts at 2000; all end at 2500. Then a kernel
    [2500, 2600), rank 0's longer, to 2700. Path: rank 0's kernel 200 <- the transfer [2000,
    2500) on rank 0 <- crosses to rank 2 at 2000 <- rank 2's GEMM [0, 2000): compute 2200,
    communication 500. Rank 2 arrived 1000 ns late; it was in its GEMM all that time."""
    report = report_of(tmp_path, late_rank_scenario())
    assert causes(report) == {"compute": 2_200, "communication": 500}
    path = report.critical_path
    assert path is not None
    assert path.end_rank == 0
    assert [(r.rank, r.on_path_ns, r.idle_ns, r.slack_ns) for r in path.ranks] == [
        (0, 700, 0, 0),
        (1, 0, 100, 100),
        (2, 2_000, 100, 100),
    ]
    (wait,) = path.waits
    assert (wait.op, wait.ordinal, wait.path_rank, wait.last_rank, wait.crossed) == (
        "AllReduce",
        1,
        0,
        2,
        True,
    )
    assert (wait.wait_ns, wait.doing, wait.doing_ns) == (1_000, LONG_GEMM, 1_000)
    assert path.drill_down == (
        "Rank 2 arrived 1 µs late at AllReduce #1; before it, rank 2 was in "
        "`nvjet_tst_256x128_64x4_1x2_h_bz_coopA_TNT` for 1 µs."
    )


def test_what_ifs_are_recomputed_over_the_path_and_disagree_with_the_span_where_ranks_wait(
    tmp_path: Path,
) -> None:
    """The late-rank scenario, recomputed. Compute 2x: GEMMs end at 500 (ranks 0, 1) and 1000
    (rank 2), the all-reduce's transfer 1000-1500, rank 0's tail 100 more: 1600. GEMMs 2x:
    the same but the tail (an elementwise kernel) keeps its 200: 1700. Transfers taking no
    time: the all-reduce ends when rank 2 arrives, 2000, then the tail: 2200. Rank 0's own step
    (compute C = 1200, comm M = exposed X = 1500) projects compute 2x as C/2 + M = 2100 and
    perfect overlap as max(C, M) = 1500: the path disagrees most on the latter, since rank 2's
    GEMM stays on it."""
    path = report_of(tmp_path, late_rank_scenario()).critical_path
    assert path is not None
    got = {w.change: (w.path_ns, w.span_ns) for w in path.what_if}
    assert got == {
        "compute_2x": (1_600, 2_100),
        "gemm_2x": (1_700, None),
        "comm_hidden": (2_200, 1_500),
    }
    assert path.what_if_note is not None
    assert path.what_if_note.startswith(
        "Communication hidden (transfers take no time): the span-based projection gives 1.5 µs"
    )


def test_the_gate_judges_the_path_s_shares_and_its_longest_wait(tmp_path: Path) -> None:
    """The late-rank scenario above: no host-side time on the path (0 %), communication
    500 of 2700 (18.5 %), the longest wait 1000 ns."""
    path = write_trace(late_rank_scenario(), tmp_path / "late.sqlite")
    checks = [
        ("--max", "critical_path_pct=0"),
        ("--max", "critical_path_pct[communication]=18.6"),
        ("--max", "critical_path_wait_ns=1000"),
    ]
    args = [str(path), *(x for check in checks for x in check), "--no-cache"]
    result = runner.invoke(app, ["gate", *args], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    assert "3 checks, 0 failed" in result.output
    result = runner.invoke(
        app, ["gate", str(path), "--max", "critical_path_wait_ns=999", "--no-cache"]
    )
    assert result.exit_code == 1 and "1 check, 1 failed" in result.output
    result = runner.invoke(app, ["gate", str(path), "--max", "critical_path_pct[nope]=1"])
    assert result.exit_code == 2 or result.exit_code == 1
    assert "no such cause" in result.output and "Traceback" not in result.output


def test_compare_sets_the_paths_side_by_side(tmp_path: Path) -> None:
    """The late-rank scenario (compute 2200 and communication 500 of 2700) against a GPU that
    only computes [0, 1000): compute 100 % -> 81.5 %, communication 0 -> 18.5 %."""
    alone = write_trace(
        Scenario(kernels=[Kernel(0, 1_000, GEMM)], nvtx=[NvtxRange(-10, 1_100, "step 1")]),
        tmp_path / "one.sqlite",
    )
    late = write_trace(late_rank_scenario(), tmp_path / "three.sqlite")
    reports = [build_report(open_trace(p), p) for p in (alone, late)]
    comparison = compare_reports(reports, ["one", "three"])
    rows = {r["cause"]: r["pct"] for r in comparison.critical_path}
    assert rows["compute"] == {"one": 100.0, "three": pytest.approx(100 * 2_200 / 2_700)}
    assert rows["communication"] == {"one": 0.0, "three": pytest.approx(100 * 500 / 2_700)}
    assert critical_path_sentence(comparison) == (
        "Median step, one → three: compute 100.0% → 81.5%; communication transfer 0.0% → 18.5%."
    )
    assert compare_json(comparison)["critical_path_summary"] == critical_path_sentence(comparison)


def test_a_graph_replay_follows_its_launch(tmp_path: Path) -> None:
    """A kernel [0, 100) launched at (-50, -40); the same thread then calls cudaGraphLaunch
    [100, 150), whose two kernels replay [300, 500) and [500, 800) on the same stream. Path:
    node 2 (300) <- node 1 (200) <- launch latency [150, 300) <- cudaGraphLaunch [100, 150)
    <- the thread's time since its last call [-40, 100), cut at 0: compute 500, launch latency
    150, CUDA API 50, host 100."""
    nodes = [
        Kernel(300, 500, GEMM, graph_node_id=1),
        Kernel(500, 800, COPY, graph_node_id=2),
    ]
    scenario = Scenario(
        kernels=[Kernel(0, 100, GEMM, launch=(-50, -40))],
        graph_launches=[GraphLaunch(300, 800, launch=(100, 150), kernels=nodes)],
        nvtx=[NvtxRange(-100, 900, "step 1")],
    )
    report = report_of(tmp_path, scenario)
    assert causes(report) == {"compute": 500, "launch_latency": 150, "cuda_api": 50, "host": 100}
    path = report.critical_path
    assert path is not None
    assert ("cuda_api", "cudaGraphLaunch") in {(i.cause, i.what) for i in path.items}


def test_a_host_sync_puts_the_gpu_work_it_waited_for_on_the_path(tmp_path: Path) -> None:
    """A GEMM [0, 1000) launched at (-20, -10); the thread calls cudaDeviceSynchronize
    [100, 1050), which returns 50 after the GEMM ends, then launches a kernel (1100, 1150)
    that runs [1200, 1300). Path: kernel 100 <- launch latency 50 <- its call 50 <- host 50
    <- synchronisation [1000, 1050) <- the GEMM [0, 1000): compute 1100, launch latency 50,
    CUDA API 50, host 50, synchronisation 50."""
    scenario = Scenario(
        kernels=[
            Kernel(0, 1_000, GEMM, launch=(-20, -10)),
            Kernel(1_200, 1_300, COPY, launch=(1_100, 1_150)),
        ],
        api_calls=[ApiCall(100, 1_050, "cudaDeviceSynchronize_v3020")],
        nvtx=[NvtxRange(-100, 1_400, "step 1")],
    )
    report = report_of(tmp_path, scenario)
    assert causes(report) == {
        "compute": 1_100,
        "launch_latency": 50,
        "cuda_api": 50,
        "host": 50,
        "synchronisation": 50,
    }


def test_the_json_holds_the_path_and_reads_back(tmp_path: Path) -> None:
    kernels = [Kernel(0, 1_000, GEMM), Kernel(1_000, 1_500, COPY)]
    report = report_of(tmp_path, Scenario(kernels=kernels, nvtx=[NvtxRange(-10, 1_600, "step 1")]))
    data = json.loads(json.dumps(as_json(report)))
    section = data["critical_path"]
    assert section["length_ns"] == 1_500
    assert {c["cause"]: c["ns"] for c in section["causes"]}["compute"] == 1_500
    assert Report.from_json(data, "r.json").critical_path == report.critical_path


# The real nsys exports: tests/test_real_traces.py checks the same on each one's report.
@pytest.mark.parametrize(
    "name", ["kineto/a100_ddp_rank0_nccl_data.json.gz", "kineto/mi300_rccl_rank0.json.gz"]
)
def test_on_real_traces_the_causes_add_up_to_the_window(name: str) -> None:
    path = SHARED_TRACES / name
    report = build_report(open_trace(path), path)
    cp = report.critical_path
    assert cp is not None
    assert sum(c.ns for c in cp.causes) == cp.length_ns == cp.end_ns - cp.start_ns > 0
    assert sum(r.on_path_ns for r in cp.ranks) == cp.length_ns
    assert all(0 <= r.slack_ns <= r.idle_ns <= cp.length_ns for r in cp.ranks)


def test_mfu_names_what_the_late_rank_was_doing() -> None:
    """The real 2-GPU trace: rank 1 is the one that arrives last at most all-to-alls; the
    path crosses to it and names what it was doing."""
    path = real_trace("mfu_2gpu_before.sqlite")
    cp = build_report(open_trace(path), path).critical_path
    assert cp is not None and cp.drill_down is not None
    assert any(w.crossed for w in cp.waits)
    worst = max(cp.waits, key=lambda w: w.wait_ns)
    assert cp.drill_down.startswith(f"Rank {worst.last_rank} arrived ")
    assert worst.doing_ns > 0


def ddp_rank(rank: int) -> Scenario:
    """One rank of a data-parallel step: compute kernels of 100 ns (rank 0) or 150 ns (rank 1)
    back to back on stream 7 from 0; each of two all-reduces on stream 9 starts 10 after the
    second and the fourth kernel end (its gradient ready) and lasts 50 past the later rank's
    arrival. Rank 1 arrives last at both: 310 and 610; both end at 360 and 660."""
    pid, d = 100 + rank, (100, 150)[rank]
    kernels = [
        Kernel(d * k, d * (k + 1), GEMM, device=rank, pid=pid, launch=(-90 + 5 * k, -88 + 5 * k))
        for k in range(4)
    ]
    kernels += [
        Kernel(2 * d + 10, 360, ALL_REDUCE, device=rank, pid=pid, stream=9, launch=(-60, -58)),
        Kernel(4 * d + 10, 660, ALL_REDUCE, device=rank, pid=pid, stream=9, launch=(-50, -48)),
    ]
    return Scenario(kernels=kernels, nvtx=[NvtxRange(-100, 700, "step 1", pid=pid)])


def test_across_files_each_node_is_walked_once_and_the_path_is_the_one_file_s(
    tmp_path: Path,
) -> None:
    """Path: rank 1's second all-reduce's transfer [610, 660) <- waiting 10 for its gradient
    <- rank 1's four kernels [0, 600): communication 50, GPU waiting 10, compute 600, the same
    from the one file and from a file per rank. In rank 1's file, the walk from the second
    all-reduce meets the first one's at its second kernel (both arrive there at 300): it stops
    there and goes on as that walk."""
    one = write_trace(
        Scenario(
            kernels=[*ddp_rank(0).kernels, *ddp_rank(1).kernels],
            nvtx=[*ddp_rank(0).nvtx, *ddp_rank(1).nvtx],
        ),
        tmp_path / "one.sqlite",
    )
    files = [write_trace(ddp_rank(r), tmp_path / f"rank{r}.sqlite") for r in (0, 1)]
    single = build_report(open_trace(one), one).critical_path
    multi = build_multi_report(files, Patterns(), cache=False).critical_path
    for path in (single, multi):
        assert path is not None
        assert {c.cause: c.ns for c in path.causes if c.ns} == {
            "compute": 600,
            "gpu_wait": 10,
            "communication": 50,
        }
        assert [(w.op, w.ordinal, w.last_rank, w.wait_ns) for w in path.waits] == [
            ("AllReduce", 2, 1, 200)
        ]
    walks = local_walks(open_trace(files[1]), "rank1.sqlite", 0, 660).walks
    entries = {w.entry[:2]: w for w in walks if w.entry is not None}
    first, second = entries[("AllReduce", 1)], entries[("AllReduce", 2)]
    assert first.tail is None and first.stop is None  # down to the window's start
    assert second.tail == (walks.index(first), 1)  # from kernel 2, after the wait [300, 310)
    assert sum(s.end_ns - s.start_ns for s in second.segments) == 610 - 300


def copies_and_event_scenario(cuda_events: bool = True) -> Scenario:
    """The shape of a CUTLASS benchmark's export (nsys 2023.2): one thread, stream 7, pageable
    cudaMemcpy calls around three kernels and a cudaEventSynchronize. cudaMemcpy [0, 1000)
    copies [50, 990) host to device; cudaMemcpy [1010, 2000) copies [1060, 2030) (its last 30 ns
    after the call returned, as pageable copies do); three launches [2010, 2100), [2110, 2120),
    [2130, 2140) run kernels [2080, 3080), [3090, 4090), [4100, 5100) (the first starts before
    its call returns); cudaEventRecord [2150, 2160) records event 1 on stream 7;
    cudaEventSynchronize [2170, 5120) waits for it; cudaMemcpy [5150, 7000) copies [5200, 6990)
    back."""
    copies = [
        Memcpy(50, 990, launch=(0, 1_000), api="cudaMemcpy_v3020"),
        Memcpy(1_060, 2_030, launch=(1_010, 2_000), api="cudaMemcpy_v3020"),
        Memcpy(5_200, 6_990, copy_kind=2, launch=(5_150, 7_000), api="cudaMemcpy_v3020"),
    ]
    kernels = [
        Kernel(2_080, 3_080, GEMM, launch=(2_010, 2_100)),
        Kernel(3_090, 4_090, GEMM, launch=(2_110, 2_120)),
        Kernel(4_100, 5_100, GEMM, launch=(2_130, 2_140)),
    ]
    calls = [
        ApiCall(2_150, 2_160, "cudaEventRecord_v3020", event=1, stream=7),
        ApiCall(2_170, 5_120, "cudaEventSynchronize_v3020", event=1),
    ]
    return Scenario(
        kernels=kernels,
        memcpys=copies,
        api_calls=calls,
        nvtx=[NvtxRange(-100, 7_100, "step 1")],
        cuda_events=cuda_events,
    )


@pytest.mark.parametrize("version", ["2023.2", "2022.2", "2026.2"])
@pytest.mark.parametrize("cuda_events", [True, False])
def test_a_synchronous_copy_and_an_event_wait_lead_to_the_gpu_work_they_waited_for(
    tmp_path: Path, version: str, cuda_events: bool
) -> None:
    """The window is the step's GPU time [50, 6990) = 6940 (copies_and_event_scenario). Path:
    the last copy [5200, 6990) 1790 <- its call from its start, [5150, 5200) 50 of CUDA API
    <- host [5120, 5150) 30 <- cudaEventSynchronize returning [5100, 5120) 20 after the event's
    work <- kernel 3 (1000) <- 10 waiting for its stream <- kernel 2 (1000) <- 10 <- kernel 1
    (1000), started before its launch returned <- the launch [2010, 2080) 70 <- host [2000,
    2010) 10 <- the second cudaMemcpy returning at 2000, its copy still running: the copy
    [1060, 2000) 940 <- its call [1010, 1060) 50 <- host [1000, 1010) 10 <- the first
    cudaMemcpy returning [990, 1000) 10 after its copy <- the copy [50, 990) 940. So compute
    3000 (the kernels), copy 3670 (the copies but the 30 ns the second ran past its call),
    CUDA API 170, host 50, synchronisation 30, GPU waiting 20; nothing untraced. The same
    with the event's CUDA_EVENT row or without (one stream: the work submitted before the
    call is the event's), whatever syncType the release writes (2023.2: 2 for an event
    synchronisation, the enum's stream wait). Before #46 the walk went round between the last
    copy and its call: copy 1790, untraced 5150.

    Compute 2x: the kernels end at 2580, 3090 and 3600 (each wait kept), the event wait
    returns at 3620, the last copy runs [3700, 5490): 5440, 1500 shorter."""
    path = write_trace(copies_and_event_scenario(cuda_events), tmp_path / "t.sqlite", version)
    report = build_report(open_trace(path), path)
    assert causes(report) == {
        "compute": 3_000,
        "copy": 3_670,
        "cuda_api": 170,
        "host": 50,
        "synchronisation": 30,
        "gpu_wait": 20,
    }
    cp = report.critical_path
    assert cp is not None and (cp.start_ns, cp.end_ns) == (50, 6_990)
    assert ("synchronisation", "cudaEventSynchronize") in {(i.cause, i.what) for i in cp.items}
    assert {w.change: w.path_ns for w in cp.what_if}["compute_2x"] == 5_440


def two_streams_scenario(sync: str, rows: bool) -> Scenario:
    """Stream 7 runs a GEMM [0, 1000), launched at (-100, -90), then event 1 is recorded on
    stream 7 (-80, -70); stream 8 runs a copy kernel [0, 1040), launched at (-60, -50). The
    thread waits [-40, 1050) in `sync` (cudaEventSynchronize on event 1, or
    cudaStreamSynchronize on stream 7), then launches a GEMM (1060, 1070) that runs [1100,
    1200) on stream 7. `rows`: the export has the CUDA_EVENT and SYNCHRONIZATION rows."""
    record = ApiCall(-80, -70, "cudaEventRecord_v3020", event=1, stream=7)
    if sync == "event":
        wait = ApiCall(-40, 1_050, "cudaEventSynchronize_v3020", event=1)
    else:
        wait = ApiCall(-40, 1_050, "cudaStreamSynchronize_v3020", stream=7)
    if not rows:
        record, wait = (replace(c, event=None, stream=None) for c in (record, wait))
    kernels = [
        Kernel(0, 1_000, GEMM, launch=(-100, -90)),
        Kernel(0, 1_040, COPY, stream=8, launch=(-60, -50)),
        Kernel(1_100, 1_200, LONG_GEMM, launch=(1_060, 1_070)),
    ]
    return Scenario(
        kernels=kernels, api_calls=[record, wait], nvtx=[NvtxRange(-200, 1_300, "step 1")]
    )


@pytest.mark.parametrize("sync", ["event", "stream"])
@pytest.mark.parametrize("version", ["2023.2", "2026.2"])
def test_a_host_wait_follows_the_stream_the_export_names_not_the_last_activity(
    tmp_path: Path, sync: str, version: str
) -> None:
    """two_streams_scenario, window [0, 1200). With the rows, the wait was for stream 7's GEMM:
    GEMM 100 <- launch latency [1070, 1100) 30 <- its launch 10 <- host [1050, 1060) 10 <-
    the wait returning [1000, 1050) 50 after the GEMM [0, 1000): compute 1100, launch latency
    30, CUDA API 10, host 10, synchronisation 50. Without them the wait is inferred: the
    activity submitted before the call that ended last before it returned, stream 8's copy
    kernel [0, 1040): compute 1140, synchronisation 10."""
    with_rows = write_trace(two_streams_scenario(sync, True), tmp_path / "rows.sqlite", version)
    without = write_trace(two_streams_scenario(sync, False), tmp_path / "none.sqlite", version)
    linked, inferred = (build_report(open_trace(p), p) for p in (with_rows, without))
    rest = {"launch_latency": 30, "cuda_api": 10, "host": 10}
    assert causes(linked) == {"compute": 1_100, "synchronisation": 50, **rest}
    assert causes(inferred) == {"compute": 1_140, "synchronisation": 10, **rest}
    for report, kernel in ((linked, GEMM), (inferred, COPY)):
        cp = report.critical_path
        assert cp is not None
        assert {i.what for i in cp.items if i.cause == "compute"} == {kernel, LONG_GEMM}


def stream_wait_scenario(cuda_events: bool) -> Scenario:
    """Stream 7 runs a GEMM [0, 1000) (launched at (-100, -90)) and event 1 is recorded after
    it (-80, -70); stream 8 runs a copy kernel [0, 1100) (-60, -50); cudaStreamWaitEvent
    (-40, -30) makes stream 9 wait for event 1, and its GEMM, launched at (-20, -10), runs
    [1150, 1250)."""
    calls = [
        ApiCall(-80, -70, "cudaEventRecord_v3020", event=1, stream=7),
        ApiCall(-40, -30, "cudaStreamWaitEvent_v3020", event=1, stream=9),
    ]
    kernels = [
        Kernel(0, 1_000, GEMM, launch=(-100, -90)),
        Kernel(0, 1_100, COPY, stream=8, launch=(-60, -50)),
        Kernel(1_150, 1_250, LONG_GEMM, stream=9, launch=(-20, -10)),
    ]
    return Scenario(
        kernels=kernels,
        api_calls=calls,
        nvtx=[NvtxRange(-200, 1_300, "step 1")],
        cuda_events=cuda_events,
    )


@pytest.mark.parametrize("version", ["2023.2", "2026.2", "2022.2"])
def test_a_stream_wait_follows_the_event_s_record_where_the_export_has_it(
    tmp_path: Path, version: str
) -> None:
    """stream_wait_scenario, window [0, 1250). Stream 9's GEMM waited for event 1, recorded on
    stream 7 after its GEMM: GEMM 100 <- waiting [1000, 1150) 150 <- the GEMM [0, 1000):
    compute 1100, GPU waiting 150. Without the event's record (CUDA_EVENT) the wait is
    inferred from the timing: the activity of another stream that ended last before it
    started, stream 8's copy kernel [0, 1100): compute 1200, GPU waiting 50."""
    linked, inferred = (
        write_trace(stream_wait_scenario(e), tmp_path / f"{e}.sqlite", version)
        for e in (True, False)
    )
    for path, expected, kernel in (
        (linked, {"compute": 1_100, "gpu_wait": 150}, GEMM),
        (inferred, {"compute": 1_200, "gpu_wait": 50}, COPY),
    ):
        report = build_report(open_trace(path), path)
        assert causes(report) == expected
        cp = report.critical_path
        assert cp is not None
        assert {i.what for i in cp.items if i.cause == "compute"} == {kernel, LONG_GEMM}


def test_a_copy_that_starts_after_its_cudamemcpy_returned_was_not_waited_for(
    tmp_path: Path,
) -> None:
    """A GEMM [0, 1000) launched at (-20, -10); the thread then calls cudaMemcpy [1010, 1020),
    which only queues its small copy: it runs [1050, 1100). Window [0, 1100). Path: the copy
    50 <- launch latency [1020, 1050) 30 <- the call 10, which waited for nothing (its copy had
    not started, the GEMM had ended before it began) <- host [-10, 1010), cut at 0: copy 50,
    launch latency 30, CUDA API 10, host 1010. (Taking the copy as what the call waited for
    made the call and its copy each other's predecessor at the same instant.)"""
    scenario = Scenario(
        kernels=[Kernel(0, 1_000, GEMM, launch=(-20, -10))],
        memcpys=[Memcpy(1_050, 1_100, launch=(1_010, 1_020), api="cudaMemcpy_v3020")],
        nvtx=[NvtxRange(-100, 1_200, "step 1")],
    )
    report = report_of(tmp_path, scenario)
    assert causes(report) == {"copy": 50, "launch_latency": 30, "cuda_api": 10, "host": 1_010}
