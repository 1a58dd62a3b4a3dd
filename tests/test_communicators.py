"""Communicators and their roles: from the trace's process groups, from instances that end
together, from --comm-group; per-role exposed comm checked against the simulation's truth.

The TP x DP sample (sample_traces/llama8b_train_tp4_dp2_nvlink.sqlite, nsysreport.synth.training)
records which ranks form each TP and DP group and the stream each runs on; every expected
exposure below is recomputed from the simulator's kernels by plain interval arithmetic.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest

from nsysreport.analysis import analyse
from nsysreport.compare import compare, role_comparison_sentence
from nsysreport.errors import OptionError
from nsysreport.gate_metrics import metric_of
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.sections.communicators import parse_comm_groups
from nsysreport.synth import Kernel, NvtxRange, write_trace
from nsysreport.synth.rank_files import write_rank_files
from nsysreport.synth.training import (
    COMPUTE_STREAM,
    DP_STREAM,
    SAMPLE,
    SAMPLE_NAME,
    TP_STREAM,
    TrainingConfig,
    training,
)
from nsysreport.units import fmt_ranks
from nsysreport.user_facts import Facts

from conftest import REPO, SHARED_TRACES

SAMPLE_PATH = REPO / "sample_traces" / SAMPLE_NAME
KINETO = SHARED_TRACES / "kineto"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


@pytest.fixture(scope="module")
def sample() -> Report:
    return analyse(SAMPLE_PATH)


def truth() -> dict[str, Any]:
    """The simulation's ground truth, as the sample file itself records it."""
    with sqlite3.connect(SAMPLE_PATH) as db:
        (text,) = db.execute(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'NSYSREPORT_SIMULATION'"
        ).fetchone()
    return dict(json.loads(text)["groups"])


