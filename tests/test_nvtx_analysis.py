"""Steps, layers, collectives and stragglers on hand-checkable scenarios and a real trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.patterns import Patterns
from nsysreport.queries import run_query
from nsysreport.report_builder import build_report
from nsysreport.sections.gpu_breakdown import what_if
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

from bruteforce import layer_exposed_comm
from conftest import real_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


def two_layer_step(**extra: Any) -> Scenario:
    """One step, two layers. Layer 0: a GEMM [100,200) and an all-reduce [300,400) on the comm
    stream; layer 1's GEMM [350,450) hides the all-reduce's second half.
    """
    return Scenario(
        kernels=[
            Kernel(100, 200, GEMM, launch=(30, 31)),
            Kernel(300, 400, ALLREDUCE, stream=31, launch=(300 - 40, 300 - 39)),
            Kernel(350, 450, GEMM, launch=(510, 511)),
        ],
        nvtx=[
            NvtxRange(0, 1000, "step 1"),
            NvtxRange(10, 500, "model.layers.0, op_id = 7"),
            NvtxRange(20, 200, "self_attn"),  # nested inside layer 0: not a layer itself
            NvtxRange(505, 990, "model.layers.1", registered=True),  # text via StringIds
            NvtxRange(0, None, "model.layers.7"),  # never ended: ignored
            NvtxRange(0, 1000, "model.layers.8", end_tid=101),  # ended on another thread
        ],
        **extra,
    )


def layers_of(con: Any) -> dict[str, dict[str, Any]]:
    return {r["layer"]: r for r in run_query(con, "layer_summary").to_dicts()}


def test_a_layer_whose_all_reduce_is_half_hidden_exposes_the_other_half(
    write_and_open: Any,
) -> None:
    layers = layers_of(write_and_open(two_layer_step()))
    assert set(layers) == {"model.layers.0", "model.layers.1"}
    l0, l1 = layers["model.layers.0"], layers["model.layers.1"]
    assert (l0["kernel_count"], l0["compute_ns"], l0["comm_ns"], l0["exposed_comm_ns"]) == (
        2,
        100,
        100,
        50,
    )
    assert (l0["occurrences"], l0["gpu_time_ns"], l0["exposed_rank"]) == (1, 300, 1)
    assert (l1["kernel_count"], l1["compute_ns"], l1["exposed_comm_ns"], l1["gpu_time_ns"]) == (
        1,
        100,
        0,
        100,
    )


def test_a_step_window_spans_its_activities_and_its_breakdown_partitions_it(
    write_and_open: Any,
) -> None:
    (step,) = run_query(write_and_open(two_layer_step()), "step_breakdown").to_dicts()
    assert (step["name"], step["step_index"], step["start_ns"], step["end_ns"]) == (
        "step 1",
        1,
        100,
        450,
    )
    assert step["step_time_ns"] == 350
    assert (step["compute_ns"], step["comm_ns"], step["exposed_comm_ns"], step["idle_ns"]) == (
        200,
        100,
        50,
        100,
    )
    parts = (
        step["compute_ns"] + step["exposed_comm_ns"] + step["exposed_memcpy_ns"] + step["idle_ns"]
    )
    assert parts == step["step_time_ns"]
    assert (step["kernel_count"], step["comm_kernel_count"], step["comm_sum_ns"]) == (3, 1, 100)


def test_backtrace_duplicates_do_not_double_count_projected_kernels(write_and_open: Any) -> None:
    con = write_and_open(two_layer_step(backtrace_duplicates=True))
    assert layers_of(con)["model.layers.0"]["kernel_count"] == 2
    dupes = con.execute(
        "SELECT count(*) FROM (SELECT source, activity_id, role FROM activity_range "
        "GROUP BY ALL HAVING count(*) > 1)"
    ).fetchone()
    assert dupes == (0,)


def test_comm_on_the_compute_stream_is_fully_exposed_in_its_layer(write_and_open: Any) -> None:
    scenario = Scenario(
        kernels=[
            Kernel(100, 200, GEMM, launch=(20, 21)),
            Kernel(200, 260, ALLREDUCE, launch=(22, 23)),
        ],
        nvtx=[NvtxRange(10, 50, "layers.3")],
    )
    (row,) = run_query(write_and_open(scenario), "layer_summary").to_dicts()
    assert (row["layer"], row["comm_ns"], row["exposed_comm_ns"]) == ("layers.3", 60, 60)


def test_layer_unions_are_the_same_whether_its_kernels_overlap_on_two_streams_or_queue_on_one(
    write_and_open: Any,
) -> None:
    # The same work on two GPUs. GPU 0 runs layer 0's two GEMMs [100,200) and [150,260) and its
    # two all-reduces [300,400) and [350,420) on two streams each, so they overlap (grouped_island
    # takes each group's union by its start-order pass); GPU 1 queues them on one stream,
    # [100,200) [200,260) and [300,400) [400,420), touching, not overlapping (each interval is
    # a piece of its union as it is). Either way layer 0's compute union is 160 and its comm
    # union 120, of which layer 1's GEMM [390,410) hides 20: 100 exposed.
    def on(device: int, start: int, end: int, name: str, stream: int, launch: int) -> Kernel:
        return Kernel(start, end, name, device=device, stream=stream, launch=(launch, launch + 1))

    kernels = []
    for device, (second_gemm, second_comm) in enumerate(
        [((150, 260), (350, 420)), ((200, 260), (400, 420))]
    ):
        spread = 1 - device  # GPU 0: a second stream for the second of each pair
        kernels += [
            on(device, 100, 200, GEMM, 7, 10),
            on(device, *second_gemm, GEMM, 7 + spread, 12),
            on(device, 300, 400, ALLREDUCE, 31, 14),
            on(device, *second_comm, ALLREDUCE, 31 + spread, 16),
            on(device, 390, 410, GEMM, 7, 60),
        ]
    con = write_and_open(
        Scenario(
            kernels=kernels,
            nvtx=[NvtxRange(0, 50, "model.layers.0"), NvtxRange(50, 100, "model.layers.1")],
        )
    )
    rows = run_query(con, "layer_summary").to_dicts()
    layers = {(r["device_id"], r["layer"]): r for r in rows}
    assert len(rows) == 4
    for device in (0, 1):
        l0, l1 = layers[device, "model.layers.0"], layers[device, "model.layers.1"]
        assert (l0["kernel_count"], l0["compute_ns"], l0["gemm_ns"]) == (4, 160, 160)
        assert (l0["comm_ns"], l0["exposed_comm_ns"]) == (120, 100)
        assert (l1["kernel_count"], l1["compute_ns"], l1["comm_ns"]) == (1, 20, 0)
    ops = run_query(con, "collective_summary").to_dicts()
    assert {(r["device_id"], r["op"], r["exposed_ns"]) for r in ops} == {
        (0, "AllReduce", 100),
        (1, "AllReduce", 100),
    }


def test_kernels_outside_every_layer_are_reported_as_outside_layers(write_and_open: Any) -> None:
    scenario = Scenario(
        kernels=[Kernel(100, 200, GEMM, launch=(20, 21)), Kernel(300, 400, GEMM, launch=(80, 81))],
        nvtx=[NvtxRange(10, 50, "block_2")],
    )
    rows = {r["layer"]: r for r in run_query(write_and_open(scenario), "layer_summary").to_dicts()}
    assert rows["block_2"]["kernel_count"] == 1
    assert rows["(outside layers)"]["kernel_count"] == 1
    assert (
        rows["(outside layers)"]["occurrences"] == 0
        and rows["(outside layers)"]["gpu_time_ns"] is None
    )


def test_the_layer_pattern_option_decides_what_a_layer_is(tmp_path: Path) -> None:
    path = write_trace(two_layer_step(), tmp_path / "t.sqlite")
    con = open_trace(path, patterns=Patterns(layer=r"self_attn"))
    assert {r["layer"] for r in run_query(con, "layer_summary").to_dicts()} == {
        "self_attn",
        "(outside layers)",
    }


def straggler_scenario() -> Scenario:
    """4 GPUs, 3 all-reduces. Before each, GPU g computes until base + (0, 10, 20, 100)[g]:
    GPU 3 arrives 100 ns late every time; the all-reduce ends at base + 150 everywhere.
    """
    offsets = (0, 10, 20, 100)
    kernels = []
    for k in range(3):
        base = 10_000 * (k + 1)
        for g, off in enumerate(offsets):
            pid = 100 + g
            kernels.append(
                Kernel(
                    base - 500, base + off, GEMM, pid=pid, device=g, launch=(base - 600, base - 599)
                )
            )
            kernels.append(
                Kernel(
                    base + off,
                    base + 150,
                    ALLREDUCE,
                    pid=pid,
                    device=g,
                    launch=(base - 598, base - 597),
                )
            )
    return Scenario(kernels=kernels)


def test_four_gpus_name_the_late_gpu_as_straggler_with_exact_waits(tmp_path: Path) -> None:
    path = write_trace(straggler_scenario(), tmp_path / "s.sqlite")
    rows = run_query(open_trace(path), "straggler_gpu").to_dicts()
    got = [
        (
            r["device_id"],
            r["matched_instances"],
            r["last_arrivals"],
            r["wait_ns"],
            r["caused_wait_ns"],
        )
        for r in rows
    ]
    # Per instance GPU 0/1/2 wait 100/90/80 ns; GPU 3 causes 270 ns; three instances.
    assert got == [(0, 3, 0, 300, 0), (1, 3, 0, 270, 0), (2, 3, 0, 240, 0), (3, 3, 3, 0, 810)]
    report = build_report(open_trace(path), path)
    assert report.stragglers.straggler is not None and report.stragglers.straggler.device_id == 3
    # 810 ns caused vs 450 + 420 + 390 ns of exposed comm on the others: 64 % -> named.
    assert report.bottleneck.straggler is not None and report.bottleneck.straggler.rank == 3
    assert (
        "rank 3" in report.bottleneck.summary
        and "arrives last at 3 of 3" in report.bottleneck.summary
    )


def test_ops_with_different_instance_counts_are_reported_unmatched(tmp_path: Path) -> None:
    scenario = Scenario(
        kernels=[
            Kernel(100, 200, ALLREDUCE, pid=1, device=0),
            Kernel(300, 400, ALLREDUCE, pid=1, device=0),
            Kernel(100, 200, ALLREDUCE, pid=2, device=1),
        ]
    )
    con = open_trace(write_trace(scenario, tmp_path / "u.sqlite"))
    assert run_query(con, "straggler_gpu").height == 0
    rows = run_query(con, "straggler_unmatched").to_dicts()
    assert [(r["op"], r["device_id"], r["instances"]) for r in rows] == [
        ("AllReduce", 0, 2),
        ("AllReduce", 1, 1),
    ]


def test_the_collective_op_comes_from_nvtx_before_the_kernel_name(tmp_path: Path) -> None:
    kernels, nvtx = [], []
    for g in range(4):
        pid = 10 + g
        kernels += [
            Kernel(1_000, 2_000, SENDRECV, pid=pid, device=g, launch=(100, 101)),
            Kernel(3_000, 103_000, ALLREDUCE, pid=pid, device=g, launch=(200, 201)),
            Kernel(200_000, 300_000, ALLGATHER, pid=pid, device=g, launch=(300, 301)),
        ]
        nvtx += [
            NvtxRange(90, 110, "nccl:all_to_all", pid=pid),
            NvtxRange(95, 105, "ncclGroupEnd", pid=pid, registered=True, domain="NCCL"),
            NvtxRange(
                190,
                210,
                "ncclAllReduce",
                pid=pid,
                registered=True,
                domain="NCCL",
                payload=1_000_000,
            ),
        ]
    path = write_trace(Scenario(kernels=kernels, nvtx=nvtx), tmp_path / "c.sqlite")
    con = open_trace(path, patterns=Patterns(comm_bytes={"AllGather": 2_000_000}))
    ops = set(con.execute("SELECT op, op_source, message_bytes FROM collective").fetchall())
    assert ops == {
        ("AllToAll", "torch_collective", None),
        ("AllReduce", "nccl_collective", 1_000_000),
        ("AllGather", "kernel", 2_000_000),
    }
    summary = {
        r["op"]: r for r in run_query(con, "collective_summary").to_dicts() if r["device_id"] == 0
    }
    # 1 MB in 100 µs = 10 GB/s; all-reduce bus bandwidth x 2(4-1)/4 = 15 GB/s.
    assert summary["AllReduce"]["algbw_gbps"] == pytest.approx(10.0)
    assert summary["AllReduce"]["busbw_gbps"] == pytest.approx(15.0)
    # 2 MB in 100 µs = 20 GB/s; all-gather x (4-1)/4 = 15 GB/s.
    assert summary["AllGather"]["busbw_gbps"] == pytest.approx(15.0)
    assert summary["AllToAll"]["busbw_gbps"] is None and summary["AllToAll"]["group_gpus"] == 4


def test_what_if_matches_the_worked_example() -> None:
    # compute 100, exposed comm 80 (no overlap, no copies, no idle): docs/metrics.md's example.
    got = what_if(
        {
            "compute_ns": 100,
            "comm_ns": 80,
            "overlapped_comm_ns": 0,
            "exposed_comm_ns": 80,
            "exposed_memcpy_ns": 0,
            "idle_ns": 0,
        }
    )
    assert (got.compute_2x_ns, got.comm_2x_ns, got.perfect_overlap_ns, got.no_idle_ns) == (
        130,
        140,
        100,
        180,
    )


def test_the_mfu_trace_matches_its_cross_gpu_reference() -> None:
    path = real_trace("mfu_2gpu_before.sqlite")
    con = open_trace(path)
    rows = {r["device_id"]: r for r in run_query(con, "straggler_gpu").to_dicts()}
    assert rows[0]["matched_instances"] == 33 and rows[1]["matched_instances"] == 33
    assert (rows[1]["last_arrivals"], rows[0]["last_arrivals"]) == (22, 11)
    assert rows[1]["caused_wait_ns"] == rows[0]["wait_ns"] == pytest.approx(10.9e6, rel=0.01)
    assert rows[0]["caused_wait_ns"] == rows[1]["wait_ns"] == pytest.approx(2.5e6, rel=0.02)
    ops = dict(
        con.execute(
            "SELECT op, count(*) FROM collective WHERE device_id = 0 GROUP BY op"
        ).fetchall()
    )
    assert ops["AllToAll"] == 32  # SendRecv kernels inside PyTorch's nccl:all_to_all ranges


def test_per_layer_exposed_comm_equals_a_brute_force_over_raw_rows(tmp_path: Path) -> None:
    kernels, nvtx = [], []
    for g in range(4):
        pid, t = 50 + g, 1_000
        for layer in range(6):
            launch = t - 900
            nvtx.append(NvtxRange(launch - 5, launch + 20, f"decoder.layers.{layer}", pid=pid))
            gemm = 300 + 37 * layer + 11 * g
            kernels.append(
                Kernel(t, t + gemm, GEMM, pid=pid, device=g, launch=(launch, launch + 1))
            )
            # The all-reduce starts 40 ns before the GEMM ends on another stream: partly hidden.
            ar_start = t + gemm - 40 * (layer % 3)
            kernels.append(
                Kernel(
                    ar_start,
                    ar_start + 120 + 5 * g,
                    ALLREDUCE,
                    pid=pid,
                    device=g,
                    stream=31,
                    launch=(launch + 2, launch + 3),
                )
            )
            t = ar_start + 120 + 5 * g + 7 * layer
    path = write_trace(Scenario(kernels=kernels, nvtx=nvtx), tmp_path / "tp4.sqlite")
    expected = layer_exposed_comm(path, r"layers\.\d+")
    con = open_trace(path, patterns=Patterns(layer=r"layers\.\d+"))
    got = {
        (r["pid"], r["device_id"], r["layer"]): r["exposed_comm_ns"]
        for r in run_query(con, "layer_summary").to_dicts()
        if r["comm_ns"]
    }
    assert got == expected
    assert len(got) == 24 and any(v > 0 for v in got.values())


def test_the_cli_takes_patterns_and_rejects_bad_ones(tmp_path: Path) -> None:
    path = write_trace(two_layer_step(), tmp_path / "t.sqlite")
    out = tmp_path / "m.json"
    ok = CliRunner().invoke(
        app,
        [
            "report",
            str(path),
            "-o",
            str(tmp_path / "r.html"),
            "--json",
            str(out),
            "--layer-pattern",
            r"layers\.\d+",
            "-q",
        ],
    )
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(app, ["report", str(path), "--layer-pattern", "layers(["])
    assert bad.exit_code == 2 and bad.stderr.startswith(
        "Error: --layer-pattern 'layers([': not a valid regular expression"
    )
    bad_class = CliRunner().invoke(app, ["report", str(path), "--kernel-class", "network=foo"])
    assert bad_class.exit_code == 2 and "expected CLASS=REGEX" in bad_class.stderr


def test_a_user_kernel_class_wins_over_the_defaults(tmp_path: Path) -> None:
    path = write_trace(
        Scenario(kernels=[Kernel(0, 10, "my_custom_allreduce_kernel"), Kernel(10, 20, GEMM)]),
        tmp_path / "k.sqlite",
    )
    from nsysreport.patterns import parse_patterns

    con = open_trace(path, patterns=parse_patterns(None, None, ["comm=custom_allreduce"], []))
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert row["comm_kernel_count"] == 1 and row["exposed_comm_ns"] == 10


def emit_nvtx_ops(kernels: list[Kernel]) -> list[NvtxRange]:
    """What PyTorch's emit_nvtx adds: nested op ranges with unique texts around each launch."""
    ops = []
    for seq, k in enumerate(kernels):
        assert k.launch is not None
        lo, hi = k.launch
        ops += [
            NvtxRange(lo - 3 + i, hi + 3 - i, f"aten::{op}, seq = {seq}, op_id = {seq * 3 + i}")
            for i, op in enumerate(("linear", "addmm", "mm"))
        ]
    return ops


