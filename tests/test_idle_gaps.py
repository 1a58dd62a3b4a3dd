"""Idle time concentrated in a few long gaps, and what the host was doing in them (#46): long
gaps, their share of the idle time, each one's host cause (gap_top.sql), the verdict's and the
launch line's sentences (sections/idle_gaps.py, verdict.py, launches.py).

The scenario (nsysreport/synth/data_loader.py, times in µs): 5 bursts of 100 kernels of
1,000 µs, 10 µs apart (a burst lasts 100 x 1,000 + 99 x 10 = 100,990 µs), 120,000 µs apart; the
launching thread loads the next batch in between. So the GPU's span is 5 x 100,990 + 4 x
120,000 = 984,950 µs, its idle time 4 x 120,000 + 5 x 99 x 10 = 484,950 µs (49.2% of the span)
in 4 + 5 x 99 = 499 gaps. A gap is long from 5% of the idle time, 24,247.5 µs: the four
120,000 µs gaps (24.7% each), not the 10 µs ones. They hold 480,000 / 484,950 = 98.98% of the
idle time: concentrated. Gap s (from 0) starts when burst s ends, at 200,000 + s x 220,990 +
100,990 µs, 100,990 + s x 220,990 µs after the first kernel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.patterns import DATA_LOADER_PATTERN, Patterns
from nsysreport.queries import find_query, run_query
from nsysreport.report_builder import build_report
from nsysreport.sections.gpu_breakdown import LONG_GAP_PCT
from nsysreport.synth import Kernel, Scenario, write_trace
from nsysreport.synth.data_loader import (
    ANNOTATION,
    NEXT_FRAME,
    WORKERS_ANNOTATION,
    write_kineto_stall,
    write_nsys_stall,
)

MS = 1_000_000
LONG_STARTS = [(100_990 + s * 220_990) * 1_000 for s in range(4)]  # offsets, ns
IDLE_NS = 484_950_000
HOST = (
    "The host is the bottleneck: the GPU sits idle 49.2% of the time waiting for the host; "
    "removing the idle time would cut the span by 49.2%. "
)


def report(path: Path, top: int = 10) -> Report:
    return build_report(open_trace(path), path, top=top)


def test_a_kineto_data_loader_stall_is_four_long_gaps_of_data_loading(tmp_path: Path) -> None:
    r = report(write_kineto_stall(tmp_path / "stall.json"))
    (gpu,) = r.gpus
    assert (gpu.idle_ns, gpu.gaps.count, len(gpu.gaps.top)) == (IDLE_NS, 499, 10)
    assert [(g.offset_ns, g.duration_ns) for g in gpu.gaps.long] == [
        (start, 120 * MS) for start in LONG_STARTS
    ]
    # The annotation [lo, hi) sits inside the frame [lo - 1, hi + 1) and inside it the frames
    # _next_data and fetch: the innermost DataLoader event is the annotation.
    assert {(g.cause_kind, g.host_cause) for g in gpu.gaps.long} == {("data_loading", ANNOTATION)}
    # The 10 µs gaps inside a burst: the thread sat in cudaStreamSynchronize throughout.
    assert {(g.cause_kind, g.host_cause) for g in gpu.gaps.top[4:]} == {
        ("sync", "cudaStreamSynchronize")
    }
    idle = r.bottleneck.idle_gaps
    assert idle is not None
    assert (idle.gaps, idle.gpus, idle.total_ns, idle.concentrated) == (4, 1, 480 * MS, True)
    assert idle.idle_pct == pytest.approx(100 * 480 / 484.95)
    assert [(c.kind, c.name, c.gaps, c.total_ns) for c in idle.causes] == [
        ("data_loading", ANNOTATION, 4, 480 * MS)
    ]
    assert r.bottleneck.stage == "host"
    assert r.bottleneck.summary == HOST + (
        "Idle time is concentrated: 4 gaps hold 480 ms (99.0% of idle time); the GPU waited on "
        "data loading (DataLoader __next__, num_workers=0) in all 4."
    )
    back = Report.from_json(as_json(r), "r.json")  # the JSON leaves the timeline out
    assert (back.bottleneck, back.gpus) == (r.bottleneck, r.gpus)


def test_the_launch_line_says_its_queue_is_measured_within_the_bursts(tmp_path: Path) -> None:
    """Kernel k of a burst is launched by a call ending at B - 16 + 5k and starts at
    B + 1,010k: latency 1,005k + 16 µs, median (k = 49.5) 49,763.5 µs, p99 (k = 98.01)
    98,516.05 µs; all 100 are launched before the first ends, so k are queued at launch k:
    mean 49.5. A deep queue, and the GPU idle between the bursts: both said, no contradiction."""
    r = report(write_kineto_stall(tmp_path / "stall.json"))
    assert r.launch_summary == (
        "Kernels launched eagerly: 100.0%. On the busiest stream (rank 0, stream 7) a kernel "
        "started 49.8 ms after its launch returned (median; p99 98.5 ms), with 49.5 kernels "
        "queued ahead of it on average (at its launch: a depth within the bursts of launches, "
        "which says nothing of the 4 long idle gaps between them)."
    )


@pytest.mark.parametrize(
    ("with_stack", "annotate", "cause"),
    [(False, True, ANNOTATION), (True, False, NEXT_FRAME)],
    ids=["annotation-alone", "frame-alone"],
)
def test_either_the_annotation_or_the_frame_says_data_loading(
    tmp_path: Path, with_stack: bool, annotate: bool, cause: str
) -> None:
    path = write_kineto_stall(tmp_path / "stall.json", with_stack, annotate)
    (gpu,) = report(path).gpus
    assert {(g.cause_kind, g.host_cause) for g in gpu.gaps.long} == {("data_loading", cause)}


def test_only_python_frames_of_at_least_100_us_are_kept(tmp_path: Path) -> None:
    """<module> and train, then per step __next__, _next_data, fetch and 60 __getitem__ of
    1,998 µs: 2 + 5 x 63 = 317; the 99.999 µs to_tensor of each step is left out."""
    con = open_trace(write_kineto_stall(tmp_path / "stall.json"))
    names = [n for (n,) in con.execute("SELECT name FROM python_call").fetchall()]
    assert len(names) == 317
    assert not any("to_tensor" in n for n in names)


def test_the_innermost_python_frame_covering_half_the_gap_is_the_cause(tmp_path: Path) -> None:
    """A kernel [0, 100) µs, then one [1,100, 1,200) launched at (1,080, 1,084): a gap of
    1,000 µs. The launching thread was in train [-50, 5,000) (all of it), evaluate [110, 1,090)
    (980 µs), inside it compute [200, 400) (200 µs, less than half) and a
    cudaStreamSynchronize [1,000, 1,050): evaluate, the innermost covering half, is the cause;
    sync_call still names the synchronising call that overlaps most."""
    launch = {"correlation": 2, "External id": 2}

    def cpu(cat: str, name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": args}  # fmt: skip

    def kernel(ts: int, correlation: int) -> dict[str, Any]:
        args = {"device": 0, "stream": 7, "correlation": correlation}
        return {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts,
                "dur": 100, "args": args}  # fmt: skip

    events = [
        cpu("cuda_runtime", "cudaLaunchKernel", -10, 4, correlation=1, **{"External id": 1}),
        kernel(0, 1),
        cpu("python_function", "train.py(30): train", -50, 5_050),
        cpu("python_function", "eval.py(20): evaluate", 110, 980),
        cpu("python_function", "metrics.py(5): compute", 200, 200),
        cpu("cuda_runtime", "cudaStreamSynchronize", 1_000, 50),
        cpu("cuda_runtime", "cudaLaunchKernel", 1_080, 4, **launch),
        kernel(1_100, 2),
    ]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    (gap,) = report(path).gpus[0].gaps.top
    assert (gap.duration_ns, gap.cause_kind, gap.host_cause) == (
        1_000_000,
        "python",
        "eval.py(20): evaluate",
    )
    assert gap.sync_call == "cudaStreamSynchronize"


def test_an_nsys_export_names_the_data_loader_range_over_the_os_call(tmp_path: Path) -> None:
    """The same loop under nsys with worker processes: the DataLoader's emit_nvtx range (inline
    text, kept though no step, layer or collective pattern matches it) holds the `poll` the
    thread sat in; the DataLoader wins. Gap s is closed by step s + 1's first launch, whose
    range says op_id = 1000 + s + 1."""
    r = report(write_nsys_stall(tmp_path / "stall.sqlite"))
    (gpu,) = r.gpus
    assert [(g.offset_ns, g.cause_kind, g.host_cause, g.os_call) for g in gpu.gaps.long] == [
        (start, "data_loading", f"{WORKERS_ANNOTATION}, op_id = {1001 + s}", "poll")
        for s, start in enumerate(LONG_STARTS)
    ]
    assert r.bottleneck.summary == HOST + (
        "Idle time is concentrated: 4 gaps hold 480 ms (99.0% of idle time); the GPU waited on "
        "data loading (DataLoader __next__) in all 4."
    )


def test_an_nsys_export_with_os_calls_alone_names_the_os_call(tmp_path: Path) -> None:
    r = report(write_nsys_stall(tmp_path / "stall.sqlite", nvtx=False))
    assert {(g.cause_kind, g.host_cause) for g in r.gpus[0].gaps.long} == {("os", "poll")}
    assert r.bottleneck.summary == HOST + (
        "Idle time is concentrated: 4 gaps hold 480 ms (99.0% of idle time); the launching "
        "thread was in the OS call poll in all 4."
    )


def test_without_a_recorded_cause_the_sentence_says_what_to_record(tmp_path: Path) -> None:
    """No NVTX range but the steps, no OS call: the thread was in nothing traced."""
    r = report(write_nsys_stall(tmp_path / "stall.sqlite", nvtx=False, os_call=False))
    idle = r.bottleneck.idle_gaps
    assert idle is not None and idle.summary is not None
    assert [(c.kind, c.name, c.gaps) for c in idle.causes] == [("unknown", None, 4)]
    assert idle.summary.endswith(
        "the trace does not say what the host was doing in them (nsys profile "
        "--trace=cuda,nvtx,osrt records NVTX ranges and OS runtime calls)."
    )


def test_long_gaps_are_listed_and_judged_whatever_top(tmp_path: Path) -> None:
    r = report(write_kineto_stall(tmp_path / "stall.json"), top=2)
    (gpu,) = r.gpus
    assert [g.duration_ns for g in gpu.gaps.top] == [120 * MS] * 2
    assert len(gpu.gaps.long) == 4
    assert r.bottleneck.idle_gaps is not None and r.bottleneck.idle_gaps.gaps == 4


def test_the_long_share_is_a_parameter_of_the_query(tmp_path: Path) -> None:
    """At 30% no gap is long (each holds 24.7%): the $top longest alone, none flagged."""
    con = open_trace(write_kineto_stall(tmp_path / "stall.json"))
    assert LONG_GAP_PCT == 5
    rows = run_query(con, "gap_top", {"top": 2, "long_pct": 30})
    assert rows["long_gap"].to_list() == [False, False]
    rows = run_query(con, "gap_top", {"top": 2})
    assert rows["long_gap"].to_list() == [True] * 4


def test_idle_time_spread_over_many_gaps_is_not_concentrated(tmp_path: Path) -> None:
    """25 kernels of 100 ns, 100 ns apart: 24 equal gaps, each 1/24 = 4.2% of the idle time,
    none long; the verdict keeps its launch-bound wording and says nothing of long gaps."""
    kernels = [Kernel(200 * i, 200 * i + 100, "gemm") for i in range(25)]
    r = report(write_trace(Scenario(kernels=kernels), tmp_path / "spread.sqlite"))
    idle = r.bottleneck.idle_gaps
    assert idle is not None
    assert (idle.gaps, idle.total_ns, idle.idle_pct, idle.concentrated) == (0, 0, 0.0, False)
    assert idle.summary is None
    assert "waiting for kernel launches or synchronisation" in r.bottleneck.summary
    assert "concentrated" not in r.bottleneck.summary


def test_a_long_gap_in_little_idle_time_is_not_worth_a_sentence(tmp_path: Path) -> None:
    """Ten kernels of 1,000 ns back to back but for one 100 ns gap: that gap is all the idle
    time (concentrated), but idle is 100 / 10,100 = 0.99% of the span, under 10%: no sentence."""
    kernels = [Kernel(1_000 * i + 100 * (i >= 5), 1_000 * i + 100 * (i >= 5) + 1_000, "gemm")
               for i in range(10)]  # fmt: skip
    r = report(write_trace(Scenario(kernels=kernels), tmp_path / "one.sqlite"))
    idle = r.bottleneck.idle_gaps
    assert idle is not None
    assert (idle.gaps, idle.total_ns, idle.idle_pct, idle.concentrated) == (1, 100, 100.0, True)
    assert idle.summary is None
    assert r.launch_summary is not None and "long idle gap" not in r.launch_summary


@pytest.mark.parametrize(
    ("name", "loading"),
    [
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", True),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__, op_id = 12", True),
        ("torch/utils/data/dataloader.py(733): __next__", True),
        ("/usr/lib/python3/site-packages/torch/utils/data/dataloader.py(701): __next__", True),
        ("torch/utils/data/dataloader.py(789): _next_data", False),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__x", False),
        ("mydataloader.py(10): __next__", False),
    ],
)
def test_the_data_loader_signature(name: str, loading: bool) -> None:
    """As DuckDB (RE2) matches it; the query's documented default is the same pattern, and
    the loader keeps an NVTX range of the range form (the role pattern)."""
    con = duckdb.connect()
    found = con.execute("SELECT regexp_matches($n, $p)", {"n": name, "p": DATA_LOADER_PATTERN})
    assert found.fetchone() == (loading,)
    (param,) = [p for p in find_query("gap_top").params if p.name == "data_loader"]
    assert param.default == DATA_LOADER_PATTERN
    ranged = name.startswith("enumerate")
    kept = con.execute("SELECT regexp_matches($n, $p)", {"n": name, "p": Patterns().role_pattern()})
    assert kept.fetchone() == (loading and ranged,)


def test_another_stage_prints_the_sentence_on_its_own_line(tmp_path: Path) -> None:
    """17 kernels of 1,000 ns back to back, a 3,000 ns gap after the 14th: span 20,000 ns,
    compute 85% (compute-bound), idle 15% (over 10%), all of it in one long gap; nothing traced
    on the host. The verdict is compute's; the terminal adds an Idle: line."""
    kernels = [Kernel(1_000 * i + 3_000 * (i >= 14), 1_000 * i + 3_000 * (i >= 14) + 1_000,
                      "gemm") for i in range(17)]  # fmt: skip
    path = write_trace(Scenario(kernels=kernels), tmp_path / "compute.sqlite")
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert "Verdict: Compute-bound: kernels keep the GPU busy 85.0% of the time" in result.output
    assert (
        "Idle: Idle time is concentrated: 1 gap holds 3 µs (100.0% of idle time); the trace "
        "does not say what the host was doing in it (nsys profile --trace=cuda,nvtx,osrt "
        "records NVTX ranges and OS runtime calls)."
    ) in result.output
