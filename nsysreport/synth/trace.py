"""Write synthetic Nsight Systems SQLite exports (schemas 2.9.1 to 3.25.0) from scenarios."""

from __future__ import annotations

import os
import re
import sqlite3
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

from nsysreport.synth.nsys_schema import (
    CUDA_EVENT,
    GPU,
    GRAPH_NODE_CREATION_CLASS,
    KERNEL,
    MEM_KINDS,
    MEMCPY,
    MEMCPY_OPER,
    MEMSET,
    NVTX,
    RUNTIME,
    SESSION_START,
    SYNC_TYPES,
    SYNCHRONIZATION,
    VERSIONS,
    Column,
    VersionProfile,
)

Row = tuple[Any, ...]

# Serialized GlobalId: hw id 0, VM id 1 in bits 55..48, then 24-bit pid and 24-bit tid.
GLOBAL_VID = 1 << 48
PROCESS_NAME = "python3"


@dataclass(frozen=True, slots=True)
class Kernel:
    """A kernel launched by `api` at `launch` (default: the 2 ns just before `start`)."""

    start: int
    end: int
    name: str
    device: int = 0
    stream: int = 7
    pid: int = 100
    tid: int | None = None
    launch: tuple[int, int] | None = None
    api: str = "cudaLaunchKernel_v7000"
    event_class: int = 0
    graph_node_id: int | None = None  # replayed from a CUDA graph: its node (GraphLaunch)
    graph_id: int | None = None  # written by nsys 2026.1+ only


@dataclass(frozen=True, slots=True)
class GraphLaunch:
    """A cudaGraphLaunch at `launch` (default: the 2 ns before `start`) and what the GPU shows.

    Graph-level tracing (no `kernels`): one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row [start, end) on
    `device`/`stream`. Node-level tracing: the replayed `kernels` (each with its graph_node_id)
    instead, all sharing this launch's correlation id; `start`/`end` are then unused.
    """

    start: int
    end: int
    graph_id: int = 1
    graph_exec_id: int = 1
    device: int = 0
    stream: int = 7
    pid: int = 100
    tid: int | None = None
    launch: tuple[int, int] | None = None
    api: str = "cudaGraphLaunch_v10000"
    kernels: Sequence[Kernel] = ()


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A graph node's creation on the host: during stream capture (`original` None) or as a
    clone of node `original` (cudaGraphInstantiate, cudaGraphClone)."""

    start: int
    end: int
    node_id: int
    original: int | None = None
    pid: int = 100
    tid: int | None = None
    api: str = "cudaLaunchKernel_v7000"


@dataclass(frozen=True, slots=True)
class Memcpy:
    """A copy; `copy_kind` is an ENUM_CUDA_MEMCPY_OPER id (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP)."""

    start: int
    end: int
    bytes: int = 1 << 20
    copy_kind: int = 1
    device: int = 0
    stream: int = 7
    pid: int = 100
    tid: int | None = None
    launch: tuple[int, int] | None = None
    api: str = "cudaMemcpyAsync_v3020"
    pinned: bool = False  # the host side is pinned (ENUM_CUDA_MEM_KIND 1), not pageable (0)


@dataclass(frozen=True, slots=True)
class Memset:
    """A memset of `bytes` bytes to `value`."""

    start: int
    end: int
    bytes: int = 1 << 20
    value: int = 0
    device: int = 0
    stream: int = 7
    pid: int = 100
    tid: int | None = None
    launch: tuple[int, int] | None = None
    api: str = "cudaMemsetAsync_v3020"


# nsys's streamId / eventId where a synchronisation names none (0xFFFFFFFF): a
# cudaDeviceSynchronize's stream, a cudaStreamSynchronize's event.
NONE_ID = 4294967295


@dataclass(frozen=True, slots=True)
class ApiCall:
    """A CUDA runtime (class 0) or driver (class 1) call that launches no GPU work.

    `event`/`stream` (on `device`) give it the row nsys writes beside it: a cudaEventRecord
    of `event` on `stream` a CUPTI_ACTIVITY_KIND_CUDA_EVENT row (where Scenario.cuda_events);
    a synchronisation (cudaEventSynchronize on `event`, cudaStreamSynchronize or
    cudaStreamWaitEvent on `stream`, cudaDeviceSynchronize with `stream` NONE_ID) a
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION row, NONE_ID for what it leaves unset."""

    start: int
    end: int
    name: str
    pid: int = 100
    tid: int | None = None
    event_class: int = 0
    event: int | None = None
    stream: int | None = None
    device: int = 0


@dataclass(frozen=True, slots=True)
class NvtxRange:
    """An NVTX range (59 push/pop, 60 start/end); `end` None means never closed."""

    start: int
    end: int | None
    text: str
    pid: int = 100
    tid: int | None = None
    registered: bool = False
    domain: str | None = None
    event_type: int = 59
    end_tid: int | None = None
    payload: int | None = None
    binary: bytes | None = None  # an extended payload (binaryData; see nccl_payload)


def emit_nvtx_text(
    op: str,
    sizes: Sequence[Sequence[int]],
    seq: int | None = 0,
    op_id: int = 1,
    input_op_ids: Sequence[tuple[int, int]] = (),
) -> str:
    """The text PyTorch's `emit_nvtx(record_shapes=True)` pushes for an op call (getNvtxStr,
    docs/export-format.md): `aten::mm, seq = 12, op_id = 345, sizes = [[64, 128], [128, 256]],
    input_op_ids = [(342,0), (343,0)]`; `seq` None for an op autograd gives no sequence number,
    a scalar or absent input's size `[]`."""
    text = op if seq is None else f"{op}, seq = {seq}"
    text += f", op_id = {op_id}"
    if sizes:
        shapes = ", ".join("[" + ", ".join(str(d) for d in shape) + "]" for shape in sizes)
        text += f", sizes = [{shapes}]"
    if input_op_ids:
        text += ", input_op_ids = [" + ", ".join(f"({i},{n})" for i, n in input_op_ids) + "]"
    return text


