"""Each process spills DuckDB's temporary storage into a private folder of its own: two reports
that spill at once give the same JSON as one alone, and another user's folder changes nothing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nsysreport.database import MEMORY_VARIABLE, out_of_memory_message
from nsysreport.load import open_trace
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

# Measured: a report of this trace keeps ~4 MB of its tables in DuckDB's temporary files at a
# 96 MiB limit (duckdb_temporary_files() after the load), and runs out of memory below ~56 MiB.
SPILLING_LIMIT = "96MiB"


@pytest.fixture(scope="module")
def spilling_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100,000 kernels on 2 GPUs, each with an NVTX range: enough rows to spill at 96 MiB."""
    kernels, ranges = [], []
    for dev in range(2):
        for i in range(50_000):
            start = 1_000 + i * 3_000
            name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" if i % 5 == 4 else "sm90_gemm"
            kernels.append(Kernel(start, start + 2_000, name, device=dev, pid=100 + dev))
            ranges.append(NvtxRange(start - 500, start + 100, f"op {i}", pid=100 + dev))
    path = tmp_path_factory.mktemp("spill") / "big.sqlite"
    return write_trace(Scenario(kernels=kernels, nvtx=ranges), path)


def _report(trace: Path, out: Path, tmpdir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, MEMORY_VARIABLE: SPILLING_LIMIT, "TMPDIR": str(tmpdir)}
    command = [sys.executable, "-m", "nsysreport", str(trace), "--no-cache", "-q"]
    return subprocess.Popen(
        [*command, "--json", str(out), "-o", str(out.with_suffix(".html"))],
        env=env,
        stderr=subprocess.PIPE,
    )


def test_a_connection_spills_into_a_private_folder_of_its_own(
    spilling_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_VARIABLE, SPILLING_LIMIT)
    first = open_trace(spilling_trace, cache=False)
    second = open_trace(spilling_trace, cache=False)
    files = [Path(p) for (p,) in first.sql("SELECT path FROM duckdb_temporary_files()").fetchall()]
    assert files, "the trace did not spill: the test would prove nothing"
    folder = files[0].parent
    assert {f.parent for f in files} == {folder}
    # <tmp>/nsysreport-spill-XXXX (0700, this process's) / db-XXXX (this connection's)
    assert folder.parent.name.startswith("nsysreport-spill-")
    assert folder.parent.parent == Path(tempfile.gettempdir())
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    setting = "SELECT current_setting('temp_directory')"
    assert first.sql(setting).fetchone() != second.sql(setting).fetchone()


def test_two_reports_spilling_at_once_match_one_alone(spilling_trace: Path, tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # Something of the old fixed name that no process can spill into (another user's folder
    # blocks a user the same way; tests run as root, whom a folder's mode does not stop).
    foreign = tmpdir / "nsysreport-duckdb"
    foreign.write_text("another user's")
    alone = _report(spilling_trace, tmp_path / "alone.json", tmpdir)
    assert alone.wait() == 0, alone.stderr.read() if alone.stderr else ""
    both = [_report(spilling_trace, tmp_path / f"together{i}.json", tmpdir) for i in range(2)]
    for run in both:
        assert run.wait() == 0, run.stderr.read() if run.stderr else ""
    expected = (tmp_path / "alone.json").read_bytes()
    assert (tmp_path / "together0.json").read_bytes() == expected
    assert (tmp_path / "together1.json").read_bytes() == expected
    # Every process removed its folder at exit; the foreign one is as it was.
    assert sorted(p.name for p in tmpdir.iterdir() if "nsysreport" in p.name) == [foreign.name]
    assert foreign.read_text() == "another user's"


def test_a_report_that_runs_out_of_memory_says_so_in_one_line_and_leaves_no_folder(
    spilling_trace: Path, tmp_path: Path
) -> None:
    env = {**os.environ, MEMORY_VARIABLE: "20MiB", "TMPDIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "nsysreport", str(spilling_trace), "--no-cache", "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"Error: {spilling_trace}: ran out of memory")
    assert f"DuckDB's limit is 20MiB: raise it with {MEMORY_VARIABLE}=" in lines[0]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("nsysreport-spill-")]


def test_a_memory_limit_that_is_not_a_size_is_refused(spilling_trace: Path) -> None:
    env = {**os.environ, MEMORY_VARIABLE: "lots"}
    run = subprocess.run(
        [sys.executable, "-m", "nsysreport", str(spilling_trace), "--no-cache", "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert run.stderr.strip() == (f"Error: {MEMORY_VARIABLE}='lots': expected a size such as 2GiB")


def test_python_running_out_of_memory_is_named_too() -> None:
    # MemoryError carries no message: the line names the exception instead.
    line = out_of_memory_message(["a.sqlite", "b.sqlite", "c.sqlite", "d.sqlite"], MemoryError())
    assert line.startswith(
        "a.sqlite, b.sqlite, c.sqlite and 1 more: ran out of memory (MemoryError)"
    )
