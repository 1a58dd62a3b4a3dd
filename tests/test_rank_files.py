"""Per-rank exports: each file holds one rank's rows on its own clock, with a known offset."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.synth import Gpu, Kernel, NvtxRange, Scenario, write_trace
from nsysreport.synth.rank_files import (
    BASE_UTC_NS,
    app,
    injected_clocks,
    split_ranks,
    true_offsets,
    write_rank_files,
)
from nsysreport.synth.simulate import TensorParallelConfig, tensor_parallel

SMALL = TensorParallelConfig(tp=4, layers_simulated=2, steps=2, straggler_rank=1,
                             straggler_slowdown=1.5)  # fmt: skip
SHIFTS = [0, 1_000_000, -2_500_000, 7]
ERRORS = [300_000, -1_200_000, 0, 2_000_000]


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("ranks")
    hosts = ["node0", "node0", "node1", "node1"]
    return write_rank_files(tensor_parallel(SMALL), folder, SHIFTS, ERRORS, hosts)


KERNELS = """
SELECT k.start, k."end", s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN StringIds s ON s.id = k.demangledName ORDER BY 1, 2, 3
"""


def test_each_file_holds_one_gpu_and_exactly_its_ranks_kernels_shifted(
    files: list[Path],
) -> None:
    whole = list(tensor_parallel(SMALL).kernels)
    assert [f.name for f in files] == [f"rank{r}.sqlite" for r in range(4)]
    for rank, (path, shift) in enumerate(zip(files, SHIFTS, strict=True)):
        assert query(path, "SELECT id FROM TARGET_INFO_GPU") == [(rank,)]
        assert query(path, "SELECT DISTINCT globalPid >> 24 & 0xFFFFFF FROM "
                           "CUPTI_ACTIVITY_KIND_KERNEL") == [(1000 + rank,)]  # fmt: skip
        mine = sorted(
            (k.start + shift, k.end + shift, k.name) for k in whole if k.pid == 1000 + rank
        )
        assert query(path, KERNELS) == mine


def test_the_first_kernel_of_a_rank_moves_by_exactly_its_shift(files: list[Path]) -> None:
    whole = list(tensor_parallel(SMALL).kernels)
    for rank, (path, shift) in enumerate(zip(files, SHIFTS, strict=True)):
        first = min(k.start for k in whole if k.pid == 1000 + rank)
        assert query(path, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL") == [
            (first + shift,)
        ]


def test_launches_nvtx_and_copies_move_with_the_kernels(files: list[Path]) -> None:
    whole = tensor_parallel(SMALL)
    ranges, calls, copies = list(whole.nvtx), list(whole.api_calls), list(whole.memcpys)
    kernels = [k for k in whole.kernels if k.pid == 1002]
    path, shift = files[2], SHIFTS[2]
    nvtx = sorted((r.start + shift, r.end and r.end + shift) for r in ranges if r.pid == 1002)
    assert query(path, 'SELECT start, "end" FROM NVTX_EVENTS WHERE eventType = 59 '
                       "ORDER BY 1, 2") == nvtx  # fmt: skip
    launches = [(k.launch[0] + shift, k.launch[1] + shift) for k in kernels if k.launch]
    runtime = set(query(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_RUNTIME'))
    assert runtime >= set(launches)
    syncs = [(a.start + shift, a.end + shift) for a in calls if a.pid == 1002]
    assert runtime >= set(syncs)
    mine = sorted((m.start + shift, m.end + shift) for m in copies if m.pid == 1002)
    assert query(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY 1') == mine


def test_each_file_names_its_rank_host_and_simulation(files: list[Path]) -> None:
    for rank, path in enumerate(files):
        env = query(path, "SELECT value FROM META_DATA_CAPTURE "
                          "WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'")  # fmt: skip
        assert env == [(f'RANK="{rank}"',)]
        host = query(path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
        assert host == [("node0" if rank < 2 else "node1",)]
        simulated = "SELECT count(*) FROM META_DATA_EXPORT WHERE name = 'NSYSREPORT_SIMULATED'"
        assert query(path, simulated) == [(1,)]


def test_session_start_puts_time_zero_at_base_minus_shift_plus_error(files: list[Path]) -> None:
    for path, shift, error in zip(files, SHIFTS, ERRORS, strict=True):
        (epoch, clock, first), = query(
            path,
            "SELECT utcEpochNs, systemClockNs, (SELECT min(start) FROM NVTX_EVENTS)"
            " FROM TARGET_INFO_SESSION_START_TIME",
        )  # fmt: skip
        assert clock == first  # the anchor is the file's first event, as synth writes it
        assert epoch - clock == BASE_UTC_NS - shift + error


@pytest.mark.parametrize("version", ["2022.2", "2024.5"])
def test_without_system_clock_the_epoch_is_that_of_time_zero(tmp_path: Path, version: str) -> None:
    paths = write_rank_files(tensor_parallel(SMALL), tmp_path, SHIFTS, ERRORS, version=version)
    for path, shift, error in zip(paths, SHIFTS, ERRORS, strict=True):
        assert query(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME") == [
            (BASE_UTC_NS - shift + error,)
        ]


def test_utc_at_zero_gives_the_same_epoch_for_an_event_in_every_version(tmp_path: Path) -> None:
    # A kernel at t = 5000 on a clock whose 0 is 2026-01-15 midnight + 1 s: its epoch is the
    # same whether the reader anchors on systemClockNs (2026.2) or on 0 (older schemas).
    for version in ("2026.2", "2024.5", "2022.2"):
        scenario = Scenario(kernels=[Kernel(5_000, 6_000, "k")], utc_at_zero_ns=BASE_UTC_NS + 10**9)
        path = write_trace(scenario, tmp_path / f"{version}.sqlite", version)
        columns = [r[1] for r in query(path, "PRAGMA table_info(TARGET_INFO_SESSION_START_TIME)")]
        anchor = "systemClockNs" if "systemClockNs" in columns else "0"
        sql = f"SELECT utcEpochNs - {anchor}, utcTime FROM TARGET_INFO_SESSION_START_TIME"
        assert query(path, sql) == [(BASE_UTC_NS + 10**9, "2026-01-15T00:00:01")]


def test_the_rank_variable_can_be_renamed_or_left_out(tmp_path: Path) -> None:
    whole = tensor_parallel(SMALL)
    env = "SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'"
    slurm = write_rank_files(whole, tmp_path / "a", SHIFTS, rank_env="SLURM_PROCID", stem="r")
    assert slurm[3].name == "r3.sqlite"
    assert query(slurm[3], env) == [('SLURM_PROCID="3"',)]
    bare = write_rank_files(whole, tmp_path / "b", SHIFTS, rank_env=None)
    assert query(bare[3], env) == []


def test_ranks_follow_sorted_pids_and_other_processes_are_dropped() -> None:
    scenario = Scenario(
        kernels=[Kernel(10, 20, "a", pid=7, device=1), Kernel(30, 40, "b", pid=3, device=0),
                 Kernel(50, 60, "c", pid=99, device=0)],
        nvtx=iter([NvtxRange(5, None, "open", pid=7)]),
        gpus=[Gpu(1, pid=7), Gpu(0, pid=3)],
    )  # fmt: skip
    first, second = split_ranks(scenario, [100, -5])
    assert list(first.kernels) == [Kernel(130, 140, "b", pid=3, device=0)]
    assert list(second.kernels) == [Kernel(5, 15, "a", pid=7, device=1)]
    assert list(second.nvtx) == [NvtxRange(0, None, "open", pid=7)]
    assert (first.utc_at_zero_ns, second.utc_at_zero_ns) == (BASE_UTC_NS - 100, BASE_UTC_NS + 5)


def test_one_shift_per_rank_is_required() -> None:
    with pytest.raises(ValueError, match="clock_shift_ns has 3 values for 4 ranks"):
        split_ranks(tensor_parallel(SMALL), [0, 1, 2])
    with pytest.raises(ValueError, match="session_error_ns has 1 values"):
        split_ranks(tensor_parallel(SMALL), SHIFTS, [5])
    with pytest.raises(ValueError, match="hosts has 2 names"):
        split_ranks(tensor_parallel(SMALL), SHIFTS, hosts=["a", "b"])


def test_true_offsets_put_every_file_on_file_zeros_clock() -> None:
    # File f's time t is true time t - shift[f]; on file 0's clock that is t - shift[f] + shift[0].
    assert true_offsets([100, 40, -60]) == [0, 60, 160]


def test_injected_clocks_are_distinct_and_errors_are_hundreds_of_us_to_ms() -> None:
    shifts, errors = injected_clocks(8, seed=0)
    assert len(set(shifts)) == 8 and any(s < 0 for s in shifts)
    assert all(200_000 <= abs(e) < 3_000_000 for e in errors)
    assert injected_clocks(8, seed=0) == (shifts, errors)


def test_the_command_writes_one_file_per_rank_and_prints_the_truth(tmp_path: Path) -> None:
    run = CliRunner().invoke(app, [str(tmp_path), "--tp", "2", "--straggler-rank", "1"])
    assert run.exit_code == 0, run.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.sqlite", "rank1.sqlite"]
    lines = run.output.splitlines()
    shifts, errors = injected_clocks(2, seed=0)
    assert lines[2].split()[1:] == [
        "node1", str(shifts[1]), str(errors[1]), str(shifts[0] - shifts[1]),
        str(shifts[0] - shifts[1] + errors[1] - errors[0]),
    ]  # fmt: skip