def test_emit_nvtx_op_ranges_change_no_number_but_the_range_count(tmp_path: Path) -> None:
    plain = two_layer_step()
    busy = Scenario(kernels=plain.kernels, nvtx=[*plain.nvtx, *emit_nvtx_ops(plain.kernels)])
    reports = []
    for name, scenario in (("plain", plain), ("ops", busy)):
        (tmp_path / name).mkdir()
        path = write_trace(scenario, tmp_path / name / "t.sqlite")  # one name: the JSON says it
        reports.append(as_json(build_report(open_trace(path), path)))
    before, after = reports
    # 3 kernels x 3 op ranges, none a step or layer: the loader leaves them in the file, and
    # only the Capture section's count of NVTX ranges grows.
    ranges_before = before["capture"]["facts"]["nvtx_ranges"]
    assert after["capture"]["facts"]["nvtx_ranges"] == ranges_before + 9
    for doc in reports:
        del doc["capture"], doc["traces"]  # the folders differ
    assert after == before


@pytest.mark.parametrize("loader", ["sqlite_scanner", "adbc"])
def test_both_loaders_leave_roleless_ranges_in_the_file_and_count_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: str
) -> None:
    if loader == "adbc":
        monkeypatch.setenv("NSYSREPORT_LOADER", "adbc")
    plain = two_layer_step()
    busy = Scenario(kernels=plain.kernels, nvtx=[*plain.nvtx, *emit_nvtx_ops(plain.kernels)])
    con = open_trace(write_trace(busy, tmp_path / "t.sqlite"))
    # Loaded: the step, both layers, and the never-ended and cross-thread ranges (the Capture
    # section counts those). Left in the file: self_attn and the 9 op ranges.
    loaded = con.execute(
        "SELECT coalesce(s.value, e.text) AS name FROM NVTX_EVENTS AS e "
        "LEFT JOIN StringIds AS s ON s.id = e.textId ORDER BY name"
    ).fetchall()
    assert [name for (name,) in loaded] == [
        "model.layers.0, op_id = 7",
        "model.layers.1",
        "model.layers.7",
        "model.layers.8",
        "step 1",
    ]
    assert con.execute("SELECT count FROM nvtx_unloaded").fetchall() == [(9 + 1,)]


