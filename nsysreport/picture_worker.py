"""The pictures of a large trace's report, drawn in a second process while this one works.

After the analysis, a cold report is single-threaded Python: matplotlib's import, the pictures
and the JSON (1M kernels: 0.7 s, 1.2 s and 0.6 s; 5M: 0.7 s, 1.8 s and 2.3 s, bench_report.py's
traces), while another core waits. A worker process, started when the analysis begins, imports
matplotlib while DuckDB runs, then draws the pictures while this process writes the JSON. The
pictures are the same: each is drawn by the same function from the same arguments (pickled
once here: their digest is the picture's key, nsysreport.render).

The worker is `python -m nsysreport.picture_worker`, not a multiprocessing child: spawn would
import the caller's main script again (a script calling nsysreport without an
`if __name__ == "__main__"` guard would run twice), and fork would copy DuckDB's threads and
locks. Requests and pictures go through its stdin and stdout as length-prefixed pickles; a
thread here does the exchange, so drawing goes on while this process makes the JSON.

Small traces draw here: starting the worker costs about a core-second (a Python, matplotlib),
more than their pictures and JSON take. Whatever stops the worker (it cannot start, it dies),
the pictures are drawn here instead: a failure of the worker is never the report's.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

# A trace file at least this large gets a worker: bench_report.py's 136 MB export of 1M kernels
# spends 2.5 s on matplotlib, its pictures and JSON; the 2-3 MB real traces 0.1-0.2 s.
WORKER_MIN_BYTES = 32 << 20
# How long closing waits for the worker to exit after its last picture.
EXIT_WAIT_S = 5
# The worker's command after the Python executable.
WORKER_ARGS = ("-m", "nsysreport.picture_worker")

Draw = Callable[..., str]
Job = tuple[Draw, bytes, "Future[str]"]  # a chart function, its pickled arguments, its picture
LENGTH = struct.Struct("<Q")


class PictureWorker:
    """One worker process that draws pictures: `draw(fn, pickled_args)` returns a future."""

    def __init__(self) -> None:
        # The worker imports this copy of nsysreport, wherever it was imported from.
        package_root = str(Path(__file__).resolve().parents[1])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (package_root, os.environ.get("PYTHONPATH")) if p
            ),
        }
        self._process = subprocess.Popen(
            [sys.executable, *WORKER_ARGS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._exchange, daemon=True)
        self._thread.start()

    def draw(self, fn: Draw, pickled_args: bytes) -> Future[str]:
        future: Future[str] = Future()
        self._jobs.put((fn, pickled_args, future))
        return future

    def close(self) -> None:
        """Stop the worker: at once when it exits after its last picture, else (pictures left
        to draw when the report failed or was interrupted) after EXIT_WAIT_S."""
        self._jobs.put(None)
        self._thread.join(EXIT_WAIT_S)
        try:
            self._process.wait(0 if self._thread.is_alive() else EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._thread.join()

    def _exchange(self) -> None:
        """Send each request and read its picture, in order, until close (or the worker fails:
        every request left then fails, and is drawn here)."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        failed: BaseException | None = None
        while (job := self._jobs.get()) is not None:
            fn, pickled_args, future = job
            if failed is None:
                try:
                    _send(stdin, (fn, pickled_args))
                    ok, value = _receive(stdout)
                except Exception as exc:  # a dead worker: a broken pipe, or EOF
                    failed = exc
            if failed is not None:
                future.set_exception(failed)
            elif ok:
                future.set_result(value)
            else:  # it failed to draw there (drawn here again, the error is raised here)
                future.set_exception(RuntimeError(value))
        with suppress(OSError):
            stdin.close()


def start(traces: Sequence[Path]) -> PictureWorker | None:
    """A worker for the report of `traces` when they are large enough together to gain from
    one; None when they are small or no process can be started (the pictures are then drawn
    here)."""
    try:
        if sum(trace.stat().st_size for trace in traces) < WORKER_MIN_BYTES:
            return None
        return PictureWorker()
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def stop(worker: PictureWorker | None) -> None:
    if worker is not None:
        worker.close()


def result(future: Future[str], fn: Draw, pickled_args: bytes) -> str:
    """The worker's picture, or the same picture drawn here when the worker failed (a real
    error of the drawing is then raised here, as without a worker)."""
    with suppress(Exception):
        return future.result()
    return _draw(fn, pickled_args)


def _draw(fn: Draw, pickled_args: bytes) -> str:
    args: Any = pickle.loads(pickled_args)
    return fn(*args)


def _send(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(LENGTH.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(LENGTH.size)
    if len(head) < LENGTH.size:
        raise EOFError("the picture worker stopped")
    (size,) = LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the picture worker stopped")
    return pickle.loads(data)


def _serve() -> None:
    """The worker: import matplotlib, then draw each request until stdin closes."""
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            fn, pickled_args = _receive(stdin)
        except EOFError:
            return
        try:
            reply: tuple[bool, str] = (True, _draw(fn, pickled_args))
        except Exception as exc:
            reply = (False, f"{type(exc).__name__}: {exc}")
        _send(stdout, reply)


if __name__ == "__main__":
    _serve()