def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def uncovered(pieces: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """Length of the union of `pieces` that the union of `cover` leaves bare."""
    total = 0
    for start, end in union(pieces):
        bare = end - start
        for c0, c1 in cover:
            bare -= max(0, min(end, c1) - max(start, c0))
        total += bare
    return total


def test_the_sample_is_the_simulator_s_output_and_small(tmp_path: Path) -> None:
    assert SAMPLE_PATH.stat().st_size < 600 * 1024
    written = write_trace(training(SAMPLE), tmp_path / SAMPLE_NAME)
    assert written.read_bytes() == SAMPLE_PATH.read_bytes(), (
        f"sample_traces/{SAMPLE_NAME} is stale: python -m nsysreport.synth.training "
        f"--out sample_traces/{SAMPLE_NAME}"
    )
    assert truth() == {
        "tp": {"stream": TP_STREAM, "ranks": [[0, 1, 2, 3], [4, 5, 6, 7]]},
        "dp": {"stream": DP_STREAM, "ranks": [[0, 4], [1, 5], [2, 6], [3, 7]]},
    }


def test_the_tp_x_dp_sample_splits_exactly_as_simulated(sample: Report) -> None:
    groups = truth()
    for role in ("tp", "dp"):
        rows = [c for c in sample.communicators if c.role == role]
        assert {c.members for c in rows} == {tuple(g) for g in groups[role]["ranks"]}
        assert all(c.source == "matched instances" for c in rows)
        assert all(c.streams == str(groups[role]["stream"]) for c in rows)
        # bus bandwidth's n is the communicator's size: 4 for TP, 2 for DP, not the 8 GPUs
        assert {c.group_size for c in rows} == {len(groups[role]["ranks"][0])}
        # every member GPU of every group has its row of that role, and only its own groups
        for c in rows:
            assert c.rank in c.members
    per_gpu = {(c.rank, c.role) for c in sample.communicators}
    assert per_gpu == {(r, role) for r in range(8) for role in ("tp", "dp")}
    why = next(c for c in sample.communicators if c.role == "tp").role_source
    assert why is not None and "inside layer ranges" in why


def test_per_role_exposed_comm_is_the_simulated_kernels_exposure(sample: Report) -> None:
    kernels = list(training(SAMPLE).kernels)
    for c in sample.communicators:
        mine = [k for k in kernels if k.device == c.device_id]
        stream = TP_STREAM if c.role == "tp" else DP_STREAM
        comm = [(k.start, k.end) for k in mine if k.stream == stream]
        compute = union([(k.start, k.end) for k in mine if k.stream == COMPUTE_STREAM])
        assert c.count == len(comm)
        assert c.total_ns == sum(e - s for s, e in comm)
        assert c.exposed_ns == uncovered(comm, compute)
    roles = {r.role: r for r in sample.roles}
    # by design: the compute stream waits for every TP all-reduce, the DP buckets run beside
    # the backward pass of the layers below (all but the last layer's hide)
    assert roles["tp"].hidden_pct == 0.0
    assert roles["dp"].hidden_pct is not None and roles["dp"].hidden_pct > 75.0
    assert roles["tp"].step_pct is not None and roles["dp"].step_pct is not None
    assert roles["tp"].step_pct > 5 * roles["dp"].step_pct
    assert [r.role for r in sample.roles] == ["tp", "dp"]  # costliest first
    assert "By communicator: the tensor-parallel all-reduces are 100% exposed" in (
        sample.bottleneck.summary
    )
    assert "the data-parallel all-reduces are" in sample.bottleneck.summary


def test_gate_metric_exposed_comm_pct_of_a_role(sample: Report) -> None:
    """exposed_comm_pct[tp]: per GPU the median over its steps of TP's exposed time over the
    step window, the worst GPU. TP all-reduces are serial on their stream and fully exposed,
    so a step's share is the sum of its TP kernels' durations over its window (first start to
    last end of the kernels launched inside `step N`)."""
    scenario = training(SAMPLE)
    kernels, ranges = list(scenario.kernels), list(scenario.nvtx)
    worst = 0.0
    for device in range(8):
        shares = []
        for step in (r for r in ranges if r.pid == 1000 + device and r.text.startswith("step")):
            inside = [
                k for k in kernels
                if k.device == device and k.launch and step.start <= k.launch[0] < (step.end or 0)
            ]  # fmt: skip
            window = max(k.end for k in inside) - min(k.start for k in inside)
            tp = sum(k.end - k.start for k in inside if k.stream == TP_STREAM)
            shares.append(100.0 * tp / window)
        worst = max(worst, statistics.median(shares))
    metric, role = metric_of("exposed_comm_pct[tp]")
    measure = metric.compute(sample, role)
    assert measure.value == pytest.approx(worst, rel=1e-9)
    dp = metric.compute(sample, "dp").value
    assert dp is not None and measure.value is not None and 0 < dp < measure.value
    whole, _ = metric_of("exposed_comm_pct")
    assert whole.compute(sample, None).value == metric.compute(sample, None).value
    with pytest.raises(OptionError, match="no communicator has the role 'ep'"):
        metric.compute(sample, "ep")


def test_comm_group_names_roles_by_ranks_by_stream_and_by_regex() -> None:
    specs = parse_comm_groups(["tensor=0-3", "tensor=4-7", "data=stream:31"])
    report = analyse(SAMPLE_PATH, facts=Facts(comm_groups=specs))
    by_role = {c.role for c in report.communicators}
    assert by_role == {"tensor", "data"}
    assert {c.members for c in report.communicators if c.role == "tensor"} == {
        (0, 1, 2, 3),
        (4, 5, 6, 7),
    }
    assert {c.role_source for c in report.communicators if c.role == "data"} == {
        "--comm-group data=stream:31"
    }
    # a regular expression: against the communicator's name (stream 23, ranks 4-7)
    specs = parse_comm_groups([r"other=ranks 4-7$"])
    report = analyse(SAMPLE_PATH, facts=Facts(comm_groups=specs))
    named = {c.members for c in report.communicators if c.role == "other"}
    assert named == {(4, 5, 6, 7)}
    # the rest keep the heuristics' roles
    assert {c.role for c in report.communicators if c.members == (0, 1, 2, 3)} == {"tp"}


@pytest.mark.parametrize("bad", ["tp", "=0-3", "tp=", "tp=(unclosed"])
def test_a_bad_comm_group_is_one_option_error(bad: str) -> None:
    with pytest.raises(OptionError, match="--comm-group"):
        parse_comm_groups([bad])


def two_group_kineto(path: Path) -> Path:
    """Rank 0 of an 8-rank job with two process groups: "2" (TP, ranks 0-3, stream 20) and
    "5" (DP, ranks 0 and 4, stream 24); two all-reduces of 1,000,000 bytes on the first, each
    100 µs, one on the second, 200 µs, launched inside / outside no layer range."""

    def kernel(ts: int, dur: int, stream: int, corr: int, group: str, ranks: list[int]) -> Any:
        return {
            "ph": "X", "cat": "kernel", "name": ALLREDUCE, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr,
                     "Collective name": "allreduce", "In msg nelems": 250_000,
                     "dtype": "Float", "Group size": len(ranks), "Process Group Name": group,
                     "Process Group Ranks": str(ranks)},
        }  # fmt: skip

    def launch(ts: int, corr: int) -> Any:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42,
                "tid": 42, "ts": ts, "dur": 5, "args": {"correlation": corr}}  # fmt: skip

    events = [
        launch(990, 1), kernel(1000, 100, 20, 1, "2", [0, 1, 2, 3]),
        launch(1190, 2), kernel(1200, 100, 20, 2, "2", [0, 1, 2, 3]),
        launch(1390, 3), kernel(1400, 200, 24, 3, "5", [0, 4]),
    ]  # fmt: skip
    pg = [
        {"pg_name": "0", "pg_desc": "default_pg", "pg_size": 8, "ranks": list(range(8))},
        {"pg_name": "2", "pg_desc": "mesh_tp", "pg_size": 4, "ranks": [0, 1, 2, 3]},
        {"pg_name": "5", "pg_desc": "mesh_dp", "pg_size": 2, "ranks": [0, 4]},
    ]
    top = {"schemaVersion": 1, "traceEvents": events,
           "distributedInfo": {"rank": 0, "world_size": 8, "pg_config": pg}}  # fmt: skip
    path.write_text(json.dumps(top))
    return path