def emit_nvtx_op(
    kernel: Kernel,
    op: str,
    sizes: Sequence[Sequence[int]],
    seq: int | None = 0,
    op_id: int = 1,
    margin: int = 1,
) -> NvtxRange:
    """The emit_nvtx range of the op that launched `kernel`: pushed `margin` ns before its
    launch call on the launching thread, popped `margin` ns after the call returns."""
    start, end = (kernel.start - 2, kernel.start - 1) if kernel.launch is None else kernel.launch
    text = emit_nvtx_text(op, sizes, seq, op_id)
    return NvtxRange(start - margin, end + margin, text, pid=kernel.pid, tid=kernel.tid)


@dataclass(frozen=True, slots=True)
class Gpu:
    """A TARGET_INFO_GPU row; `pid` also maps it to that process (TARGET_INFO_CUDA_DEVICE)."""

    device: int
    name: str = "NVIDIA H100 80GB HBM3"
    pid: int | None = None
    memory_bandwidth: int = 3_352_320_000_000  # bytes/s, as nsys writes an H100 SXM's
    # The id the GPU list gives it where the list numbers the GPUs otherwise than the rows
    # (queries/load/gpu_list_match.sql); None: `device`, as every real nsys export writes.
    listed_as: int | None = None

    @property
    def list_id(self) -> int:
        return self.device if self.listed_as is None else self.listed_as


@dataclass(frozen=True, slots=True)
class GpuMetricSample:
    """One GPU metric sample (nsys --gpu-metrics-devices): the counter `metric` (its name as
    nsys writes it, unit included) of GPU `device` read `value` at `timestamp`, its average
    since the counter's previous sample."""

    timestamp: int
    metric: str
    value: int
    device: int = 0


@dataclass(frozen=True, slots=True)
class PayloadSchema:
    """An NVTX extended-payload schema (NVTX_PAYLOAD_SCHEMAS and its _ENTRIES rows): `entries`
    are (NVTX entry type, name, offset) in index order; `domain_id` the registering domain's
    id in its process (the first named domain of a process is 1)."""

    schema_id: int
    payload_size: int
    entries: tuple[tuple[int, str, int], ...]
    domain_id: int = 1


# NCCL's schemas as a real export (nsys 2026.2, NCCL 2.27: shared/traces' mfu_2gpu_before)
# lists them; the ids change between NCCL releases (docs/export-format.md).
NCCL_COMM_INIT = PayloadSchema(
    16777227,
    24,
    ((18, "NCCL communicator ID", 0), (5, "No. of ranks", 8), (5, "Rank", 12),
     (5, "CUDA device", 16)),
)  # fmt: skip
NCCL_ALL_REDUCE = PayloadSchema(
    16777221,
    24,
    ((18, "NCCL communicator ID", 0), (22, "Message size [bytes]", 8),
     (16777232, "Reduction operation", 16)),
)  # fmt: skip


def nccl_payload(schema: PayloadSchema, values: Mapping[str, int], domain_id: int = 1) -> bytes:
    """The binaryData of one NCCL range: the 32-byte header (domain, schema id, payload size,
    offset of the payload) and NCCL's struct, each named entry at its offset."""
    body = bytearray(schema.payload_size)
    for kind, name, offset in schema.entries:
        if name in values:
            fmt = "<Q" if kind in (18, 22) else "<i"
            struct.pack_into(fmt, body, offset, values[name])
    header = struct.pack("<QQQQ", domain_id, schema.schema_id, schema.payload_size, 32)
    return header + bytes(body)


@dataclass(frozen=True, slots=True)
class ProfilerOverhead:
    """A PROFILER_OVERHEAD row: nsys pausing thread `tid` (default: the main thread) of process
    `pid` for itself, e.g. to flush CUPTI's buffers."""

    start: int
    end: int
    pid: int = 100
    tid: int | None = None
    name: str = "CUPTI Buffer flush"


