"""Load a PyTorch profiler (Kineto) Chrome-trace JSON into the raw tables an nsys export fills.

One Kineto file is one process. Ids are synthesised in the nsys encoding, globalPid =
(1::BIGINT << 48) | (pid << 24) and globalTid = globalPid | tid, so every view works unchanged. GPU
events carry pid = device in Kineto; they get the host process's globalPid (the pid of the
CUDA API events) so that launches join them by correlation id. Times are exact: `ts` and `dur`
are microseconds with up to three decimals, read as text and scaled as integers, never as float.
All the work is SQL over DuckDB's own JSON reader (queries/load/kineto_*.sql, run in the
order STEPS lists); no Python loop touches an event.

Loader policy as for nsys exports (nsysreport.sqlite_copy): a GPU event without `ts` or `dur`
becomes a row without a start or an end, which the views leave out and skipped_row counts; one
without a name (or a name that is not a string) keeps a placeholder name (kernel_name); a name
that is not UTF-8 is read with U+FFFD; a complete event without a category, or a GPU event that
is not a complete event, is counted as skipped.
"""

from __future__ import annotations

import gzip
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.errors import TraceError
from nsysreport.flops import SHAPED_OPS
from nsysreport.queries import run_loader

if TYPE_CHECKING:
    # duckdb is imported in copy_kineto: 0.08 s of start-up (python -X importtime) that
    # telling a Kineto trace apart (is_kineto, which every load asks) never needs.
    import duckdb

SUFFIXES = (".json", ".json.gz")
# DuckDB reads the whole document as one object, into buffers sized by maximum_object_size
# (twice over for a compressed file): that is set from the document's real size, and DuckDB's
# memory limit is raised for the read when one document needs more.
MAX_OBJECT_BYTES = 4_294_967_295
NEXT_STEP = "save it again with torch.profiler (export_chrome_trace or tensorboard_trace_handler)"

# The load, step by step: queries/load/<step>.sql, each after what it reads (its header's
# Reads:). kineto_doc, read first, is the document; kineto_event its events with exact integer
# times, kineto_host the host process, kineto_string the names' ids; then each raw table, and
# last kineto_op_call (it takes the operator names nsysreport.flops knows).
STEPS = (
    "kineto_event",
    "kineto_unusable",
    "kineto_defaulted",
    "kineto_host",
    "kineto_string",
    "kineto_gpu_event",
    "kineto_kernel",
    "kineto_memcpy",
    "kineto_memset",
    "kineto_runtime",
    "kineto_annotation",
    "kineto_python",
    "kineto_nccl_range",
    "kineto_comm_group",
    "kineto_string_ids",
    "kineto_gpu_name",
    "kineto_export_meta",
    "kineto_hostname",
    "kineto_mpi_rank",
)


def is_kineto(path: Path) -> bool:
    """Whether `path` is named like a Kineto trace (`.json`, `.json.gz`, `.pt.trace.json`)."""
    return path.name.lower().endswith(SUFFIXES)


def _document_bytes(path: Path) -> int:
    """The JSON document's size: the file's, or for gzip the decompressed size, read and
    counted. The footer's size would save the read, but only the read checks every member to
    its trailer: DuckDB reads a member cut inside its CRC and size without a word."""
    if not path.name.lower().endswith(".gz"):
        return path.stat().st_size
    total = 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(
            f"{path}: is not a readable PyTorch profiler trace (gzip: {exc}); {NEXT_STEP}"
        ) from None
    return total


def _decoded_copy(path: Path, folder: Path) -> Path:
    """A copy of the (decompressed) document in `folder` with invalid UTF-8 as U+FFFD."""
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "rb") as f:
            data = f.read()
    else:
        data = path.read_bytes()
    copy = folder / "trace.json"
    copy.write_text(data.decode("utf-8", "replace"), encoding="utf-8")
    return copy


def copy_kineto(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Fill the (empty, existing) raw tables of `con` from the Kineto trace at `path`."""
    import duckdb

    private = tempfile.TemporaryDirectory(prefix="nsysreport-kineto-")
    (limit,) = run_loader(con, "memory_limit").fetchone() or ("",)
    try:
        source = path
        while True:
            size = min(_document_bytes(source) + (1 << 20), MAX_OBJECT_BYTES)
            run_loader(con, "set_memory_limit", {"limit": f"{max(4 * size, 1 << 30) >> 20}MiB"})
            try:
                run_loader(con, "kineto_doc", {"path": str(source.resolve()), "size": size})
                break
            except duckdb.InvalidInputException as exc:
                if "invalid UTF-8" in str(exc) and source is path:
                    # A name that is not UTF-8: read a private copy decoded with U+FFFD.
                    source = _decoded_copy(path, Path(private.name))
                else:
                    raise
        if run_loader(con, "kineto_doc_rows").fetchone() != (1, 1):
            raise TraceError(
                f"{path}: is not a PyTorch profiler (Kineto) trace (no traceEvents list); "
                + NEXT_STEP
            )
        for step in STEPS:
            run_loader(con, step)
        run_loader(con, "kineto_op_call", {"ops": list(SHAPED_OPS)})
        has_gpu = run_loader(con, "kineto_has_gpu").fetchone()
    except duckdb.OutOfMemoryException:
        raise  # not the trace's fault: the command's one line says so (cli._run)
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError(
            f"{path}: is not a readable PyTorch profiler trace ({reason}); {NEXT_STEP}"
        ) from exc
    finally:
        private.cleanup()
        run_loader(con, "set_memory_limit", {"limit": limit})
        run_loader(con, "kineto_cleanup")
    if has_gpu != (True,):
        raise TraceError(
            f"{path}: contains no GPU activity (no kernel, gpu_memcpy or gpu_memset events); "
            "profile with torch.profiler activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
