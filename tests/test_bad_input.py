"""Bad input gets one line `Error: ...` naming the file and the next step, exit 1, no output."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app

from conftest import real_trace

runner = CliRunner()


def run_report(trace: Path, out_dir: Path) -> tuple[int, str]:
    out = out_dir / "report.html"
    result = runner.invoke(
        app, ["report", str(trace), "-o", str(out), "--json", str(out_dir / "m.json")]
    )
    assert not out.exists() and not (out_dir / "m.json").exists(), "no output on failure"
    return result.exit_code, result.stderr


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


def test_a_missing_file_is_named(tmp_path: Path, out_dir: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    assert_one_line_error(*run_report(missing, out_dir), str(missing), "no such file")


def test_a_directory_is_refused(tmp_path: Path, out_dir: Path) -> None:
    assert_one_line_error(*run_report(tmp_path, out_dir), "is a directory")


def test_an_empty_file_is_refused(tmp_path: Path, out_dir: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert_one_line_error(*run_report(empty, out_dir), "empty.sqlite", "is empty")


def test_a_text_file_is_not_sqlite(tmp_path: Path, out_dir: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("hello\n" * 50)
    assert_one_line_error(*run_report(text, out_dir), "is not a SQLite file", "nsys export")


def test_an_nsys_rep_report_gets_the_export_command(tmp_path: Path, out_dir: Path) -> None:
    rep = tmp_path / "run1.nsys-rep"
    rep.write_bytes(b"\x00binary report")
    assert_one_line_error(
        *run_report(rep, out_dir),
        "nsys export --type sqlite --output run1.sqlite run1.nsys-rep",
    )


def test_an_nvprof_database_is_recognised(tmp_path: Path, out_dir: Path) -> None:
    db = tmp_path / "prof.nvvp.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE StringTable (_id_ INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (_id_ INTEGER PRIMARY KEY, start INT)")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 5)")
    con.commit()
    con.close()
    assert_one_line_error(*run_report(db, out_dir), "nvprof database")


def test_a_sqlite_file_that_is_not_an_export_is_refused(tmp_path: Path, out_dir: Path) -> None:
    db = tmp_path / "app.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    assert_one_line_error(*run_report(db, out_dir), "not an Nsight Systems export")


def test_a_truncated_export_is_refused(tmp_path: Path, out_dir: Path) -> None:
    source = real_trace("rtx3080_tiny_2026.1.sqlite").read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(source[: len(source) // 2])
    assert_one_line_error(*run_report(cut, out_dir), "cut.sqlite", "truncated")


def test_a_corrupt_kernel_table_is_refused(tmp_path: Path, out_dir: Path) -> None:
    broken = tmp_path / "broken.sqlite"
    shutil.copyfile(real_trace("mfu_2gpu_before.sqlite"), broken)
    broken.chmod(0o644)
    con = sqlite3.connect(broken)
    (root,) = con.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    ).fetchone()
    (page_size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    with broken.open("r+b") as f:  # scribble over the root page of the kernel table's b-tree
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)
    code, stderr = run_report(broken, out_dir)
    assert_one_line_error(code, stderr, "broken.sqlite")
    assert "corrupt" in stderr or "could not be read" in stderr


def test_an_export_without_gpu_activity_is_refused(tmp_path: Path, out_dir: Path) -> None:
    from nsysreport.synth import NvtxRange, Scenario, write_trace

    trace = write_trace(
        Scenario(nvtx=[NvtxRange(start=0, end=100, text="step 1")]), tmp_path / "cpu.sqlite"
    )
    assert_one_line_error(
        *run_report(trace, out_dir), "cpu.sqlite", "no GPU activity", "--trace=cuda"
    )


def test_the_installed_command_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "nsysreport", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr == f"Error: {missing}: no such file\n"
    assert proc.stdout == ""


def test_a_broken_pytorch_profiler_trace_is_named_as_such(tmp_path: Path, out_dir: Path) -> None:
    kineto = tmp_path / "rank0.pt.trace.json.gz"
    kineto.write_bytes(b"\x1f\x8b\x08\x00 gzip")
    assert_one_line_error(
        *run_report(kineto, out_dir), str(kineto), "is not a readable PyTorch profiler trace"
    )


def test_a_damaged_schema_is_one_printable_line_without_its_bytes_or_sql(
    tmp_path: Path, out_dir: Path
) -> None:
    from nsysreport.synth import Kernel, Memcpy, Scenario, write_trace

    trace = write_trace(
        Scenario(kernels=[Kernel(0, 100, "gemm")], memcpys=[Memcpy(100, 140)]),
        tmp_path / "schema.sqlite",
    )
    con = sqlite3.connect(trace)
    con.execute("PRAGMA writable_schema = ON")  # a flipped bit in the schema's text: a \x0b
    con.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'CREATE TABLE', 'CREATE TABLE' || char(11))"
        " WHERE name = 'CUPTI_ACTIVITY_KIND_MEMCPY'"
    )
    con.commit()
    con.close()
    code, stderr = run_report(trace, out_dir)
    assert_one_line_error(
        code,
        stderr,
        f"{trace}: is corrupt (malformed database schema (CUPTI_ACTIVITY_KIND_MEMCPY)); copy",
    )
    assert "\x0b" not in stderr and "unrecognized token" not in stderr


def test_control_characters_in_an_error_are_escaped_on_its_one_line(
    tmp_path: Path, out_dir: Path
) -> None:
    missing = tmp_path / "a\x1bb\nc.sqlite"  # a file name can hold any byte but / and NUL
    code, stderr = run_report(missing, out_dir)
    assert_one_line_error(code, stderr, str(tmp_path / "a\\x1bb c.sqlite"), "no such file")


def test_a_folder_that_may_not_be_searched_is_one_line(
    tmp_path: Path, out_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "locked"
    trace = folder / "t.sqlite"
    stat = Path.stat

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.parent == folder:  # what chmod 0 on the folder does (root would pass it)
            raise PermissionError(13, "Permission denied", str(self))
        return stat(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", refuse)
    code, stderr = run_report(trace, out_dir)
    assert_one_line_error(code, stderr, f"{trace}: cannot read it (Permission denied)")


def test_a_schema_with_bytes_that_are_not_utf8_is_corrupt_in_one_line(
    tmp_path: Path, out_dir: Path
) -> None:
    from nsysreport.synth import Kernel, Scenario, write_trace

    trace = write_trace(Scenario(kernels=[Kernel(0, 100, "gemm")]), tmp_path / "bytes.sqlite")
    con = sqlite3.connect(trace)
    con.execute("PRAGMA writable_schema = ON")  # a flipped bit in a column's name: byte 0xc9
    con.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'streamId', 'stream' || CAST(X'c9' AS TEXT))"
        " WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    )
    con.commit()
    con.close()
    assert_one_line_error(
        *run_report(trace, out_dir),
        f"{trace}: is corrupt (its schema holds bytes that are not UTF-8); copy",
    )
