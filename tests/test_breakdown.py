"""Hand-checkable scenarios for gpu_breakdown: every expected number follows from the timeline."""

from __future__ import annotations

from typing import Any

import pytest

from nsysreport.database import connect
from nsysreport.queries import create_views, query_files, run_query
from nsysreport.raw_tables import create_raw_tables
from nsysreport.synth import ApiCall, Kernel, Memcpy, Memset, Scenario

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>>(int)"
)
FLASH = (
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, cutlass::bfloat16_t>>"
    "(flash::Flash_fwd_params)"
)


def breakdown(
    write_and_open: Any, scenario: Scenario, version: str = "2026.2"
) -> list[dict[str, Any]]:
    return run_query(write_and_open(scenario, version), "gpu_breakdown").to_dicts()


def test_comm_overlapping_compute_on_another_stream_is_half_hidden(write_and_open: Any) -> None:
    # gemm [0,100) on stream 7, all-reduce [50,150) on stream 31: 50 ns hidden, 50 exposed.
    (row,) = breakdown(
        write_and_open,
        Scenario(
            kernels=[
                Kernel(10, 110, GEMM, stream=7),
                Kernel(60, 160, NCCL, stream=31),
            ]
        ),
    )
    assert row["span_ns"] == 150 and row["busy_ns"] == 150 and row["idle_ns"] == 0
    assert row["compute_ns"] == 100 and row["gemm_ns"] == 100
    assert row["comm_ns"] == 100 and row["comm_sum_ns"] == 100
    assert row["exposed_comm_ns"] == 50 and row["overlapped_comm_ns"] == 50
    assert row["overlap_pct"] == pytest.approx(50.0)


def test_comm_on_the_compute_stream_is_fully_exposed(write_and_open: Any) -> None:
    (row,) = breakdown(
        write_and_open,
        Scenario(
            kernels=[
                Kernel(10, 110, GEMM),
                Kernel(110, 170, NCCL),
                Kernel(170, 210, ELEMENTWISE),
            ]
        ),
    )
    assert row["exposed_comm_ns"] == 60 and row["overlap_pct"] == 0.0
    assert row["compute_ns"] == 140 and row["span_ns"] == 200 and row["idle_ns"] == 0
    assert row["comm_kernel_count"] == 1 and row["kernel_count"] == 3


def test_back_to_back_kernels_leave_no_gap(write_and_open: Any) -> None:
    con = write_and_open(
        Scenario(
            kernels=[
                Kernel(10, 20, GEMM),
                Kernel(20, 30, GEMM),
                Kernel(30, 40, GEMM),
                Kernel(50, 60, GEMM),
            ]
        )
    )
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert row["busy_ns"] == 40 and row["idle_ns"] == 10 and row["span_ns"] == 50
    (gaps,) = run_query(con, "gap_summary").to_dicts()
    assert gaps["gap_count"] == 1 and gaps["gap_ns"] == 10


def test_kernels_with_end_at_or_before_start_count_but_carry_no_time(write_and_open: Any) -> None:
    (row,) = breakdown(
        write_and_open,
        Scenario(
            kernels=[
                Kernel(10, 20, GEMM),
                Kernel(500, 500, GEMM),  # zero length, far away: must not stretch the span
                Kernel(40, 30, NCCL),  # end before start
                Kernel(25, 35, ELEMENTWISE),
            ]
        ),
    )
    assert row["kernel_count"] == 4 and row["comm_kernel_count"] == 1
    assert row["span_ns"] == 25 and row["busy_ns"] == 20 and row["idle_ns"] == 5
    assert row["comm_ns"] == 0 and row["comm_sum_ns"] == 0 and row["overlap_pct"] is None


def test_copies_under_compute_are_hidden_and_the_rest_exposed(write_and_open: Any) -> None:
    (row,) = breakdown(
        write_and_open,
        Scenario(
            kernels=[Kernel(100, 200, GEMM)],
            memcpys=[Memcpy(150, 260, copy_kind=1)],
            memsets=[Memset(300, 310)],
        ),
    )
    assert row["memcpy_ns"] == 120 and row["exposed_memcpy_ns"] == 70
    assert row["memcpy_count"] == 2 and row["span_ns"] == 210 and row["idle_ns"] == 40
    assert (
        row["compute_ns"] + row["exposed_comm_ns"] + row["exposed_memcpy_ns"] + row["idle_ns"]
        == 210
    )


