"""Run cases in worker processes, so that a hang or a crash of one case (a segfault in a
native library, a read that never returns) is a failure of that case, not of the run."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from fuzzing.cases import Context, Outcome, execute
from fuzzing.seeds import SEEDS

CaseId = tuple[int, str, int]  # run seed, family, index


def _serve(root: str, conn: Connection, keep: bool) -> None:
    from fuzzing import plan

    ctx = Context(Path(root))
    while True:
        job = conn.recv()
        if job is None:
            return
        seed, family, index = job
        try:
            case = plan(ctx, seed, family, index)
        except Exception as exc:  # a planner bug must show, not stop the run
            conn.send(Outcome(f"{family}:{index}", "?", [("harness", repr(exc))], 0.0))
            continue
        try:
            conn.send(execute(ctx, case, keep))
        except Exception as exc:
            conn.send(Outcome(case.name, case.repro(), [("harness", repr(exc)[:300])], 0.0))


class Worker:
    def __init__(self, root: Path, keep: bool) -> None:
        self.root, self.keep = root, keep
        self._start()

    def _start(self) -> None:
        context = mp.get_context("spawn")  # a fresh interpreter: no forked DuckDB/polars threads
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=_serve, args=(str(self.root), child, self.keep))
        self.proc.daemon = True
        self.proc.start()
        child.close()

    def run(self, job: CaseId, timeout: float) -> Outcome:
        started = time.perf_counter()
        self.conn.send(job)
        if self.conn.poll(timeout):
            try:
                outcome: Outcome = self.conn.recv()
                return outcome
            except EOFError:
                pass
        seed, family, index = job
        code = self.proc.exitcode
        self.proc.kill()
        self.proc.join()
        self._start()
        what = f"no answer within {timeout:.0f} s" if code is None else f"worker died ({code})"
        repro = f"python benchmarks/fuzz.py --seed {seed} --case {family}:{index}"
        kind = "hang" if code is None else "crash"
        return Outcome(f"{family}:{index}", repro, [(kind, what)], time.perf_counter() - started)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def prepare(root: Path) -> None:
    """Build every seed and its baseline report once, before any worker starts."""
    ctx = Context(root)
    for seed in SEEDS:
        ctx.seed_file(seed)
        ctx.baseline(seed)


def run_all(
    root: Path, jobs: Iterable[CaseId], timeout: float = 300, workers: int = 1, keep: bool = False
) -> Iterator[Outcome]:
    """Outcomes of `jobs` in order, from `workers` processes."""
    pending = list(jobs)
    if workers <= 1:
        worker = Worker(root, keep)
        try:
            for job in pending:
                yield worker.run(job, timeout)
        finally:
            worker.close()
        return
    from concurrent.futures import ThreadPoolExecutor
    from queue import Queue

    free: Queue[Worker] = Queue()
    for _ in range(workers):
        free.put(Worker(root, keep))

    def one(job: CaseId) -> Outcome:
        w = free.get()
        try:
            return w.run(job, timeout)
        finally:
            free.put(w)

    with ThreadPoolExecutor(workers) as pool:
        yield from pool.map(one, pending)
    while not free.empty():
        free.get().close()
