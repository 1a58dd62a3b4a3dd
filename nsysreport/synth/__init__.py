"""Synthetic nsys exports for tests, benchmarks and sample_traces/; never imported by the runtime.

The writer API is re-exported here, so a scenario reads `from nsysreport.synth import Kernel,
Scenario, write_trace`. The modules: `trace` (scenario dataclasses -> an nsys SQLite export),
`nsys_schema` (what each nsys version writes), `simulate` (tensor-parallel inference as
scenarios, and the sample traces) and `rank_files` (a run split into per-rank files on shifted
clocks).
"""

from nsysreport.synth.nsys_schema import VERSIONS
from nsysreport.synth.trace import (
    GLOBAL_VID,
    NCCL_ALL_REDUCE,
    NCCL_COMM_INIT,
    NONE_ID,
    ApiCall,
    Diagnostic,
    Gpu,
    GpuMetricSample,
    GraphLaunch,
    GraphNode,
    Kernel,
    Memcpy,
    Memset,
    NvtxRange,
    OsCall,
    PayloadSchema,
    ProfilerOverhead,
    Scenario,
    emit_nvtx_op,
    emit_nvtx_text,
    kernel_names,
    nccl_payload,
    write_trace,
)

__all__ = [
    "GLOBAL_VID",
    "NCCL_ALL_REDUCE",
    "NCCL_COMM_INIT",
    "NONE_ID",
    "VERSIONS",
    "ApiCall",
    "Diagnostic",
    "Gpu",
    "GpuMetricSample",
    "GraphLaunch",
    "GraphNode",
    "Kernel",
    "Memcpy",
    "Memset",
    "NvtxRange",
    "OsCall",
    "PayloadSchema",
    "ProfilerOverhead",
    "Scenario",
    "emit_nvtx_op",
    "emit_nvtx_text",
    "kernel_names",
    "nccl_payload",
    "write_trace",
]
