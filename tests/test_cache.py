"""The trace and report caches: hits, misses when the trace or options change, corrupt files,
concurrent runs."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from nsysreport import (
    database,
    load,
    model,
    outputs,
    render,
    report_builder,
    sqlite_copy,
    trace_cache,
)
from nsysreport.cache import cache_path, cached_report, report_path
from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.patterns import Patterns
from nsysreport.queries import run_query
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

from conftest import real_trace

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
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
    real = sqlite_copy.copy_tables

    def counting(con, path, schema, *rest):  # type: ignore[no-untyped-def]
        calls.append(path)
        return real(con, path, schema, *rest)

    monkeypatch.setattr(database, "copy_tables", counting)
    return calls


def opening_no_database(monkeypatch: pytest.MonkeyPatch, instead: Any) -> None:
    """Replace every call that opens DuckDB for a trace (in memory or its cache) by `instead`."""
    for module in (load, trace_cache):
        monkeypatch.setattr(module, "connect", instead)


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
    leftovers = [p for p in cache_path(trace, Patterns()).parent.iterdir() if p.name[0] == "."]
    assert leftovers == []  # no temporary files


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


# The report cache: the finished model (and its pages) per trace, patterns and model options.

OPTIONS = (10, None, (None, None))  # top, timeline step, timeline range: the report defaults


def builds_counted(trace: Path, calls: list[int], top: int = 10):  # type: ignore[no-untyped-def]
    """A build function as the report command passes it, counting its calls."""

    def build() -> Report:
        calls.append(1)
        return build_report(open_trace(trace, cache=True), trace, top)

    return build


def test_a_cached_report_comes_back_equal_without_building_or_opening_the_database(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    first = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls)).model

    def no_database(*args: object, **kwargs: object) -> None:
        raise AssertionError("a hit must not open DuckDB")

    opening_no_database(monkeypatch, no_database)
    second = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls)).model
    assert calls == [1] and second == first and second is not first
    assert as_json(second) == as_json(first)


def test_a_changed_trace_misses_the_report_cache_and_drops_the_old_report(
    trace: Path, isolated_cache: Path
) -> None:
    calls: list[int] = []
    cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    write_trace(Scenario(kernels=[Kernel(0, 300, GEMM)]), trace)  # new size and mtime
    os.utime(trace, ns=(10**18, 10**18))
    model = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls)).model
    assert len(calls) == 2 and model.gpus[0].span_ns == 300
    assert [p.name for p in isolated_cache.glob("*.report")] == [
        report_path(trace, Patterns(), OPTIONS).name
    ]


def test_a_touched_trace_of_the_same_size_misses_the_report_cache(trace: Path) -> None:
    calls: list[int] = []
    cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    os.utime(trace, ns=(10**18, 10**18))
    cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    assert len(calls) == 2


def test_other_model_options_get_their_own_report_and_other_patterns_replace_them(
    trace: Path, isolated_cache: Path
) -> None:
    calls: list[int] = []
    top1 = (1, None, (None, None))
    for _ in range(2):
        cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
        cached_report(trace, Patterns(), top1, builds_counted(trace, calls, 1))
    assert len(calls) == 2
    assert len(list(isolated_cache.glob("*.report"))) == 2
    other = Patterns(layer="block_\\d+")
    cached_report(trace, other, OPTIONS, builds_counted(trace, calls))
    assert len(calls) == 3  # as the DuckDB cache, one set of patterns per trace is kept
    assert [p.name for p in isolated_cache.glob("*.report")] == [
        report_path(trace, other, OPTIONS).name
    ]


def test_a_corrupt_report_file_is_rebuilt_and_rewritten(trace: Path) -> None:
    calls: list[int] = []
    first = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls)).model
    target = report_path(trace, Patterns(), OPTIONS)
    for junk in (b"", b"not a pickle" * 10, target.read_bytes()[:100], pickle.dumps([1, 2])):
        target.write_bytes(junk)
        again = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
        assert again.model == first and again.outputs == {}
    assert len(calls) == 5
    cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    assert len(calls) == 5  # the rebuilt file reads back


def test_kept_outputs_come_back_with_the_model_unpickled_only_when_asked(trace: Path) -> None:
    calls: list[int] = []
    cold = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    assert cold.outputs == {}
    cold.keep(html="<p>page</p>", json="{}")
    warm = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    assert warm.outputs == {"html": "<p>page</p>", "json": "{}"} and calls == [1]
    assert warm._model is None  # not unpickled yet
    assert warm.model == cold.model and calls == [1]


def test_a_model_damaged_inside_a_readable_file_is_built_again(trace: Path) -> None:
    calls: list[int] = []
    cold = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    cold._model_bytes = b"not a pickle"
    cold.keep(html="stale")
    warm = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls))
    assert warm.model == cold.model and calls == [1, 1] and warm.outputs == {}


def test_a_warm_cli_run_writes_the_kept_pages_with_its_own_time(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages, texts = [], []
    for i, epoch in enumerate(("0", "86400")):  # the second run is a day later
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        out, js = tmp_path / f"r{i}.html", tmp_path / f"r{i}.json"
        result = CliRunner().invoke(app, ["report", str(trace), "-o", str(out), "--json", str(js)])
        assert result.exit_code == 0, result.output
        assert "Verdict:" in result.stdout  # the summary unpickles the model
        pages.append(out.read_text())
        texts.append(js.read_text())
        opening_no_database(monkeypatch, lambda *a, **k: pytest.fail("warm opened DuckDB"))
        monkeypatch.setattr(render, "render_html", lambda *a, **k: pytest.fail("warm rendered"))
        monkeypatch.setattr(outputs, "json_sections", lambda *a, **k: pytest.fail("warm encoded"))
    assert "1970-01-01 00:00 UTC" in pages[0] and "1970-01-02" not in pages[0]
    assert pages[1] == pages[0].replace("1970-01-01 00:00 UTC", "1970-01-02 00:00 UTC")
    assert texts[1] == texts[0]


def test_cache_clear_removes_the_reports_too(trace: Path, isolated_cache: Path) -> None:
    cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, []))
    assert {p.suffix for p in isolated_cache.iterdir()} == {".duckdb", ".report"}
    result = CliRunner().invoke(app, ["cache", "clear"])
    assert result.exit_code == 0 and result.stdout.startswith("Removed 2 cache file(s)")
    assert list(isolated_cache.iterdir()) == []


def test_an_unwritable_cache_folder_still_gives_the_report(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    calls: list[int] = []
    for _ in range(2):
        model = cached_report(trace, Patterns(), OPTIONS, builds_counted(trace, calls)).model
        assert model.gpus[0].exposed_comm_ns == 80
        assert "<svg" in render_html(model, "t")
    assert len(calls) == 2


def test_a_missing_trace_fails_as_without_a_cache(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        cached_report(tmp_path / "gone.sqlite", Patterns(), OPTIONS, lambda: None)


# Hardening: a key on content, stale temporaries, a cache that cannot be written.


def test_another_trace_of_the_same_size_and_mtime_copied_over_gets_its_own_report(
    trace: Path, tmp_path: Path
) -> None:
    other = write_trace(  # the all-reduce is 50 ns instead of 80: same pages, other bytes
        Scenario(kernels=[Kernel(0, 100, GEMM), Kernel(100, 150, NCCL)]), tmp_path / "o.sqlite"
    )
    assert other.stat().st_size == trace.stat().st_size

    def exposed_comm_ns() -> int:
        out = tmp_path / "m.json"
        result = CliRunner().invoke(
            app, ["report", str(trace), "-o", str(tmp_path / "r.html"), "--json", str(out), "-q"]
        )
        assert result.exit_code == 0, result.output
        value: int = json.loads(out.read_text())["gpus"][0]["exposed_comm_ns"]
        return value

    assert exposed_comm_ns() == 80
    before = trace.stat()
    shutil.copyfile(other, trace)  # as cp -p or rsync -t: the old mtime put back
    os.utime(trace, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert trace.stat().st_mtime_ns == before.st_mtime_ns
    assert exposed_comm_ns() == 50


def test_temporaries_of_dead_runs_are_removed_when_the_cache_is_written(
    trace: Path, isolated_cache: Path
) -> None:
    isolated_cache.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    dead, alive = int(done.stdout), os.getpid()
    hour, day = 3600, 86400
    temporaries = {  # name: (age in s, kept?)
        f".0a1b-2c3d.{dead}.x1y2.tmp": (2 * hour, False),  # killed an hour ago
        f".0a1b-2c3d.{dead}.x1y2.tmp.wal": (2 * hour, False),  # and DuckDB's log beside it
        f".0a1b-2c3d.{dead}.x3y4.tmp": (60, True),  # may be a run in another pid namespace
        f".0a1b-2c3d.{alive}.x5y6.tmp": (2 * hour, True),  # this very process: a long build
        f".0a1b-2c3d.{alive}.x7y8.tmp": (2 * day, False),  # abandoned, whoever has the pid now
        ".0a1b-2c3d.x9y0.tmp": (2 * day, False),  # no pid (an older version's name)
        ".0a1b-2c3d.x9y1.tmp": (2 * hour, False),  # no run of this code writes it: as dead
        ".0a1b-2c3d.x9y2.tmp": (60, True),  # but not before the hour
        ".abc.tmp": (2 * hour, False),  # any name of a temporary, so that none stays forever
    }
    now = time.time()
    for name, (age, _) in temporaries.items():
        (isolated_cache / name).write_bytes(b"half a cache")
        os.utime(isolated_cache / name, (now - age, now - age))
    open_trace(trace, cache=True)
    left = {p.name for p in isolated_cache.glob(".*")}
    assert left == {name for name, (_, kept) in temporaries.items() if kept}


def test_cache_clear_removes_temporaries_too(trace: Path, isolated_cache: Path) -> None:
    open_trace(trace, cache=True)
    (isolated_cache / ".0a1b-2c3d.1.x1y2.tmp").write_bytes(b"")
    (isolated_cache / ".0a1b-2c3d.1.x1y2.tmp.wal").write_bytes(b"")
    result = CliRunner().invoke(app, ["cache", "clear"])
    assert result.exit_code == 0 and result.stdout.startswith("Removed 3 cache file(s)")
    assert list(isolated_cache.iterdir()) == []


def test_a_cache_disk_that_fills_up_mid_load_falls_back_to_memory_and_never_blames_the_trace(
    tmp_path: Path,
) -> None:
    # A file size limit makes every write past 256 KiB fail with EFBIG, as a full disk fails
    # with ENOSPC: DuckDB's cache file fails while the trace's tables are copied into it.
    limited = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10)); "
        "from nsysreport.cli import main; main(sys.argv[1:])"
    )
    trace = real_trace("h100_2gpu_1s.sqlite")  # its cache is ~10x the limit
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-c", limited, str(trace), "-o", str(tmp_path / "r.html"), "--json"]
    run = subprocess.run([*cmd, str(out), "-q"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "" and json.loads(out.read_text())["gpus"][0]["rank"] == 0


def test_a_cache_file_duckdb_cannot_create_falls_back_to_memory(
    trace: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder where DuckDB's write-ahead log must go: a real write failure inside DuckDB,
    # during the copy from the trace (which names the trace for any DuckDB error).
    real = tempfile.mkstemp

    def blocking_the_log(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = real(*args, **kwargs)
        if Path(kwargs["dir"]) == isolated_cache:
            Path(f"{name}.wal").mkdir()
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", blocking_the_log)
    (row,) = run_query(open_trace(trace, cache=True), "gpu_breakdown").to_dicts()
    assert row["exposed_comm_ns"] == 80
    assert not list(isolated_cache.glob("*.duckdb"))  # nothing kept, and no error


def test_when_memory_fails_too_the_error_names_the_cache_and_the_reason(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any) -> None:
        raise duckdb.IOException('Could not write file "x": No space left on device')

    monkeypatch.setattr(trace_cache, "load_into", full)
    result = CliRunner().invoke(app, ["report", str(trace), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {trace}: could not be loaded: the cache in ")
    assert "failed (Could not write file" in line and "No space left on device" in line
    assert "and so did loading into memory" in line and "could not be read" not in line


def test_a_killed_build_s_temporaries_are_kept_while_it_runs_and_removed_once_it_is_dead(
    trace: Path, tmp_path: Path, isolated_cache: Path
) -> None:
    # A real run, held between loading and renaming its cache, then killed with SIGKILL.
    holding = (
        "import sys, time; from pathlib import Path; import nsysreport.load as load; "
        "import nsysreport.trace_cache as cache; real = cache.load_into; "
        "cache.load_into = lambda *a: (real(*a), print('built', flush=True), time.sleep(300)); "
        "load.open_trace(Path(sys.argv[1]), cache=True)"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", holding, str(trace)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert run.stdout is not None and run.stdout.readline() == "built\n"
        leftovers = sorted(isolated_cache.glob(".*.tmp*"))
        assert leftovers, "the held build has its temporary"
        hours_ago = time.time() - 2 * 3600
        for tmp in leftovers:
            os.utime(tmp, (hours_ago, hours_ago))
        other = write_trace(Scenario(kernels=[Kernel(0, 50, GEMM)]), tmp_path / "other.sqlite")
        open_trace(other, cache=True)  # writes the cache: the live run's temporaries stay
        assert all(tmp.exists() for tmp in leftovers)
    finally:
        run.kill()
        run.wait()
    open_trace(write_trace(Scenario(kernels=[Kernel(0, 70, GEMM)]), tmp_path / "third.sqlite"),
               cache=True)  # fmt: skip
    assert list(isolated_cache.glob(".*")) == []


def test_a_write_ahead_log_that_appears_beside_the_trace_misses_the_cache(
    tmp_path: Path, isolated_cache: Path
) -> None:
    # gemm [0,100), nccl [100,180); then a log beside it adds a gemm [200,250): span 250 (inside
    # the capture's bound: 180 ns, the capture's length, from the median start 100)
    folder = tmp_path / "input"
    folder.mkdir()
    source = write_trace(
        Scenario(kernels=[Kernel(0, 100, GEMM), Kernel(100, 180, NCCL)]), tmp_path / "w.sqlite"
    )
    trace = folder / "t.sqlite"
    shutil.copyfile(source, trace)
    (before,) = run_query(open_trace(trace, cache=True), "gpu_breakdown").to_dicts()
    con = sqlite3.connect(source)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    kernels = "CUPTI_ACTIVITY_KIND_KERNEL"
    con.execute(f"INSERT INTO {kernels} SELECT * FROM {kernels} WHERE start = 0")
    con.execute(
        f'UPDATE {kernels} SET start = 200, "end" = 250 WHERE rowid = '
        f"(SELECT max(rowid) FROM {kernels})"
    )
    con.commit()
    shutil.copyfile(f"{source}-wal", folder / "t.sqlite-wal")  # the log as a crash leaves it
    con.close()
    (after,) = run_query(open_trace(trace, cache=True), "gpu_breakdown").to_dicts()
    assert (before["span_ns"], before["kernel_count"]) == (180, 2)
    assert (after["span_ns"], after["kernel_count"]) == (250, 3)


def test_the_cache_keeps_each_parameterless_result_and_serves_it_unchanged(
    isolated_cache: Path,
) -> None:
    from nsysreport.queries import RESULT_TABLE, UNKEPT, query_files

    path = SAMPLES / "llama70b_decode_tp4_nvlink_graphs_node.sqlite"
    cached, fresh = open_trace(path, cache=True), open_trace(path)
    plain = [q for q in query_files() if not q.params]
    assert {"gpu_breakdown", "step_breakdown", "layer_summary"} <= {q.name for q in plain}
    assert {q.name for q in plain} >= UNKEPT
    for query in plain:
        if query.name not in UNKEPT:
            kept = cached.table(RESULT_TABLE.format(query.name))  # stored, not recomputed
            assert kept.shape[0] == fresh.execute(query.sql).pl().height
        assert run_query(cached, query.name).equals(run_query(fresh, query.name)), query.name
    # Queries with parameters (display options) are computed on each run, and the few kept
    # for merging files alone on each merge.
    for name in ("kernel_top", *UNKEPT):
        with pytest.raises(duckdb.CatalogException):
            cached.table(RESULT_TABLE.format(name))


# Another display option (--top, --timeline-step): made again from a kept report.


def stepped(tmp_path: Path) -> Path:
    """Two steps of three kernels with gaps of 10, 20, 30 and 40 ns between them."""
    kernels = [Kernel(s, s + 50, name) for s, name in ((0, GEMM), (60, GEMM), (130, NCCL))]
    kernels += [Kernel(s, s + 50, name) for s, name in ((210, GEMM), (300, NCCL), (355, GEMM))]
    nvtx = [NvtxRange(-5, 190, "step 1"), NvtxRange(200, 420, "step 2")]
    return write_trace(Scenario(kernels=kernels, nvtx=nvtx), tmp_path / "stepped.sqlite")


def report_texts(trace: Path, out: Path, *options: str) -> tuple[str, str]:
    html, js = out.with_suffix(".html"), out.with_suffix(".json")
    args = ["report", str(trace), "-o", str(html), "--json", str(js), *options]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return html.read_text(), js.read_text()


def test_a_report_with_other_display_options_is_made_from_a_kept_one_as_a_fresh_one_is(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    trace = stepped(tmp_path)
    report_texts(trace, tmp_path / "first", "--top", "3")
    builds: list[int] = []
    real = report_builder.build_report
    monkeypatch.setattr(
        report_builder, "build_report", lambda *a, **k: builds.append(1) or real(*a, **k)
    )
    for i, options in enumerate((("--top", "1"), ("--top", "1", "--timeline-step", "2"))):
        made = report_texts(trace, tmp_path / f"made{i}", *options)
        assert builds == []  # made again from the kept report, not built
        fresh = report_texts(trace, tmp_path / f"fresh{i}", *options, "--no-cache")
        assert builds == [1]
        builds.clear()
        assert made == fresh
    gaps = json.loads(made[1])["gpus"][0]["gaps"]["top"]
    assert [g["duration_ns"] for g in gaps] == [40]  # the longest of the 4 gaps, with --top 1


def test_pictures_drawn_from_the_same_inputs_are_not_drawn_again(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsysreport import charts

    trace = stepped(tmp_path)
    report_texts(trace, tmp_path / "first", "--top", "3")
    drawn: list[str] = []
    for name in ("breakdown_chart", "timeline_chart", "step_series_chart", "gap_histogram_chart"):
        real = getattr(charts, name)
        monkeypatch.setattr(
            charts,
            name,
            lambda *a, _real=real, _name=name, **k: drawn.append(_name) or _real(*a, **k),
        )
    report_texts(trace, tmp_path / "top", "--top", "1")
    assert drawn == []  # --top changes no picture
    report_texts(trace, tmp_path / "step", "--top", "1", "--timeline-step", "2")
    assert drawn == ["timeline_chart"]


def test_a_picture_drawn_from_the_kept_report_s_own_objects_is_not_digested_again(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsysreport import render
    from nsysreport.sections.steps import StepReport

    trace = stepped(tmp_path)
    report_texts(trace, tmp_path / "first", "--top", "3")
    digested: list[tuple[Any, ...]] = []
    real = render.pickled_model
    monkeypatch.setattr(render, "pickled_model", lambda args: digested.append(args) or real(args))
    report_texts(trace, tmp_path / "top", "--top", "1")

    def shows_steps(args: tuple[Any, ...]) -> bool:
        return any(isinstance(a, tuple) and a and isinstance(a[0], StepReport) for a in args)

    # --top keeps the steps (the same objects as the kept report's): their picture is taken
    # as kept, undigested; the timeline is queried again, so its new objects are digested.
    assert digested and not any(map(shows_steps, digested))
    digested.clear()
    report_texts(trace, tmp_path / "again", "--top", "2")  # made from the --top 1 report
    assert digested and not any(map(shows_steps, digested))


def test_a_report_with_another_top_encodes_only_the_json_keys_made_from_what_changed(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = stepped(tmp_path)
    report_texts(trace, tmp_path / "first", "--top", "3")
    made: list[str] = []
    monkeypatch.setattr(
        model,
        "JSON_SECTIONS",
        tuple(
            (key, fields, lambda r, _key=key, _make=make: made.append(_key) or _make(r))
            for key, fields, make in model.JSON_SECTIONS
        ),
    )
    report_texts(trace, tmp_path / "top", "--top", "1")
    # --top replaces the GPUs' rows (their longest gaps) and the top kernels; the keys made
    # from those are encoded again, every other key's text is the kept report's.
    assert made == ["gpus", "top_kernels", "data_path_verdict", "communicator_roles"]
    made.clear()
    report_texts(trace, tmp_path / "fresh", "--top", "1", "--no-cache")
    assert made == [key for key, _, _ in model.JSON_SECTIONS]


def test_a_report_model_pickled_as_calls_of_its_classes_reads_back_equal() -> None:
    import pickletools

    from nsysreport.pickling import pickled_model

    def state_set(data: bytes) -> bool:  # BUILD: an object's state set after it was made
        return any(op.name == "BUILD" for op, _, _ in pickletools.genops(data))

    for trace in sorted((Path(__file__).parents[1] / "sample_traces").glob("*.sqlite"))[:3]:
        report = build_report(open_trace(trace), trace)
        data = pickled_model(report)
        back = pickle.loads(data)
        assert back == report and as_json(back) == as_json(report)
        # Every dataclass is made by its class's __init__ (a change of field order would fail
        # above), none by __setstate__ as the standard pickle of a slots dataclass.
        assert not state_set(data) and state_set(pickle.dumps(report, pickle.HIGHEST_PROTOCOL))