@dataclass(frozen=True, slots=True)
class OsCall:
    """An OS runtime call (OSRT_API, --trace=osrt) on thread `tid` (default: the main thread)."""

    start: int
    end: int
    name: str
    pid: int = 100
    tid: int | None = None


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A DIAGNOSTIC_EVENT row: one of nsys's messages about the capture. `severity` and
    `source` are ENUM_DIAGNOSTIC_SEVERITY_LEVEL (1 Info, 2 Warning, 3 Error) and
    ENUM_DIAGNOSTIC_SOURCE_TYPE (1 Injection, 2 Daemon, 3 Analysis) ids."""

    timestamp: int
    text: str
    severity: int = 2
    source: int = 1
    pid: int | None = 100


# The bits of a GPU metric typeId above the GPU's id (its low byte): what real exports hold
# there is not known, so the writer puts a constant that readers must mask off.
GPU_METRIC_TYPE_BASE = 0x10000


@dataclass(frozen=True, slots=True)
class Scenario:
    """What a synthetic trace holds. Iterables are consumed once by `write_trace`."""

    kernels: Iterable[Kernel] = ()
    memcpys: Iterable[Memcpy] = ()
    memsets: Iterable[Memset] = ()
    api_calls: Iterable[ApiCall] = ()
    graph_launches: Iterable[GraphLaunch] = ()
    graph_nodes: Iterable[GraphNode] = ()
    nvtx: Iterable[NvtxRange] = ()
    gpus: Sequence[Gpu] = ()
    gpu_metrics: Iterable[GpuMetricSample] = ()
    host: str = "synth-host"
    backtrace_duplicates: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    capture_env: Mapping[str, str] = field(default_factory=dict)
    # MPI rank of each process (pid -> rank), as nsys --trace=mpi records it (MPI_RANKS; the
    # 2026.2 profile only).
    mpi_ranks: Mapping[int, int] = field(default_factory=dict)
    diagnostics: Iterable[Diagnostic] = ()  # 2024.5 and 2026.2 profiles only
    overheads: Iterable[ProfilerOverhead] = ()  # 2022.2 and later profiles
    os_calls: Iterable[OsCall] = ()  # 2022.2, 2023.2 and 2024.5 profiles
    payload_schemas: Sequence[PayloadSchema] = ()  # 2026.2 profile only
    # The session start row then puts time 0 at this UTC epoch (ns) in every schema version;
    # None keeps each version's fixed capture time (and the committed sample traces' bytes).
    utc_at_zero_ns: int | None = None
    # Whether event records get their CUPTI_ACTIVITY_KIND_CUDA_EVENT rows (ApiCall): the
    # 2023.2 export here has them; the 2026.2 ones, with cudaEventRecord calls, none.
    cuda_events: bool = True


# Tables every export has, even when the scenario puts nothing in them.
_ALWAYS = frozenset(
    {
        "StringIds",
        "TARGET_INFO_SYSTEM_ENV",
        "TARGET_INFO_SESSION_START_TIME",
        "ANALYSIS_DETAILS",
        "ENUM_NSYS_EVENT_TYPE",
        "ENUM_CUDA_MEMCPY_OPER",
        "META_DATA_CAPTURE",
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
    }
)
_EVENT_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUDA_GRAPH_NODE_EVENTS",
    "CUDA_GRAPH_EVENTS",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)
_BUILTIN_TYPES = {
    "void": "v",
    "bool": "b",
    "char": "c",
    "signed char": "a",
    "unsigned char": "h",
    "short": "s",
    "unsigned short": "t",
    "int": "i",
    "unsigned int": "j",
    "long": "l",
    "unsigned long": "m",
    "long long": "x",
    "unsigned long long": "y",
    "float": "f",
    "double": "d",
}

_Op = Kernel | Memcpy | Memset | ApiCall | GraphLaunch


def write_trace(scenario: Scenario, path: Path, version: str = "2026.2") -> Path:
    """Write `scenario` as an nsys `version` SQLite export at `path`, replacing any file there."""
    profile = VERSIONS.get(version)
    if profile is None:
        known = ", ".join(VERSIONS)
        raise ValueError(f"unknown nsys version {version!r} for a synthetic trace: use {known}")
    # Build beside the target and rename, so a crash never leaves a half-written trace at `path`.
    tmp = path.with_name(path.name + ".tmp")
    journal = tmp.with_name(tmp.name + "-journal")
    try:
        tmp.unlink(missing_ok=True)
        journal.unlink(missing_ok=True)
        _write(scenario, tmp, profile)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        journal.unlink(missing_ok=True)
        raise
    return path


def kernel_names(name: str) -> tuple[str, str, str]:
    """The (demangled, short, mangled) names nsys would store for a kernel's demangled `name`."""
    if "(" not in name:
        return name, name, name  # extern "C" / precompiled kernels: all three are equal
    depth = 0
    paren = len(name)
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            paren = i
            break
    head = name[:paren]
    params = name[paren + 1 : name.rfind(")")] if paren < len(name) else ""
    # shortName: drop the return type, template arguments and namespaces.
    words = _strip_templates(head).split()
    parts = [p for p in (words[-1] if words else head).split("::") if p] or [head]
    short = parts[-1]
    templated = head.rstrip().endswith(">")
    # Itanium-style mangling, except the template arguments: a checksum keeps names distinct.
    mangled = "_Z" + _mangle_path(parts, f"ILj{zlib.crc32(head.encode())}EE" if templated else "")
    if templated and head.startswith("void "):
        mangled += "v"  # template functions encode their return type
    args = [_mangle_type(p) for p in _split_params(params)] or ["v"]
    return name, short, mangled + "".join(args)


def _strip_templates(text: str) -> str:
    depth = 0
    kept = []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    return "".join(kept)


