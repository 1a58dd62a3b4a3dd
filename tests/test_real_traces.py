"""Real exports: the reference numbers of PROVENANCE.md to the nanosecond, and invariants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.queries import run_query

from bruteforce import per_gpu_metrics
from conftest import NSYS_TRACES, real_trace

REAL = sorted(p.name for p in NSYS_TRACES.glob("*.sqlite"))

# ../shared/traces/PROVENANCE.md, converted from µs with three decimals to ns.
# (device, kernels, comm kernels, comm sum, compute union, exposed comm, busy, span)
REFERENCE = {
    "mfu_2gpu_before.sqlite": [
        (0, 1993, 33, 17172652, 253690832, 17172652, 273817787, 299848812),
        (1, 2017, 33, 8229100, 256095624, 8229100, 267275916, 298661551),
    ],
    "h100_2gpu_1s.sqlite": [
        (0, 1721, 0, 0, 22385163, 0, 962890247, 969447605),
        (1, 1721, 0, 0, 22444359, 0, 962810705, 969258578),
    ],
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_per_gpu_numbers_equal_the_provenance_reference_to_the_nanosecond(name: str) -> None:
    rows = run_query(open_trace(real_trace(name)), "gpu_breakdown").to_dicts()
    got = [
        (
            r["device_id"],
            r["kernel_count"],
            r["comm_kernel_count"],
            r["comm_sum_ns"],
            r["compute_ns"],
            r["exposed_comm_ns"],
            r["busy_ns"],
            r["span_ns"],
        )
        for r in rows
    ]
    assert got == REFERENCE[name]


@pytest.mark.parametrize("name", REAL)
def test_every_metric_matches_an_independent_python_sweep(name: str) -> None:
    path = real_trace(name)
    expected = per_gpu_metrics(path)
    rows = run_query(open_trace(path), "gpu_breakdown").to_dicts()
    assert {(r["pid"], r["device_id"]) for r in rows} == set(expected)
    for r in rows:
        want = expected[(r["pid"], r["device_id"])]
        assert {k: r[k] for k in want} == want


@pytest.mark.parametrize("name", REAL)
def test_the_breakdown_partitions_the_span_and_unions_stay_within_sums(name: str) -> None:
    con = open_trace(real_trace(name))
    for r in run_query(con, "gpu_breakdown").to_dicts():
        parts = r["compute_ns"] + r["exposed_comm_ns"] + r["exposed_memcpy_ns"] + r["idle_ns"]
        parts += r["graph_opaque_ns"] + r["profiler_overhead_ns"]
        assert parts == r["span_ns"]
        assert r["busy_ns"] + r["profiler_overhead_ns"] + r["idle_ns"] == r["span_ns"]
        assert r["comm_ns"] <= r["comm_sum_ns"]
        assert 0 <= r["exposed_comm_ns"] <= r["comm_ns"]
        assert r["gemm_ns"] + r["attention_ns"] >= 0 and r["gemm_ns"] <= r["compute_ns"]
        assert r["overlap_pct"] is None or 0.0 <= r["overlap_pct"] <= 100.0


@pytest.mark.parametrize("name", REAL)
def test_gaps_sum_to_the_idle_time(name: str) -> None:
    con = open_trace(real_trace(name))
    idle = {
        (r["pid"], r["device_id"]): r["idle_ns"] for r in run_query(con, "gpu_breakdown").to_dicts()
    }
    for r in run_query(con, "gap_summary").to_dicts():
        assert r["gap_ns"] == idle[(r["pid"], r["device_id"])]
    hist = run_query(con, "gap_histogram").to_dicts()
    for key, total in idle.items():
        assert sum(h["gap_ns"] for h in hist if (h["pid"], h["device_id"]) == key) == total


def test_sendrecv_kernels_on_the_compute_stream_count_as_communication() -> None:
    con = open_trace(real_trace("mfu_2gpu_before.sqlite"))
    streams = con.execute(
        "SELECT DISTINCT stream_id FROM kernel WHERE class = 'comm' ORDER BY 1"
    ).fetchall()
    compute_streams = con.execute(
        "SELECT DISTINCT stream_id FROM kernel WHERE class <> 'comm' ORDER BY 1"
    ).fetchall()
    assert set(streams) & set(compute_streams), "the trace runs NCCL on a compute stream"


@pytest.mark.parametrize("name", REAL)
def test_every_real_export_writes_a_full_report_and_json(name: str, tmp_path: Path) -> None:
    out, js = tmp_path / "r.html", tmp_path / "m.json"
    result = CliRunner().invoke(
        app, ["report", str(real_trace(name)), "-o", str(out), "--json", str(js), "-q"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(js.read_text())
    assert data["gpus"] and data["bottleneck"]["summary"] in out.read_text()
    # The critical path's causes and its ranks' shares each add up to its window exactly.
    path = data["critical_path"]
    assert sum(c["ns"] for c in path["causes"]) == path["length_ns"] > 0
    assert sum(r["on_path_ns"] for r in path["ranks"]) == path["length_ns"]
    assert path["length_ns"] == path["end_ns"] - path["start_ns"]
    assert all(0 <= r["slack_ns"] <= r["idle_ns"] <= path["length_ns"] for r in path["ranks"])
