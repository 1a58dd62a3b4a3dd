"""The timeline's window and pieces (timeline_window, step_span, activity_middle queries)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from nsysreport.errors import OptionError
from nsysreport.queries import run_query
from nsysreport.report_builder import build_report
from nsysreport.sections.timeline import DEFAULT_ACTIVITIES, Timeline
from nsysreport.synth import Kernel, Memcpy, NvtxRange, Scenario

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
NORM = "rms_norm_kernel"
Open = Callable[[Scenario], duckdb.DuckDBPyConnection]


def three_steps() -> Scenario:
    """Two GPUs (GPU 1 runs 100 ns behind GPU 0), three steps starting at t = 10k, 20k, 30k.

    Each step on each GPU: GEMM [t, t+1000) on stream 7; all-reduce [t+800, t+1500) on stream 31,
    so [t+1000, t+1500) is exposed communication (500 ns); nothing runs in [t+1500, t+2000) (a
    500 ns gap); a copy [t+2000, t+2200). Then step 1 adds a norm kernel [t+2200, t+3000) and
    step 2 one at [t+2200, t+2500): the steps last 2200, 3000 and 2500 ns, so the median step by
    length is step 2, not the middle one in time.
    """
    kernels, memcpys, nvtx = [], [], []
    for gpu in range(2):
        pid, lag = 100 + gpu, 100 * gpu
        for step, extra in enumerate((0, 800, 300)):
            t = 10_000 * (step + 1) + lag

            def launch(i: int, t: int = t) -> tuple[int, int]:
                return (t - 190 + 10 * i, t - 185 + 10 * i)

            kernels.append(Kernel(t, t + 1000, GEMM, pid=pid, device=gpu, launch=launch(0)))
            kernels.append(
                Kernel(t + 800, t + 1500, NCCL, pid=pid, device=gpu, stream=31, launch=launch(1))
            )
            memcpys.append(Memcpy(t + 2000, t + 2200, pid=pid, device=gpu, launch=launch(2)))
            if extra:
                end = t + 2200 + extra
                kernels.append(Kernel(t + 2200, end, NORM, pid=pid, device=gpu, launch=launch(3)))
            nvtx.append(NvtxRange(t - 200, t - 100, f"step {step}", pid=pid))
    return Scenario(kernels=kernels, memcpys=memcpys, nvtx=nvtx)


@pytest.fixture
def con(write_and_open: Open) -> duckdb.DuckDBPyConnection:
    return write_and_open(three_steps())


def build_timeline(
    con: duckdb.DuckDBPyConnection,
    step: str | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> Timeline | None:
    """The timeline of the report of the trace loaded in `con` (its GPUs ranked by pid)."""
    return build_report(
        con, Path("t.sqlite"), timeline_step=step, timeline_range=(start_ns, end_ns)
    ).timeline


def test_steps_are_matched_across_gpus_by_their_order(con: duckdb.DuckDBPyConnection) -> None:
    rows = run_query(con, "step_span").rows()
    # step_ordinal, name, step_index, gpus, start_ns, end_ns, duration_ns, max_step_time_ns
    assert rows == [
        (1, "step 0", 0, 2, 10_000, 12_300, 2_300, 2_200),
        (2, "step 1", 1, 2, 20_000, 23_100, 3_100, 3_000),
        (3, "step 2", 2, 2, 30_000, 32_600, 2_600, 2_500),
    ]


def test_by_default_the_timeline_shows_the_median_step_on_every_gpu(
    con: duckdb.DuckDBPyConnection,
) -> None:
    t = build_timeline(con)
    assert t is not None
    assert (t.basis, t.step_name, t.steps) == ("median step", "step 2", 3)
    assert (t.start_ns, t.end_ns, t.duration_ns) == (30_000, 32_600, 2_600)
    assert t.offset_ns == 30_000 - 10_000  # from the first activity of the trace
    gpu0, gpu1 = t.gpus
    assert [lane.stream_id for lane in gpu0.lanes] == [7, 31]
    stream7, stream31 = gpu0.lanes
    # Pieces count from the window start: GPU 0 starts at it, GPU 1 100 ns later.
    assert stream7.pieces == {
        "gemm": ((0, 1000),),
        "memcpy": ((2000, 2200),),
        "other": ((2200, 2500),),
    }
    assert stream31.pieces == {"comm": ((800, 1500),)}
    assert gpu0.exposed_comm == ((1000, 1500),) and gpu0.gaps == ((1500, 2000),)
    # GPU 1's idle time since its step 1 ended reaches into the window (it starts later).
    assert gpu1.exposed_comm == ((1100, 1600),) and gpu1.gaps == ((0, 100), (1600, 2100))
    assert gpu0.exposed_comm_ns == gpu0.idle_ns == 500
    assert gpu0.exposed_comm_pct == pytest.approx(100 * 500 / 2600)
    assert t.exposed_comm_mean_pct == pytest.approx(100 * 500 / 2600)
    assert (t.most_exposed_rank, t.longest_gap_ns) == (0, 500)
    assert t.rows == t.window_rows == (4 + 1 + 1) + (4 + 1 + 2) and not t.truncated
    assert t.window_ns == t.duration_ns


def test_a_step_is_chosen_by_name_or_number(con: duckdb.DuckDBPyConnection) -> None:
    by_name = build_timeline(con, step="step 1")
    by_number = build_timeline(con, step="1")
    assert by_name is not None and by_number is not None
    assert by_name == by_number
    assert (by_name.basis, by_name.start_ns, by_name.end_ns) == ("chosen step", 20_000, 23_100)


def test_an_unknown_step_names_the_ones_there_are(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(OptionError, match=r"'step 9' is not in .* step 0, step 1, step 2$"):
        build_timeline(con, step="step 9")


def test_a_time_range_counts_from_the_first_activity_and_clips_what_crosses_it(
    con: duckdb.DuckDBPyConnection,
) -> None:
    t = build_timeline(con, start_ns=500, end_ns=1_200)
    assert t is not None
    assert (t.basis, t.start_ns, t.end_ns) == ("chosen range", 10_500, 11_200)
    gpu0 = t.gpus[0]
    assert gpu0.lanes[0].pieces == {"gemm": ((0, 500),)}  # GEMM [10000, 11000) clipped
    assert gpu0.lanes[1].pieces == {"comm": ((300, 700),)}  # all-reduce [10800, 11500)
    assert gpu0.exposed_comm == ((500, 700),)
    with pytest.raises(OptionError, match="must come after the start"):
        build_timeline(con, start_ns=900, end_ns=900)


def test_the_window_query_is_capped_and_says_how_much_it_left_out(
    con: duckdb.DuckDBPyConnection,
) -> None:
    rows = run_query(con, "timeline_window", {"max_rows": 5}).to_dicts()
    # Per GPU: 11 activities, 3 exposed stretches, 3 gaps in steps and 2 between them.
    assert len(rows) == 5 and {r["window_rows"] for r in rows} == {2 * (11 + 3 + 3 + 2)}
    # The cut keeps the earliest pieces, whatever the GPU: all before GPU 0's first gap.
    assert max(r["start_ns"] for r in rows) <= 11_000
    # Between steps the GPUs are idle: those gaps are in the window too.
    gaps = run_query(con, "timeline_window", {"start_ns": 12_000, "end_ns": 20_000}).to_dicts()
    assert [(g["kind"], g["pid"], g["start_ns"], g["end_ns"]) for g in gaps] == [
        ("activity", 100, 12_000, 12_200),
        ("gap", 100, 12_200, 20_000),
        ("activity", 101, 12_100, 12_300),
        ("gap", 101, 12_000, 12_100),  # the end of its gap in step 0
        ("gap", 101, 12_300, 20_000),
    ]


def test_an_empty_window_has_no_rows(con: duckdb.DuckDBPyConnection) -> None:
    assert run_query(con, "timeline_window", {"start_ns": 0, "end_ns": 9_000}).height == 0


def test_without_steps_a_small_trace_is_shown_whole(write_and_open: Open) -> None:
    con = write_and_open(Scenario(kernels=[Kernel(1_000, 2_000, GEMM), Kernel(2_500, 2_500, NORM)]))
    t = build_timeline(con)
    assert t is not None
    assert (t.basis, t.start_ns, t.end_ns, t.step_name) == ("whole trace", 1_000, 2_000, None)
    # The kernel with end <= start carries no time: it is not drawn.
    assert t.gpus[0].lanes[0].pieces == {"gemm": ((0, 1_000),)}


def test_without_steps_a_large_trace_shows_a_window_of_fixed_size_from_its_middle(
    write_and_open: Open,
) -> None:
    count = 5 * DEFAULT_ACTIVITIES
    kernels = [Kernel(1_000 * i, 1_000 * i + 600, GEMM) for i in range(count)]
    con = write_and_open(Scenario(kernels=kernels))
    (middle,) = run_query(con, "activity_middle", {"activities": DEFAULT_ACTIVITIES}).to_dicts()
    lo = (count - DEFAULT_ACTIVITIES) // 2
    assert middle == {
        "first_ns": 0,
        "last_ns": 1_000 * (count - 1) + 600,
        "activity_count": count,
        "start_ns": 1_000 * lo,
        "end_ns": 1_000 * (lo + DEFAULT_ACTIVITIES),
    }
    # What a step or a chosen range counts from: the same span, without the sort.
    (extent,) = run_query(con, "activity_extent").to_dicts()
    assert extent == {"first_ns": 0, "last_ns": 1_000 * (count - 1) + 600, "activity_count": count}
    t = build_timeline(con)
    assert t is not None and t.basis == "middle of the trace"
    assert len(t.gpus[0].lanes[0].pieces["gemm"]) == DEFAULT_ACTIVITIES


def test_a_trace_without_gpu_activity_has_no_timeline(write_and_open: Open) -> None:
    con = write_and_open(Scenario(kernels=[Kernel(5, 5, GEMM)]))
    assert run_query(con, "activity_middle").height == 0
    assert run_query(con, "activity_extent").height == 0
    assert build_timeline(con) is None


def test_a_window_with_too_much_in_it_is_drawn_up_to_where_the_cap_cut_it(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("nsysreport.report_builder.MAX_ROWS", 5)
    t = build_timeline(con, step="step 0")
    assert t is not None and t.truncated
    # The five earliest pieces start at 10000 (GEMMs), 10800 and 10900 (all-reduces) and 11000
    # (GPU 0's exposed stretch): everything starting before 11000 is there, so that is the end.
    assert (t.window_ns, t.duration_ns, t.end_ns) == (2_300, 1_000, 11_000)
    assert (t.rows, t.window_rows) == (4, 11)
    gpu0, gpu1 = t.gpus
    assert [lane.pieces for lane in gpu0.lanes] == [
        {"gemm": ((0, 1000),)},
        {"comm": ((800, 1000),)},
    ]
    assert [lane.pieces for lane in gpu1.lanes] == [
        {"gemm": ((100, 1000),)},
        {"comm": ((900, 1000),)},
    ]
    assert gpu0.exposed_comm == gpu0.gaps == ()
