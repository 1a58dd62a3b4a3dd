"""The Perfetto trace file (`report --perfetto`): its tracks, its window, and its format.

The format is checked with a JSON schema of the trace-event format (tests/trace_event_schema.json)
and the one rule a schema cannot state: complete events on one thread never partly overlap.
The `perfetto` package's trace processor is not used: its wheel holds no trace_processor binary
and downloads one from get.perfetto.dev on first use, and these tests run offline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from nsysreport import perfetto
from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.report_builder import build_report
from nsysreport.synth import ApiCall, Kernel, NvtxRange, Scenario, write_trace

from conftest import real_trace

SCHEMA = json.loads((Path(__file__).parent / "trace_event_schema.json").read_text())
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
NORM = "rms_norm_kernel"


def late_rank_one() -> Scenario:
    """Two GPUs, one step `step 0`, one layer `layers.0`, times in ns.

    GPU 0 (pid 100): GEMM [1000, 2000) on stream 7, all-reduce [1500, 3000) on stream 31, then
    nothing until the norm [4000, 5000): exposed comm [2000, 3000) and a gap [3000, 4000), while
    its host thread sits in cudaStreamSynchronize [2900, 3990) before launching the norm.
    GPU 1 (pid 101): GEMM [1000, 2600), all-reduce [2500, 3000), norm [3000, 5000): exposed comm
    [2600, 3000), no gap. GPU 1 starts the all-reduce 1000 ns after GPU 0, so GPU 0 waits
    [1500, 2500) and GPU 1 is late by 1000 ns. The GEMM and the all-reduce are launched inside
    `layers.0` [900, 965) and everything inside `step 0` [0, 4500).
    """
    kernels = [
        Kernel(1000, 2000, GEMM, pid=100, device=0, launch=(950, 952)),
        Kernel(1500, 3000, NCCL, pid=100, device=0, stream=31, launch=(960, 962)),
        Kernel(4000, 5000, NORM, pid=100, device=0, launch=(3992, 3994)),
        Kernel(1000, 2600, GEMM, pid=101, device=1, launch=(950, 952)),
        Kernel(2500, 3000, NCCL, pid=101, device=1, stream=31, launch=(960, 962)),
        Kernel(3000, 5000, NORM, pid=101, device=1, launch=(970, 972)),
    ]
    nvtx = [
        NvtxRange(start, end, text, pid=pid)
        for pid in (100, 101)
        for start, end, text in ((0, 4500, "step 0"), (900, 965, "layers.0"))
    ]
    sync = [ApiCall(2900, 3990, "cudaStreamSynchronize_v3020", pid=100)]
    return Scenario(kernels=kernels, nvtx=nvtx, api_calls=sync)


def check_trace(doc: dict[str, Any]) -> None:
    """What Perfetto's JSON importer needs: the schema, every process and thread named, and no
    two complete events on one thread that partly overlap."""
    jsonschema.validate(doc, SCHEMA)
    events = doc["traceEvents"]
    named_processes = {e["pid"] for e in events if e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    rows: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in (e for e in events if e["ph"] == "X"):
        assert e["pid"] in named_processes
        assert (e["pid"], e["tid"]) in named_threads
        rows.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in rows.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[float] = []  # ends of the spans the current one may nest in
        for start, end in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-9, "partly overlapping events"
            open_ends.append(end)


def spans_of(doc: dict[str, Any], track: str) -> dict[str, list[tuple[Any, ...]]]:
    """Per process name: (name, ts, dur, args) of the complete events on rows named `track`."""
    events = doc["traceEvents"]
    process = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    out: dict[str, list[tuple[Any, ...]]] = {}
    for e in events:
        if e["ph"] == "X" and thread[(e["pid"], e["tid"])] == track:
            out.setdefault(process[e["pid"]], []).append((e["name"], e["ts"], e["dur"], e["args"]))
    return out


@pytest.fixture
def scenario_trace(tmp_path: Path) -> Path:
    return write_trace(late_rank_one(), tmp_path / "late.sqlite")


def document(path: Path, chosen: bool = False) -> dict[str, Any]:
    con = open_trace(path)
    return perfetto.trace_events(con, build_report(con, path), chosen)


GPU0, GPU1 = "GPU 0 (rank 0, pid 100)", "GPU 1 (rank 1, pid 101)"


def test_exposed_communication_has_its_own_track_per_gpu(scenario_trace: Path) -> None:
    doc = document(scenario_trace)
    check_trace(doc)
    # Times are µs after the first activity (1000 ns).
    assert spans_of(doc, "exposed comm") == {
        GPU0: [("exposed comm", 1.0, 1.0, {})],
        GPU1: [("exposed comm", 1.6, 0.4, {})],
    }


def test_an_idle_gap_names_the_sync_call_behind_it_and_its_neighbours(scenario_trace: Path) -> None:
    doc = document(scenario_trace)
    detail = f"after {NCCL}; before {NORM}"
    assert spans_of(doc, "idle gap") == {
        GPU0: [("idle: host in cudaStreamSynchronize", 2.0, 1.0, {"detail": detail})]
    }


def test_the_late_gpu_and_the_wait_it_causes_are_tracks(scenario_trace: Path) -> None:
    doc = document(scenario_trace)
    assert spans_of(doc, "straggler wait") == {GPU0: [("waits: AllReduce #1", 0.5, 1.0, {})]}
    late = {"detail": "started 1000 ns after the first GPU"}
    assert spans_of(doc, "late to collective") == {GPU1: [("late: AllReduce #1", 0.5, 1.0, late)]}


def test_steps_and_layers_are_spans_of_their_gpu_windows(scenario_trace: Path) -> None:
    doc = document(scenario_trace)
    assert spans_of(doc, "step") == {g: [("step 0", 0.0, 4.0, {})] for g in (GPU0, GPU1)}
    assert spans_of(doc, "layer") == {g: [("layers.0", 0.0, 2.0, {})] for g in (GPU0, GPU1)}


def test_each_stream_is_a_row_of_its_gpu_with_the_kernels_it_ran(scenario_trace: Path) -> None:
    doc = document(scenario_trace)
    stream7 = spans_of(doc, "stream 7")
    assert [(name, ts, dur) for name, ts, dur, _ in stream7[GPU0]] == [
        (GEMM, 0.0, 1.0),
        (NORM, 3.0, 1.0),
    ]
    assert [args["class"] for *_, args in stream7[GPU1]] == ["gemm", "other"]
    assert [(name, ts) for name, ts, _, _ in spans_of(doc, "stream 31")[GPU1]] == [(NCCL, 1.5)]


def test_a_small_trace_is_written_whole_with_the_reports_window_marked(
    scenario_trace: Path,
) -> None:
    doc = document(scenario_trace)
    assert doc["otherData"]["window"] == "whole trace"
    marked = spans_of(doc, "report timeline window")
    assert marked == {"nsysreport": [("report timeline: median step step 0", 0.0, 4.0, {})]}


def test_a_large_trace_or_a_chosen_window_gives_only_that_window(
    scenario_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = open_trace(scenario_trace)
    # The window [3000, 4000) ns: 2000:3000 after the first activity.
    report = build_report(con, scenario_trace, timeline_range=(2000, 3000))
    doc = perfetto.trace_events(con, report, chosen=True)
    check_trace(doc)
    assert (doc["otherData"]["window_start_ns"], doc["otherData"]["window_end_ns"]) == (3000, 4000)
    starts = [e["ts"] for e in doc["traceEvents"] if e["ph"] == "X"]
    ends = [e["ts"] + e["dur"] for e in doc["traceEvents"] if e["ph"] == "X"]
    assert (min(starts), max(ends)) == (2.0, 3.0)
    assert [x[:3] for x in spans_of(doc, "stream 7")[GPU1]] == [(NORM, 2.0, 1.0)]
    # Not chosen, but over the size limit: the report's window (the median step) again.
    monkeypatch.setattr(perfetto, "WHOLE_TRACE_ACTIVITIES", 5)
    doc = perfetto.trace_events(con, build_report(con, scenario_trace))
    assert doc["otherData"]["window"] == "median step"


def test_spans_that_overlap_on_one_track_go_on_extra_rows() -> None:
    rows = [{"start_ns": s, "end_ns": e} for s, e in ((0, 10), (5, 15), (10, 20), (12, 13))]
    lanes = perfetto._lanes(rows)
    assert [[(r["start_ns"], r["end_ns"]) for r in lane] for lane in lanes] == [
        [(0, 10), (10, 20)],
        [(5, 15)],
        [(12, 13)],
    ]


Run = Callable[..., Any]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.chdir(tmp_path)
    return lambda *args: CliRunner().invoke(app, ["report", *map(str, args)])


def test_the_report_links_to_the_file_and_says_how_to_open_it(
    scenario_trace: Path, tmp_path: Path, run: Run
) -> None:
    result = run(scenario_trace, "-o", "out/r.html", "--perfetto", "traces/late.json", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "Perfetto trace: traces/late.json; open it at https://ui.perfetto.dev" in result.output
    html = (tmp_path / "out" / "r.html").read_text()
    assert '<a href="../traces/late.json">../traces/late.json</a>' in html
    assert "<em>Open trace file</em>" in html
    check_trace(json.loads((tmp_path / "traces" / "late.json").read_text()))
    assert run(scenario_trace, "-o", "plain.html", "-q").exit_code == 0
    assert 'id="perfetto"' not in (tmp_path / "plain.html").read_text()


def test_a_warm_run_writes_the_same_file_and_link_from_the_cache(
    scenario_trace: Path, tmp_path: Path, run: Run
) -> None:
    assert run(scenario_trace, "-o", "a.html", "--perfetto", "a.json", "-q").exit_code == 0
    assert run(scenario_trace, "-o", "b.html", "--perfetto", "b.json", "-q").exit_code == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert '<a href="b.json">' in (tmp_path / "b.html").read_text()


def test_several_files_are_refused_with_one_line(
    scenario_trace: Path, tmp_path: Path, run: Run
) -> None:
    other = write_trace(late_rank_one(), tmp_path / "late2.sqlite")
    result = run(scenario_trace, other, "--perfetto", "p.json")
    assert result.exit_code == 2
    assert "--perfetto: takes one trace, not 2 files" in result.output
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("name", ["mfu_2gpu_before.sqlite", "h100_2gpu_1s.sqlite"])
def test_real_traces_give_a_valid_file_whose_tracks_add_up_to_the_report(
    name: str, tmp_path: Path, run: Run
) -> None:
    trace = real_trace(name)
    result = run(trace, "-o", "r.html", "--perfetto", "p.json", "--json", "r.json", "-q")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "p.json").read_text())
    check_trace(doc)
    assert doc["otherData"]["window"] == "whole trace"  # both are under the size limit
    report = json.loads((tmp_path / "r.json").read_text())
    # The whole trace: a GPU's exposed comm and idle spans add up to the report's numbers.
    for track, key in (("exposed comm", "exposed_comm_ns"), ("idle gap", "idle_ns")):
        found = spans_of(doc, track)
        for g in report["gpus"]:
            label = f"GPU {g['device_id']} (rank {g['rank']}, pid {g['pid']})"
            total_us = sum(dur for _, _, dur, _ in found.get(label, []))
            assert total_us == pytest.approx(g[key] / 1000, abs=1e-3)
