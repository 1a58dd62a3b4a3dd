"""Write synthetic Nsight Systems SQLite exports (schemas 2.9.1, 3.13.2, 3.25.0) from scenarios."""

from __future__ import annotations

import os
import re
import sqlite3
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any

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


@dataclass(frozen=True, slots=True)
class ApiCall:
    """A CUDA runtime (class 0) or driver (class 1) call that launches no GPU work."""

    start: int
    end: int
    name: str
    pid: int = 100
    tid: int | None = None
    event_class: int = 0


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


@dataclass(frozen=True, slots=True)
class Gpu:
    """A TARGET_INFO_GPU row; `pid` also maps it to that process (TARGET_INFO_CUDA_DEVICE)."""

    device: int
    name: str = "NVIDIA H100 80GB HBM3"
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    """What a synthetic trace holds. Iterables are consumed once by `write_trace`."""

    kernels: Iterable[Kernel] = ()
    memcpys: Iterable[Memcpy] = ()
    memsets: Iterable[Memset] = ()
    api_calls: Iterable[ApiCall] = ()
    nvtx: Iterable[NvtxRange] = ()
    gpus: Sequence[Gpu] = ()
    host: str = "synth-host"
    backtrace_duplicates: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    capture_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an nsys table as `PRAGMA table_info` reports it."""

    name: str
    sql_type: str
    not_null: bool
    primary_key: bool


@dataclass(frozen=True, slots=True)
class VersionProfile:
    """What one nsys release writes: its tables (in creation order), metadata keys and enums."""

    nsys_version: str
    schema_version: str
    schema_cksum: str | None
    capture_utc: str
    green_context_id: int | None
    tables: Mapping[str, tuple[Column, ...]]
    export_keys: tuple[str, ...]
    event_types: tuple[str, ...]

    @property
    def meta_table(self) -> str:
        return "META_DATA_EXPORT" if "META_DATA_EXPORT" in self.tables else "EXPORT_META_DATA"


def _columns(spec: str) -> tuple[Column, ...]:
    """Parse our compact column lists: 'name TYPE [NOT NULL] [PRIMARY KEY], ...'."""
    out = []
    for item in spec.split(","):
        name, sql_type, *rest = item.split()
        flags = " ".join(rest)
        out.append(Column(name, sql_type, "NOT NULL" in flags, "PRIMARY KEY" in flags))
    return tuple(out)


def _without(columns: tuple[Column, ...], *names: str) -> tuple[Column, ...]:
    return tuple(c for c in columns if c.name not in names)


# Column lists of the newest schema (3.25.0). Older versions drop columns by name; row builders
# fill these full lists and an itemgetter picks each version's columns, in its own order.
_STRING_IDS = _columns("id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL")
_NAME_VALUE = _columns("name TEXT NOT NULL, value TEXT")
_ENUM = _columns("id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT")
_SYSTEM_ENV = _columns(
    "globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL, nameEnum INTEGER NOT NULL,"
    "value TEXT NOT NULL"
)
_SESSION_START = _columns("utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER")
_ANALYSIS_DETAILS = _columns(
    "globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,"
    "stopTime INTEGER NOT NULL"
)
_PROCESSES = _columns("globalPid INTEGER, pid INTEGER, name TEXT")
_THREAD_NAMES = _columns("nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER")
_RUNTIME = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,"
    "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,"
    "callchainId INTEGER"
)
_GPU_OP = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
    "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,"
    "correlationId INTEGER, globalPid INTEGER,"
)
_KERNEL = _columns(
    _GPU_OP + "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,"
    "launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,"
    "gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,"
    "blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,"
    "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,"
    "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,"
    "gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,"
    "sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER,"
    "qmdLastCtaDone INTEGER, graphId INTEGER, clusterX INTEGER, clusterY INTEGER,"
    "clusterZ INTEGER, clusterSchedulingPolicy INTEGER, maxPotentialClusterSize INTEGER,"
    "maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER,"
    "tensorSizeMinusOneElements TEXT NOT NULL"
)
# Columns appended by 2026.1 (3.24.14) and 2026.2 (3.25.0).
_KERNEL_2026_TAIL = tuple(c.name for c in _KERNEL[28:])
_MEMCPY = _columns(
    _GPU_OP + "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,"
    "srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,"
    "dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,"
    "virtualAddress INTEGER, copyCount INTEGER"
)
_MEMSET = _columns(
    _GPU_OP + "value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
)
_NVTX = _columns(
    "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,"
    "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER,"
    "doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL,"
    "jsonTextId INTEGER, jsonText TEXT, binaryData TEXT"
)
_GPU = _columns(
    "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,"
    "l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,"
    "smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER,"
    "ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER,"
    "constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock INTEGER,"
    "maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER,"
    "maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER,"
    "maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER,"
    "maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER,"
    "maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER,"
    "smMajor INTEGER, smMinor INTEGER"
)
_CUDA_DEVICE = _columns(
    "gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT NULL, uuid TEXT,"
    "numMultiprocessors INTEGER"
)

# ENUM_NSYS_EVENT_TYPE names by id (name == label in every dump) as of 2026.2 (155 rows), packed
# because one name per line would take 155 lines.
_EVENT_TYPES_2026 = tuple(
    (  # noqa: SIM905
        "Unknown|CpuCycles|Instructions|CacheReferences|L1CacheDataWriteMisses|"
        "L1CacheDataReadMisses|L1CacheInstructionMisses|L2CacheDataWriteMisses|"
        "L2CacheDataReadMisses|L2CacheInstructionMisses|BranchInstructions|BranchMisses|"
        "BusCycles|CpuClock|TaskClock|PageFault|ContextSwitches|CpuMigrations|PageFaultsMin|"
        "PageFaultsMax|AlignmentFaults|EmulationFaults|ThreadState|Frames|Annotations|"
        "SchedSwitch|SchedWakeup|Command|Mmap|MemUsage|Emc|Composite|NvtxEvents|NvtxCategory|"
        "NvtxMark|NvtxPushRange|NvtxPopRange|NvtxStartRange|NvtxEndRange|NvtxThread|PowerRate|"
        "Sched|CpuCyclesSelf|CpuCyclesTotal|CpuCyclesSelfPlus|Cuda|CudaDevice|TraceProcess|"
        "TraceFunctions|Diagnostic|GlWorkload|BandwidthUsage|KhrDebugMark|KhrDebugPushRange|"
        "KhrDebugPopRange|KhrDebugGpuMark|KhrDebugGpuPushRange|KhrDebugGpuPopRange|GpuCtxsw|"
        "NvtxPushPopRange|NvtxStartEndRange|ProfTime|KhrDebugPushPopRange|"
        "KhrDebugGpuPushPopRange|NvtxtCategory|NvtxtMark|NvtxtPushRange|NvtxtPopRange|"
        "NvtxtStartRange|NvtxtEndRange|NvtxtPushPopRange|NvtxtStartEndRange|NvtxtMetaThread|"
        "NvtxtMetaProcess|NvtxtMetaFileDisplay|NvtxDomainCreate|NvtxDomainDestroy|NvnGpuCmdBuf|"
        "TraceVSync|CudaDeviceKernel|CudaDeviceMemory|Pmu|NvnGpuDraw|NvnGpuCompute|NvnGpuDebug|"
        "OS runtime libraries|CuDNN|CuBLAS|NvMedia|OpenACC|Correlation|DX12|DX12Workload|"
        "PmuRawEvent|GraphicsFrame|Vulkan|VulkanWorkload|NvtxNameCudaDevice|"
        "NvtxNameCudaContext|NvtxNameCudaStream|SystemEvent|GpuMemoryEvent|DX12CreateObject|"
        "VulkanCreateObject|UnitTraceEvent|CustomETWEvent|CudaSyncEvent|SLIEvent (DEPRECATED)|"
        "CudaBacktrace|WddmEvent|DX11|DX11CreateObject|DXGI|CudaGraphNodeCreation|OpenMP|"
        "UncorePmuEvent|UncorePmuCarmel|CudaDeviceMemoryUsage|ETWDxgKrnlEvent|"
        "CudaUvmCpuPageFaultEvent|CudaUvmGpuPageFaultEvent|NICMetricsValuesEvent|"
        "NICMetricsListEvent|InterruptHandler|NvEncode|NVDecode|nvJPEG|CudaEventRecord|"
        "PerfEventCountEvent|CudaDeviceMemoryPool|CudaDeviceGraph|CudaGraphExecCreation|"
        "CudaGraphCreation|CudaGraphClone|GpuMemoryTransferEvent|GlTrace|GpuVideoEngineWorkload|"
        "IBSwitchMetricsValuesEvent|GenericEvent|UncorePmuT23xScf|UncorePmuT23xDsu|"
        "IBSwitchCongestionEvent|CudaDeviceMemcpy|PerfMetricValueEvent|OpenXREvent|"
        "TegraInternalEvent|TraceStartFinish|Syscall|CudaConfidentialComputeKeyRotation|"
        "CudaGraphExecNodeSetParams|NvApi|CudaHostFunc|CudaApi|Overhead|CudaOverhead"
    ).split("|")
)
# 2024.5 has ids 0..146 and four names that were renamed later.
_EVENT_TYPES_2024 = tuple(
    {107: "SLIEvent", 124: "NVENC", 125: "NVDEC", 146: "OSRuntimeStartStop"}.get(i, name)
    for i, name in enumerate(_EVENT_TYPES_2026[:147])
)
_MEMCPY_OPER = (
    ("UNKNOWN", "Unknown"),
    ("HTOD", "Host-to-Device"),
    ("DTOH", "Device-to-Host"),
    ("HTOA", "Host-to-Array"),
    ("ATOH", "Array-to-Host"),
    ("ATOA", "Array-to-Array"),
    ("ATOD", "Array-to-Device"),
    ("DTOA", "Device-to-Array"),
    ("DTOD", "Device-to-Device"),
    ("HTOH", "Host-to-Host"),
    ("PTOP", "Peer-to-Peer"),
    ("UVM_HTOD", "Unified Host-to-Device"),
    ("UVM_DTOH", "Unified Device-to-Host"),
    ("UVM_DTOD", "Unified Device-to-Device"),
)
# srcKind/dstKind (ENUM_CUDA_MEM_KIND: 0 pageable, 2 device) by copyKind, as in real exports.
_MEM_KINDS = {1: (0, 2), 2: (2, 0), 8: (2, 2), 10: (2, 2)}

# META_DATA_EXPORT / EXPORT_META_DATA keys in each version's row order (packed like the names).
_EXPORT_KEYS_2024 = tuple(
    "EXPORT_PRODUCT_NAME EXPORT_PRODUCT_VERSION EXPORT_PRODUCT_DATE EXPORT_SCHEMA_VERSION "  # noqa: SIM905
    "EXPORT_SCHEMA_VERSION_MAJOR EXPORT_SCHEMA_VERSION_MINOR EXPORT_SCHEMA_VERSION_MICRO "
    "EXPORT_SCHEMA_VERSION_CKSUM EXPORT_PLATFORM EXPORT_ARCH EXPORT_TIME_UTC EXPORT_TIME_LOCAL "
    "EXPORT_HOST EXPORT_USER EXPORT_PARAM_INPUT_FILE EXPORT_PARAM_OUTPUT_FILE "
    "EXPORT_PARAM_INPUT_PATH EXPORT_PARAM_OUTPUT_PATH EXPORT_PARAM_INPUT_PATH_ABS "
    "EXPORT_PARAM_OUTPUT_PATH_ABS EXPORT_PARAM_OVERWRITE EXPORT_PARAM_APPEND EXPORT_PARAM_LAZY "
    "EXPORT_PARAM_TIME_NORMALIZE EXPORT_PARAM_TIME_SHIFT EXPORT_PARAM_TABLES_TO_EXPORT "
    "EXPORT_PARAM_TIMES_TO_EXPORT EXPORT_CONFIG_TIME_SHIFT EXPORT_TIME".split()
)
_EXPORT_KEYS_2026 = tuple(
    "EXPORT_PRODUCT_NAME EXPORT_PRODUCT_VERSION EXPORT_PRODUCT_DATE EXPORT_SCHEMA_VERSION "  # noqa: SIM905
    "EXPORT_SCHEMA_VERSION_MAJOR EXPORT_SCHEMA_VERSION_MINOR EXPORT_SCHEMA_VERSION_MICRO "
    "EXPORT_SCHEMA_VERSION_CKSUM EXPORT_PLATFORM EXPORT_ARCH EXPORT_TIME_UTC EXPORT_TIME_LOCAL "
    "EXPORT_HOST EXPORT_USER EXPORT_PARAM_EXPORT_TYPE EXPORT_PARAM_INPUT_FILE "
    "EXPORT_PARAM_OUTPUT_FILE EXPORT_PARAM_INPUT_PATH EXPORT_PARAM_OUTPUT_PATH "
    "EXPORT_PARAM_INPUT_PATH_ABS EXPORT_PARAM_OUTPUT_PATH_ABS EXPORT_PARAM_PROGRESS "
    "EXPORT_PARAM_OVERWRITE EXPORT_PARAM_APPEND EXPORT_PARAM_LAZY EXPORT_PARAM_USE_SHUFFLE "
    "EXPORT_PARAM_INCLUDE_JSON EXPORT_PARAM_INCLUDE_BLOBS EXPORT_PARAM_TIME_NORMALIZE "
    "EXPORT_PARAM_TIME_SHIFT EXPORT_PARAM_TABLES_TO_EXPORT EXPORT_PARAM_TIMES_TO_EXPORT "
    "EXPORT_CONFIG_TIME_SHIFT EXPORT_TIME".split()
)
# 2.x spelled OUTPUT as OUTUPT. Its checksum is not known, so that row is left out.
_EXPORT_KEYS_2022 = tuple(
    "EXPORT_PRODUCT_NAME EXPORT_PRODUCT_VERSION EXPORT_PRODUCT_DATE EXPORT_SCHEMA_VERSION "  # noqa: SIM905
    "EXPORT_SCHEMA_VERSION_MAJOR EXPORT_SCHEMA_VERSION_MINOR EXPORT_SCHEMA_VERSION_MICRO "
    "EXPORT_PLATFORM EXPORT_ARCH EXPORT_TIME EXPORT_TIME_UTC EXPORT_TIME_LOCAL EXPORT_HOST "
    "EXPORT_USER EXPORT_INPUT_FILE EXPORT_OUTUPT_FILE EXPORT_INPUT_PATH EXPORT_OUTUPT_PATH "
    "EXPORT_INPUT_PATH_ABS EXPORT_OUTUPT_PATH_ABS EXPORT_OVERWRITE EXPORT_LAZY".split()
)

_KERNEL_3_13 = _without(_KERNEL, *_KERNEL_2026_TAIL)
_MEMCPY_3_13 = _without(_MEMCPY, "copyCount")

# Creation order is the real exports' (sqlite_master rowid order). Tables that the source export
# lacked are placed as in the nearest version that has them: TARGET_INFO_GPU/CUDA_DEVICE of
# 2026.2 as in 2026.1; MEMSET and NVTX_EVENTS of 2024.5 after MEMCPY, as in 2022.2.
VERSIONS: dict[str, VersionProfile] = {
    "2026.2": VersionProfile(
        nsys_version="2026.2.1.210",
        schema_version="3.25.0",
        schema_cksum="306658267 182758",
        capture_utc="2026-05-26T07:58:50",
        green_context_id=0,
        tables=MappingProxyType(
            {
                "StringIds": _STRING_IDS,
                "TARGET_INFO_SYSTEM_ENV": _SYSTEM_ENV,
                "TARGET_INFO_SESSION_START_TIME": _SESSION_START,
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET,
                "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY,
                "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL,
                "PROCESSES": _PROCESSES,
                "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME,
                "NVTX_EVENTS": _NVTX,
                "ThreadNames": _THREAD_NAMES,
                "TARGET_INFO_GPU": _GPU,
                "TARGET_INFO_CUDA_DEVICE": _CUDA_DEVICE,
                "ENUM_NSYS_EVENT_TYPE": _ENUM,
                "ENUM_CUDA_MEMCPY_OPER": _ENUM,
                "META_DATA_CAPTURE": _NAME_VALUE,
                "META_DATA_EXPORT": _NAME_VALUE,
            }
        ),
        export_keys=_EXPORT_KEYS_2026,
        event_types=_EVENT_TYPES_2026,
    ),
    "2024.5": VersionProfile(
        nsys_version="2024.5.1.113",
        schema_version="3.13.2",
        schema_cksum="1271772049 158887",
        capture_utc="2024-09-13T01:27:48",
        green_context_id=None,
        tables=MappingProxyType(
            {
                "StringIds": _STRING_IDS,
                "TARGET_INFO_SYSTEM_ENV": _SYSTEM_ENV,
                "TARGET_INFO_SESSION_START_TIME": _SESSION_START[:3],
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "PROCESSES": _PROCESSES,
                "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME,
                "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_3_13,
                "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_3_13,
                "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET,
                # binaryData arrived with schema 3.16.1 (2024.6); the 2024.4 docs lack it.
                "NVTX_EVENTS": _without(_NVTX, "binaryData"),
                "ThreadNames": _THREAD_NAMES,
                "TARGET_INFO_GPU": _GPU,
                "ENUM_NSYS_EVENT_TYPE": _ENUM,
                "ENUM_CUDA_MEMCPY_OPER": _ENUM,
                "META_DATA_CAPTURE": _NAME_VALUE,
                "META_DATA_EXPORT": _NAME_VALUE,
            }
        ),
        export_keys=_EXPORT_KEYS_2024,
        event_types=_EVENT_TYPES_2024,
    ),
    "2022.2": VersionProfile(
        nsys_version="2022.2.1.31",
        schema_version="2.9.1",
        schema_cksum=None,
        capture_utc="2022-06-01T12:00:00",
        green_context_id=None,
        tables=MappingProxyType(
            {
                "StringIds": _STRING_IDS,
                "ThreadNames": _THREAD_NAMES,
                "TARGET_INFO_SYSTEM_ENV": (
                    Column("globalVid", "INTEGER", True, False),
                    *_SYSTEM_ENV[1:],
                ),
                "TARGET_INFO_SESSION_START_TIME": _SESSION_START[:3],
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "TARGET_INFO_GPU": _GPU,
                "EXPORT_META_DATA": _NAME_VALUE,
                "CUPTI_ACTIVITY_KIND_MEMCPY": _without(_MEMCPY_3_13, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_MEMSET": _without(_MEMSET, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_KERNEL": _without(_KERNEL_3_13, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME,
                "NVTX_EVENTS": _without(_NVTX, "binaryData"),
                "PROCESSES": _PROCESSES,
            }
        ),
        export_keys=_EXPORT_KEYS_2022,
        event_types=(),
    ),
}

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

_Op = Kernel | Memcpy | Memset | ApiCall


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
    words = _strip_templates(head).split()
    parts = [p for p in (words[-1] if words else head).split("::") if p]
    short = parts[-1] if parts else head
    path = "".join(f"{len(p)}{p}" for p in parts or [short])
    if head.rstrip().endswith(">"):
        # Not real mangling of the template arguments: a checksum keeps distinct names distinct.
        path += f"ILj{zlib.crc32(head.encode())}EE"
    mangled = "_Z" + (f"N{path}E" if len(parts) > 1 else path)
    if head.rstrip().endswith(">") and head.startswith("void "):
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


def _mangle_path(parts: Sequence[str]) -> str:
    encoded = "".join(f"{len(p)}{p}" for p in parts)
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
    ops.sort(key=_launch_start)
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
    # GPU tables list rows by start time, as nsys does; the sorts are stable on launch order.
    kernels.sort(key=lambda pair: pair[0].start)
    memcpys.sort(key=lambda pair: pair[0].start)
    memsets.sort(key=lambda pair: pair[0].start)
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
    if ops:
        backtrace = scenario.backtrace_duplicates
        rows["CUPTI_ACTIVITY_KIND_RUNTIME"] = _runtime_rows(ops, corr, strings, backtrace)
    if nvtx:
        rows["NVTX_EVENTS"] = _nvtx_rows(nvtx, strings)
    if pids:
        rows["PROCESSES"] = [(GLOBAL_VID | pid << 24, pid, PROCESS_NAME) for pid in pids]
    if tids:
        # Linux threads inherit the process name unless they rename themselves.
        name_id = strings.setdefault(PROCESS_NAME, len(strings) + 1)
        rows["ThreadNames"] = [(name_id, 20, GLOBAL_VID | p << 24 | t) for p, t in tids]
    if gpus:
        rows["TARGET_INFO_GPU"] = [_gpu_row(g) for g in gpus]
    if "TARGET_INFO_CUDA_DEVICE" in profile.tables and any(g.pid is not None for g in gpus):
        rows["TARGET_INFO_CUDA_DEVICE"] = _cuda_device_rows(gpus)
    if profile.event_types:
        rows["ENUM_NSYS_EVENT_TYPE"] = [(i, n, n) for i, n in enumerate(profile.event_types)]
        rows["ENUM_CUDA_MEMCPY_OPER"] = [
            (i, f"CUDA_MEMCPY_KIND_{name}", label) for i, (name, label) in enumerate(_MEMCPY_OPER)
        ]
        rows["META_DATA_CAPTURE"] = _capture_rows(scenario)
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
            _insert(con, profile, table, table_rows)
        start, stop = _bounds(con, [t for t in _EVENT_TABLES if t in rows])
        _insert(con, profile, "ANALYSIS_DETAILS", [(GLOBAL_VID, stop - start, start, stop)])
        utc = datetime.fromisoformat(profile.capture_utc).replace(tzinfo=UTC)
        epoch_ns = int(utc.timestamp()) * 1_000_000_000
        session = [(epoch_ns, profile.capture_utc, profile.capture_utc, start)]
        _insert(con, profile, "TARGET_INFO_SESSION_START_TIME", session)
        _insert(con, profile, "StringIds", [(i, s) for s, i in strings.items()])
        con.execute("COMMIT")
    finally:
        con.close()


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
        "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL,
        "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY,
        "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET,
        "NVTX_EVENTS": _NVTX,
        "TARGET_INFO_SESSION_START_TIME": _SESSION_START,
    }.get(table, columns)
    if full != columns:
        names = [c.name for c in full]
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
        # Launch geometry and resources are fixed plausible values taken from real H100 kernels.
        yield (
            k.start, k.end, k.device, 1, green, k.stream, corr, GLOBAL_VID | k.pid << 24,
            *ids, 1, 1, 32, 128, 1, 1, 256, 1, 1, 0, 0, 0, 127401984, grid_id, 32768, None, 0,
            None, None, None, None, 0, 0, 0, 1, 0, 0, None, "[]",
        )  # fmt: skip


def _memcpy_rows(memcpys: list[tuple[Memcpy, int]], profile: VersionProfile) -> Iterator[Row]:
    green = profile.green_context_id
    for m, corr in memcpys:
        src, dst = _MEM_KINDS.get(m.copy_kind, (None, None))
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
            domain_id, r.payload, None, None, None, None, None, None, None, None,
        )  # fmt: skip


def _cuda_device_rows(gpus: Sequence[Gpu]) -> list[Row]:
    # Each process numbers the GPUs it sees from 0 (one GPU per rank: CUDA device 0).
    seen: dict[int, int] = {}
    rows: list[Row] = []
    for g in gpus:
        if g.pid is not None:
            cuda_id = seen[g.pid] = seen.get(g.pid, -1) + 1
            rows.append((g.device, cuda_id, g.pid, _gpu_uuid(g.device), 132))
    return rows


def _gpu_uuid(device: int) -> str:
    return f"00000000-0000-4000-8000-{device:012x}"


def _gpu_row(g: Gpu) -> Row:
    # Whatever the name, the properties are an H100 SXM's (the rows only need to be plausible).
    return (
        GLOBAL_VID, g.device, g.name, f"0000:{0x18 + g.device:02x}:00.0", 1, 52428800,
        85029158912, 3352320000000, 1980000000, 132, 0, _gpu_uuid(g.device), 0, "GH100",
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
    for prefix, infix in (("EXPORT_PARAM_", "OUTPUT"), ("EXPORT_", "OUTUPT")):
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