def test_a_kineto_trace_gives_each_kernel_its_process_group(tmp_path: Path) -> None:
    trace = two_group_kineto(tmp_path / "rank0.json")
    con = open_trace(trace)
    rows = con.sql(
        "SELECT comm_group, channel, comm_ranks, comm_desc, group_size FROM collective "
        "ORDER BY start_ns"
    ).fetchall()
    assert rows == [
        ("2", "process group 2", "0,1,2,3", "mesh_tp", 4),
        ("2", "process group 2", "0,1,2,3", "mesh_tp", 4),
        ("5", "process group 5", "0,4", "mesh_dp", 2),
    ]
    report = analyse(trace)
    comms = {c.communicator: c for c in report.communicators}
    tp, dp = comms["process group 2"], comms["process group 5"]
    assert (tp.members, tp.group_size, tp.source, tp.count) == (
        (0, 1, 2, 3),
        4,
        "trace metadata",
        2,
    )
    assert (dp.members, dp.group_size, dp.source, dp.count) == ((0, 4), 2, "trace metadata", 1)
    # roles from the process groups' descriptions
    assert (tp.role, dp.role) == ("tp", "dp")
    assert tp.role_source == "process group description 'mesh_tp'"
    # 2,000,000 bytes in 200 µs: algbw 10 GB/s, x 2(n-1)/n: 15 for n = 4; DP: 5 GB/s x 1
    assert tp.busbw_gbps == pytest.approx(15.0)
    assert dp.busbw_gbps == pytest.approx(5.0)
    # no compute: all exposed; 200 µs of TP, 200 µs of DP
    assert (tp.exposed_ns, dp.exposed_ns) == (200_000, 200_000)
    # the collectives row of AllReduce runs on two communicators: its communicator is null
    (row,) = as_json(report)["collectives"]
    assert row["communicator"] is None
    # by regex on the process group's name
    named = analyse(trace, facts=Facts(comm_groups=parse_comm_groups(["grads=group 5$"])))
    assert {c.communicator: c.role for c in named.communicators} == {
        "process group 2": "tp",
        "process group 5": "grads",
    }


def kineto_kernels(name: str) -> list[dict[str, Any]]:
    with gzip.open(KINETO / name, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()]


