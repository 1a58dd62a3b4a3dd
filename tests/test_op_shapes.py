"""Operator calls with input shapes from an nsys export: PyTorch's emit_nvtx(record_shapes=True)
ranges (`aten::mm, seq = 12, op_id = 345, sizes = [[64, 128], [128, 256]], ...`) fill op_call,
in the SQLite and the Parquet form and with either SQLite loader, and change no other number.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

from nsysreport.database import connect
from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.report_builder import build_report
from nsysreport.sqlite_copy import copy_tables
from nsysreport.synth import (
    GLOBAL_VID,
    Kernel,
    NvtxRange,
    Scenario,
    emit_nvtx_op,
    emit_nvtx_text,
    write_trace,
)
from nsysreport.synth.parquet import write_parquet_dir
from nsysreport.trace_file import inspect_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"
PID = 100
GTID = GLOBAL_VID | PID << 24 | PID  # the main thread of process 100, as the writer numbers it
MM_TEXT = "aten::mm, seq = 12, op_id = 345, sizes = [[64, 128], [128, 256]]"


def step_with_gemms() -> Scenario:
    """One step [0, 10000): a GEMM launched at [500, 600) inside `aten::mm` [490, 610) (the op
    emit_nvtx records around the launch), and a second GEMM launched at [2500, 2600)."""
    first = Kernel(1_000, 2_000, GEMM, pid=PID, launch=(500, 600))
    second = Kernel(3_000, 4_000, GEMM, pid=PID, launch=(2_500, 2_600))
    return Scenario(
        kernels=[first, second],
        nvtx=[
            NvtxRange(0, 10_000, "step 1", pid=PID),
            emit_nvtx_op(first, "aten::mm", [[64, 128], [128, 256]], seq=12, op_id=345, margin=10),
        ],
    )


def op_calls(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    return con.execute(
        'SELECT globalTid, "start", "end", name, dims, types, concrete, source FROM op_call '
        'ORDER BY "start", row_id'
    ).fetchall()


def sqlite_rowid(path: Path, text: str) -> int:
    with sqlite3.connect(path) as src:
        (rowid,) = src.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = ?", [text]).fetchone()
    return int(rowid)


def test_the_synthetic_writer_writes_emit_nvtx_text_as_pytorch_does() -> None:
    # getNvtxStr (torch/csrc/profiler/util.cpp): scalar inputs' sizes are [], input op ids
    # are written (id,output) without a space; no seq when autograd gives none.
    assert emit_nvtx_text(
        "aten::addmm", [[256], [64, 128], [128, 256], [], []], 12, 345, [(342, 0), (343, 0)]
    ) == (
        "aten::addmm, seq = 12, op_id = 345, sizes = [[256], [64, 128], [128, 256], [], []], "
        "input_op_ids = [(342,0), (343,0)]"
    )
    assert emit_nvtx_text("aten::bmm", [[2, 3, 4]], None, 9) == (
        "aten::bmm, op_id = 9, sizes = [[2, 3, 4]]"
    )
    assert emit_nvtx_op(Kernel(100, 200, GEMM, launch=(50, 60)), "aten::mm", [[1, 2]]) == (
        NvtxRange(49, 61, "aten::mm, seq = 0, op_id = 1, sizes = [[1, 2]]")
    )


@pytest.mark.parametrize("form", ["sqlite", "parquetdir"])
def test_an_mm_range_around_a_launch_loads_one_op_call_with_its_shapes_and_times(
    tmp_path: Path, form: str
) -> None:
    path = write_trace(step_with_gemms(), tmp_path / "t.sqlite")
    row_id = sqlite_rowid(path, MM_TEXT)
    if form == "parquetdir":
        path = write_parquet_dir(path, tmp_path / "t_pqtdir")
    con = open_trace(path)
    assert op_calls(con) == [
        (GTID, 490, 610, "aten::mm", "[[64, 128], [128, 256]]", None, None, "nvtx")
    ]
    assert con.execute("SELECT row_id FROM op_call").fetchall() == [(row_id,)]
    # The range plays no role: it stays out of NVTX_EVENTS and is counted as left in the file.
    assert con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone() == (1,)
    assert con.execute("SELECT count FROM nvtx_unloaded").fetchall() == [(1,)]


def test_scalar_inputs_and_a_missing_seq_keep_their_empty_sizes(tmp_path: Path) -> None:
    k = Kernel(1_000, 2_000, GEMM, pid=PID, launch=(500, 600))
    addmm = emit_nvtx_text("aten::addmm", [[256], [64, 128], [128, 256], [], []], 3, 7, [(5, 0)])
    bmm = emit_nvtx_text("aten::bmm", [[2, 3, 4], [2, 4, 5]], None, 8)  # no seq
    scenario = Scenario(
        kernels=[k], nvtx=[NvtxRange(400, 700, addmm, pid=PID), NvtxRange(450, 650, bmm, pid=PID)]
    )
    con = open_trace(write_trace(scenario, tmp_path / "t.sqlite"))
    assert [(name, dims) for _, _, _, name, dims, *_ in op_calls(con)] == [
        ("aten::addmm", "[[256], [64, 128], [128, 256], [], []]"),
        ("aten::bmm", "[[2, 3, 4], [2, 4, 5]]"),
    ]
    # dims is JSON: DuckDB (and json.loads) read it as a list of integer lists.
    assert con.execute("SELECT dims::BIGINT[][] FROM op_call ORDER BY start").fetchall() == [
        ([[256], [64, 128], [128, 256], [], []],),
        ([[2, 3, 4], [2, 4, 5]],),
    ]


def not_op_calls() -> list[NvtxRange]:
    """Ranges around the launch at [500, 600) that are no op call with shapes: another op, a
    prefix of one, no sizes, not at the text's start, never popped, popped on another thread,
    sizes cut off or not integers or empty, a registered string."""
    sizes = ", sizes = [[64, 128], [128, 256]]"
    return [
        NvtxRange(400, 700, "aten::add_, seq = 1, op_id = 2, sizes = [[4], [4], []]", pid=PID),
        NvtxRange(401, 699, "aten::mm_fake, seq = 1, op_id = 3" + sizes, pid=PID),
        NvtxRange(402, 698, "aten::mm, seq = 1, op_id = 4", pid=PID),  # recorded without shapes
        NvtxRange(403, 697, "my aten::mm, op_id = 5" + sizes, pid=PID),
        NvtxRange(404, None, "aten::mm, seq = 2, op_id = 6" + sizes, pid=PID),  # never popped
        NvtxRange(405, 695, "aten::mm, seq = 3, op_id = 7" + sizes, pid=PID, end_tid=PID + 1),
        NvtxRange(406, 694, "aten::mm, seq = 4, op_id = 8, sizes = [[1, 2]", pid=PID),  # cut off
        NvtxRange(407, 693, "aten::mm, seq = 5, op_id = 9, sizes = [[1, 2], [x]]", pid=PID),
        NvtxRange(408, 692, "aten::mm, seq = 6, op_id = 10, sizes = ", pid=PID),
        NvtxRange(409, 691, "aten::mm, seq = 7, op_id = 11" + sizes, pid=PID, registered=True),
    ]


@pytest.mark.parametrize("loader", ["sqlite_scanner", "adbc", "parquetdir"])
def test_other_ops_ranges_without_shapes_open_cross_thread_or_malformed_are_no_op_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: str
) -> None:
    if loader == "adbc":
        monkeypatch.setenv("NSYSREPORT_LOADER", "adbc")
    k = Kernel(1_000, 2_000, GEMM, pid=PID, launch=(500, 600))
    path = write_trace(Scenario(kernels=[k], nvtx=not_op_calls()), tmp_path / "t.sqlite")
    if loader == "parquetdir":
        path = write_parquet_dir(path, tmp_path / "t_pqtdir")
    con = open_trace(path)  # the malformed sizes are skipped, never an error
    assert op_calls(con) == []
    # Unchanged by op_call: the open, cross-thread and registered ranges are loaded (they are
    # no roleless range), the six others are left in the file.
    assert con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone() == (3,)
    assert con.execute("SELECT count FROM nvtx_unloaded").fetchall() == [(7,)]


@pytest.mark.parametrize("roles", [True, False])
def test_both_sqlite_loaders_give_the_same_op_calls_with_or_without_the_role_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, roles: bool
) -> None:
    scenario = step_with_gemms()
    path = write_trace(
        Scenario(kernels=scenario.kernels, nvtx=[*scenario.nvtx, *not_op_calls()]),
        tmp_path / "t.sqlite",
    )
    from nsysreport.patterns import Patterns

    pattern = Patterns().role_pattern() if roles else None
    got = {}
    for loader in ("sqlite_scanner", "adbc"):
        if loader == "adbc":
            monkeypatch.setenv("NSYSREPORT_LOADER", "adbc")
        con = connect()
        assert copy_tables(con, path, inspect_trace(path), nvtx_roles=pattern) == loader
        got[loader] = con.execute("SELECT * FROM op_call ORDER BY ALL").fetchall()
        loaded = con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()
        assert loaded == ((4,) if roles else (12,))  # all 12 rows without the filter
    assert got["sqlite_scanner"] == got["adbc"]
    assert [row[4] for row in got["adbc"]] == ["aten::mm"]


def test_a_range_that_plays_a_role_too_stays_loaded_and_is_an_op_call(tmp_path: Path) -> None:
    from nsysreport.patterns import parse_patterns

    path = write_trace(step_with_gemms(), tmp_path / "t.sqlite")
    patterns = parse_patterns(None, r"aten::mm\b", [], [])
    con = open_trace(path, patterns=patterns)
    assert [r[3] for r in op_calls(con)] == ["aten::mm"]
    assert con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone() == (2,)
    assert con.execute("SELECT count FROM nvtx_unloaded").fetchall() == [(0,)]


def test_emit_nvtx_op_ranges_with_shapes_change_no_number_but_the_range_count(
    tmp_path: Path,
) -> None:
    plain = step_with_gemms()
    plain = Scenario(kernels=plain.kernels, nvtx=plain.nvtx[:1])  # the step alone
    busy = step_with_gemms()
    reports = []
    for name, scenario in (("plain", plain), ("ops", busy)):
        (tmp_path / name).mkdir()
        path = write_trace(scenario, tmp_path / name / "t.sqlite")  # one name: the JSON says it
        con = open_trace(path)
        reports.append(as_json(build_report(con, path)))
    before, after = reports
    # The op range is left in the file like any roleless range (op_call holds what it says):
    # the Capture section's count of NVTX ranges alone grows, by it.
    ranges_before = before["capture"]["facts"]["nvtx_ranges"]
    assert after["capture"]["facts"]["nvtx_ranges"] == ranges_before + 1
    for doc in reports:
        # The folders differ; the compute section is what op_call is for (its FLOPs).
        del doc["capture"], doc["traces"], doc["compute"]
    assert after == before


@pytest.mark.parametrize("loader", ["sqlite_scanner", "adbc", "parquetdir"])
def test_a_nul_byte_in_the_text_is_removed_first_by_every_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: str
) -> None:
    # The text policy removes NUL bytes from every text: the op call is what is left.
    if loader == "adbc":
        monkeypatch.setenv("NSYSREPORT_LOADER", "adbc")
    k = Kernel(1_000, 2_000, GEMM, pid=PID, launch=(500, 600))
    text = "aten::m\0m, seq = 1, op_id = 2, sizes = [[1, 2], [2\0, 3]]"
    path = write_trace(
        Scenario(kernels=[k], nvtx=[NvtxRange(400, 700, text, pid=PID)]), tmp_path / "t.sqlite"
    )
    if loader == "parquetdir":
        path = write_parquet_dir(path, tmp_path / "t_pqtdir")
    con = open_trace(path)
    assert [(r[3], r[4]) for r in op_calls(con)] == [("aten::mm", "[[1, 2], [2, 3]]")]
    assert con.execute("SELECT count FROM nvtx_unloaded").fetchall() == [(1,)]