def test_a_layer_exposes_the_part_of_its_copy_that_no_kernel_hides(write_and_open: Any) -> None:
    # Layer 0 launches a copy [100, 300); layer 1's GEMM [200, 260) hides 60 ns of it, so 140
    # ns are exposed, in layer 0. Layer 1 has no copy.
    from nsysreport.synth import Memcpy

    layers = layers_of(
        write_and_open(
            Scenario(
                kernels=[
                    Kernel(20, 90, GEMM, launch=(5, 6)),
                    Kernel(200, 260, GEMM, launch=(60, 61)),
                ],
                memcpys=[Memcpy(100, 300, launch=(10, 11))],
                nvtx=[NvtxRange(0, 50, "model.layers.0"), NvtxRange(55, 100, "model.layers.1")],
            )
        )
    )
    assert layers["model.layers.0"]["exposed_memcpy_ns"] == 140
    assert layers["model.layers.1"]["exposed_memcpy_ns"] == 0


def test_ranges_ending_together_leave_no_layer_open_and_one_starting_then_holds_launches(
    write_and_open: Any,
) -> None:
    # model.layers.1 nests inside model.layers.0 and both end at 100, where model.layers.2
    # begins. A launch at 50 is in the innermost, layers.1; one at 100 in layers.2 (a range
    # holds a launch at its start); one at 250 in none.
    con = write_and_open(
        Scenario(
            kernels=[
                Kernel(1000, 1010, GEMM, launch=(50, 51)),
                Kernel(1020, 1030, GEMM, launch=(100, 101)),
                Kernel(1040, 1050, GEMM, launch=(250, 251)),
            ],
            nvtx=[
                NvtxRange(0, 100, "model.layers.0"),
                NvtxRange(10, 100, "model.layers.1"),
                NvtxRange(100, 200, "model.layers.2"),
            ],
        )
    )
    counts = {name: row["kernel_count"] for name, row in layers_of(con).items()}
    assert counts == {"model.layers.1": 1, "model.layers.2": 1, "(outside layers)": 1}


