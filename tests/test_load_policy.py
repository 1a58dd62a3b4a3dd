"""The loader policy: any bytes in a TEXT column load and change no number; a row the tool cannot
use is left out, counted and reported, never dropped silently; nothing is written beside the
trace. Each case is a tiny synth trace mutated with sqlite3, with numbers derivable by hand."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport import sqlite_copy
from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.queries import run_query
from nsysreport.raw_tables import RAW_TABLES
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, Memcpy, NvtxRange, Scenario, write_trace
from nsysreport.trace_file import check_file

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
NUMBERS = ("span_ns", "busy_ns", "compute_ns", "gemm_ns", "comm_ns", "exposed_comm_ns")
NUMBERS += ("memcpy_ns", "idle_ns", "kernel_count", "comm_kernel_count")
Mutation = Callable[[sqlite3.Connection], object]


def scenario() -> Scenario:
    """gemm [100, 200), all-reduce [150, 250) on another stream, a copy [300, 340), a step
    range around it all: span 240, busy 190, comm 100 of which 50 exposed, idle 50."""
    return Scenario(
        kernels=[Kernel(100, 200, GEMM), Kernel(150, 250, NCCL, stream=31)],
        memcpys=[Memcpy(300, 340)],
        nvtx=[NvtxRange(50, 400, "step 1")],
    )


def trace(tmp_path: Path, mutate: Mutation | None = None, name: str = "t.sqlite") -> Path:
    path = write_trace(scenario(), tmp_path / name)
    if mutate is not None:
        con = sqlite3.connect(path)
        mutate(con)
        con.commit()
        con.close()
    return path


def loosen(con: sqlite3.Connection, table: str = KERNEL) -> None:
    """Rebuild `table` without its NOT NULL constraints, so a row may lose a required value."""
    con.execute(f'CREATE TABLE loose AS SELECT * FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE loose RENAME TO "{table}"')


def numbers(path: Path) -> list[dict[str, Any]]:
    rows = run_query(open_trace(path), "gpu_breakdown").to_dicts()
    return [{k: r[k] for k in ("pid", "device_id", *NUMBERS)} for r in rows]


def both_loaders(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Per-GPU numbers and skipped rows with each loader; they must be equal."""
    results = []
    for loader in ("sqlite_scanner", "adbc"):
        monkeypatch.setenv("NSYSREPORT_LOADER", loader)
        con = open_trace(path)
        skipped = con.execute("SELECT * FROM skipped_row").fetchall()
        results.append((numbers(path), skipped))
    monkeypatch.delenv("NSYSREPORT_LOADER")
    assert results[0] == results[1], "the two loaders disagree"
    return results[0]  # type: ignore[no-any-return]


CLEAN = {
    "span_ns": 240,
    "busy_ns": 190,
    "compute_ns": 100,
    "gemm_ns": 100,
    "comm_ns": 100,
    "exposed_comm_ns": 50,
    "memcpy_ns": 40,
    "idle_ns": 50,
    "kernel_count": 2,
    "comm_kernel_count": 1,
}


def test_the_clean_scenario_has_the_hand_derived_numbers(tmp_path: Path) -> None:
    (row,) = numbers(trace(tmp_path))
    assert {k: row[k] for k in NUMBERS} == CLEAN


# --- A. any bytes in any TEXT column ------------------------------------------------------

TEXT_COLUMNS = [
    (table, name)
    for table, cols in RAW_TABLES.items()
    for name, type_, _ in cols
    if type_ == "VARCHAR"
]


