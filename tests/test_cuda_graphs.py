"""CUDA graphs: graph launches traced as a whole, and kernels replayed from graphs (node level).

Hand-checkable scenarios: every expected number follows from the timeline drawn in the comment.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.compare import compare
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.queries import run_query
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.synth import (
    GraphLaunch,
    GraphNode,
    Kernel,
    Memcpy,
    NvtxRange,
    Scenario,
    write_trace,
)
from nsysreport.synth.nsys_schema import GRAPH_NODE_EVENTS, GRAPH_TRACE, VERSIONS

from bruteforce import per_gpu_metrics

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
NORM = "void vllm::rms_norm_kernel<c10::BFloat16>(T1 *, const T1 *, const T1 *, float, int, int)"
SAMPLES = Path(__file__).parents[1] / "sample_traces"
GRAPH_SAMPLE = SAMPLES / "llama70b_decode_tp4_nvlink_graphs_graph.sqlite"
NODE_SAMPLE = SAMPLES / "llama70b_decode_tp4_nvlink_graphs_node.sqlite"
SCHEMA_2022 = Path(__file__).parents[2] / "shared" / "nsys-schema"
PARTS = ("compute_ns", "exposed_comm_ns", "exposed_memcpy_ns", "graph_opaque_ns", "idle_ns")


def gpu_rows(con: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = run_query(con, "gpu_breakdown").to_dicts()
    for r in rows:
        assert sum(r[p] for p in PARTS) == r["span_ns"], r  # the breakdown partitions the span
    return rows


# ---- graph-level tracing: one GRAPH_TRACE row per launch, contents unknown ------------------


def test_a_graph_launch_overlapping_an_eager_kernel_is_busy_and_only_its_uncovered_part_opaque(
    write_and_open: Any,
) -> None:
    # gemm [100,200) stream 7; graph [150,400) stream 9; memcpy [450,500); graph [500,600).
    # span 100..600 = 500; busy [100,400) + [450,600) = 450; idle [400,450) = 50.
    # graph union 250 + 100 = 350; opaque = graph minus gemm minus copy = [200,400) + [500,600).
    con = write_and_open(
        Scenario(
            kernels=[Kernel(100, 200, GEMM)],
            memcpys=[Memcpy(450, 500)],
            graph_launches=[GraphLaunch(150, 400, stream=9), GraphLaunch(500, 600)],
        )
    )
    (row,) = gpu_rows(con)
    assert (row["span_ns"], row["busy_ns"], row["idle_ns"]) == (500, 450, 50)
    assert (row["compute_ns"], row["memcpy_ns"], row["exposed_memcpy_ns"]) == (100, 50, 50)
    assert (row["graph_ns"], row["graph_opaque_ns"], row["graph_launches"]) == (350, 300, 2)
    assert row["kernel_count"] == 1 and row["graph_kernel_count"] == 0


def test_graph_time_hides_no_communication(write_and_open: Any) -> None:
    # all-reduce [0,100) under a graph launch [0,100): the comm stays exposed (graph content is
    # unknown), and none of the graph is opaque because the all-reduce covers it.
    con = write_and_open(
        Scenario(kernels=[Kernel(10, 110, NCCL)], graph_launches=[GraphLaunch(10, 110, stream=9)])
    )
    (row,) = gpu_rows(con)
    assert row["exposed_comm_ns"] == 100 and row["graph_ns"] == 100
    assert row["graph_opaque_ns"] == 0


def test_graph_rows_on_two_streams_are_one_union_and_two_launches(write_and_open: Any) -> None:
    # graph A [0,300) stream 7, graph B [200,500) stream 9, kernel [600,700): graph union 500,
    # busy 600, idle [500,600) = 100; the gap's neighbours are graph B and the kernel.
    con = write_and_open(
        Scenario(
            kernels=[Kernel(610, 710, GEMM)],
            graph_launches=[
                GraphLaunch(10, 310, graph_id=1, stream=7),
                GraphLaunch(210, 510, graph_id=2, stream=9),
            ],
        )
    )
    (row,) = gpu_rows(con)
    assert (row["graph_ns"], row["graph_opaque_ns"], row["graph_launches"]) == (500, 500, 2)
    assert (row["busy_ns"], row["idle_ns"]) == (600, 100)
    (gap,) = run_query(con, "gap_top").to_dicts()
    assert (gap["start_ns"], gap["duration_ns"]) == (510, 100)
    assert gap["before_name"] == "[CUDA graph 2]" and gap["before_class"] == "graph"
    assert gap["after_class"] == "gemm"
    summary = run_query(con, "gap_summary").to_dicts()[0]
    assert summary["gap_count"] == 1 and summary["gap_ns"] == row["idle_ns"]


def test_a_step_window_covers_its_graph_launches(write_and_open: Any) -> None:
    # step 1 [0,1000) on the host launches a kernel at 98 and a graph at 198: GPU window
    # [100, 500) = the kernel [100,150) and the graph [200,500); 50 idle, all 300 of it opaque.
    con = write_and_open(
        Scenario(
            kernels=[Kernel(100, 150, GEMM)],
            graph_launches=[GraphLaunch(200, 500)],
            nvtx=[NvtxRange(0, 1000, "step 1")],
        )
    )
    (step,) = run_query(con, "step_breakdown").to_dicts()
    assert (step["start_ns"], step["end_ns"], step["step_time_ns"]) == (100, 500, 400)
    assert (step["compute_ns"], step["graph_ns"], step["graph_opaque_ns"]) == (50, 300, 300)
    assert step["idle_ns"] == 50 and step["kernel_count"] == 1
    parts = ("compute_ns", "exposed_comm_ns", "exposed_memcpy_ns", "graph_opaque_ns", "idle_ns")
    assert sum(step[p] for p in parts) == step["step_time_ns"]


def test_the_timeline_draws_graph_launches_in_their_own_class(write_and_open: Any) -> None:
    con = write_and_open(
        Scenario(kernels=[Kernel(0, 50, GEMM)], graph_launches=[GraphLaunch(60, 300, stream=9)])
    )
    rows = run_query(con, "timeline_window").to_dicts()
    graph = [r for r in rows if r["class"] == "graph"]
    assert [(r["stream_id"], r["start_ns"], r["end_ns"], r["source"]) for r in graph] == [
        (9, 60, 300, "graph")
    ]
    # the 10 ns between the kernel and the graph is the only gap; the graph itself never is one
    gaps = [(r["start_ns"], r["end_ns"]) for r in rows if r["kind"] == "gap"]
    assert gaps == [(50, 60)]


def report_of(con: Any, path: Path) -> Any:
    return build_report(con, path)


def test_the_verdict_never_counts_graph_time_as_idle_and_names_the_recapture_flag(
    write_and_open: Any, tmp_path: Path
) -> None:
    # 900 ns of graph, 100 ns of gemm, 100 ns idle between: graph opaque 900/1100 = 81.8 %.
    con = write_and_open(
        Scenario(kernels=[Kernel(0, 100, GEMM)], graph_launches=[GraphLaunch(200, 1100)])
    )
    report = report_of(con, tmp_path / "t.sqlite")
    (gpu,) = report.gpus
    assert gpu.idle_ns == 100 and gpu.graph_opaque_ns == 900
    assert gpu.shares_pct["idle"] == pytest.approx(100 / 11)
    assert gpu.shares_pct["graph opaque"] == pytest.approx(900 / 11)
    b = report.bottleneck
    assert b.graph_opaque_pct == pytest.approx(900 / 11)
    assert "--cuda-graph-trace=node" in b.summary and "81.8%" in b.summary
    # what-if: the graph part is untouched by every change
    assert gpu.what_if.no_idle_ns == 1000 and gpu.what_if.compute_2x_ns == 50 + 900 + 100
    html = render_html(report, "now")
    assert "nsys profile --cuda-graph-trace=node ..." in html
    assert "CUDA graph (contents not traced)" in html
    data = as_json(report)
    assert data["gpus"][0]["graph_opaque_pct"] == pytest.approx(900 / 11)
    for key in ("graph_ns", "graph_opaque_ns", "graph_launches", "graph_kernel_count"):
        assert key in data["gpus"][0]
    assert data["bottleneck"]["graph_opaque_pct"] == pytest.approx(900 / 11)


def test_a_trace_without_graphs_shows_no_graph_part(write_and_open: Any, tmp_path: Path) -> None:
    report = report_of(write_and_open(Scenario(kernels=[Kernel(0, 100, GEMM)])), tmp_path / "t")
    assert report.bottleneck.graph_opaque_pct is None
    html = render_html(report, "now")
    assert "graph opaque" not in html and "cuda-graph-trace" not in html


def test_nsys_2022_exports_cannot_hold_graph_level_rows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        write_trace(Scenario(graph_launches=[GraphLaunch(0, 10)]), tmp_path / "t", "2022.2")


# ---- node-level tracing: kernels with graphNodeId, attributed to their capture ---------------


def capture_and_replay(nodes: bool, eager: bool = False) -> Scenario:
    """Capture [0,100): layers.0 [10,40) makes node 1 (gemm) at 20; layers.1 [50,90) makes node
    2 (all-reduce) at 60; instantiation clones 11 <- 1, 12 <- 2 at 95. Step 1 [190,400): one
    cudaGraphLaunch at 200 runs gemm [210,260) and all-reduce [260,300) as nodes 11 and 12.
    `eager`: the same two kernels launched in the same layer ranges inside the step instead."""
    step = NvtxRange(190, 400, "step 1")
    if eager:
        return Scenario(
            kernels=[
                Kernel(210, 260, GEMM, launch=(201, 202)),
                Kernel(260, 300, NCCL, launch=(206, 207)),
            ],
            nvtx=[NvtxRange(200, 203, "layers.0"), NvtxRange(205, 208, "layers.1"), step],
        )
    replay = GraphLaunch(
        210,
        300,
        launch=(200, 202),
        kernels=[
            Kernel(210, 260, GEMM, graph_node_id=11, graph_id=5),
            Kernel(260, 300, NCCL, graph_node_id=12, graph_id=5),
        ],
    )
    created = [
        GraphNode(20, 21, 1),
        GraphNode(60, 61, 2, api="cuLaunchKernelEx"),
        GraphNode(95, 95, 11, original=1, api="cudaGraphInstantiate_v12000"),
        GraphNode(95, 95, 12, original=2, api="cudaGraphInstantiate_v12000"),
    ]
    return Scenario(
        graph_launches=[replay],
        graph_nodes=created if nodes else [],
        nvtx=[NvtxRange(10, 40, "layers.0"), NvtxRange(50, 90, "layers.1"), step],
    )


LAYER_KEYS = ("layer", "occurrences", "kernel_count", "compute_ns", "gemm_ns", "comm_ns")


def layers(con: Any) -> list[dict[str, Any]]:
    rows = run_query(con, "layer_summary").to_dicts()
    keys = (*LAYER_KEYS, "exposed_comm_ns", "gpu_time_ns")
    return sorted(({k: r[k] for k in keys} for r in rows), key=lambda r: r["layer"])


# The releases that record graph node creation (none of the 2020-2021 exports found has it).
NODE_VERSIONS = [
    v
    for v, p in VERSIONS.items()
    if {"CUDA_GRAPH_NODE_EVENTS", "CUDA_GRAPH_EVENTS"} & set(p.tables)
]


@pytest.mark.parametrize("version", NODE_VERSIONS)
def test_a_node_level_replay_has_the_per_layer_numbers_of_the_same_kernels_launched_eagerly(
    write_and_open: Any, version: str
) -> None:
    eager = write_and_open(capture_and_replay(nodes=False, eager=True), version)
    expected = layers(eager)
    assert expected == [
        {"layer": "layers.0", "occurrences": 1, "kernel_count": 1, "compute_ns": 50,
         "gemm_ns": 50, "comm_ns": 0, "exposed_comm_ns": 0, "gpu_time_ns": 50},
        {"layer": "layers.1", "occurrences": 1, "kernel_count": 1, "compute_ns": 0,
         "gemm_ns": 0, "comm_ns": 40, "exposed_comm_ns": 40, "gpu_time_ns": 40},
    ]  # fmt: skip
    replayed = write_and_open(capture_and_replay(nodes=True), version)
    assert layers(replayed) == expected
    strip = ("graph_kernel_count",)
    (e,), (r,) = gpu_rows(eager), gpu_rows(replayed)
    assert {k: v for k, v in r.items() if k not in strip} == {
        k: v for k, v in e.items() if k not in strip
    }
    assert r["graph_kernel_count"] == 2 and e["graph_kernel_count"] == 0
    # the step follows the cudaGraphLaunch, not the capture
    (step,) = run_query(replayed, "step_breakdown").to_dicts()
    assert (step["step_time_ns"], step["kernel_count"]) == (90, 2)
    assert run_query(replayed, "graph_layer_gap").to_dicts() == [
        {"pid": 100, "device_id": 0, "graph_kernel_count": 2, "with_origin": 2,
         "no_layer_no_origin": 0}
    ]  # fmt: skip


def test_without_node_creation_records_replayed_kernels_have_no_layer_and_are_counted(
    write_and_open: Any, tmp_path: Path
) -> None:
    con = write_and_open(capture_and_replay(nodes=False))
    assert [r["layer"] for r in layers(con)] == ["(outside layers)"]
    report = report_of(con, tmp_path / "t.sqlite")
    assert report.gpus[0].graph_kernels_without_layer == 2
    assert as_json(report)["gpus"][0]["graph_kernels_without_layer"] == 2
    html = " ".join(render_html(report, "now").split())
    assert "2 of the 2 kernels replayed from CUDA graphs are in no layer" in html


def test_a_collective_replayed_from_a_graph_takes_its_op_from_the_nccl_range_at_capture(
    write_and_open: Any,
) -> None:
    scenario = capture_and_replay(nodes=True)
    nccl = NvtxRange(59, 62, "ncclAllReduce", registered=True, domain="NCCL", payload=4096)
    con = write_and_open(dataclasses.replace(scenario, nvtx=[*scenario.nvtx, nccl]))
    rows = run_query(con, "collective_summary").to_dicts()
    assert [(r["op"], r["count"], r["total_ns"]) for r in rows] == [("AllReduce", 1, 40)]


def test_two_replays_of_one_captured_layer_are_two_occurrences(write_and_open: Any) -> None:
    base = capture_and_replay(nodes=True)
    (first,) = base.graph_launches
    second = GraphLaunch(
        510,
        600,
        launch=(500, 502),
        kernels=[
            Kernel(510, 560, GEMM, graph_node_id=11),
            Kernel(560, 600, NCCL, graph_node_id=12),
        ],
    )
    step2 = NvtxRange(490, 700, "step 2")
    con = write_and_open(
        Scenario(
            graph_launches=[first, second],
            graph_nodes=base.graph_nodes,
            nvtx=[*base.nvtx, step2],
        )
    )
    by_layer = {r["layer"]: r for r in layers(con)}
    assert by_layer["layers.0"]["occurrences"] == 2 and by_layer["layers.0"]["kernel_count"] == 2
    # each replay's own window: 50 + 50, not the 350 from the first replay to the second
    assert by_layer["layers.0"]["gpu_time_ns"] == 100
    assert [s["kernel_count"] for s in run_query(con, "step_breakdown").to_dicts()] == [2, 2]


def test_node_links_are_followed_through_clones_of_clones_and_a_cycle_ends(
    write_and_open: Any,
) -> None:
    # node 31 <- 21 <- 1 (captured in layers.0); node 41 <- 42 <- 41: a damaged cycle
    nodes = [
        GraphNode(20, 21, 1),
        GraphNode(95, 95, 21, original=1),
        GraphNode(96, 96, 31, original=21),
        GraphNode(97, 97, 41, original=42),
        GraphNode(98, 98, 42, original=41),
    ]
    replay = GraphLaunch(
        210,
        300,
        launch=(200, 202),
        kernels=[
            Kernel(210, 260, GEMM, graph_node_id=31),
            Kernel(260, 300, GEMM, graph_node_id=41),
        ],
    )
    con = write_and_open(
        Scenario(graph_launches=[replay], graph_nodes=nodes, nvtx=[NvtxRange(10, 40, "layers.0")])
    )
    origin = run_query(con, "layer_summary").to_dicts()
    assert sorted((r["layer"], r["kernel_count"]) for r in origin) == [
        ("(outside layers)", 1),
        ("layers.0", 1),
    ]


# ---- the synthetic writer's graph tables -----------------------------------------------------


def columns(path: Path, table: str) -> list[tuple[str, str, bool]]:
    with sqlite3.connect(path) as con:
        return [(r[1], r[2], bool(r[3])) for r in con.execute(f"PRAGMA table_info({table})")]


def test_the_2022_export_writes_node_creation_into_cuda_graph_events_as_the_real_ddl(
    tmp_path: Path,
) -> None:
    path = write_trace(capture_and_replay(nodes=True), tmp_path / "t.sqlite", "2022.2")
    ddl = (SCHEMA_2022 / "nsys_2022.2.1.31_schema2.9.1_full.sql").read_text()
    table = re.search(r"CREATE TABLE CUDA_GRAPH_EVENTS \((.*?)\n\);", ddl, re.S)
    assert table is not None
    expected = [
        (m.group(1), m.group(2), "NOT NULL" in m.group(3).split("--")[0])
        for m in re.finditer(r"\n    (\w+)\s+(INTEGER|TEXT)\b([^\n]*)", table.group(1))
    ]
    assert columns(path, "CUDA_GRAPH_EVENTS") == expected
    assert "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" not in ddl  # 2.9.1 had no graph-level table


@pytest.mark.parametrize("version", ["2026.2", "2024.5"])
def test_schema_3_exports_write_the_documented_graph_trace_and_node_event_columns(
    tmp_path: Path, version: str
) -> None:
    # The User Guide's schema reference (2024.4 and 2026.4 agree; docs/export-format.md).
    graph_trace = [
        ("start", "INTEGER", True), ("end", "INTEGER", True), ("deviceId", "INTEGER", True),
        ("contextId", "INTEGER", True), ("greenContextId", "INTEGER", False),
        ("streamId", "INTEGER", True), ("correlationId", "INTEGER", False),
        ("globalPid", "INTEGER", False), ("graphId", "INTEGER", True),
        ("graphExecId", "INTEGER", True),
    ]  # fmt: skip
    node_events = [
        ("start", "INTEGER", True), ("end", "INTEGER", True), ("eventClass", "INTEGER", True),
        ("globalTid", "INTEGER", False), ("nameId", "INTEGER", True),
        ("graphNodeId", "INTEGER", True), ("originalGraphNodeId", "INTEGER", False),
    ]  # fmt: skip
    assert [(c.name, c.sql_type, c.not_null) for c in GRAPH_TRACE] == graph_trace
    assert [(c.name, c.sql_type, c.not_null) for c in GRAPH_NODE_EVENTS] == node_events
    level = write_trace(
        Scenario(graph_launches=[GraphLaunch(0, 10)]), tmp_path / "g.sqlite", version
    )
    assert columns(level, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE") == graph_trace
    node = write_trace(capture_and_replay(nodes=True), tmp_path / "n.sqlite", version)
    assert columns(node, "CUDA_GRAPH_NODE_EVENTS") == node_events
    with sqlite3.connect(node) as con:
        kernels = con.execute("SELECT graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        corr = con.execute("SELECT DISTINCT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL")
        assert kernels == [(11,), (12,)] and len(corr.fetchall()) == 1  # one launch for both
        cls = con.execute("SELECT DISTINCT eventClass FROM CUDA_GRAPH_NODE_EVENTS").fetchall()
        assert cls == [(77,)]  # ENUM_NSYS_EVENT_CLASS: CUDA graph node creation


# ---- the samples: one run captured graph-level and node-level --------------------------------


@pytest.mark.parametrize("sample", [GRAPH_SAMPLE, NODE_SAMPLE], ids=lambda p: p.stem)
def test_every_gpu_of_a_graph_sample_equals_an_independent_union_over_its_rows(
    sample: Path,
) -> None:
    expected = per_gpu_metrics(sample)
    rows = gpu_rows(open_trace(sample))
    assert {(r["pid"], r["device_id"]) for r in rows} == set(expected) and len(rows) == 4
    for r in rows:
        want = expected[(r["pid"], r["device_id"])]
        assert {k: r[k] for k in want} == want


def test_graph_and_node_level_captures_of_one_run_agree_on_every_gpus_span_and_busy_time() -> None:
    graph = {(r["pid"], r["device_id"]): r for r in gpu_rows(open_trace(GRAPH_SAMPLE))}
    node = {(r["pid"], r["device_id"]): r for r in gpu_rows(open_trace(NODE_SAMPLE))}
    assert graph.keys() == node.keys()
    for key, g in graph.items():
        n = node[key]
        assert (g["span_ns"], g["busy_ns"], g["idle_ns"]) == (
            n["span_ns"],
            n["busy_ns"],
            n["idle_ns"],
        )
        assert g["graph_launches"] == 2 and g["graph_opaque_ns"] > 0.4 * g["span_ns"]
        assert n["graph_launches"] == 0 and n["graph_kernel_count"] == 2 * 99
        assert n["kernel_count"] == 3 * 102 and g["kernel_count"] == 102 + 2 * 3


def test_the_node_level_sample_puts_every_replayed_kernel_in_its_layer() -> None:
    con = open_trace(NODE_SAMPLE)
    assert all(r["no_layer_no_origin"] == 0 for r in run_query(con, "graph_layer_gap").to_dicts())
    rows = run_query(con, "layer_summary").to_dicts()
    inside = [r for r in rows if r["layer"] != "(outside layers)"]
    assert len(inside) == 4 * 8
    assert all(r["occurrences"] == 3 and r["kernel_count"] == 36 for r in inside)
    # collectives keep their op (from the NCCL ranges at capture) and match across the 4 GPUs
    ops = {
        (r["device_id"], r["op"]): r["count"]
        for r in run_query(con, "collective_summary").to_dicts()
    }
    assert ops == {(d, op): n for d in range(4) for op, n in (("AllGather", 3), ("AllReduce", 51))}
    assert run_query(con, "straggler_unmatched").to_dicts() == []


def test_the_graph_level_sample_report_names_the_recapture_flag(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(
        app,
        [
            "report",
            str(GRAPH_SAMPLE),
            "-o",
            str(out),
            "--json",
            str(tmp_path / "r.json"),
            "--no-cache",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "--cuda-graph-trace=node" in out.read_text()
    data = json.loads((tmp_path / "r.json").read_text())
    assert all(g["graph_launches"] == 2 for g in data["gpus"])
    assert "--cuda-graph-trace=node" in data["bottleneck"]["summary"]


# ---- gate and compare ------------------------------------------------------------------------


def test_the_gate_checks_the_share_inside_graphs_traced_as_a_whole(tmp_path: Path) -> None:
    # 900 of 1100 ns inside the graph: 81.82 %
    path = write_trace(
        Scenario(kernels=[Kernel(0, 100, GEMM)], graph_launches=[GraphLaunch(200, 1100)]),
        tmp_path / "t.sqlite",
    )
    runner = CliRunner()
    ok = runner.invoke(app, ["gate", str(path), "--max", "graph_opaque_pct=81.9"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["gate", str(path), "--max", "graph_opaque_pct=81.8"])
    assert bad.exit_code == 1, bad.output


def span_config(tmp_path: Path, name: str, gpus: int, graph: bool) -> Report:
    """`gpus` GPUs without steps, each over [1000, 2000): GEMMs [1000, 1250) and [1750, 2000)
    (compute 500) and, with `graph`, a graph launch traced as a whole [1250, 1550) (graph
    opaque 300); the rest is idle (500, or 200 with the graph)."""
    kernels, launches = [], []
    for g in range(gpus):
        pid = 100 + g
        kernels += [Kernel(1000, 1250, GEMM, device=g, pid=pid)]
        kernels += [Kernel(1750, 2000, GEMM, device=g, pid=pid)]
        if graph:
            launches.append(GraphLaunch(1250, 1550, device=g, pid=pid))
    scenario = Scenario(kernels=kernels, graph_launches=launches)
    path = write_trace(scenario, tmp_path / f"{name}.sqlite")
    return build_report(open_trace(path), path)


def test_compare_splits_the_loss_into_a_graph_part_only_when_a_configuration_has_one(
    tmp_path: Path,
) -> None:
    old = span_config(tmp_path, "old", 1, graph=False)
    plain = compare([("a", old), ("b", span_config(tmp_path, "b", 1, graph=False))])
    assert "graph_opaque_ns" not in plain.configs[0].loss
    mixed = compare([("old", old), ("graphs", span_config(tmp_path, "graphs", 2, graph=True))])
    loss = mixed.configs[1].loss
    # ideal 500 per GPU; graphs: compute 500 - 250, opaque 300 - 0, idle 200 - 250
    assert loss["graph_opaque_ns"] == 300 and loss["compute_ns"] == 250 and loss["idle_ns"] == -50
    assert sum(v for k, v in loss.items() if k != "total_ns") == loss["total_ns"]


def test_graphs_holding_most_of_the_time_lead_the_verdict_and_the_rest_is_judged_after(
    write_and_open: Any, tmp_path: Path
) -> None:
    # gemm [100,200); graph [200,500): span 400 = compute 100 (25%) + graph opaque 300 (75%);
    # no comm, copies or idle: the recorded time is all compute
    con = write_and_open(
        Scenario(kernels=[Kernel(100, 200, GEMM)], graph_launches=[GraphLaunch(200, 500)])
    )
    verdict = build_report(con, tmp_path / "t.sqlite").bottleneck
    assert verdict.summary.startswith("75.0% of the GPU time is inside 1 CUDA graph launches")
    assert "Of the time the trace does record: Compute-bound" in verdict.summary
    assert (verdict.stage, verdict.share_pct, verdict.graph_opaque_pct) == ("compute", 25.0, 75.0)


def test_an_unusable_graph_launch_row_is_left_out_and_counted(tmp_path: Path) -> None:
    # graph [100,300) and graph [400,500), then the second one starts at a negative time
    path = write_trace(
        Scenario(graph_launches=[GraphLaunch(100, 300), GraphLaunch(400, 500)]),
        tmp_path / "t.sqlite",
    )
    with sqlite3.connect(path) as db:
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_GRAPH_TRACE SET start = -400 WHERE start = 400")
    report = build_report(open_trace(path), path)
    (gpu,) = report.gpus
    assert (gpu.span_ns, gpu.graph_ns, gpu.graph_launches) == (200, 200, 1)
    assert "1 CUDA graph launch skipped: negative time" in as_json(report)["data_quality"]