# What each real trace records at its NCCL kernels (docs/export-format.md's table): kernels
# with `Process Group Name` and `Group size` in their args, the group, its size and ranks.
RECORDED = {
    "a100_ddp_rank0_nccl_data.json.gz": (21, "0", 2, (0, 1), "default_pg"),
    "mi300_rccl_rank0.json.gz": (12, "0", 8, tuple(range(8)), "default_pg"),
    "v100_ddp_rank1.json.gz": (0, None, None, (), None),
    "recsys128_sampled_rank-0.json.gz": (0, None, None, (), None),
    "recsys128_sampled_rank-1.json.gz": (0, None, None, (), None),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_real_kineto_nccl_kernels_carry_their_process_group_where_recorded(name: str) -> None:
    recorded, group, size, ranks, desc = RECORDED[name]
    kernels = kineto_kernels(name)
    with_args = [k for k in kernels if "Process Group Name" in k.get("args", {})]
    assert len(with_args) == recorded
    assert {(k["args"]["Process Group Name"], k["args"]["Group size"]) for k in with_args} == (
        {(group, size)} if recorded else set()
    )
    con = open_trace(KINETO / name)
    got = con.sql(
        "SELECT comm_group, group_size, group_source, count(*) FROM collective "
        "WHERE comm_group IS NOT NULL GROUP BY ALL"
    ).fetchall()
    assert got == ([(group, size, "torch_group_size", recorded)] if recorded else [])
    report = analyse(KINETO / name)
    assert sum(c.count for c in report.communicators) == len(kernels)
    if recorded:
        (pg,) = [c for c in report.communicators if c.source == "trace metadata"]
        assert (pg.communicator, pg.group_size, pg.members, pg.description) == (
            f"process group {group}",
            size,
            ranks,
            desc,
        )
        # every NCCL kernel is on it: MI300's 5 kernels without args share its stream
        assert pg.count == len(kernels)
    else:
        # no process group recorded: each stream is a communicator known by its stream only
        assert {c.source for c in report.communicators} == {"stream"}
        assert {c.group_source for c in report.communicators} == {"world_size"}


def test_compare_sets_each_role_side_by_side(tmp_path: Path, sample: Report) -> None:
    tp8 = write_trace(training(TrainingConfig(tp=8, dp=1)), tmp_path / "tp8_dp1.sqlite")
    other = analyse(tp8)
    assert {c.role for c in other.communicators} == {"tp"}
    c = compare([("tp4xdp2", sample), ("tp8xdp1", other)])
    roles = {r["role"]: r for r in c.roles}
    assert set(roles) == {"tp", "dp"}
    assert roles["dp"]["exposed_comm_ns"].get("tp8xdp1") is None
    # per step and GPU: the TP sample's steps' exposed TP time over 8 GPUs x 2 steps
    tp_steps = sum(x.exposed_ns for x in sample.communicator_steps if x.role == "tp")
    assert roles["tp"]["exposed_comm_ns"]["tp4xdp2"] == pytest.approx(tp_steps / 16)
    sentence = role_comparison_sentence(c)
    assert sentence is not None and sentence.startswith("Exposed comm per step and GPU by role")


def test_per_rank_files_on_shifted_clocks_find_the_groups_across_files(tmp_path: Path) -> None:
    """One file per rank: no file alone can see its peers; over all files on the aligned clock
    the channels whose instances end together are one communicator again, as simulated."""
    config = TrainingConfig(tp=2, dp=2, layers=2, steps=1)
    shifts = [0, 3_000_000, -1_500_000, 7_000_000]
    files = write_rank_files(training(config), tmp_path / "ranks", shifts)
    for file in files:  # each file alone: its streams only
        assert {c.source for c in analyse(file).communicators} == {"stream"}
    report = analyse(files, jobs=1)
    got = {(c.role, c.members, c.source, c.group_size) for c in report.communicators}
    assert got == {
        ("tp", (0, 1), "matched instances", 2),
        ("tp", (2, 3), "matched instances", 2),
        ("dp", (0, 2), "matched instances", 2),
        ("dp", (1, 3), "matched instances", 2),
    }
    assert {c.communicator for c in report.communicators if c.rank == 3} == {
        "stream 23, ranks 2,3",
        "stream 31, ranks 1,3",
    }
    assert {x.communicator for x in report.communicator_steps if x.rank == 3} == {
        "stream 23, ranks 2,3",
        "stream 31, ranks 1,3",
    }


def test_communicators_survive_the_json_round_trip(sample: Report) -> None:
    data = json.loads(json.dumps(as_json(sample)))
    back = Report.from_json(data, "saved.json")
    assert back.communicators == sample.communicators
    assert back.communicator_steps == sample.communicator_steps
    assert back.roles == sample.roles
    assert data["communicator_roles"][0]["role"] == "tp"


def test_a_layer_s_collectives_per_communicator(sample: Report) -> None:
    layer0 = [x for x in sample.communicator_layers if x.rank == 0 and x.layer == "model.layers.0"]
    # forward: 2 TP all-reduces, backward: 2, per step; 2 steps; DP runs outside the layers
    assert [(x.role, x.count) for x in layer0] == [("tp", 8)]


def test_a_trace_of_one_gpu_per_rank_without_layers_has_no_role(tmp_path: Path) -> None:
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    kernels = [Kernel(1_000 * i, 1_000 * i + 500, name, 0, 9, 100) for i in range(1, 4)]
    trace = write_trace_of(tmp_path, kernels)
    (c,) = analyse(trace).communicators
    assert (c.communicator, c.source, c.role, c.role_source) == (
        "stream 9 of rank 0",
        "stream",
        None,
        None,
    )


def write_trace_of(tmp_path: Path, kernels: list[Kernel]) -> Path:
    from nsysreport.synth import Scenario

    return write_trace(
        Scenario(kernels=kernels, nvtx=[NvtxRange(0, 10, "x")]), tmp_path / "t.sqlite"
    )


def test_gate_and_compare_take_comm_group_for_a_trace_whose_roles_the_heuristics_leave_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real DDP trace has one process group and no layer ranges: no role until named.
    Rank 0's exposed comm is all of it on that group: its exposed_comm_pct[dp] is the whole
    exposed_comm_pct."""
    from typer.testing import CliRunner

    from nsysreport.cli import app

    monkeypatch.chdir(tmp_path)  # no [tool.nsysreport.gate] of the project's pyproject.toml
    trace = KINETO / "a100_ddp_rank0_nccl_data.json.gz"
    runner = CliRunner()
    unnamed = runner.invoke(app, ["gate", str(trace), "--max", "exposed_comm_pct[dp]=100"])
    assert unnamed.exit_code == 2 and "no communicator has the role 'dp'" in unnamed.stderr
    named = ["--comm-group", "dp=process group 0"]
    whole = metric_of("exposed_comm_pct")[0].compute(analyse(trace), None).value
    assert whole is not None
    ok = runner.invoke(
        app, ["gate", str(trace), "--max", f"exposed_comm_pct[dp]={whole + 0.01}", *named]
    )
    assert ok.exit_code == 0, ok.output
    failed = runner.invoke(
        app, ["gate", str(trace), "--max", f"exposed_comm_pct[dp]={whole - 0.01}", *named]
    )
    assert failed.exit_code == 1, failed.output
    out = tmp_path / "c.json"
    mi300 = KINETO / "mi300_rccl_rank0.json.gz"
    args = ["compare", f"a={trace}", f"b={mi300}", "-o", str(tmp_path / "c.html")]
    run = runner.invoke(app, [*args, "--json", str(out), "--comm-group", "dp=default_pg"])
    assert run.exit_code == 0, run.output
    (role,) = json.loads(out.read_text())["roles"]
    assert role["role"] == "dp" and set(role["exposed_comm_ns"]) == {"a", "b"}


@pytest.mark.parametrize(
    ("ranks", "text"),
    [
        ([3], "3"),
        ([0, 4], "0,4"),
        ([0, 1], "0,1"),
        ([0, 1, 2, 3], "0-3"),
        ([0, 1, 2, 3, 4, 6, 7], "0-4,6,7"),
    ],
)
def test_ranks_are_written_with_runs_of_three_or_more_as_first_last(
    ranks: list[int], text: str
) -> None:
    assert fmt_ranks(ranks) == text