def test_a_launch_of_no_length_where_two_ranges_end_is_in_neither(write_and_open: Any) -> None:
    # Both ranges end at 100; a launch call [100,100) lies inside neither once they end (the
    # nesting depth is back to 0), though it ends no later than they do.
    con = write_and_open(
        Scenario(
            kernels=[Kernel(1000, 1010, GEMM, launch=(100, 100))],
            nvtx=[NvtxRange(0, 100, "model.layers.0"), NvtxRange(10, 100, "model.layers.1")],
        )
    )
    assert set(layers_of(con)) == {"(outside layers)"}


def test_a_range_of_no_length_holds_no_launch(write_and_open: Any) -> None:
    # At one instant every end precedes every start (a range may end where the next begins),
    # so a range [90,90) closes before it opens: a launch [90,90) is in no layer.
    con = write_and_open(
        Scenario(
            kernels=[Kernel(1000, 1010, GEMM, launch=(90, 90))],
            nvtx=[NvtxRange(60, 80, "model.layers.0"), NvtxRange(90, 90, "model.layers.1")],
        )
    )
    assert set(layers_of(con)) == {"(outside layers)"}


@pytest.mark.parametrize("outer_first", [True, False])
def test_of_two_ranges_pushed_at_one_instant_the_shorter_is_inner_in_either_file_order(
    write_and_open: Any, outer_first: bool
) -> None:
    # model.layers.1 [0,500) nests inside model.layers.0 [0,1000): both pushed at 0 (one clock
    # tick, or a kineto trace's microsecond). A launch at 100 is in layers.1, the innermost;
    # one at 600 in layers.0 alone, which is still open. The file may list either first.
    ranges = [NvtxRange(0, 1000, "model.layers.0"), NvtxRange(0, 500, "model.layers.1")]
    con = write_and_open(
        Scenario(
            kernels=[
                Kernel(1000, 1100, GEMM, launch=(100, 101)),
                Kernel(1200, 1230, GEMM, launch=(600, 601)),
            ],
            nvtx=ranges if outer_first else ranges[::-1],
        )
    )
    layers = layers_of(con)
    assert {name: row["compute_ns"] for name, row in layers.items()} == {
        "model.layers.0": 30,
        "model.layers.1": 100,
    }
