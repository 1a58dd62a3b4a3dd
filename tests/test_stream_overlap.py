"""Kernels that overlap their successor on one stream: as programmatic dependent launch (PDL)
does, or with a duration that cannot be. Each is counted (queries/derived/stream_overlap.sql),
the impossible ones in the ledger, and every time counts the overlap once (docs/metrics.md,
"Kernels that overlap on one stream").

The scenario (ns), one GPU, compute stream 7, NCCL stream 20, one step range around it all:
  K1 GEMM [0, 100), K2 [90, 150): K2 starts before K1 ends and ends after it: PDL (10 ns);
  K3 [200, 300), K4 [250, 280): K3 ends after K4 does: cannot be (30 ns);
  K5 [400, 450), K6 [400, 500): they start together: cannot be (50 ns);
  an all-reduce [120, 220) on stream 20 overlaps K2 and K3, on another stream: no pair.
Unions: compute [0, 150) + [200, 300) + [400, 500) = 350; communication 100, of which
[150, 200) runs with no compute: 50 exposed; busy [0, 300) + [400, 500) = 400; span 500, idle
[300, 400) = 100. The compute kernels' durations sum to 100+60+100+30+50+100 = 440.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from nsysreport.analysis import analyse
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.synth import Gpu, Kernel, NvtxRange, Scenario, write_trace
from nsysreport.synth.lies import overlapping_successors

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
OTHER = "void at::native::vectorized_elementwise_kernel<(int)4>(int)"


def scenario() -> Scenario:
    kernels = [
        Kernel(1000, 1100, GEMM),
        Kernel(1090, 1150, OTHER),
        Kernel(1200, 1300, OTHER),
        Kernel(1250, 1280, OTHER),
        Kernel(1400, 1450, OTHER),
        Kernel(1400, 1500, OTHER),
        Kernel(1120, 1220, NCCL, stream=20),
    ]
    return Scenario(
        kernels=kernels, nvtx=[NvtxRange(900, 1600, "ProfilerStep#1")], gpus=[Gpu(0, pid=100)]
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace(scenario(), tmp_path_factory.mktemp("overlap") / "overlap.sqlite")


@pytest.fixture(scope="module")
def report(trace: Path) -> Report:
    return analyse(trace)


def test_each_overlapping_pair_is_one_kind(trace: Path) -> None:
    rows = open_trace(trace).table("stream_overlap").pl().sort("start_ns").to_dicts()
    got = [(r["start_ns"], r["next_start_ns"], r["overlap_ns"], r["kind"]) for r in rows]
    assert got == [
        (1000, 1090, 10, "pdl"),
        (1200, 1250, 30, "impossible"),
        (1400, 1400, 50, "impossible"),
    ]


def test_the_time_breakdown_counts_an_overlap_once(report: Report) -> None:
    g = as_json(report)["gpus"][0]
    assert (g["span_ns"], g["busy_ns"], g["idle_ns"]) == (500, 400, 100)
    assert (g["compute_ns"], g["comm_ns"], g["exposed_comm_ns"]) == (350, 100, 50)
    (step,) = report.steps
    assert (step.step_time_ns, step.compute_ns, step.exposed_comm_ns) == (500, 350, 50)
    # The top kernels sum durations, as their name says: 440 ns of compute kernels.
    assert sum(k.total_ns for k in report.top_kernels if k.kernel_class != "comm") == 440


def test_the_critical_path_counts_an_overlap_once(report: Report) -> None:
    path = report.critical_path
    assert path is not None
    assert sum(c.ns for c in path.causes) == path.length_ns == path.end_ns - path.start_ns
    pieces = sorted((p.start_ns, p.end_ns) for p in path.pieces)
    assert all(a[1] <= b[0] for a, b in pairwise(pieces))


def test_the_capture_says_which_kind_and_the_ledger_counts_the_impossible(report: Report) -> None:
    assert report.capture is not None
    facts = report.capture.facts
    assert (facts.pdl_overlaps, facts.impossible_overlaps) == (1, 2)
    hint = next(h for h in report.capture.hints if h.topic == "stream_overlap")
    assert hint.finding.startswith(
        "3 kernels overlap the next kernel on their stream: 1 as programmatic dependent launch"
    )
    assert [(i.ledger_class, i.count, i.treatment) for i in report.quality.items] == [
        ("impossible_duration", 2, "counted once")
    ]


def test_the_generator_stretches_kernels_into_their_successors(tmp_path: Path) -> None:
    # Ten back-to-back 100 ns kernels on one stream: every 3rd (the 3rd, 6th, 9th) ends 40 ns
    # into its successor (PDL), every 4th (the 4th, 8th) 40 ns after its successor ends.
    kernels = [Kernel(1000 + 100 * i, 1100 + 100 * i, OTHER) for i in range(10)]
    plain = Scenario(kernels=kernels, gpus=[Gpu(0, pid=100)])
    stretched = overlapping_successors(plain, pdl_every=3, impossible_every=4, overlap_ns=40)
    report = analyse(write_trace(stretched, tmp_path / "t.sqlite"))
    assert report.capture is not None
    assert (report.capture.facts.pdl_overlaps, report.capture.facts.impossible_overlaps) == (3, 2)
    # The 8th kernel [1700, 1800) now ends at 1940: past the 9th's end, still inside the
    # 10th; the busy time stays the 1000 ns the kernels tile.
    g = as_json(report)["gpus"][0]
    assert (g["busy_ns"], g["span_ns"], g["idle_ns"]) == (1000, 1000, 0)