def test_an_export_with_copies_but_no_kernels_still_reports(write_and_open: Any) -> None:
    (row,) = breakdown(
        write_and_open, Scenario(memcpys=[Memcpy(10, 30), Memcpy(40, 50, copy_kind=2)])
    )
    assert row["kernel_count"] == 0 and row["compute_ns"] == 0
    assert row["memcpy_ns"] == 30 and row["exposed_memcpy_ns"] == 30 and row["idle_ns"] == 10


def test_attention_is_recognised_before_gemm_and_split_k_reduce_is_not_gemm(
    write_and_open: Any,
) -> None:
    (row,) = breakdown(
        write_and_open,
        Scenario(
            kernels=[
                Kernel(10, 20, FLASH),  # carries cutlass:: in its template arguments
                Kernel(
                    30,
                    40,
                    "void splitKreduce_kernel<(int)32, (int)16, float>(cublasSplitKParams<float>)",
                ),
                Kernel(50, 60, "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"),
            ]
        ),
    )
    assert row["attention_ns"] == 10 and row["gemm_ns"] == 10 and row["compute_ns"] == 30


def test_processes_reusing_correlation_ids_stay_separate_gpus(write_and_open: Any) -> None:
    rows = breakdown(
        write_and_open,
        Scenario(
            kernels=[
                Kernel(10, 20, GEMM, pid=100, device=0),
                Kernel(10, 40, NCCL, pid=200, device=1),
            ]
        ),
    )
    assert [(r["pid"], r["device_id"], r["span_ns"], r["exposed_comm_ns"]) for r in rows] == [
        (100, 0, 10, 0),
        (200, 1, 30, 30),
    ]


@pytest.mark.parametrize("version", ["2022.2", "2024.5", "2026.2"])
def test_every_export_schema_version_gives_the_same_breakdown(
    write_and_open: Any, version: str
) -> None:
    scenario = Scenario(
        kernels=[Kernel(10, 110, GEMM), Kernel(60, 160, NCCL, stream=31)],
        memcpys=[Memcpy(200, 220)],
    )
    (row,) = breakdown(write_and_open, scenario, version)
    assert (row["span_ns"], row["exposed_comm_ns"], row["exposed_memcpy_ns"], row["idle_ns"]) == (
        210,
        50,
        20,
        40,
    )


def test_gap_percentiles_histogram_and_top_gaps_with_their_neighbours(write_and_open: Any) -> None:
    # Gaps of 8 µs, 10 µs (exactly on a bucket edge) and 2 ms between four kernels.
    con = write_and_open(
        Scenario(
            kernels=[
                Kernel(1_000, 2_000, GEMM),
                Kernel(10_000, 11_000, NCCL),
                Kernel(21_000, 22_000, ELEMENTWISE),
                Kernel(2_022_000, 2_023_000, GEMM, launch=(2_021_000, 2_021_500)),
            ],
            api_calls=[ApiCall(21_500, 2_020_000, "cudaDeviceSynchronize_v3020")],
        )
    )
    (summary,) = run_query(con, "gap_summary").to_dicts()
    assert (summary["gap_count"], summary["p50_ns"], summary["p99_ns"], summary["max_ns"]) == (
        3,
        10_000,
        2_000_000,
        2_000_000,
    )
    hist = {h["bucket"]: h["gap_count"] for h in run_query(con, "gap_histogram").to_dicts()}
    assert hist == {"<10us": 1, "10-100us": 1, "100us-1ms": 0, "1-10ms": 1, ">=10ms": 0}
    top = run_query(con, "gap_top", {"top": 2}).to_dicts()
    assert [(g["gap_rank"], g["start_ns"], g["duration_ns"]) for g in top] == [
        (1, 22_000, 2_000_000),
        (2, 11_000, 10_000),
    ]
    assert (top[0]["before_name"], top[0]["after_name"]) == (ELEMENTWISE, GEMM)
    assert top[0]["sync_call"] == "cudaDeviceSynchronize"
    assert (top[1]["before_class"], top[1]["after_class"], top[1]["sync_call"]) == (
        "comm",
        "other",
        None,
    )


