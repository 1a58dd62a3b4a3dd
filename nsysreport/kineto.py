"""Load a PyTorch profiler (Kineto) Chrome-trace JSON into the raw tables an nsys export fills.

One Kineto file is one process. Ids are synthesised in the nsys encoding, globalPid =
(1::BIGINT << 48) | (pid << 24) and globalTid = globalPid | tid, so every view works unchanged. GPU
events carry pid = device in Kineto; they get the host process's globalPid (the pid of the
CUDA API events) so that launches join them by correlation id. Times are exact: `ts` and `dur`
are microseconds with up to three decimals, read as text and scaled as integers, never as float.
All the work is SQL over DuckDB's own JSON reader; no Python loop touches an event.

Loader policy as for nsys exports (nsysreport.load): a GPU event without `ts` or `dur` becomes a
row without a start or an end, which the views leave out and skipped_row counts; one without a
name (or a name that is not a string) keeps a placeholder name (kernel_name); a name that is not
UTF-8 is read with U+FFFD; a complete event without a category, or a GPU event that is not a
complete event, is counted as skipped.
"""

from __future__ import annotations

import gzip
import tempfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.errors import TraceError

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


def _ns(text: str) -> str:
    """SQL: microseconds as JSON number text -> integer ns, exact (rounded half up at 1 ns).

    Plain decimals are split at the point and scaled as integers (a cast to DECIMAL(38, 3) is
    exact too but 100x slower); anything else (an exponent) falls back to DOUBLE.
    """
    return (
        f"CASE WHEN regexp_full_match({text}, '[0-9]+([.][0-9]*)?') "
        f"THEN (split_part({text}, '.', 1)::HUGEINT * 1000 "
        f"+ (rpad(split_part({text}, '.', 2), 4, '0')[1:4]::BIGINT + 5) // 10)::BIGINT "
        f"ELSE round(TRY_CAST({text} AS DOUBLE) * 1000)::BIGINT END"
    )


# Every event the tables need, one row each, with times in integer ns.
EVENTS_SQL = f"""
CREATE TEMP TABLE kineto_event AS
WITH raw AS (SELECT unnest(traceEvents) AS e FROM kineto_doc)
SELECT
    e.cat,
    -- A name that is not a JSON string (-1, true, a list) is no name: the placeholder's.
    CASE WHEN json_type(e.name) = 'VARCHAR' THEN e.name->>'$' END AS name,
    TRY_CAST(e.pid AS BIGINT) AS pid,
    coalesce(TRY_CAST(e.tid AS BIGINT), 0) AS tid,
    {_ns("e.ts")} AS start,
    {_ns("e.dur")} AS dur,
    e.args
FROM raw
WHERE e.ph = 'X' AND e.cat IN (
    'kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime', 'cuda_driver', 'user_annotation'
) AND (e.ts IS NOT NULL OR e.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset'))
"""

# Events that would be GPU work but cannot be read as such, counted as skipped (skipped_row):
# a complete event (ph X) with no category says not what it is; an event of a GPU category that
# is not a complete event has no duration. Profilers write neither.
UNUSABLE_SQL = """
INSERT INTO load_skipped -- load.LOAD_SKIPPED (load imports this module)
SELECT 'traceEvents', reason, count(*)
FROM (
    SELECT CASE
        WHEN e.ph = 'X' AND e.cat IS NULL THEN 'complete event (ph X) with no cat'
        WHEN e.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND e.ph IS DISTINCT FROM 'X'
            THEN 'GPU event that is not a complete event (ph X)'
    END AS reason
    FROM (SELECT unnest(traceEvents) AS e FROM kineto_doc)
)
WHERE reason IS NOT NULL
GROUP BY reason
"""

# The host process: the pid with the most CUDA API calls, else the pid of CPU annotations.
HOST_SQL = """
CREATE TEMP TABLE kineto_host AS
WITH candidates AS (
    SELECT pid, CASE WHEN cat IN ('cuda_runtime', 'cuda_driver') THEN 0 ELSE 1 END AS pref,
        count(*) AS n
    FROM kineto_event
    WHERE pid IS NOT NULL AND cat IN ('cuda_runtime', 'cuda_driver', 'user_annotation')
    GROUP BY ALL
),
host AS (SELECT coalesce((SELECT pid FROM candidates ORDER BY pref, n DESC, pid LIMIT 1), 0) AS pid)
SELECT pid, (1::BIGINT << 48) | ((pid & 16777215) << 24) AS gpid FROM host
"""

STRINGS_SQL = """
CREATE TEMP TABLE kineto_string AS
SELECT row_number() OVER (ORDER BY name) AS id, name
FROM (
    SELECT DISTINCT name FROM kineto_event
    WHERE name IS NOT NULL AND cat IN ('kernel', 'cuda_runtime', 'cuda_driver')
)
"""

