"""Run per-file work: here, in a pool of worker processes (--jobs N), or on a Dask cluster
(--scheduler tcp://host:port) when one machine is not enough. No cluster code of our own."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nsysreport.errors import NsysReportError, OptionError

A = TypeVar("A")
R = TypeVar("R")
THREADS_VARIABLE = "NSYSREPORT_THREADS"  # DuckDB threads per worker (database.connect reads it)


def default_jobs() -> int:
    """The cores this process may run on (a container or taskset can allow fewer than exist):
    the default worker count, and each DuckDB's thread count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Workers:
    """`with Workers(jobs, scheduler, tasks) as w: w.map(fn, items)` — the same pool serves
    every phase of one report, so worker processes start once."""

    def __init__(self, jobs: int, scheduler: str | None, tasks: int) -> None:
        self.jobs, self.scheduler, self.tasks = jobs, scheduler, tasks
        self._pool: Any = None
        self._client: Any = None

    def __enter__(self) -> Workers:
        if self.scheduler is not None:
            self._client = _dask_client(self.scheduler)
        elif self.jobs > 1 and self.tasks > 1:
            # Lazy: 20 ms of start-up (python -X importtime) for a pool that only several
            # files use; database.connect imports this module for every trace.
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            workers = min(self.jobs, self.tasks)
            # Workers share the cores: each DuckDB gets its share instead of all of them.
            threads = str(max(1, default_jobs() // workers))
            # spawn, not fork: a forked child would inherit DuckDB's threads and locks.
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_share_cores,
                initargs=(threads,),
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._client is not None:
            self._client.close()

    def map(self, fn: Callable[[A], R], items: Sequence[A]) -> list[R]:
        """fn over items, results in item order; the first error raised is re-raised here."""
        if self._client is not None:
            futures = self._client.map(fn, items, pure=False)
            result: list[R] = self._client.gather(futures)
            return result
        if self._pool is None:
            return [fn(item) for item in items]
        from concurrent.futures.process import BrokenProcessPool

        try:
            return list(self._pool.map(fn, items))
        except BrokenProcessPool as exc:
            raise NsysReportError(
                f"a worker process died ({exc}); out of memory? try fewer --jobs"
            ) from exc


def _share_cores(threads: str) -> None:
    os.environ[THREADS_VARIABLE] = threads


def _dask_client(address: str) -> Any:
    try:  # lazy: an optional dependency, and 0.3 s of start-up (python -X importtime)
        from distributed import Client
    except ImportError as exc:
        raise OptionError(
            f"--scheduler {address}: needs Dask (pip install 'nsysreport[dask]')"
        ) from exc
    try:
        return Client(address, timeout=10)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise OptionError(f"--scheduler {address}: cannot connect ({exc})") from exc
