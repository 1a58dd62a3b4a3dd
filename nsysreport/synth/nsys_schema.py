"""The nsys export formats the generator writes: per-version column lists, table order, enums."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


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
    # SYNCHRONIZATION.syncType by API name (without its _vNNNN suffix) where a real export of
    # this release was seen to write another value than SYNC_TYPES (docs/export-format.md).
    sync_types: Mapping[str, int] = field(default_factory=dict)

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
# As the User Guide's schema reference gives it (nsys writes it under --trace=mpi); none of the
# real exports in shared/ has the table.
MPI_RANKS = _columns("globalTid INTEGER NOT NULL, rank INTEGER NOT NULL")
_ENUM = _columns("id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT")
_SYSTEM_ENV = _columns(
    "globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL, nameEnum INTEGER NOT NULL,"
    "value TEXT NOT NULL"
)
SESSION_START = _columns("utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER")
_ANALYSIS_DETAILS = _columns(
    "globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,"
    "stopTime INTEGER NOT NULL"
)
_PROCESSES = _columns("globalPid INTEGER, pid INTEGER, name TEXT")
_THREAD_NAMES = _columns("nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER")
RUNTIME = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,"
    "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,"
    "callchainId INTEGER"
)
_GPU_OP = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
    "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,"
    "correlationId INTEGER, globalPid INTEGER,"
)
KERNEL = _columns(
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
MEMCPY = _columns(
    _GPU_OP + "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,"
    "srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,"
    "dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,"
    "virtualAddress INTEGER, copyCount INTEGER"
)
MEMSET = _columns(
    _GPU_OP + "value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
)
NVTX = _columns(
    "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,"
    "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER,"
    "doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL,"
    "jsonTextId INTEGER, jsonText TEXT, binaryData TEXT"
)
# CUDA graphs (docs/export-format.md). Graph-level tracing writes one GRAPH_TRACE row per graph
# launch (schema 3.x only: the full 2.9.1 dump has no such table); node-level tracing writes
# node creation and cloning events, in CUDA_GRAPH_NODE_EVENTS from schema 3.x and in
# CUDA_GRAPH_EVENTS (same columns) in 2.9.1. The 3.x lists are the User Guide's schema reference
# (2024.4 and 2026.4 releases agree); the lazy 2024.5/2026.x dumps we have hold neither table.
GRAPH_TRACE = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
    "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,"
    "correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL,"
    "graphExecId INTEGER NOT NULL"
)
GRAPH_NODE_EVENTS = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,"
    "nameId INTEGER NOT NULL, graphNodeId INTEGER NOT NULL, originalGraphNodeId INTEGER"
)
# ENUM_NSYS_EVENT_CLASS id of a node creation event (TRACE_PROCESS_EVENT_CUDA_GRAPH_NODE_CREATION).
GRAPH_NODE_CREATION_CLASS = 77
GPU = _columns(
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
# GPU metric sampling (nsys profile --gpu-metrics-devices), as public readers of real exports
# show them (docs/export-format.md); placed after TARGET_INFO_GPU, their real position unknown.
GPU_METRICS = _columns(
    "timestamp INTEGER, typeId INTEGER NOT NULL, metricId INTEGER NOT NULL,value INTEGER NOT NULL"
)
TARGET_INFO_GPU_METRICS = _columns(
    "typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, typeName TEXT NOT NULL,"
    "metricId INTEGER NOT NULL, metricName TEXT NOT NULL"
)
# Host synchronisation and CUDA events, as 2026.2 writes them (NSYS_SCHEMA.md); older
# releases lack deprecatedSyncType, eventSyncId, timestamp and greenContextId.
SYNCHRONIZATION = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
    "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,"
    "correlationId INTEGER, globalPid INTEGER, deprecatedSyncType INTEGER,"
    "syncType INTEGER NOT NULL, eventId INTEGER NOT NULL, eventSyncId INTEGER"
)
CUDA_EVENT = _columns(
    "timestamp INTEGER, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,"
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,"
    "globalPid INTEGER, eventId INTEGER NOT NULL, eventSyncId INTEGER"
)
_SYNCHRONIZATION_3_13 = _without(SYNCHRONIZATION, "deprecatedSyncType", "eventSyncId")
_SYNCHRONIZATION_2_9 = _without(_SYNCHRONIZATION_3_13, "greenContextId")
_CUDA_EVENT_2_9 = _without(CUDA_EVENT, "timestamp", "greenContextId", "eventSyncId")
# ENUM_CUPTI_SYNC_TYPE as every export's enum table lists it: 1 event synchronise, 2 stream
# wait event, 3 stream synchronise, 4 context synchronise. The writer's default per call;
# releases write other values (VersionProfile.sync_types), which is why readers key on the
# call's name instead.
SYNC_TYPES = MappingProxyType(
    {
        "cudaEventSynchronize": 1,
        "cuEventSynchronize": 1,
        "cudaEventQuery": 1,
        "cudaStreamWaitEvent": 2,
        "cuStreamWaitEvent": 2,
        "cudaStreamSynchronize": 3,
        "cuStreamSynchronize": 3,
        "cudaDeviceSynchronize": 4,
        "cuCtxSynchronize": 4,
    }
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
MEMCPY_OPER = (
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
MEM_KINDS = {1: (0, 2), 2: (2, 0), 8: (2, 2), 10: (2, 2)}

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
# 2023.2 (schema 3.1.7) still names the table EXPORT_META_DATA and spells OUTPUT as OUTUPT,
# with 3.x's EXPORT_PARAM_ prefix (wenscarl/cutlass_benchmark @ 8f17c66, report1.sqlite).
_EXPORT_KEYS_2023 = tuple(
    "EXPORT_PRODUCT_NAME EXPORT_PRODUCT_VERSION EXPORT_PRODUCT_DATE EXPORT_SCHEMA_VERSION "  # noqa: SIM905
    "EXPORT_SCHEMA_VERSION_MAJOR EXPORT_SCHEMA_VERSION_MINOR EXPORT_SCHEMA_VERSION_MICRO "
    "EXPORT_SCHEMA_VERSION_CKSUM EXPORT_PLATFORM EXPORT_ARCH EXPORT_TIME EXPORT_TIME_UTC "
    "EXPORT_TIME_LOCAL EXPORT_HOST EXPORT_USER EXPORT_PARAM_INPUT_FILE EXPORT_PARAM_OUTUPT_FILE "
    "EXPORT_PARAM_INPUT_PATH EXPORT_PARAM_OUTUPT_PATH EXPORT_PARAM_INPUT_PATH_ABS "
    "EXPORT_PARAM_OUTUPT_PATH_ABS EXPORT_PARAM_OVERWRITE EXPORT_PARAM_LAZY "
    "EXPORT_PARAM_TIME_NORMALIZE EXPORT_PARAM_TIME_SHIFT EXPORT_CONFIG_TIME_SHIFT".split()
)
# 2.x spelled OUTPUT as OUTUPT. Its checksum is not known, so that row is left out.
_EXPORT_KEYS_2022 = tuple(
    "EXPORT_PRODUCT_NAME EXPORT_PRODUCT_VERSION EXPORT_PRODUCT_DATE EXPORT_SCHEMA_VERSION "  # noqa: SIM905
    "EXPORT_SCHEMA_VERSION_MAJOR EXPORT_SCHEMA_VERSION_MINOR EXPORT_SCHEMA_VERSION_MICRO "
    "EXPORT_PLATFORM EXPORT_ARCH EXPORT_TIME EXPORT_TIME_UTC EXPORT_TIME_LOCAL EXPORT_HOST "
    "EXPORT_USER EXPORT_INPUT_FILE EXPORT_OUTUPT_FILE EXPORT_INPUT_PATH EXPORT_OUTUPT_PATH "
    "EXPORT_INPUT_PATH_ABS EXPORT_OUTUPT_PATH_ABS EXPORT_OVERWRITE EXPORT_LAZY".split()
)

# As in the real exports of 2024.5 (3.13.2) and 2026.1-2026.2 (NSYS_SCHEMA.md, DIAGNOSTIC_EVENT).
_DIAGNOSTIC_EVENT = _columns(
    "timestamp INTEGER NOT NULL, timestampType INTEGER NOT NULL, source INTEGER NOT NULL, "
    "severity INTEGER NOT NULL, text TEXT NOT NULL, globalPid INTEGER"
)

# NVTX extended-payload layouts, as the real 2026.2 exports in shared/traces hold them.
NVTX_PAYLOAD_SCHEMAS = _columns(
    "domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, flags INTEGER,"
    "numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER"
)
NVTX_PAYLOAD_SCHEMA_ENTRIES = _columns(
    "domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, flags INTEGER,"
    "type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER"
)

# OSRT_API as in the real 2022.2 and 2024.5 exports (NSYS_SCHEMA.md); no 2026 export here has
# OS runtime tracing, so the 2026 profiles write none.
OSRT_API = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
    "globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
    "nestingLevel INTEGER, callchainId INTEGER NOT NULL"
)

# PROFILER_OVERHEAD as in the real exports (NSYS_SCHEMA.md): 2026.x replaced returnValue with
# overheadType (ENUM_CUPTI_OVERHEAD_TYPE, 3: a CUPTI buffer flush).
PROFILER_OVERHEAD = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL,"
    "overheadType INTEGER NOT NULL"
)
_PROFILER_OVERHEAD_2022 = _columns(
    "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL,"
    "returnValue INTEGER NOT NULL"
)

# 2026.1 (3.24.14) and 2026.2 (3.25.0) appended the kernel columns from qmdBulkReleaseDone on.
_KERNEL_3_13 = KERNEL[: [c.name for c in KERNEL].index("qmdBulkReleaseDone")]
_MEMCPY_3_13 = _without(MEMCPY, "copyCount")

# nsys 2020.3-2021.2 (docs/export-format.md, "nsys 2020-2021"; every list below is a real
# export's, read from the exports named there): no metadata, ANALYSIS_DETAILS, PROCESSES,
# TARGET_INFO_SYSTEM_ENV or session start table; kernels without mangledName (25 columns in
# 2020.3, 26 from 2020.5 with sharedMemoryLimitConfig); memcpys without virtualAddress (17
# columns in 2020.3, 18 from 2020.5 with migrationCause); runtime rows without callchainId in
# 2020.3. The GPU list: TARGET_INFO_CUDA_GPU (per process and CUDA device) in 2020.3 and 2020.5,
# beside a five-column TARGET_INFO_GPU keyed by `deviceId` in 2020.5; 2021.2 has today's
# 41-column TARGET_INFO_GPU. No export of these years here holds NVTX_EVENTS: its columns are
# 2022.2's (schema 2.9.1), an assumption the docs mark unverified.
_KERNEL_2020_5 = _without(_KERNEL_3_13, "greenContextId", "mangledName")
_KERNEL_2020_3 = _without(_KERNEL_2020_5, "sharedMemoryLimitConfig")
_MEMCPY_2020_5 = _without(_MEMCPY_3_13, "greenContextId", "virtualAddress")
_MEMCPY_2020_3 = _without(_MEMCPY_2020_5, "migrationCause")
_GPU_2020_5 = _columns(
    "vmId INTEGER NOT NULL, deviceId INTEGER NOT NULL, name TEXT, busLocation TEXT, "
    "isDiscrete INTEGER"
)
TARGET_INFO_CUDA_GPU = _columns(
    "vmId INTEGER NOT NULL, name TEXT NOT NULL, pciBusId TEXT, "
    "globalMemoryBandwidth INTEGER NOT NULL, globalMemorySize INTEGER NOT NULL, "
    "constantMemorySize INTEGER NOT NULL, l2CacheSize INTEGER NOT NULL, "
    "numThreadsPerWarp INTEGER NOT NULL, coreClockRate INTEGER NOT NULL, "
    "numMemcpyEngines INTEGER NOT NULL, numMultiprocessors INTEGER NOT NULL, "
    "maxIPC INTEGER NOT NULL, maxWarpsPerMultiprocessor INTEGER NOT NULL, "
    "maxBlocksPerMultiprocessor INTEGER NOT NULL, maxRegistersPerBlock INTEGER NOT NULL, "
    "maxSharedMemoryPerBlock INTEGER NOT NULL, maxThreadsPerBlock INTEGER NOT NULL, "
    "maxBlockDimX INTEGER NOT NULL, maxBlockDimY INTEGER NOT NULL, "
    "maxBlockDimZ INTEGER NOT NULL, maxGridDimX INTEGER NOT NULL, "
    "maxGridDimY INTEGER NOT NULL, maxGridDimZ INTEGER NOT NULL, "
    "computeCapabilityMajor INTEGER NOT NULL, computeCapabilityMinor INTEGER NOT NULL, "
    "deviceId INTEGER NOT NULL, pid INTEGER, maxSharedMemoryPerMultiprocessor INTEGER, "
    "maxRegistersPerMultiprocessor INTEGER"
)
_OLD_NVTX = _without(NVTX, "binaryData")


def _old_profile(
    nsys_version: str, capture_utc: str, tables: dict[str, tuple[Column, ...]]
) -> VersionProfile:
    return VersionProfile(
        nsys_version=nsys_version,
        schema_version="",  # the export does not say
        schema_cksum=None,
        capture_utc=capture_utc,
        green_context_id=None,
        tables=MappingProxyType({"StringIds": _STRING_IDS, **tables}),
        export_keys=(),
        event_types=(),
    )


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
                "TARGET_INFO_SESSION_START_TIME": SESSION_START,
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "CUPTI_ACTIVITY_KIND_CUDA_EVENT": CUDA_EVENT,
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": SYNCHRONIZATION,
                "CUPTI_ACTIVITY_KIND_MEMSET": MEMSET,
                "CUPTI_ACTIVITY_KIND_MEMCPY": MEMCPY,
                "CUPTI_ACTIVITY_KIND_KERNEL": KERNEL,
                "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": GRAPH_TRACE,
                "PROCESSES": _PROCESSES,
                "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
                "CUDA_GRAPH_NODE_EVENTS": GRAPH_NODE_EVENTS,
                "NVTX_EVENTS": NVTX,
                "ThreadNames": _THREAD_NAMES,
                "TARGET_INFO_GPU": GPU,
                "TARGET_INFO_GPU_METRICS": TARGET_INFO_GPU_METRICS,
                "GPU_METRICS": GPU_METRICS,
                "TARGET_INFO_CUDA_DEVICE": _CUDA_DEVICE,
                "ENUM_NSYS_EVENT_TYPE": _ENUM,
                "ENUM_CUDA_MEMCPY_OPER": _ENUM,
                "META_DATA_CAPTURE": _NAME_VALUE,
                "META_DATA_EXPORT": _NAME_VALUE,
                "MPI_RANKS": MPI_RANKS,
                "DIAGNOSTIC_EVENT": _DIAGNOSTIC_EVENT,
                "PROFILER_OVERHEAD": PROFILER_OVERHEAD,
                "NVTX_PAYLOAD_SCHEMAS": NVTX_PAYLOAD_SCHEMAS,
                "NVTX_PAYLOAD_SCHEMA_ENTRIES": NVTX_PAYLOAD_SCHEMA_ENTRIES,
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
                "TARGET_INFO_SESSION_START_TIME": SESSION_START[:3],
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "PROCESSES": _PROCESSES,
                # Not in the real export (no event was recorded): placed as in 2023.2.
                "CUPTI_ACTIVITY_KIND_CUDA_EVENT": _CUDA_EVENT_2_9,
                "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
                "CUDA_GRAPH_NODE_EVENTS": GRAPH_NODE_EVENTS,
                "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_3_13,
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": _SYNCHRONIZATION_3_13,
                "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": GRAPH_TRACE,
                "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_3_13,
                "CUPTI_ACTIVITY_KIND_MEMSET": MEMSET,
                # binaryData arrived with schema 3.16.1 (2024.6); the 2024.4 docs lack it.
                "NVTX_EVENTS": _without(NVTX, "binaryData"),
                "ThreadNames": _THREAD_NAMES,
                "TARGET_INFO_GPU": GPU,
                "TARGET_INFO_GPU_METRICS": TARGET_INFO_GPU_METRICS,
                "GPU_METRICS": GPU_METRICS,
                "ENUM_NSYS_EVENT_TYPE": _ENUM,
                "ENUM_CUDA_MEMCPY_OPER": _ENUM,
                "META_DATA_CAPTURE": _NAME_VALUE,
                "META_DATA_EXPORT": _NAME_VALUE,
                "DIAGNOSTIC_EVENT": _DIAGNOSTIC_EVENT,
                "PROFILER_OVERHEAD": _PROFILER_OVERHEAD_2022,
                "OSRT_API": OSRT_API,
            }
        ),
        export_keys=_EXPORT_KEYS_2024,
        event_types=_EVENT_TYPES_2024,
        sync_types=MappingProxyType({"cudaDeviceSynchronize": 1}),
    ),
    "2023.2": VersionProfile(
        nsys_version="2023.2.3.0",
        schema_version="3.1.7",
        schema_cksum="2070890140 131535",
        capture_utc="2024-01-16T23:00:34",
        green_context_id=None,
        # As in the real export (wenscarl/cutlass_benchmark @ 8f17c66, report1.sqlite), which
        # lacks MEMSET and NVTX_EVENTS: 2022.2's columns, placed after MEMCPY and SYNCHRONIZATION.
        tables=MappingProxyType(
            {
                "StringIds": _STRING_IDS,
                "TARGET_INFO_SYSTEM_ENV": _SYSTEM_ENV,
                "TARGET_INFO_SESSION_START_TIME": SESSION_START[:3],
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "PROCESSES": _PROCESSES,
                "CUPTI_ACTIVITY_KIND_CUDA_EVENT": _CUDA_EVENT_2_9,
                "PROFILER_OVERHEAD": _PROFILER_OVERHEAD_2022,
                "OSRT_API": OSRT_API,
                "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
                "CUPTI_ACTIVITY_KIND_MEMCPY": _without(_MEMCPY_3_13, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_MEMSET": _without(MEMSET, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_KERNEL": _without(_KERNEL_3_13, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": _SYNCHRONIZATION_2_9,
                "NVTX_EVENTS": _OLD_NVTX,
                "ThreadNames": _THREAD_NAMES,
                "TARGET_INFO_GPU": GPU,
                "ENUM_NSYS_EVENT_TYPE": _ENUM,
                "ENUM_CUDA_MEMCPY_OPER": _ENUM,
                "EXPORT_META_DATA": _NAME_VALUE,
            }
        ),
        export_keys=_EXPORT_KEYS_2023,
        event_types=_EVENT_TYPES_2024[:142],
        sync_types=MappingProxyType({"cudaEventSynchronize": 2}),
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
                "TARGET_INFO_SESSION_START_TIME": SESSION_START[:3],
                "ANALYSIS_DETAILS": _ANALYSIS_DETAILS,
                "TARGET_INFO_GPU": GPU,
                "EXPORT_META_DATA": _NAME_VALUE,
                "CUPTI_ACTIVITY_KIND_MEMCPY": _without(_MEMCPY_3_13, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_MEMSET": _without(MEMSET, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_KERNEL": _without(_KERNEL_3_13, "greenContextId"),
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": _SYNCHRONIZATION_2_9,
                "CUPTI_ACTIVITY_KIND_CUDA_EVENT": _CUDA_EVENT_2_9,
                "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
                "CUDA_GRAPH_EVENTS": GRAPH_NODE_EVENTS,
                "NVTX_EVENTS": _without(NVTX, "binaryData"),
                "PROCESSES": _PROCESSES,
                "PROFILER_OVERHEAD": _PROFILER_OVERHEAD_2022,
                "OSRT_API": OSRT_API,
            }
        ),
        export_keys=_EXPORT_KEYS_2022,
        event_types=(),
        # Seen in a 2022.1.3 export, whose schema (2.9.1) and columns are 2022.2's.
        sync_types=MappingProxyType({"cudaDeviceSynchronize": 1}),
    ),
    # Table order as in the real exports (sqlite_master), NVTX_EVENTS last (see above).
    "2021.2": _old_profile(
        "2021.2.1.58",
        "2021-07-05T12:00:00",
        {
            "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
            "CUPTI_ACTIVITY_KIND_MEMSET": _without(MEMSET, "greenContextId"),
            "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_2020_5,
            "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_2020_5,
            "ThreadNames": _THREAD_NAMES,
            "TARGET_INFO_GPU": GPU,
            "NVTX_EVENTS": _OLD_NVTX,
        },
    ),
    "2020.5": _old_profile(
        "2020.5.1.85",
        "2021-01-15T12:00:00",
        {
            "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME,
            "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_2020_5,
            "CUPTI_ACTIVITY_KIND_MEMSET": _without(MEMSET, "greenContextId"),
            "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_2020_5,
            "ThreadNames": _THREAD_NAMES,
            "TARGET_INFO_CUDA_GPU": TARGET_INFO_CUDA_GPU,
            "TARGET_INFO_GPU": _GPU_2020_5,
            "NVTX_EVENTS": _OLD_NVTX,
        },
    ),
    "2020.3": _old_profile(
        "2020.3.4.32",
        "2020-09-15T12:00:00",
        {
            "CUPTI_ACTIVITY_KIND_RUNTIME": RUNTIME[:7],  # no callchainId yet
            "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_2020_3,
            # No 2020.3 export here has memsets: 2020.5's list (unverified).
            "CUPTI_ACTIVITY_KIND_MEMSET": _without(MEMSET, "greenContextId"),
            "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_2020_3,
            "ThreadNames": _THREAD_NAMES,
            "TARGET_INFO_CUDA_GPU": TARGET_INFO_CUDA_GPU,
            "NVTX_EVENTS": _OLD_NVTX,
        },
    ),
}