def test_backtrace_duplicates_of_launch_calls_are_not_double_counted(write_and_open: Any) -> None:
    con = write_and_open(
        Scenario(
            kernels=[Kernel(100, 200, GEMM), Kernel(300, 400, GEMM)],
            api_calls=[ApiCall(150, 350, "cudaStreamSynchronize_v3020")],
            backtrace_duplicates=True,
        )
    )
    assert con.execute("SELECT count(*) FROM launch").fetchone() == (3,)
    (gap,) = run_query(con, "gap_top").to_dicts()
    assert gap["sync_call"] == "cudaStreamSynchronize"


def test_of_sync_calls_overlapping_a_gap_equally_the_later_one_names_its_cause(
    write_and_open: Any,
) -> None:
    # Gap [200, 1000) before a kernel launched at 900: a blocking copy [150, 300) and a stream
    # sync [800, 900) on the launching thread each overlap it by 100 ns. The later one, the
    # last thing the thread did before launching, names it, whichever the file lists first.
    con = write_and_open(
        Scenario(
            kernels=[Kernel(100, 200, GEMM), Kernel(1_000, 1_100, GEMM, launch=(900, 901))],
            api_calls=[
                ApiCall(150, 300, "cudaMemcpy_v3020"),
                ApiCall(800, 900, "cudaStreamSynchronize_v3020"),
            ],
        )
    )
    (gap,) = run_query(con, "gap_top").to_dicts()
    assert (gap["start_ns"], gap["duration_ns"]) == (200, 800)
    assert gap["sync_call"] == "cudaStreamSynchronize"
    spans = run_query(con, "perfetto_span").to_dicts()
    assert [s["name"] for s in spans if s["track"] == "idle gap"] == [
        "idle: host in cudaStreamSynchronize"
    ]


def test_top_kernels_rank_names_within_each_class(write_and_open: Any) -> None:
    con = write_and_open(
        Scenario(
            kernels=[Kernel(0, 30, GEMM), Kernel(40, 50, GEMM), Kernel(60, 100, ELEMENTWISE)],
            memcpys=[Memcpy(110, 115)],
        )
    )
    rows = run_query(con, "kernel_top").to_dicts()
    got = [(r["class"], r["name_rank"], r["instances"], r["total_ns"], r["max_ns"]) for r in rows]
    assert got == [
        ("gemm", 1, 2, 40, 30),
        ("memcpy", 1, 1, 5, 5),
        ("other", 1, 1, 40, 40),
    ]
    assert rows[0]["pct_of_class"] == 100.0 and rows[0]["mean_ns"] == 20.0


@pytest.mark.parametrize("query", query_files(), ids=lambda q: q.name)
def test_every_query_on_an_export_without_tables_returns_no_rows(query: Any) -> None:
    con = connect()
    create_raw_tables(con)
    create_views(con)
    assert run_query(con, query.name).height == 0


def test_an_interval_inside_another_adds_nothing_to_its_group(write_and_open: Any) -> None:
    # One group's intervals on three streams, the second inside the first: [0,100), [10,50),
    # [60,120). The union is [0,120) = 120 ns (the third reaches past the first's end, not
    # just past the second's). Compute: elementwise inside a GEMM, a later GEMM; comm: the
    # same shape of all-reduces 1000 ns later, with nothing under them.
    kernels = [
        Kernel(0, 100, GEMM, stream=7),
        Kernel(10, 50, ELEMENTWISE, stream=8),
        Kernel(60, 120, GEMM, stream=9),
        Kernel(1000, 1100, NCCL, stream=31),
        Kernel(1010, 1050, NCCL, stream=32),
        Kernel(1060, 1120, NCCL, stream=33),
    ]
    con = write_and_open(Scenario(kernels=kernels))
    (layer,) = run_query(con, "layer_summary").to_dicts()
    assert layer["layer"] == "(outside layers)"
    assert layer["compute_ns"] == 120 and layer["gemm_ns"] == 120
    assert layer["comm_ns"] == 120 and layer["exposed_comm_ns"] == 120
    (op,) = run_query(con, "collective_summary").to_dicts()
    assert op["op"] == "AllReduce" and op["total_ns"] == 200 and op["exposed_ns"] == 120