def _split_params(params: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(params):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(params[start:i])
            start = i + 1
    out.append(params[start:])
    return [p.strip() for p in out if p.strip() and p.strip() != "void"]


def _mangle_path(parts: Sequence[str], template: str = "") -> str:
    encoded = "".join(f"{len(p)}{p}" for p in parts) + template
    return encoded if len(parts) == 1 else f"N{encoded}E"


def _mangle_type(param: str) -> str:
    prefix = ""
    while param and param[-1] in "*&":
        prefix = ("P" if param[-1] == "*" else "R") + prefix
        param = param[:-1].rstrip()
    if param.startswith("const "):
        prefix, param = prefix + "K", param[6:]
    code = _BUILTIN_TYPES.get(param)
    if code is None:
        code = _mangle_path([p for p in _strip_templates(param).split("::") if p] or ["T"])
    return prefix + code


def _launch_start(op: _Op) -> int:
    if isinstance(op, ApiCall):
        return op.start
    return op.start - 2 if op.launch is None else op.launch[0]


def _start(item: NvtxRange) -> int:
    return item.start


def _write(scenario: Scenario, file: Path, profile: VersionProfile) -> None:
    ops: list[_Op] = [*scenario.kernels, *scenario.memcpys, *scenario.memsets, *scenario.api_calls]
    ops += scenario.graph_launches
    ops.sort(key=_launch_start)
    graph_nodes = sorted(scenario.graph_nodes, key=lambda n: n.start)
    nvtx = sorted(scenario.nvtx, key=_start)
    gpus = list(scenario.gpus)
    if len({g.device for g in gpus}) != len(gpus):
        raise ValueError("two Gpu entries share a device id: TARGET_INFO_GPU ids must be unique")

    # One pass in launch order: correlation ids restart at 1 in every process, like a merged
    # multi-process export.
    corr: list[int] = []
    kernels: list[tuple[Kernel, int]] = []
    memcpys: list[tuple[Memcpy, int]] = []
    memsets: list[tuple[Memset, int]] = []
    graphs: list[tuple[GraphLaunch, int]] = []
    next_corr: dict[int, int] = {}
    threads: set[tuple[int, int | None]] = set()
    for op in ops:
        c = next_corr[op.pid] = next_corr.get(op.pid, 0) + 1
        corr.append(c)
        threads.add((op.pid, op.tid))
        if isinstance(op, Kernel):
            kernels.append((op, c))
        elif isinstance(op, Memcpy):
            memcpys.append((op, c))
        elif isinstance(op, Memset):
            memsets.append((op, c))
        elif isinstance(op, GraphLaunch) and op.kernels:
            kernels += [(k, c) for k in op.kernels]  # a replay: every kernel shares the launch's
        elif isinstance(op, GraphLaunch):
            graphs.append((op, c))
    if graphs and "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" not in profile.tables:
        raise ValueError(
            f"nsys {profile.nsys_version} exports have no CUPTI_ACTIVITY_KIND_GRAPH_TRACE table: "
            "give graph launches their kernels (node-level tracing)"
        )
    for n in graph_nodes:
        threads.add((n.pid, n.tid))
    # GPU tables list rows by start time, as nsys does; the sorts are stable on launch order.
    kernels.sort(key=lambda pair: pair[0].start)
    memcpys.sort(key=lambda pair: pair[0].start)
    memsets.sort(key=lambda pair: pair[0].start)
    graphs.sort(key=lambda pair: pair[0].start)
    for o in scenario.os_calls:
        threads.add((o.pid, o.tid))
    for r in nvtx:
        threads.add((r.pid, r.tid))
        if r.end_tid is not None:
            threads.add((r.pid, r.end_tid))
    tids = sorted({(pid, pid if tid is None else tid) for pid, tid in threads})
    for pid, tid in tids:
        if not (0 <= pid < 1 << 24 and 0 <= tid < 1 << 24):
            raise ValueError(f"pid {pid} / tid {tid} does not fit the 24-bit GlobalId fields")
    pids = sorted({pid for pid, _ in tids} | {g.pid for g in gpus if g.pid is not None})

    strings: dict[str, int] = {}
    rows: dict[str, Iterable[Row]] = {}
    if kernels:
        rows["CUPTI_ACTIVITY_KIND_KERNEL"] = _kernel_rows(kernels, strings, profile)
    if memcpys:
        rows["CUPTI_ACTIVITY_KIND_MEMCPY"] = _memcpy_rows(memcpys, profile)
    if memsets:
        rows["CUPTI_ACTIVITY_KIND_MEMSET"] = _memset_rows(memsets, profile)
    if graphs:
        rows["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"] = _graph_rows(graphs, profile)
    if graph_nodes:
        # Schema 2.x kept node creation in CUDA_GRAPH_EVENTS, 3.x in CUDA_GRAPH_NODE_EVENTS.
        table = "CUDA_GRAPH_NODE_EVENTS"
        if table not in profile.tables:
            table = "CUDA_GRAPH_EVENTS"
        rows[table] = _graph_node_rows(graph_nodes, strings)
    if ops:
        backtrace = scenario.backtrace_duplicates
        rows["CUPTI_ACTIVITY_KIND_RUNTIME"] = _runtime_rows(ops, corr, strings, backtrace)
    if nvtx:
        rows["NVTX_EVENTS"] = _nvtx_rows(nvtx, strings)
    calls = [(op, c) for op, c in zip(ops, corr, strict=True) if isinstance(op, ApiCall)]
    records = [(op, c) for op, c in calls if op.event is not None and _is_record(op.name)]
    waits = [
        (op, c)
        for op, c in calls
        if (op.event is not None or op.stream is not None) and not _is_record(op.name)
    ]
    if records and scenario.cuda_events:
        if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" not in profile.tables:
            raise ValueError(f"the nsys {profile.nsys_version} profile writes no CUDA events")
        rows["CUPTI_ACTIVITY_KIND_CUDA_EVENT"] = _cuda_event_rows(records, profile)
    if waits:
        rows["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"] = _sync_rows(waits, profile)
    if pids:
        rows["PROCESSES"] = [(GLOBAL_VID | pid << 24, pid, PROCESS_NAME) for pid in pids]
    if tids:
        # Linux threads inherit the process name unless they rename themselves.
        name_id = strings.setdefault(PROCESS_NAME, len(strings) + 1)
        rows["ThreadNames"] = [(name_id, 20, GLOBAL_VID | p << 24 | t) for p, t in tids]
    if gpus:
        rows["TARGET_INFO_GPU"] = [_gpu_row(g) for g in gpus]
        rows["TARGET_INFO_CUDA_GPU"] = _cuda_gpu_rows(gpus)
    samples = sorted(scenario.gpu_metrics, key=lambda m: (m.timestamp, m.device, m.metric))
    if samples:
        if "GPU_METRICS" not in profile.tables:
            raise ValueError(
                f"the GPU metrics layout of nsys {profile.nsys_version} exports is not known: "
                "write GPU metric samples with a 2024.5 or 2026.2 profile"
            )
        rows["TARGET_INFO_GPU_METRICS"], rows["GPU_METRICS"] = _gpu_metric_rows(samples)
    diagnostics = list(scenario.diagnostics)
    if diagnostics:
        if "DIAGNOSTIC_EVENT" not in profile.tables:
            raise ValueError(f"the nsys {profile.nsys_version} profile writes no DIAGNOSTIC_EVENT")
        rows["DIAGNOSTIC_EVENT"] = [
            # timestampType 1: the target's clock, as in the real exports' rows
            (
                d.timestamp,
                1,
                d.source,
                d.severity,
                d.text,
                None if d.pid is None else GLOBAL_VID | d.pid << 24,
            )
            for d in diagnostics
        ]
    if scenario.payload_schemas:
        if "NVTX_PAYLOAD_SCHEMAS" not in profile.tables:
            raise ValueError(f"the nsys {profile.nsys_version} profile writes no payload schemas")
        rows["NVTX_PAYLOAD_SCHEMAS"] = [
            (p.domain_id, p.schema_id, None, 1, None, len(p.entries), p.payload_size, None)
            for p in scenario.payload_schemas
        ]
        # The first entry's offset is NULL (meaning 0), as in the real export.
        rows["NVTX_PAYLOAD_SCHEMA_ENTRIES"] = [
            (p.domain_id, p.schema_id, idx, None, kind, name, None, None, offset or None)
            for p in scenario.payload_schemas
            for idx, (kind, name, offset) in enumerate(p.entries)
        ]
    overheads = list(scenario.overheads)
    if overheads:
        if "PROFILER_OVERHEAD" not in profile.tables:
            raise ValueError(f"the nsys {profile.nsys_version} profile writes no PROFILER_OVERHEAD")
        rows["PROFILER_OVERHEAD"] = [
            # 3 (overheadType, 2026.x): a CUPTI buffer flush; 0 (returnValue, before): success
            (o.start, o.end, GLOBAL_VID | o.pid << 24 | (o.pid if o.tid is None else o.tid),
             strings.setdefault(o.name, len(strings) + 1),
             3 if profile.tables["PROFILER_OVERHEAD"][-1].name == "overheadType" else 0)
            for o in overheads
        ]  # fmt: skip
    os_calls = list(scenario.os_calls)
    if os_calls:
        if "OSRT_API" not in profile.tables:
            raise ValueError(f"the nsys {profile.nsys_version} profile writes no OSRT_API")
        # eventClass 27 and nestingLevel 0, as most rows of the real 2024.5 export.
        rows["OSRT_API"] = [
            (o.start, o.end, 27, GLOBAL_VID | o.pid << 24 | (o.pid if o.tid is None else o.tid),
             strings.setdefault(o.name, len(strings) + 1), 0, 0, 0)
            for o in os_calls
        ]  # fmt: skip
    if scenario.mpi_ranks:
        if "MPI_RANKS" not in profile.tables:
            raise ValueError(f"the nsys {profile.nsys_version} profile writes no MPI_RANKS table")
        # One row for the process's main thread (tid = pid), as for its other CPU rows.
        rows["MPI_RANKS"] = [
            (GLOBAL_VID | pid << 24 | pid, rank) for pid, rank in sorted(scenario.mpi_ranks.items())
        ]
    if "TARGET_INFO_CUDA_DEVICE" in profile.tables and any(g.pid is not None for g in gpus):
        rows["TARGET_INFO_CUDA_DEVICE"] = _cuda_device_rows(gpus)
    if profile.event_types:
        rows["ENUM_NSYS_EVENT_TYPE"] = [(i, n, n) for i, n in enumerate(profile.event_types)]
        rows["ENUM_CUDA_MEMCPY_OPER"] = [
            (i, f"CUDA_MEMCPY_KIND_{name}", label) for i, (name, label) in enumerate(MEMCPY_OPER)
        ]
        rows["META_DATA_CAPTURE"] = _capture_rows(scenario)
    if profile.meta_table in profile.tables:  # none before nsys 2022.1
        rows[profile.meta_table] = list(_export_values(profile, scenario).items())
    rows["TARGET_INFO_SYSTEM_ENV"] = [
        (GLOBAL_VID, "Local (CLI)", name, enum, value)
        for name, enum, value in (
            ("CpuCores", 1, "16"),
            ("CpuArchitecture", 3, "x86_64"),
            ("NvDriverVersion", 205, "580.95.05"),
            ("OsDescription", 605, "Ubuntu 22.04.5 LTS"),
            ("CudaDriverVersion", 611, "13000"),
            ("Hostname", 619, scenario.host),
        )
    ]

    con = sqlite3.connect(file, isolation_level=None)
    try:
        # Real exports: 4 KiB pages, rollback journal, no indexes or views. synchronous=OFF only
        # speeds up this write: the file is renamed into place once it is complete.
        con.execute("PRAGMA page_size = 4096")
        con.execute("PRAGMA journal_mode = DELETE")
        con.execute("PRAGMA synchronous = OFF")
        con.execute("BEGIN")
        for table, columns in profile.tables.items():
            if table in rows or table in _ALWAYS:
                con.execute(_create_sql(table, columns))
        # Row generators intern strings as they go, so StringIds is filled last.
        for table, table_rows in rows.items():
            if table in profile.tables:
                _insert(con, profile, table, table_rows)
            elif table in _EVENT_TABLES:
                raise ValueError(f"nsys {profile.nsys_version} exports have no {table} table")
            # else a table this (old) release did not write: PROCESSES, the metadata, ...
        start, stop = _bounds(con, [t for t in _EVENT_TABLES if t in rows])
        if "ANALYSIS_DETAILS" in profile.tables:
            _insert(con, profile, "ANALYSIS_DETAILS", [(GLOBAL_VID, stop - start, start, stop)])
        if "TARGET_INFO_SESSION_START_TIME" in profile.tables:
            session = [_session_row(scenario.utc_at_zero_ns, profile, start)]
            _insert(con, profile, "TARGET_INFO_SESSION_START_TIME", session)
        _insert(con, profile, "StringIds", [(i, s) for s, i in strings.items()])
        con.execute("COMMIT")
    finally:
        con.close()


def _session_row(utc_at_zero_ns: int | None, profile: VersionProfile, start: int) -> Row:
    """TARGET_INFO_SESSION_START_TIME: the epoch of the capture, and of `start` where it fits."""
    if utc_at_zero_ns is None:
        utc = datetime.fromisoformat(profile.capture_utc).replace(tzinfo=UTC)
        epoch_ns = int(utc.timestamp()) * 1_000_000_000
        return (epoch_ns, profile.capture_utc, profile.capture_utc, start)
    # Readers take epoch(t) = utcEpochNs + (t - systemClockNs), with systemClockNs as 0 where
    # the schema lacks the column; anchoring on what is written keeps epoch(t) the same for all.
    columns = profile.tables["TARGET_INFO_SESSION_START_TIME"]
    has_clock = any(c.name == "systemClockNs" for c in columns)
    epoch_ns = utc_at_zero_ns + (start if has_clock else 0)
    when = datetime.fromtimestamp(epoch_ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return (epoch_ns, when, when, start)


def _create_sql(table: str, columns: Sequence[Column]) -> str:
    # Laid out like nsys' own DDL (without its comments); names are trusted constants.
    lines = []
    for c in columns:
        flags = ("NOT NULL   " if c.not_null else "") + ("PRIMARY KEY" if c.primary_key else "")
        lines.append(f"    {c.name:<27} {c.sql_type:<9} {flags}".rstrip())
    return f"CREATE TABLE {table} (\n" + ",\n".join(lines) + "\n);"


def _insert(
    con: sqlite3.Connection, profile: VersionProfile, table: str, rows: Iterable[Row]
) -> None:
    columns = profile.tables[table]
    # Builders fill the newest schema's column list; pick this version's columns from it.
    full = {
        "CUPTI_ACTIVITY_KIND_KERNEL": KERNEL,
        "CUPTI_ACTIVITY_KIND_MEMCPY": MEMCPY,
        "CUPTI_ACTIVITY_KIND_MEMSET": MEMSET,
        "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
        "NVTX_EVENTS": NVTX,
        "TARGET_INFO_SESSION_START_TIME": SESSION_START,
        "TARGET_INFO_GPU": GPU,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": SYNCHRONIZATION,
        "CUPTI_ACTIVITY_KIND_CUDA_EVENT": CUDA_EVENT,
    }.get(table, columns)
    if full != columns:
        # nsys 2020.5 named the GPU's id `deviceId` in TARGET_INFO_GPU.
        names = [
            {"id": "deviceId"}.get(c.name, c.name) if table == "TARGET_INFO_GPU" else c.name
            for c in full
        ]
        rows = map(itemgetter(*(names.index(c.name) for c in columns)), rows)
    marks = ", ".join("?" * len(columns))
    con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)


def _bounds(con: sqlite3.Connection, tables: Sequence[str]) -> tuple[int, int]:
    """The earliest and latest timestamp of any event row ((0, 0) for an empty trace)."""
    # Both ends of both columns: NULL ends are skipped, and an edge-case row may end before it
    # starts.
    values: list[int] = []
    for table in tables:
        sql = f"SELECT min(start), max(start), min(end), max(end) FROM {table}"
        values += [v for v in con.execute(sql).fetchone() if v is not None]
    return (min(values), max(values)) if values else (0, 0)


def _kernel_rows(
    kernels: list[tuple[Kernel, int]], strings: dict[str, int], profile: VersionProfile
) -> Iterator[Row]:
    green = profile.green_context_id
    names: dict[str, tuple[int, int, int]] = {}
    for grid_id, (k, corr) in enumerate(kernels, 1):
        ids = names.get(k.name)
        if ids is None:
            d, s, m = (strings.setdefault(n, len(strings) + 1) for n in kernel_names(k.name))
            ids = names[k.name] = (d, s, m)
        # Geometry and resources are fixed, plausible values (real exports show such rows).
        yield (
            k.start, k.end, k.device, 1, green, k.stream, corr, GLOBAL_VID | k.pid << 24,
            *ids, 1, 1, 32, 128, 1, 1, 256, 1, 1, 0, 0, 0, 127401984, grid_id, 32768,
            k.graph_node_id, 0, None, None, None, k.graph_id, 0, 0, 0, 1, 0, 0, None, "[]",
        )  # fmt: skip


def _memcpy_rows(memcpys: list[tuple[Memcpy, int]], profile: VersionProfile) -> Iterator[Row]:
    green = profile.green_context_id
    for m, corr in memcpys:
        src, dst = (
            1 if m.pinned and k == 0 else k for k in MEM_KINDS.get(m.copy_kind, (None,) * 2)
        )
        yield (
            m.start, m.end, m.device, 1, green, m.stream, corr, GLOBAL_VID | m.pid << 24,
            m.bytes, m.copy_kind, None, src, dst, None, None, None, None, None, None, None, 1,
        )  # fmt: skip


def _memset_rows(memsets: list[tuple[Memset, int]], profile: VersionProfile) -> Iterator[Row]:
    green = profile.green_context_id
    for m, corr in memsets:
        yield (
            m.start, m.end, m.device, 1, green, m.stream, corr, GLOBAL_VID | m.pid << 24,
            m.value, m.bytes, None, 2,
        )  # fmt: skip


def _graph_rows(graphs: list[tuple[GraphLaunch, int]], profile: VersionProfile) -> Iterator[Row]:
    green = profile.green_context_id
    for g, corr in graphs:
        yield (
            g.start, g.end, g.device, 1, green, g.stream, corr, GLOBAL_VID | g.pid << 24,
            g.graph_id, g.graph_exec_id,
        )  # fmt: skip


def _graph_node_rows(nodes: list[GraphNode], strings: dict[str, int]) -> Iterator[Row]:
    for n in nodes:
        gtid = GLOBAL_VID | n.pid << 24 | (n.pid if n.tid is None else n.tid)
        name_id = strings.setdefault(n.api, len(strings) + 1)
        yield (n.start, n.end, GRAPH_NODE_CREATION_CLASS, gtid, name_id, n.node_id, n.original)


def _runtime_rows(
    ops: list[_Op], corr: list[int], strings: dict[str, int], backtrace: bool
) -> Iterator[Row]:
    """One API row per op in launch order; with backtraces, nsys' class-67 twin just before it."""
    bare: dict[str, int] = {}  # API name -> StringId of the name without its _vNNNN suffix
    for op, c in zip(ops, corr, strict=True):
        gtid = GLOBAL_VID | op.pid << 24 | (op.pid if op.tid is None else op.tid)
        if isinstance(op, ApiCall):
            name_id = strings.setdefault(op.name, len(strings) + 1)
            yield (op.start, op.end, op.event_class, gtid, c, name_id, 0, None)
            continue
        name_id = strings.setdefault(op.api, len(strings) + 1)
        start, end = (op.start - 2, op.start - 1) if op.launch is None else op.launch
        if backtrace:
            twin = bare.get(op.api)
            if twin is None:
                plain = re.sub(r"_v\d+$", "", op.api)
                twin = bare[op.api] = strings.setdefault(plain, len(strings) + 1)
            yield (start - 1, end + 1, 67, gtid, c, twin, 0, None)
        event_class = op.event_class if isinstance(op, Kernel) else 0
        yield (start, end, event_class, gtid, c, name_id, 0, None)


def _is_record(name: str) -> bool:
    return name.startswith(("cudaEventRecord", "cuEventRecord"))


def _cuda_event_rows(records: list[tuple[ApiCall, int]], profile: VersionProfile) -> list[Row]:
    """One row per event record: its stream, event and the record call's correlation id (no
    device-side timestamp: 0, "not collected")."""
    green = profile.green_context_id
    return [
        (0, r.device, 1, green, NONE_ID if r.stream is None else r.stream, c,
         GLOBAL_VID | r.pid << 24, r.event, None)
        for r, c in records
    ]  # fmt: skip


def _sync_rows(waits: list[tuple[ApiCall, int]], profile: VersionProfile) -> list[Row]:
    """One row per synchronising call, its syncType as this release writes it for the call."""
    green = profile.green_context_id
    rows = []
    for w, c in waits:
        name = re.sub(r"_v\d+$", "", w.name)
        sync_type = profile.sync_types.get(name, SYNC_TYPES.get(name, 0))
        rows.append(
            (w.start, w.end, w.device, 1, green, NONE_ID if w.stream is None else w.stream, c,
             GLOBAL_VID | w.pid << 24, None, sync_type, NONE_ID if w.event is None else w.event,
             None)
        )  # fmt: skip
    return rows


def _nvtx_rows(ranges: list[NvtxRange], strings: dict[str, int]) -> Iterator[Row]:
    """Ranges in start order; a named domain is announced once per process by a type-75 row."""
    domains: dict[tuple[int, str], int] = {}
    next_domain: dict[int, int] = {}
    next_range: dict[int, int] = {}
    for r in ranges:
        gpid = GLOBAL_VID | r.pid << 24
        gtid = gpid | (r.pid if r.tid is None else r.tid)
        domain_id = 0
        if r.domain is not None:
            domain_id = domains.get((r.pid, r.domain), 0)
            if not domain_id:
                # Domain ids are per process, numbered from 1 in order of creation.
                domain_id = next_domain[r.pid] = next_domain.get(r.pid, 0) + 1
                domains[(r.pid, r.domain)] = domain_id
                yield (
                    r.start, None, 75, None, None, None, r.domain, gtid, None, None, domain_id,
                    None, None, None, None, None, None, None, None, None,
                )  # fmt: skip
        range_id = None
        if r.event_type == 60:  # nvtxRangeStart returns a per-process id; push/pop has none
            range_id = next_range[r.pid] = next_range.get(r.pid, 0) + 1
        text: str | None = r.text
        text_id = None
        if r.registered:
            text, text_id = None, strings.setdefault(r.text, len(strings) + 1)
        end_gtid = None if r.end_tid is None else gpid | r.end_tid
        yield (
            r.start, r.end, r.event_type, range_id, None, None, text, gtid, end_gtid, text_id,
            domain_id, r.payload, None, None, None, None, None, None, None, r.binary,
        )  # fmt: skip


def _gpu_metric_rows(samples: Sequence[GpuMetricSample]) -> tuple[list[Row], list[Row]]:
    """TARGET_INFO_GPU_METRICS (one row per GPU and counter, metric ids numbered per GPU in
    order of first sample) and GPU_METRICS (one row per sample, in time order)."""
    ids: dict[tuple[int, str], int] = {}
    for m in samples:
        per_gpu = sum(1 for device, _ in ids if device == m.device)
        ids.setdefault((m.device, m.metric), per_gpu)
    info = [
        (GPU_METRIC_TYPE_BASE | device, device, f"GPU {device}", metric_id, metric)
        for (device, metric), metric_id in sorted(ids.items(), key=lambda kv: (kv[0][0], kv[1]))
    ]
    values = [
        (m.timestamp, GPU_METRIC_TYPE_BASE | m.device, ids[(m.device, m.metric)], m.value)
        for m in samples
    ]
    return info, values


def _cuda_device_rows(gpus: Sequence[Gpu]) -> list[Row]:
    # Each process numbers the GPUs it sees from 0 (one GPU per rank: CUDA device 0).
    seen: dict[int, int] = {}
    rows: list[Row] = []
    for g in gpus:
        if g.pid is not None:
            cuda_id = seen[g.pid] = seen.get(g.pid, -1) + 1
            rows.append((g.device, cuda_id, g.pid, _gpu_uuid(g.device), 132))
    return rows


def _cuda_gpu_rows(gpus: Sequence[Gpu]) -> list[Row]:
    """TARGET_INFO_CUDA_GPU (nsys 2020.3-2020.5): one row per process and GPU, `deviceId` the
    activities' deviceId; an H100 SXM's properties, the bandwidth in kB/s as 2020.5 wrote it."""
    return [
        (
            GLOBAL_VID, g.name, f"0000:{0x18 + g.device:02x}:00.0", g.memory_bandwidth // 1000,
            85029158912, 65536, 52428800, 32, 1980000, 7, 132, 4, 64, 32, 65536, 49152, 1024,
            1024, 1024, 64, 2147483647, 65535, 65535, 9, 0, g.list_id, g.pid, 233472, 65536,
        )
        for g in gpus
    ]  # fmt: skip


def _gpu_uuid(device: int) -> str:
    return f"00000000-0000-4000-8000-{device:012x}"


def _gpu_row(g: Gpu) -> Row:
    # Whatever the name, the properties but the HBM rate are an H100 SXM's (the rows only need
    # to be plausible).
    return (
        GLOBAL_VID, g.list_id, g.name, f"0000:{0x18 + g.device:02x}:00.0", 1, 52428800,
        85029158912, g.memory_bandwidth, 1980000000, 132, 0, _gpu_uuid(g.device), 0, "GH100",
        g.device, None, None, 161, 0, 65536, 4, 65536, 49152, 232448, 233472, 65536, 32, 3, 64,
        32, 1024, 1024, 1024, 64, 2147483647, 65535, 65535, 9, 0, 9, 0,
    )  # fmt: skip


def _capture_rows(scenario: Scenario) -> list[Row]:
    rows: list[Row] = [
        ("DEVICE_ID", "Local (CLI)"),
        ("CAPTURE_EVENT_TYPE", "NvtxEvents"),
        ("CAPTURE_EVENT_TYPE", "Cuda"),
        ("DEVICE_TYPE", "Unix"),
        ("DEVICE_DISPLAY_NAME", scenario.host),
        ("PROCESS_0:HOW_TO_ATTACH", "LaunchAnother"),
        ("PROCESS_0:COMMAND", PROCESS_NAME),
        ("PROCESS_0:ARGUMENT_0", "train.py"),
        ("PROCESS_0:WORKING_DIR", "/workspace"),
        ("PROCESS_0:PID", "0"),
        ("PROCESS_0:COLLECT_NVTX_TRACE", "true"),
        ("PROCESS_0:COLLECT_CUDA_TRACE", "true"),
    ]
    rows += [
        ("PROCESS_0:ENVIRONMENT_VARIABLE", f'{k}="{v}"') for k, v in scenario.capture_env.items()
    ]
    return rows


def _export_values(profile: VersionProfile, scenario: Scenario) -> dict[str, str | None]:
    major, minor, micro = profile.schema_version.split(".")
    # Fixed file names, not the real path, so the same scenario always gives the same bytes.
    rep, out = "synth.nsys-rep", "synth.sqlite"
    known: dict[str, str | None] = {
        "EXPORT_PRODUCT_NAME": "NVIDIA Nsight Systems",
        "EXPORT_PRODUCT_VERSION": profile.nsys_version,
        "EXPORT_PRODUCT_DATE": ".".join(profile.nsys_version.split(".")[:2]),
        "EXPORT_SCHEMA_VERSION": profile.schema_version,
        "EXPORT_SCHEMA_VERSION_MAJOR": major,
        "EXPORT_SCHEMA_VERSION_MINOR": minor,
        "EXPORT_SCHEMA_VERSION_MICRO": micro,
        "EXPORT_SCHEMA_VERSION_CKSUM": profile.schema_cksum,
        "EXPORT_PLATFORM": "linux-desktop",
        "EXPORT_ARCH": "x64",
        "EXPORT_TIME_UTC": profile.capture_utc,
        "EXPORT_TIME_LOCAL": profile.capture_utc + " +0000 UTC",
        "EXPORT_HOST": scenario.host,
        "EXPORT_USER": "nsysreport",
        "EXPORT_PARAM_EXPORT_TYPE": "SQLite",
        "EXPORT_PARAM_PROGRESS": "true",
        "EXPORT_PARAM_APPEND": "false",
        "EXPORT_PARAM_USE_SHUFFLE": "true",
        "EXPORT_PARAM_INCLUDE_JSON": "false",
        "EXPORT_PARAM_INCLUDE_BLOBS": "false",
        "EXPORT_PARAM_TIME_NORMALIZE": "false",
        "EXPORT_PARAM_TIME_SHIFT": "0",
        "EXPORT_PARAM_TABLES_TO_EXPORT": "",
        "EXPORT_PARAM_TIMES_TO_EXPORT": "",
        "EXPORT_CONFIG_TIME_SHIFT": "0",
        "EXPORT_TIME": "0.01 sec",
    }
    for prefix, infix in (
        ("EXPORT_PARAM_", "OUTPUT"),
        ("EXPORT_", "OUTUPT"),
        ("EXPORT_PARAM_", "OUTUPT"),  # nsys 2023.2
    ):
        known |= {
            f"{prefix}INPUT_FILE": rep,
            f"{prefix}{infix}_FILE": out,
            f"{prefix}INPUT_PATH": rep,
            f"{prefix}{infix}_PATH": out,
            f"{prefix}INPUT_PATH_ABS": f"/tmp/{rep}",
            f"{prefix}{infix}_PATH_ABS": f"/tmp/{out}",
            f"{prefix}OVERWRITE": "true",
            f"{prefix}LAZY": "true",
        }
    values = {key: known[key] for key in profile.export_keys}
    # Extra rows follow the standard ones; a standard key given here gets the new value.
    values.update(scenario.metadata)
    return values
