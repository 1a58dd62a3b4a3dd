"""Run one nsysreport command for a case: in this process (fast), or as a subprocess (FIFOs,
another user, a file-size limit, concurrency, kill -9); and snapshot what it may not touch."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import resource
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fuzzing.seeds import REPO

# As root, a chmod 000 file is still readable: the child then runs without the two
# capabilities that override file permissions (util-linux setpriv), so permissions apply.
DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
# Fixed generation time: two runs of the same input write the same bytes.
BASE_ENV = {"SOURCE_DATE_EPOCH": "1767225600", "NSYSREPORT_FUZZ": "1"}


@dataclass(slots=True)
class Result:
    """What one command did: exit status (None: killed), streams, and a traceback summary."""

    code: int | None
    stderr: str
    stdout: str = ""
    crash: str | None = None  # "ExcType: message (at file:line)" for an uncaught exception
    seconds: float = 0.0
    signal: int | None = None


def run_inproc(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> Result:
    """nsysreport.cli.main(argv) in this process, with `env` and `cwd` set for the call only."""
    from nsysreport.cli import main

    saved_env = {k: os.environ.get(k) for k in (*env, *BASE_ENV)}
    saved_cwd = os.getcwd()
    err, out = io.StringIO(), io.StringIO()
    os.environ.update({**BASE_ENV, **env})
    os.chdir(cwd)
    started = time.perf_counter()
    crash = None
    code: int | None = 0
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # the promise is "never a traceback": record which one
        code, crash = None, _crash_summary(exc)
    finally:
        os.chdir(saved_cwd)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return Result(code, err.getvalue(), out.getvalue(), crash, time.perf_counter() - started)


def _crash_summary(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/nsysreport/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno} in {ours[-1].name}" if ours else "?"
    message = (str(exc).strip().splitlines() or [""])[0][:160]
    return f"{type(exc).__name__}: {message} (at {where})"


def command(argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "nsysreport", *argv]


def subprocess_env(env: Mapping[str, str]) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, **BASE_ENV, "PYTHONPATH": path, **env}


def run_subprocess(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    timeout: float = 60,
    no_dac: bool = False,
    fsize: int | None = None,
) -> Result:
    """`python -m nsysreport argv` in a child; `no_dac`: file permissions apply even to root;
    `fsize`: a file-size limit (writes past it fail with EFBIG, as on a full disk)."""

    def limits() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    started = time.perf_counter()
    try:
        done = subprocess.run(
            (DROP_DAC if no_dac and os.geteuid() == 0 else []) + command(argv),
            cwd=cwd,
            env=subprocess_env(env),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            preexec_fn=limits if fsize else None,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return Result(None, stderr, "", f"hang: no exit within {timeout:.0f} s", timeout)
    return from_completed(done.returncode, done.stderr, done.stdout, time.perf_counter() - started)


def from_completed(code: int, stderr: str, stdout: str, seconds: float) -> Result:
    crash = None
    if code < 0:
        crash = f"killed by signal {signal.Signals(-code).name}"
    elif "Traceback (most recent call last)" in stderr:
        lines = [x for x in stderr.strip().splitlines() if x and not x.startswith(" ")]
        crash = (lines[-1] if lines else "Traceback")[:200]
    return Result(
        code if code >= 0 else None, stderr, stdout, crash, seconds, -code if code < 0 else None
    )


@dataclass(frozen=True, slots=True)
class FileState:
    sha256: str
    mtime_ns: int
    mode: int


@dataclass(slots=True)
class Snapshot:
    """The inputs' bytes and mtimes, and the listing of each watched folder."""

    files: dict[Path, FileState] = field(default_factory=dict)
    listings: dict[Path, frozenset[str]] = field(default_factory=dict)


def snapshot(inputs: Sequence[Path], folders: Sequence[Path]) -> Snapshot:
    snap = Snapshot()
    for path in inputs:
        with contextlib.suppress(OSError):
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "-"
            snap.files[path] = FileState(digest, st.st_mtime_ns, st.st_mode)
    for folder in folders:
        with contextlib.suppress(OSError):
            snap.listings[folder] = frozenset(os.listdir(folder))
    return snap
