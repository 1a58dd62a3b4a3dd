"""The report cache: a pickle of each finished report model (with the outputs made from it)
beside the trace's cached tables, so that a second run skips the queries."""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nsysreport.cache_files import (
    REPORT_SUFFIX,
    cache_path,
    digest,
    drop_older,
    temp_prefix,
)
from nsysreport.pickling import pickled_model
from nsysreport.trace_file import check_file

if TYPE_CHECKING:
    from nsysreport.patterns import Patterns

# What reading a report file can raise when it is truncated, corrupt or from other code.
UNREADABLE = (
    OSError,
    EOFError,
    pickle.UnpicklingError,
    AttributeError,
    ImportError,
    IndexError,
    KeyError,
    TypeError,
    ValueError,
    # Random bytes can declare a huge object (a bogus length after a pickle opcode): unpickling
    # them asks for that much memory and fails before reading on (the fuzzer's cache case 3).
    MemoryError,
)

T = TypeVar("T")


def report_path(
    trace: Path, patterns: Patterns, options: tuple[Any, ...], shared: tuple[Any, ...] = ()
) -> Path:
    """The report file for this trace's cache key (code digest included) plus the model's
    options and the path as given (the model records it). `shared`: the options that a report
    made with other display options must share to be made again from (cached_report's
    `refresh`); they end the name, so such reports are found by it."""
    db = cache_path(trace, patterns)
    what = digest(repr(options), str(trace))
    return db.with_name(f"{db.stem}-{what}-{_shared(trace, shared)}{REPORT_SUFFIX}")


def _shared(trace: Path, shared: tuple[Any, ...]) -> str:
    return digest(repr(shared), str(trace))


class CachedReport(Generic[T]):
    """A report model from the cache (or just built), with the outputs kept beside it.

    Outputs are anything derived from the model alone (the HTML with a placeholder for its
    generation time, the JSON text): a warm run writes them as they are, so it neither queries
    nor draws nor encodes. The model itself is unpickled only when asked for.
    """

    def __init__(
        self,
        path: Path,
        model_bytes: bytes,
        outputs: dict[str, Any],
        build: Callable[[], T],
        previous: tuple[T, dict[str, Any]] | None = None,
    ) -> None:
        self.path = path
        self._model_bytes = model_bytes
        self._model: T | None = None
        self._build = build
        self.outputs = outputs
        # A model made again from a report with other display options: that report's model and
        # outputs, whose pictures and JSON text the parts made from the same inputs reuse.
        self.previous = previous

    @property
    def pictures(self) -> dict[str, Any]:
        """The previous report's pictures (outputs["svg"]), else none."""
        return self.previous[1].get("svg", {}) if self.previous else {}

    @property
    def model(self) -> T:
        if self._model is None:
            try:
                self._model = pickle.loads(self._model_bytes)
            except UNREADABLE:  # damaged inside a readable file: build it again, keep that
                self._model = self._build()
                self._model_bytes = pickled_model(self._model)
                self.outputs = {}
                _write(self.path, self._model_bytes, {})
        return self._model

    def keep(self, **outputs: Any) -> None:
        """Add outputs to the file (best effort, as every cache write)."""
        self.outputs.update(outputs)
        _write(self.path, self._model_bytes, self.outputs)


def cached_report(
    trace: Path,
    patterns: Patterns,
    options: tuple[Any, ...],
    build: Callable[[], T],
    shared: tuple[Any, ...] = (),
    refresh: Callable[[T], T] | None = None,
) -> CachedReport[T]:
    """The report model of `trace` read from the cache, else `build()` and keep it there.

    `options` are the model's own options (top N, timeline step and range): each set of them
    gets its own file. A hit opens neither the trace's DuckDB cache nor the trace; an
    unreadable file is rebuilt; without room or permission for a file the model is not kept.
    On a miss, a kept report of the same trace with the same `shared` options but other
    display options is made again by `refresh(model)` where there is one (only what the
    display options choose is queried again), else the model is built.
    """
    check_file(trace)  # a missing or unreadable trace fails the same way with or without a cache
    target = report_path(trace, patterns, options, shared)
    stored = _read(target)
    if stored is not None:
        return CachedReport(target, stored["model"], stored["outputs"], build)
    sibling = _sibling(target, _shared(trace, shared)) if refresh is not None else None
    model = refresh(sibling[0]) if refresh is not None and sibling is not None else build()
    cached: CachedReport[T] = CachedReport(target, pickled_model(model), {}, build, sibling)
    cached._model = model
    _write(target, cached._model_bytes, {})
    drop_older(target)
    return cached


def _sibling(target: Path, shared: str) -> tuple[Any, dict[str, Any]] | None:
    """The model and outputs of the newest readable report beside `target` that shares its
    trace, code, patterns and `shared` options (its display options differ), else None."""
    db_stem = "-".join(target.name.split("-")[:2])
    others = [p for p in target.parent.glob(f"{db_stem}-*-{shared}{REPORT_SUFFIX}") if p != target]
    for other in sorted(others, key=_mtime, reverse=True):
        stored = _read(other)
        if stored is None:
            continue
        try:
            return pickle.loads(stored["model"]), stored["outputs"]
        except UNREADABLE:
            continue
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read(target: Path) -> dict[str, Any] | None:
    """A report file's pickled model and outputs, or None when missing, corrupt or of another
    key. The key covers the code, so the model unpickles; CachedReport.model rebuilds if not."""
    try:
        with target.open("rb") as f:
            stored = pickle.load(f)
        if stored["name"] != target.name:
            raise ValueError(f"{target.name}: written for {stored['name']}")
        if not isinstance(stored["model"], bytes) or not isinstance(stored["outputs"], dict):
            raise TypeError(f"{target.name}: not a report file")
        return {"model": stored["model"], "outputs": stored["outputs"]}
    except FileNotFoundError:
        return None
    except UNREADABLE:
        with suppress(OSError):  # an unusable folder: the next write fails quietly too
            target.unlink(missing_ok=True)  # corrupt, or from other code: rebuilt and rewritten
        return None


def _write(target: Path, model_bytes: bytes, outputs: dict[str, Any]) -> None:
    """Pickle under a unique temporary name and rename into place (as the DuckDB cache)."""
    content = {"name": target.name, "model": model_bytes, "outputs": outputs}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(content, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(name, target)
        finally:
            Path(name).unlink(missing_ok=True)
    except OSError:
        pass  # no room or no permission (a read-only home, a full disk): nothing is kept