@pytest.mark.parametrize(("table", "column"), TEXT_COLUMNS)
def test_invalid_utf8_and_nul_bytes_in_any_text_column_change_no_number(
    tmp_path: Path, table: str, column: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean = numbers(trace(tmp_path, name="clean.sqlite"))

    def scribble(con: sqlite3.Connection) -> None:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        if table not in tables:  # an export without it: add one as a newer nsys would
            defs = ", ".join(
                f'"{n}" {"INTEGER" if t == "BIGINT" else "TEXT"}' for n, t, _ in RAW_TABLES[table]
            )
            con.execute(f'CREATE TABLE "{table}" ({defs})')
        if con.execute(f'SELECT count(*) FROM "{table}"').fetchone() == (0,):
            con.execute(f'INSERT INTO "{table}" ("{column}") VALUES (\'x\')')
        # Half the rows get invalid UTF-8 and a NUL appended (stored as TEXT), the other half
        # the same bytes as a BLOB: a name stays recognisable, so no class may change.
        con.execute(
            f'UPDATE "{table}" SET "{column}" = CASE WHEN rowid % 2 = 0 '
            f"THEN \"{column}\" || x'ff00fe' ELSE CAST(\"{column}\" || x'c300' AS BLOB) END"
        )

    path = trace(tmp_path, scribble)
    got, skipped = both_loaders(path, monkeypatch)
    assert got == clean
    assert skipped == []


def test_names_shown_get_u_fffd_for_invalid_bytes_and_lose_nul_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def scribble(con: sqlite3.Connection) -> None:
        con.execute(
            "UPDATE StringIds SET value = CAST(value AS BLOB) || x'ff00' || x'21' "
            "WHERE value LIKE 'ncclDev%'"
        )
        con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = x'0a0212ff00' || 'env'")

    path = trace(tmp_path, scribble)
    for loader in ("sqlite_scanner", "adbc"):
        monkeypatch.setenv("NSYSREPORT_LOADER", loader)
        con = open_trace(path)
        (name,) = con.execute("SELECT name FROM kernel WHERE class = 'comm'").fetchone()  # type: ignore[misc]
        assert name == NCCL + "\ufffd!"
        values = [r[0] for r in con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV").fetchall()]
        assert values and all("\x00" not in v for v in values)
        html = _report_html(path, tmp_path)
        assert "\x00" not in html and "\ufffd!" in html


def _report_html(path: Path, tmp_path: Path) -> str:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(out), "-q", "--no-cache"])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


# --- B. values of another type in an integer column ---------------------------------------


def test_a_value_that_is_not_an_integer_skips_its_row_and_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        con.execute(f"UPDATE {KERNEL} SET start = 'abc' WHERE start = 150")  # the all-reduce
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = x'01'")
        con.execute("UPDATE NVTX_EVENTS SET eventType = 59.5 WHERE eventType = 59")

    (row,), skipped = both_loaders(trace(tmp_path, mutate), monkeypatch)
    # Only the gemm is left: busy = compute = span = 100, nothing else.
    assert row["kernel_count"] == 1 and row["comm_kernel_count"] == 0
    assert row["span_ns"] == 100 and row["busy_ns"] == 100 and row["memcpy_ns"] == 0
    assert skipped == [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start is not an integer", 1),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "deviceId is not an integer", 1),
        ("NVTX_EVENTS", "eventType is not an integer", 1),
    ]


@pytest.mark.parametrize("batch_rows", [1, 2, 65536])
def test_a_bad_value_in_any_batch_is_found_by_both_loaders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int
) -> None:
    # ADBC types a column by its first batch: a fraction in a later one must be found too.
    monkeypatch.setattr(sqlite_copy, "ADBC_BATCH_ROWS", batch_rows)

    def mutate(con: sqlite3.Connection) -> None:
        con.execute(f"UPDATE {KERNEL} SET streamId = 7.5 WHERE start = 150")
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 'x' WHERE rowid = 2")

    (row,), skipped = both_loaders(trace(tmp_path, mutate), monkeypatch)
    assert row["kernel_count"] == 1 and row["busy_ns"] == 140
    assert skipped == [
        (KERNEL, "streamId is not an integer", 1),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId is not an integer", 1),
    ]


def test_a_float_with_an_integral_value_is_taken_as_an_integer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        # A view declares no INTEGER affinity for an expression: the floats stay floats.
        con.execute(f"ALTER TABLE {KERNEL} RENAME TO kernel_rows")
        con.execute(
            f'CREATE VIEW {KERNEL} AS SELECT start * 1.0 AS start, "end" * 1.0 AS "end", '
            "deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName "
            "FROM kernel_rows"
        )

    (row,), skipped = both_loaders(trace(tmp_path, mutate), monkeypatch)
    assert {k: row[k] for k in NUMBERS} == CLEAN and skipped == []