# A GPU event's columns, shared by kernels, memcpys and memsets. Its end is start + dur as the
# trace says: missing (NULL) or before the start, the views treat it as they do nsys rows.
GPU_COLUMNS = """
    e.start, e.start + e.dur,
    coalesce(TRY_CAST(e.args->>'device' AS BIGINT), e.pid),
    coalesce(TRY_CAST(e.args->>'stream' AS BIGINT), e.tid),
    TRY_CAST(e.args->>'correlation' AS BIGINT),
    (SELECT gpid FROM kineto_host)
"""

INSERTS = (
    f"""
    INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ("start", "end", deviceId, streamId, correlationId,
        globalPid, contextId, demangledName, shortName)
    SELECT {GPU_COLUMNS}, TRY_CAST(e.args->>'context' AS BIGINT), s.id, s.id
    FROM kineto_event AS e LEFT JOIN kineto_string AS s ON s.name = e.name
    WHERE e.cat = 'kernel'
    """,
    f"""
    INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY ("start", "end", deviceId, streamId, correlationId,
        globalPid, bytes, copyKind)
    SELECT {GPU_COLUMNS}, TRY_CAST(e.args->>'bytes' AS BIGINT),
        CASE WHEN e.name LIKE '%HtoD%' THEN 1 WHEN e.name LIKE '%DtoH%' THEN 2
            WHEN e.name LIKE '%DtoD%' THEN 8 WHEN e.name LIKE '%HtoH%' THEN 9
            WHEN e.name LIKE '%PtoP%' THEN 10 ELSE 0 END
    FROM kineto_event AS e
    WHERE e.cat = 'gpu_memcpy'
    """,
    f"""
    INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET ("start", "end", deviceId, streamId, correlationId,
        globalPid, bytes)
    SELECT {GPU_COLUMNS}, TRY_CAST(e.args->>'bytes' AS BIGINT)
    FROM kineto_event AS e
    WHERE e.cat = 'gpu_memset'
    """,
    """
    INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME ("start", "end", eventClass, globalTid,
        correlationId, nameId)
    SELECT e.start, e.start + greatest(coalesce(e.dur, 0), 0),
        CASE e.cat WHEN 'cuda_driver' THEN 1 ELSE 0 END,
        (1::BIGINT << 48) | ((e.pid & 16777215) << 24) | (e.tid & 16777215),
        TRY_CAST(e.args->>'correlation' AS BIGINT), s.id
    FROM kineto_event AS e JOIN kineto_string AS s ON s.name = e.name
    WHERE e.cat IN ('cuda_runtime', 'cuda_driver') AND e.pid IS NOT NULL AND e.start IS NOT NULL
    """,
    # CPU annotations (record_function ranges, ProfilerStep#N) are NVTX push/pop ranges.
    """
    INSERT INTO NVTX_EVENTS ("start", "end", eventType, globalTid, text)
    SELECT e.start, e.start + greatest(coalesce(e.dur, 0), 0), 59,
        (1::BIGINT << 48) | ((e.pid & 16777215) << 24) | (e.tid & 16777215),
        replace(e.name, chr(0), '')
    FROM kineto_event AS e
    WHERE e.cat = 'user_annotation' AND e.pid IS NOT NULL AND e.name IS NOT NULL
        AND e.start IS NOT NULL
    """,
    # An NCCL kernel with collective metadata gets an NCCL-API-like range around its launch,
    # whose payload is the message size, as nsys records NCCL's own NVTX ranges.
    """
    INSERT INTO NVTX_EVENTS ("start", "end", eventType, globalTid, text, uint64Value)
    WITH meta AS (
        SELECT TRY_CAST(args->>'correlation' AS BIGINT) AS correlation,
            regexp_replace(lower(args->>'Collective name'), '[^a-z]', '', 'g') AS op,
            TRY_CAST(args->>'In msg nelems' AS BIGINT) AS nelems,
            lower(args->>'dtype') AS dtype
        FROM kineto_event
        WHERE cat = 'kernel' AND (args->>'Collective name') IS NOT NULL
    ),
    named AS (
        SELECT *,
            CASE WHEN op LIKE 'allreduce%' THEN 'ncclAllReduce'
                WHEN op LIKE 'allgather%' THEN 'ncclAllGather'
                WHEN op LIKE 'reducescatter%' THEN 'ncclReduceScatter'
                WHEN op LIKE 'alltoall%' THEN 'ncclAllToAll'
                WHEN op LIKE 'broadcast%' THEN 'ncclBroadcast'
                WHEN op LIKE 'reduce%' THEN 'ncclReduce'
                WHEN op LIKE 'send%' THEN 'ncclSend'
                WHEN op LIKE 'recv%' THEN 'ncclRecv' END AS text,
            CASE WHEN dtype IN ('double', 'long', 'int64', 'complexfloat') THEN 8
                WHEN dtype IN ('float', 'int', 'int32', 'complexhalf') THEN 4
                WHEN dtype IN ('half', 'bfloat16', 'short', 'int16') THEN 2
                WHEN dtype IN ('byte', 'char', 'bool', 'int8', 'uint8') OR dtype LIKE 'float8%'
                    THEN 1
                WHEN dtype = 'complexdouble' THEN 16 END AS dtype_bytes
        FROM meta
    )
    SELECT l.start, l.start + greatest(coalesce(l.dur, 0), 0), 59,
        (1::BIGINT << 48) | ((l.pid & 16777215) << 24) | (l.tid & 16777215), n.text,
        n.nelems * n.dtype_bytes
    FROM named AS n
    JOIN kineto_event AS l
        ON l.cat IN ('cuda_runtime', 'cuda_driver')
        AND TRY_CAST(l.args->>'correlation' AS BIGINT) = n.correlation
        AND l.pid = (SELECT pid FROM kineto_host)
    WHERE n.text IS NOT NULL
    """,
    # Names as nsys exports hold them after load.py's text policy: no NUL bytes.
    "INSERT INTO StringIds (id, value) SELECT id, replace(name, chr(0), '') FROM kineto_string",
    """
    INSERT INTO TARGET_INFO_GPU (id, name)
    SELECT TRY_CAST(d->>'id' AS BIGINT), d->>'name'
    FROM (SELECT unnest(deviceProperties) AS d FROM kineto_doc)
    WHERE TRY_CAST(d->>'id' AS BIGINT) IS NOT NULL
    """,
    """
    INSERT INTO META_DATA_EXPORT (name, value)
    SELECT 'EXPORT_PRODUCT_NAME', 'PyTorch profiler (Kineto)'
    UNION ALL
    SELECT 'EXPORT_PRODUCT_VERSION', coalesce(pytorch_version->>'$', schemaVersion->>'$')
    FROM kineto_doc
    """,
    """
    INSERT INTO TARGET_INFO_SYSTEM_ENV (name, value)
    SELECT 'Hostname', coalesce(distributedInfo->>'hostname', hostname->>'$')
    FROM kineto_doc
    WHERE coalesce(distributedInfo->>'hostname', hostname->>'$') IS NOT NULL
    """,
    # The rank of the job is the process's MPI rank: the gpu view reads it from here.
    """
    INSERT INTO MPI_RANKS (globalTid, rank)
    SELECT h.gpid | (h.pid & 16777215), TRY_CAST(d.distributedInfo->>'rank' AS BIGINT)
    FROM kineto_doc AS d, kineto_host AS h
    WHERE TRY_CAST(d.distributedInfo->>'rank' AS BIGINT) IS NOT NULL
    """,
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
    columns = (
        "{'traceEvents': '"
        "STRUCT(ph VARCHAR, cat VARCHAR, name JSON, pid VARCHAR, tid VARCHAR, ts VARCHAR, "
        "dur VARCHAR, args JSON)[]', 'deviceProperties': 'JSON[]', 'distributedInfo': 'JSON', "
        "'schemaVersion': 'JSON', 'pytorch_version': 'JSON', 'hostname': 'JSON'}"
    )
    (limit,) = con.execute("SELECT current_setting('memory_limit')").fetchone() or ("",)
    try:
        source = path
        while True:
            size = min(_document_bytes(source) + (1 << 20), MAX_OBJECT_BYTES)
            con.execute(f"SET memory_limit = '{max(4 * size, 1 << 30) >> 20}MiB'")
            text = str(source.resolve()).replace("'", "''")
            try:
                con.execute(
                    f"CREATE TEMP TABLE kineto_doc AS SELECT * FROM read_json('{text}', "
                    f"columns = {columns}, format = 'unstructured', maximum_object_size = {size})"
                )
                break
            except duckdb.InvalidInputException as exc:
                if "invalid UTF-8" in str(exc) and source is path:
                    # A name that is not UTF-8: read a private copy decoded with U+FFFD.
                    source = _decoded_copy(path, Path(private.name))
                else:
                    raise
        rows = con.execute("SELECT count(*), count(traceEvents) FROM kineto_doc").fetchone()
        if rows != (1, 1):
            raise TraceError(
                f"{path}: is not a PyTorch profiler (Kineto) trace (no traceEvents list); "
                + NEXT_STEP
            )
        for sql in (EVENTS_SQL, UNUSABLE_SQL, HOST_SQL, STRINGS_SQL, *INSERTS):
            con.execute(sql)
        has_gpu = con.execute(
            "SELECT EXISTS (SELECT 1 FROM kineto_event "
            "WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset'))"
        ).fetchone()
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError(
            f"{path}: is not a readable PyTorch profiler trace ({reason}); {NEXT_STEP}"
        ) from exc
    finally:
        private.cleanup()
        con.execute(f"SET memory_limit = '{limit}'")
        for table in ("kineto_doc", "kineto_event", "kineto_host", "kineto_string"):
            con.execute(f"DROP TABLE IF EXISTS temp.{table}")
    if has_gpu != (True,):
        raise TraceError(
            f"{path}: contains no GPU activity (no kernel, gpu_memcpy or gpu_memset events); "
            "profile with torch.profiler activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
