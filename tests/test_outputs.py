"""Where commands write (nsysreport.writes): never over an input or another output, every
location checked before any work, all outputs written or none, write errors in one line."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import SUBCOMMANDS, app
from nsysreport.synth import Kernel, Scenario, write_trace

runner = CliRunner()
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """GEMM [0,100), all-reduce [100,180) on one stream: exposed comm 80 ns."""
    scenario = Scenario(kernels=[Kernel(0, 100, GEMM), Kernel(100, 180, NCCL)])
    (tmp_path / "in").mkdir()
    return write_trace(scenario, tmp_path / "in" / "t.sqlite")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths are relative to the test's folder (no pyproject.toml budget there)."""
    monkeypatch.chdir(tmp_path)


def nsysreport(*args: str | Path) -> tuple[int, str, str]:
    """Run the command line as `main` would (a bare trace means `report`)."""
    argv = [str(a) for a in args]
    result = runner.invoke(app, argv if argv[0] in SUBCOMMANDS else ["report", *argv])
    return result.exit_code, result.stdout, result.stderr


def one_error(stderr: str, *fragments: str) -> str:
    """The single `Error:` line of stderr, checked to hold every fragment."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def nothing_loaded(cache: Path) -> bool:
    """No trace was loaded: the run left nothing in the (per-test) cache folder."""
    return not cache.exists() or not any(cache.iterdir())


def kineto_trace(path: Path) -> Path:
    """A PyTorch profiler trace: one GEMM [1000,2000) ns and an all-reduce [2000,2500) ns."""
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7}
    args = {"device": 0, "stream": 7}
    events = [
        {**kernel, "name": "gemm_kernel", "ts": 1, "dur": 1, "args": {**args, "correlation": 1}},
        {**kernel, "name": NCCL, "ts": 2, "dur": 0.5, "args": {**args, "correlation": 2}},
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


# --- never an input ----------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["-o", "--json"])
def test_an_output_named_as_the_trace_is_refused_and_the_trace_kept(
    trace: Path, option: str, isolated_cache: Path
) -> None:
    before = trace.read_bytes()
    code, _, err = nsysreport(trace, option, trace)
    assert code == 2
    assert one_error(err) == (
        f"Error: {option} {trace}: is the input trace {trace}; choose another output path"
    )
    assert trace.read_bytes() == before and nothing_loaded(isolated_cache)


def test_an_output_spelled_through_another_folder_is_still_the_trace(
    trace: Path, tmp_path: Path
) -> None:
    before = trace.read_bytes()
    code, _, err = nsysreport("in/t.sqlite", "-o", "out/../in/t.sqlite")
    assert code == 2
    one_error(err, "-o out/../in/t.sqlite: is the input trace in/t.sqlite")
    assert trace.read_bytes() == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("link", [os.link, os.symlink])
def test_a_hard_link_or_symlink_to_the_trace_is_the_trace(trace: Path, link: object) -> None:
    alias = trace.with_name("alias.html")
    link(trace, alias)  # type: ignore[operator]
    before = trace.read_bytes()
    code, _, err = nsysreport(trace, "-o", alias)
    assert code == 2
    one_error(err, f"-o {alias}: is the input trace {trace}")
    assert trace.read_bytes() == before


def test_the_pdf_beside_the_html_may_not_be_the_trace(tmp_path: Path) -> None:
    scenario = Scenario(kernels=[Kernel(0, 100, GEMM)])
    trace = write_trace(scenario, tmp_path / "run.pdf")  # an export, whatever its name
    before = trace.read_bytes()
    code, _, err = nsysreport(trace, "-o", tmp_path / "run.html", "--pdf")
    assert code == 2
    one_error(err, f"--pdf {trace}: is the input trace {trace}")
    assert trace.read_bytes() == before and not (tmp_path / "run.html").exists()


def test_a_kineto_trace_is_protected_as_an_nsys_export_is(tmp_path: Path) -> None:
    trace = kineto_trace(tmp_path / "rank0.json")
    before = trace.read_bytes()
    code, _, err = nsysreport(trace, "--json", trace)
    assert code == 2
    one_error(err, "is the input trace")
    assert trace.read_bytes() == before


def test_every_file_of_a_directory_of_ranks_is_an_input(tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in (0, 1):
        write_trace(Scenario(kernels=[Kernel(0, 100, GEMM)]), ranks / f"rank{rank}.sqlite")
    code, _, err = nsysreport(ranks, "-o", ranks / "rank1.sqlite")
    assert code == 2
    one_error(err, f"is the input trace {ranks / 'rank1.sqlite'}")


def test_compare_outputs_may_not_be_its_inputs(trace: Path, tmp_path: Path) -> None:
    other = write_trace(Scenario(kernels=[Kernel(0, 200, GEMM)]), tmp_path / "b.sqlite")
    before = other.read_bytes()
    for option in ("-o", "--json"):
        code, _, err = nsysreport("compare", f"a={trace}", f"b={other}", option, other)
        assert code == 2
        one_error(err, f"{option} {other}: is the input {other}")
    assert other.read_bytes() == before and not Path("nsysreport-compare.html").exists()


@pytest.mark.parametrize("option", ["--junit", "--markdown", "--json"])
def test_gate_outputs_may_not_be_the_trace_the_baseline_or_the_budget(
    trace: Path, tmp_path: Path, option: str
) -> None:
    base = write_trace(Scenario(kernels=[Kernel(0, 200, GEMM)]), tmp_path / "base.sqlite")
    budget = tmp_path / "budget.toml"
    budget.write_text("[max]\nidle_pct = 100\n")
    for target, role in ((trace, "trace"), (base, "baseline"), (budget, "budget file")):
        before = target.read_bytes()
        code, _, err = nsysreport(
            "gate", trace, "--budget", budget, "--baseline", base, option, target
        )
        assert code == 2
        one_error(err, f"{option} {target}: is the {role} {target}")
        assert target.read_bytes() == before


def test_two_outputs_may_not_be_one_file(trace: Path, tmp_path: Path) -> None:
    code, _, err = nsysreport(trace, "-o", tmp_path / "r.html", "--json", tmp_path / "r.html")
    assert code == 2
    one_error(err, f"--json {tmp_path / 'r.html'}: is also -o {tmp_path / 'r.html'}")
    code, _, err = nsysreport(trace, "-o", "r.html", "--pdf", "--json", "r.pdf")
    assert code == 2
    one_error(err, "--json r.pdf: is also --pdf r.pdf")
    (tmp_path / "old.html").write_text("old")
    os.link(tmp_path / "old.html", tmp_path / "old.json")
    code, _, err = nsysreport(trace, "-o", "old.html", "--json", "old.json")
    assert code == 2
    one_error(err, "--json old.json: is also -o old.html")
    assert not (tmp_path / "r.html").exists() and (tmp_path / "old.html").read_text() == "old"


# --- checked before any work -------------------------------------------------------------------


@pytest.mark.parametrize("option", ["-o", "--json"])
def test_an_existing_directory_as_output_is_one_line_before_loading(
    trace: Path, tmp_path: Path, option: str, isolated_cache: Path
) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    code, _, err = nsysreport(trace, option, folder)
    assert code == 2
    one_error(err, f"{option} {folder}: is a directory")
    assert nothing_loaded(isolated_cache) and list(folder.iterdir()) == []


def test_a_folder_that_is_a_file_fails_before_any_output_is_written(
    trace: Path, tmp_path: Path, isolated_cache: Path
) -> None:
    (tmp_path / "ro").write_text("a file where a folder would be")
    code, _, err = nsysreport(trace, "-o", "out/r.html", "--json", "ro/sub/r.json")
    assert code == 2
    one_error(err, "--json ro/sub/r.json: ro is not a directory")
    assert not (tmp_path / "out").exists() and nothing_loaded(isolated_cache)


@pytest.mark.parametrize(
    ("code", "reason"), [(errno.EACCES, "Permission denied"), (errno.EROFS, "Read-only")]
)
def test_a_folder_that_takes_no_new_file_fails_before_loading(
    trace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
    code: int,
    reason: str,
) -> None:
    # Tests run as root, whom permission bits do not stop: the folder refuses new files here.
    locked = tmp_path / "locked"
    locked.mkdir()
    real = tempfile.mkstemp

    def refusing(*args: object, **kwargs: object) -> tuple[int, str]:
        if Path(str(kwargs.get("dir"))) == locked:
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(tempfile, "mkstemp", refusing)
    exit_code, _, err = nsysreport(trace, "-o", "r.html", "--json", locked / "r.json")
    assert exit_code == 2
    one_error(err, f"--json {locked / 'r.json'}: cannot write there ({reason}")
    assert not (tmp_path / "r.html").exists() and nothing_loaded(isolated_cache)


def test_a_folder_that_may_not_be_searched_is_one_line_not_a_traceback(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = tmp_path / "private"
    private.mkdir()
    real = pathlib.Path.stat

    def denied(self: Path, **kwargs: bool) -> os.stat_result:
        if private in self.absolute().parents:  # as if `private` lacked its x bit
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real(self, **kwargs)

    monkeypatch.setattr(pathlib.Path, "stat", denied)
    code, _, err = nsysreport(trace, "-o", "private/sub/r.html")
    assert code == 2
    one_error(err, "-o private/sub/r.html: cannot write there (Permission denied)")


# --- all or none -------------------------------------------------------------------------------


def test_a_full_disk_while_writing_names_the_output_and_changes_no_output(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.html").write_text("yesterday's report")
    real = pathlib.Path.open

    def filling(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if self.name.startswith(".r.json.") and "w" in mode:
            with real(self, mode, *args, **kwargs) as f:
                f.write("{\n")  # a part of it written, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, mode, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", filling)
    code, _, err = nsysreport(trace, "-o", out / "r.html", "--json", out / "r.json")
    assert code == 1
    line = one_error(err)
    assert line == f"Error: --json {out / 'r.json'}: cannot write: No space left on device"
    # The HTML was complete, but its rename waits for every output: yesterday's stays.
    assert sorted(p.name for p in out.iterdir()) == ["r.html"]
    assert (out / "r.html").read_text() == "yesterday's report"


def test_a_pipe_that_cannot_be_written_fails_in_one_line_before_any_rename(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Never /dev/full itself: a regression would replace it (tests run as root).
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    real = pathlib.Path.open

    def full(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if self == pipe and "w" in mode:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, mode, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", full)
    code, _, err = nsysreport(trace, "-o", tmp_path / "r.html", "--json", pipe)
    assert code == 1
    one_error(err, f"--json {pipe}: cannot write: No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "pipe"]


def test_a_failed_rename_removes_the_outputs_renamed_before_it(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pathlib.Path.replace

    def failing(self: Path, target: Path) -> Path:
        if Path(target).name == "r.json":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(self, target)

    monkeypatch.setattr(pathlib.Path, "replace", failing)
    code, _, err = nsysreport(trace, "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert code == 1
    one_error(err, f"--json {tmp_path / 'r.json'}: cannot write: Input/output error")
    assert [p.name for p in tmp_path.iterdir() if p.name != "in"] == []


def test_outputs_are_as_readable_as_any_new_file_and_pipes_are_written_in_place(
    trace: Path, tmp_path: Path
) -> None:
    # A named pipe stands for /dev/null or /dev/stdout, which a regression would replace.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    old = os.umask(0o027)
    try:
        code, out, _ = nsysreport(trace, "-o", pipe, "--json", tmp_path / "m.json")
    finally:
        os.umask(old)
        reader.join(timeout=60)
    assert code == 0 and f"Wrote {pipe}" in out
    assert received[0].startswith(b"<!DOCTYPE html>") and stat.S_ISFIFO(pipe.stat().st_mode)
    assert stat.S_IMODE((tmp_path / "m.json").stat().st_mode) == 0o640
    assert json.loads((tmp_path / "m.json").read_text())["gpus"][0]["exposed_comm_ns"] == 80
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_missing_folders_on_the_way_are_made(trace: Path, tmp_path: Path) -> None:
    code, _, _ = nsysreport(trace, "-o", "a/b/r.html", "--json", "a/c/r.json", "-q")
    assert code == 0
    assert (tmp_path / "a/b/r.html").is_file() and (tmp_path / "a/c/r.json").is_file()


def test_json_to_stdout_is_not_a_file_and_may_go_with_any_output(trace: Path) -> None:
    code, out, _ = nsysreport(trace, "-o", "r.html", "--json", "-")
    assert code == 0 and json.loads(out)["schema_version"] == 2
    assert not Path("-").exists() and Path("r.html").is_file()


def test_a_full_disk_is_one_line_even_where_a_library_warns_of_it_too(
    trace: Path, tmp_path: Path
) -> None:
    # A file-size limit fails every write past 16 KiB with EFBIG, as a full disk does: the
    # report's, and matplotlib's saving of its font cache in a fresh cache folder, which it
    # logs as a warning ("Could not save font_manager cache"). stderr is the one Error line.
    out = tmp_path / "out"

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))

    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl"), "XDG_CACHE_HOME": str(tmp_path)}
    argv = [trace, "-o", out / "r.html", "--no-cache", "-q"]
    command = [sys.executable, "-m", "nsysreport", *map(str, argv)]
    proc = subprocess.run(command, env=env, preexec_fn=limit, capture_output=True, text=True)
    assert proc.returncode == 1
    assert one_error(proc.stderr) == f"Error: -o {out / 'r.html'}: cannot write: File too large"
    assert not (out / "r.html").exists()