# --- C. silently wrong numbers ----------------------------------------------------------


def test_a_kernel_table_replaced_by_a_view_of_itself_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        con.execute(f"ALTER TABLE {KERNEL} RENAME TO kernel_rows")
        con.execute(f"CREATE VIEW {KERNEL} AS SELECT * FROM kernel_rows")

    (row,), skipped = both_loaders(trace(tmp_path, mutate), monkeypatch)
    assert {k: row[k] for k in NUMBERS} == CLEAN and skipped == []


def _many_kernels(con: sqlite3.Connection) -> None:
    """The scenario's two kernels copied to 2^18 rows, each moved 1000 ns per rowid: rowids
    1..n, every start distinct, several of DuckDB's row groups for the fast loader's threads
    (which insert in the order they finish)."""
    for _ in range(17):
        con.execute(f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}")
    con.execute(f'UPDATE {KERNEL} SET start = start + 1000 * rowid, "end" = "end" + 1000 * rowid')
    con.execute("UPDATE ANALYSIS_DETAILS SET duration = 1000000000")  # all inside the capture


@pytest.mark.parametrize("as_view", [False, True])
def test_every_id_is_the_row_s_place_in_the_file_with_either_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_view: bool
) -> None:
    # Ids break ties (an op's k-th kernel, which duplicate is kept): they must not change from
    # one load of the file to the next. A table's rowid; a view's rows numbered in its order.
    def mutate(con: sqlite3.Connection) -> None:
        _many_kernels(con)
        if as_view:
            con.execute(f"ALTER TABLE {KERNEL} RENAME TO kernel_rows")
            con.execute(f"CREATE VIEW {KERNEL} AS SELECT * FROM kernel_rows ORDER BY start DESC")

    path = trace(tmp_path, mutate)
    with sqlite3.connect(path) as src:
        order = "row_number() OVER ()" if as_view else "rowid"
        expected = src.execute(f"SELECT {order}, start FROM {KERNEL}").fetchall()
    assert len(expected) == 1 << 18 and len({start for _, start in expected}) == 1 << 18
    expected.sort()
    for loader in ("sqlite_scanner", "adbc"):
        monkeypatch.setenv("NSYSREPORT_LOADER", loader)
        con = open_trace(path)
        raw = con.execute(f"SELECT file_row, start FROM {KERNEL} ORDER BY file_row").fetchall()
        assert raw == expected, loader
        ids = con.execute("SELECT kernel_id, start_ns FROM kernel ORDER BY kernel_id").fetchall()
        assert ids == expected, loader


def _names_of(path: Path) -> list[tuple[str, str, bool]]:
    con = open_trace(path)
    return con.execute("SELECT name, class, unnamed FROM kernel ORDER BY start_ns").fetchall()


