"""The trace cache: hits, misses when the trace changes, corrupt files, concurrent runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport import load
from nsysreport.cache import cache_path
from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.patterns import Patterns
from nsysreport.queries import run_query
from nsysreport.synth import Kernel, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_trace(
        Scenario(kernels=[Kernel(0, 100, GEMM), Kernel(100, 180, NCCL)]), tmp_path / "t.sqlite"
    )


def loads_counted(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every real load (copy from SQLite) that happens from now on."""
    calls: list[Path] = []
    real = load.copy_tables

    def counting(con, path, schema, progress=None):  # type: ignore[no-untyped-def]
        calls.append(path)
        return real(con, path, schema, progress)

    monkeypatch.setattr(load, "copy_tables", counting)
    return calls


def test_a_second_open_reads_the_cache_instead_of_the_trace(
    trace: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = loads_counted(monkeypatch)
    first = run_query(open_trace(trace, cache=True), "gpu_breakdown")
    second = run_query(open_trace(trace, cache=True), "gpu_breakdown")
    assert calls == [trace] and first.equals(second)
    assert [p.name for p in isolated_cache.iterdir()] == [cache_path(trace, Patterns()).name]


def test_a_changed_trace_misses_and_replaces_its_old_cache(
    trace: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = loads_counted(monkeypatch)
    open_trace(trace, cache=True)
    write_trace(Scenario(kernels=[Kernel(0, 300, GEMM)]), trace)  # new size and mtime
    os.utime(trace, ns=(10**18, 10**18))
    (row,) = run_query(open_trace(trace, cache=True), "gpu_breakdown").to_dicts()
    assert row["span_ns"] == 300 and len(calls) == 2
    assert len(list(isolated_cache.glob("*.duckdb"))) == 1


def test_other_options_get_their_own_cache(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = loads_counted(monkeypatch)
    open_trace(trace, cache=True)
    open_trace(trace, cache=True, patterns=Patterns(layer="block_\\d+"))
    assert len(calls) == 2


def test_a_corrupt_cache_file_is_ignored_and_rebuilt(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_trace(trace, cache=True)
    target = cache_path(trace, Patterns())
    target.write_bytes(b"not a database at all" * 100)
    calls = loads_counted(monkeypatch)
    (row,) = run_query(open_trace(trace, cache=True), "gpu_breakdown").to_dicts()
    assert row["exposed_comm_ns"] == 80 and calls == [trace]


def test_the_json_is_identical_with_and_without_the_cache(trace: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    outputs = []
    for extra in (["--no-cache"], [], []):  # no cache, cold cache, warm cache
        out = tmp_path / f"m{len(outputs)}.json"
        args = [
            "report",
            str(trace),
            "-o",
            str(tmp_path / "r.html"),
            "--json",
            str(out),
            "-q",
            *extra,
        ]
        assert runner.invoke(app, args).exit_code == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] == outputs[2]


def test_two_concurrent_runs_on_one_trace_both_succeed_with_identical_json(
    trace: Path, tmp_path: Path
) -> None:
    def start(i: int) -> subprocess.Popen[str]:
        out = tmp_path / f"c{i}.json"
        cmd = [
            sys.executable,
            "-m",
            "nsysreport",
            str(trace),
            "-o",
            str(tmp_path / f"c{i}.html"),
            "--json",
            str(out),
            "-q",
        ]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    runs = [start(0), start(1)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    assert json.loads((tmp_path / "c0.json").read_text()) == json.loads(
        (tmp_path / "c1.json").read_text()
    )
    leftovers = [p for p in cache_path(trace, Patterns()).parent.iterdir() if p.suffix != ".duckdb"]
    assert leftovers == []


def test_cache_clear_removes_every_file(trace: Path, isolated_cache: Path) -> None:
    open_trace(trace, cache=True)
    result = CliRunner().invoke(app, ["cache", "clear"])
    assert result.exit_code == 0 and result.stdout.startswith("Removed 1 cache file(s)")
    assert list(isolated_cache.iterdir()) == []


def test_an_unwritable_cache_folder_falls_back_to_memory(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    (row,) = run_query(open_trace(trace, cache=True), "gpu_breakdown").to_dicts()
    assert row["exposed_comm_ns"] == 80
