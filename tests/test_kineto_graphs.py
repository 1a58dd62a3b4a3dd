"""Graph replays in PyTorch-profiler traces (#35): a `hipGraphLaunch` or `cudaGraphLaunch`
replays many kernels that share its correlation id (vLLM's and SGLang's decode on ROCm and
CUDA), none with an External id.

Scenario (µs): an eager GEMM launched by cudaLaunchKernel at 1 (runs [2, 12)); two replays of a
3-kernel graph by hipGraphLaunch at 20 and 60 (kernels of 5 µs each, back to back from 21 and
61); so 6 replayed kernels of 30 µs, against 40 µs of kernel time in all: 75 %.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.render import render_html
from nsysreport.report_builder import build_report


def event(cat: str, name: str, ts: float, dur: float, corr: int, **more: Any) -> dict[str, Any]:
    gpu = cat == "kernel"
    args = {"correlation": corr, **({"device": 0, "stream": 7} if gpu else {}), **more}
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if gpu else 42, "tid": 7 if gpu else 43,
            "ts": ts, "dur": dur, "args": args}  # fmt: skip


def trace(tmp_path: Path, launch: str = "hipGraphLaunch") -> Path:
    events = [
        event("cuda_runtime", "cudaLaunchKernel", 1, 0.5, 1),
        event("kernel", "Cijk_gemm", 2, 10, 1),
    ]
    for corr, at in ((2, 20), (3, 60)):
        events.append(event("cuda_runtime", launch, at, 1, corr))
        events += [event("kernel", f"graph_kernel_{i}", at + 1 + 5 * i, 5, corr) for i in range(3)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def report_of(path: Path) -> Any:
    return build_report(open_trace(path), path)


def test_a_graph_launch_s_kernels_are_its_replay(tmp_path: Path) -> None:
    for launch in ("hipGraphLaunch", "cudaGraphLaunch"):
        report = report_of(trace(tmp_path, launch))
        facts = report.capture.facts
        assert (facts.graph_replays, facts.graph_kernels) == (2, 6)
        assert (facts.graph_kernel_ns, facts.kernel_ns) == (30_000, 40_000)
        (gpu,) = report.gpus
        assert gpu.graph_kernel_count == 6 and gpu.kernel_count == 7
        hint = next(h for h in report.capture.hints if h.topic == "graph_nodes")
        assert hint.finding.startswith(
            "6 kernels were replayed by 2 CUDA/HIP graph launches (3 per replay, 75.0% of "
            "kernel time)"
        )
        assert "--enforce-eager" in hint.command
        data = as_json(report)["capture"]["facts"]
        assert (data["graph_replays"], data["graph_kernel_ns"], data["kernel_ns"]) == (
            2, 30_000, 40_000,
        )  # fmt: skip
        assert "3 per replay" in render_html(report, "now")


def test_replayed_kernels_are_launched_by_their_graph_launch(tmp_path: Path) -> None:
    con = open_trace(trace(tmp_path))
    rows = con.sql(
        "SELECT l.name, count(*) FROM kernel AS k JOIN launch AS l "
        "ON l.global_pid = k.global_pid AND l.correlation_id = k.correlation_id "
        "WHERE k.graph_id IS NOT NULL GROUP BY l.name"
    ).fetchall()
    assert rows == [("hipGraphLaunch", 6)]


def test_a_trace_without_graph_launches_has_no_graph_kernels(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    events = [event("cuda_runtime", "cudaLaunchKernel", 1, 0.5, 1), event("kernel", "k", 2, 10, 1)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    facts = report_of(path).capture.facts
    assert (facts.graph_replays, facts.graph_kernels, facts.graph_kernel_ns) == (0, 0, 0)