def test_a_kernel_without_its_demangled_name_falls_back_to_the_short_name(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        # The gemm's demangled name is NULL; the all-reduce's points at no StringIds row.
        loosen(con)
        con.execute(f"UPDATE {KERNEL} SET demangledName = NULL WHERE start = 100")
        con.execute(f"UPDATE {KERNEL} SET demangledName = 9999 WHERE start = 150")

    short_nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    assert _names_of(trace(tmp_path, mutate)) == [
        (GEMM, "gemm", False),
        (short_nccl, "comm", False),
    ]


def test_a_demangled_name_of_bytes_that_spell_nothing_falls_back_to_the_short_name(
    tmp_path: Path,
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        # The all-reduce's demangled name becomes the bytes 00 ff 10: read as U+FFFD and a
        # control character, which name nothing; its short name still does.
        (name_id,) = con.execute(f"SELECT demangledName FROM {KERNEL} WHERE start = 150").fetchone()
        con.execute("UPDATE StringIds SET value = X'00ff10' WHERE id = ?", [name_id])

    assert _names_of(trace(tmp_path, mutate)) == [
        (GEMM, "gemm", False),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "comm", False),
    ]


def test_empty_names_fall_back_to_the_mangled_name_then_a_placeholder(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        # Demangled and short names empty: the all-reduce keeps its mangled name (comm), the
        # gemm has none left at all.
        con.execute(
            f"UPDATE StringIds SET value = '' WHERE id IN (SELECT demangledName FROM {KERNEL} "
            f"UNION SELECT shortName FROM {KERNEL})"
        )
        con.execute(f"UPDATE {KERNEL} SET mangledName = NULL WHERE start = 100")

    (gemm, nccl) = _names_of(trace(tmp_path, mutate))
    assert gemm[1:] == ("other", True) and gemm[0].startswith("<kernel name ")
    assert nccl[0].startswith("_Z") and nccl[1:] == ("comm", False)


def test_kernels_with_no_name_count_as_compute_and_the_report_says_so(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        loosen(con)
        con.execute(
            f"UPDATE {KERNEL} SET demangledName = NULL, shortName = NULL, mangledName = NULL"
        )

    path = trace(tmp_path, mutate)
    (row,) = numbers(path)
    # Both kernels are kept with their time; the all-reduce is now counted as compute.
    assert row["kernel_count"] == 2 and row["comm_kernel_count"] == 0
    assert row["busy_ns"] == 190 and row["compute_ns"] == 150
    report = build_report(open_trace(path), path)
    assert report.quality.notes() == ("2 kernels with no name: counted as compute",)
    assert as_json(report)["skipped"] == []


@pytest.mark.parametrize(
    ("assignment", "reason"),
    [
        ("start = NULL", "no start time"),
        ('"end" = NULL', "no end time"),
        ("globalPid = NULL", "no process id"),
        ("deviceId = NULL", "no device id"),
        ("streamId = NULL", "no stream id"),  # the timeline has no lane for it
        ("deviceId = -5", "device id out of range"),  # else a phantom GPU of one all-reduce
        ("deviceId = 9223372036854775807", "device id out of range"),
        ("globalPid = -1234567", "not a process id"),  # else a phantom process
        ("globalPid = globalPid + 7", "not a process id"),  # thread bits: no launch joins it
        ('"end" = 9223372036854775807', "time outside the capture"),
        ("start = -9223372036854775808", "negative time"),
        ('"end" = -9223372036854775808', "negative time"),
        ("start = start + 4000000000000000, \"end\" = \"end\" + 4000000000000000",
         "time outside the capture"),
    ],
)  # fmt: skip
def test_an_unusable_kernel_is_left_out_and_counted_with_its_reason(
    tmp_path: Path, assignment: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        loosen(con)
        con.execute(f"UPDATE {KERNEL} SET {assignment} WHERE start = 150")  # the all-reduce

    path = trace(tmp_path, mutate)
    (row,), skipped = both_loaders(path, monkeypatch)
    # The gemm [100, 200) and the copy [300, 340) are left: span 240, busy 140, idle 100.
    assert row["kernel_count"] == 1 and row["comm_kernel_count"] == 0
    assert (row["span_ns"], row["busy_ns"], row["idle_ns"]) == (240, 140, 100)
    assert skipped == [(KERNEL, reason, 1)]
    report = build_report(open_trace(path), path)  # every query runs: no overflow anywhere
    assert report.quality.notes() == (f"1 kernel skipped: {reason}",)


def test_a_kernel_that_ends_before_it_starts_counts_with_no_time_and_is_noted(
    tmp_path: Path,
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        con.execute(f'UPDATE {KERNEL} SET "end" = 120 WHERE start = 150')

    path = trace(tmp_path, mutate)
    (row,) = numbers(path)
    assert row["kernel_count"] == 2 and row["comm_ns"] == 0 and row["busy_ns"] == 140
    report = build_report(open_trace(path), path)
    assert report.quality.notes() == ("1 kernel with end before start: counted, with no time",)


def test_lookup_tables_with_every_id_twice_count_no_row_twice(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        for table in ("ENUM_CUDA_MEMCPY_OPER", "StringIds"):
            loosen(con, table)  # a primary key would refuse the copies
            con.execute(f"INSERT INTO {table} SELECT * FROM {table}")

    path = trace(tmp_path, mutate)
    con = open_trace(path)
    (row,) = numbers(path)
    assert {k: row[k] for k in NUMBERS} == CLEAN  # one copy [300, 340), not two
    assert con.sql("SELECT count(*) FROM memcpy").fetchone() == (1,)
    launches = con.sql("SELECT count(*), count(DISTINCT launch_id) FROM launch").fetchone()
    assert launches is not None and launches[0] == launches[1] > 0
    ranges = con.sql("SELECT count(*), count(DISTINCT range_id) FROM nvtx_range").fetchone()
    assert ranges == (1, 1)  # the step range once


def test_a_launch_call_with_a_negative_thread_id_changes_no_number(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:  # its process: the top bits, no shift of -1
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = -1")

    path = trace(tmp_path, mutate)
    (row,) = numbers(path)
    assert {k: row[k] for k in NUMBERS} == CLEAN
    build_report(open_trace(path), path)  # every query runs (launch, activity_step)


def test_a_memcpy_that_ends_before_it_starts_counts_with_no_time_and_is_noted(
    tmp_path: Path,
) -> None:
    def mutate(con: sqlite3.Connection) -> None:  # the copy [300, 340) swapped: [340, 300)
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET start = 340, "end" = 300')

    path = trace(tmp_path, mutate)
    (row,) = numbers(path)
    # Without the copy the GPU ends at 250: span 150 (from 100), busy 150, idle 0.
    assert row["memcpy_ns"] == 0 and (row["span_ns"], row["busy_ns"]) == (150, 150)
    report = as_json(build_report(open_trace(path), path))
    assert report["data_quality"] == ["1 memcpy with end before start: counted, with no time"]


def test_exact_duplicate_kernel_rows_are_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        con.execute(f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}")  # every row twice
        con.execute(f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE start = 150")

    # gemm twice, all-reduce four times: 1 + 3 rows are copies.
    (row,), skipped = both_loaders(trace(tmp_path, mutate), monkeypatch)
    assert {k: row[k] for k in NUMBERS} == CLEAN
    assert skipped == [(KERNEL, "duplicate row", 4)]


def test_skipped_rows_reach_the_json_the_terminal_and_the_html(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        loosen(con)
        con.execute(f"UPDATE {KERNEL} SET start = NULL WHERE start = 150")

    path = trace(tmp_path, mutate)
    out, data = tmp_path / "r.html", tmp_path / "r.json"
    result = CliRunner().invoke(
        app, ["report", str(path), "-o", str(out), "--json", str(data), "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    assert "1 kernel skipped: no start time" in result.stdout
    doc = json.loads(data.read_text())
    assert doc["skipped"] == [
        {"file": "t.sqlite", "source": KERNEL, "reason": "no start time", "count": 1}
    ]
    assert doc["data_quality"] == ["1 kernel skipped: no start time"]
    html = out.read_text()
    assert 'id="data-quality"' in html and "1 kernel skipped: no start time" in html
    # The note comes before the numbers it qualifies.
    assert html.index('id="data-quality"') < html.index('id="gpu_breakdown"')


def test_a_clean_trace_has_no_quality_section(tmp_path: Path) -> None:
    html = _report_html(trace(tmp_path), tmp_path)
    assert "data-quality" not in html


def test_several_files_keep_each_files_skipped_rows(tmp_path: Path) -> None:
    def mutate(con: sqlite3.Connection) -> None:
        loosen(con)
        con.execute(f"UPDATE {KERNEL} SET deviceId = NULL WHERE start = 150")

    a = trace(tmp_path, mutate, "a.sqlite")
    b = trace(tmp_path, None, "b.sqlite")
    out, html = tmp_path / "m.json", tmp_path / "m.html"
    args = ["report", str(a), str(b), "--json", str(out), "-o", str(html), "-q", "--no-cache"]
    result = CliRunner().invoke(app, [*args, "--jobs", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["skipped"] == [
        {"file": "a.sqlite", "source": KERNEL, "reason": "no device id", "count": 1}
    ]
    assert doc["data_quality"] == ["a.sqlite: 1 kernel skipped: no device id"]


# --- D. nothing written beside the trace; a write-ahead log is part of the database -------


def _listing(folder: Path) -> dict[str, tuple[int, str]]:
    return {
        p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.iterdir())
    }


def test_a_write_ahead_log_is_read_and_nothing_is_written_beside_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    path = trace(work)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    # A third kernel, committed to the log only: a gemm [400, 450) on the compute stream.
    con.execute(f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL} WHERE start = 100")
    last = f"(SELECT max(rowid) FROM {KERNEL})"
    con.execute(f'UPDATE {KERNEL} SET start = 400, "end" = 450 WHERE rowid = {last}')
    con.commit()
    # Keep the uncheckpointed log as a crashed writer leaves it: copy it while it is open.
    folder = tmp_path / "input"
    folder.mkdir()
    shutil.copyfile(path, folder / "t.sqlite")
    shutil.copyfile(f"{path}-wal", folder / "t.sqlite-wal")
    con.close()
    before = _listing(folder)
    private = tmp_path / "private"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    (row,), skipped = both_loaders(folder / "t.sqlite", monkeypatch)
    assert row["kernel_count"] == 3 and row["span_ns"] == 350 and skipped == []
    assert _listing(folder) == before
    assert not list(private.glob("nsysreport-copy-*")), "the private copies are removed"


def test_a_database_in_wal_mode_without_a_log_gets_no_log_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace(tmp_path)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.close()  # the last connection checkpoints and removes the log; the file stays WAL
    before = _listing(tmp_path)
    assert list(before) == ["t.sqlite"]
    (row,), skipped = both_loaders(path, monkeypatch)
    assert {k: row[k] for k in NUMBERS} == CLEAN and skipped == []
    assert _listing(tmp_path) == before


def test_a_hot_journal_is_rolled_back_in_a_private_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace(tmp_path)
    # A writer dies in the middle of moving every kernel by 1000 ns: its journal stays hot
    # and part of the change may be in the file. The committed content is the clean trace.
    code = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "c.execute('PRAGMA cache_size = 1')\n"
        "c.execute('BEGIN')\n"
        f'c.execute(\'UPDATE {KERNEL} SET start = start + 1000, "end" = "end" + 1000\')\n'
        "c.execute('UPDATE StringIds SET value = value || zeroblob(5000)')\n"
        "print('written', flush=True)\n"
        "time.sleep(60)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert Path(f"{path}-journal").stat().st_size > 0
    before = _listing(tmp_path)
    (row,), skipped = both_loaders(path, monkeypatch)
    assert {k: row[k] for k in NUMBERS} == CLEAN and skipped == []
    assert _listing(tmp_path) == before


def test_a_stray_journal_that_is_not_hot_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace(tmp_path)
    Path(f"{path}-journal").write_bytes(b"left over by a copy tool\n" * 40)
    before = _listing(tmp_path)
    (row,), skipped = both_loaders(path, monkeypatch)
    assert {k: row[k] for k in NUMBERS} == CLEAN and skipped == []
    assert _listing(tmp_path) == before


# --- E. one clear line for input that cannot be read ---------------------------------------


def test_a_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "t.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="is not a regular file"):
        check_file(fifo)


def test_an_unreadable_trace_says_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace(tmp_path)

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(TraceError) as err:
        check_file(path)
    assert str(err.value) == f"{path}: cannot read it (Permission denied)"


def test_a_path_through_a_file_is_no_such_file(tmp_path: Path) -> None:
    path = trace(tmp_path) / "t.sqlite"
    with pytest.raises(TraceError, match="no such file"):
        check_file(path)


def test_corrupt_pages_are_one_line_without_sql(tmp_path: Path) -> None:
    path = trace(tmp_path)
    con = sqlite3.connect(path)
    (root,) = con.execute(f"SELECT rootpage FROM sqlite_master WHERE name = '{KERNEL}'").fetchone()
    (page_size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)
    for loader in ("sqlite_scanner", "adbc"):
        os.environ["NSYSREPORT_LOADER"] = loader
        try:
            with pytest.raises(TraceError) as err:
                open_trace(path)
        finally:
            del os.environ["NSYSREPORT_LOADER"]
        message = str(err.value)
        assert "\n" not in message and "SELECT" not in message and "INSERT" not in message
        assert "is corrupt" in message and "copy or export it again" in message
