"""An independent, straightforward reference: per-GPU metrics by a Python sweep over raw rows.

It reads the SQLite export with the standard library and shares no code with nsysreport's
SQL, so agreement between the two is evidence, not tautology.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path

Interval = tuple[int, int]
COMM = re.compile(
    r"nccl|multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|"
    r"cross_device_reduce|nvshmem|deep_ep|dpsk::ep",
    re.I,
)
ATTENTION = re.compile(r"flash|fmha|sdpa|attention", re.I)
GEMM = re.compile(r"gemm|xmma|nvjet|gemv|cutlass.*tensorop|cublaslt|GemmUniversal", re.I)


def union_length(intervals: list[Interval]) -> int:
    total, current = 0, None
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def kernel_class(name: str) -> str:
    if COMM.search(name):
        return "comm"
    if ATTENTION.search(name):
        return "attention"
    if "splitkreduce" in name.lower():
        return "other"
    return "gemm" if GEMM.search(name) else "other"


def per_gpu_metrics(path: Path) -> dict[tuple[int, int], dict[str, int]]:
    """(pid, device) -> span, busy, compute, gemm, attention, comm, comm_sum, exposed_comm, ...

    CUDA graph launches traced as a whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows) are busy time of
    their own: graph_ns is their union, graph_opaque_ns the busy time no kernel or copy covers.
    """
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    names = dict(con.execute("SELECT id, value FROM StringIds"))
    sets: dict[tuple[int, int], dict[str, list[Interval]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[tuple[int, int], int] = defaultdict(int)
    graph_kernels: dict[tuple[int, int], int] = defaultdict(int)
    launches: dict[tuple[int, int], int] = defaultdict(int)
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        columns = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        node = "graphNodeId" if "graphNodeId" in columns else "NULL"
        rows = con.execute(
            f'SELECT globalPid, deviceId, start, "end", demangledName, {node} '
            "FROM CUPTI_ACTIVITY_KIND_KERNEL"
        )
        for gpid, dev, start, end, name_id, node_id in rows:
            key = ((gpid >> 24) & 0xFFFFFF, dev)
            counts[key] += 1
            graph_kernels[key] += node_id is not None
            cls = kernel_class(names.get(name_id, ""))
            sets[key][cls].append((start, end))
            sets[key]["all"].append((start, end))
            sets[key]["kernel"].append((start, end))
            if cls != "comm":
                sets[key]["compute"].append((start, end))
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in tables:
            for gpid, dev, start, end in con.execute(
                f'SELECT globalPid, deviceId, start, "end" FROM {table}'
            ):
                key = ((gpid >> 24) & 0xFFFFFF, dev)
                sets[key]["memcpy"].append((start, end))
                sets[key]["all"].append((start, end))
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
        for gpid, dev, start, end in con.execute(
            'SELECT globalPid, deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE'
        ):
            key = ((gpid >> 24) & 0xFFFFFF, dev)
            launches[key] += 1
            sets[key]["graph"].append((start, end))
            sets[key]["all"].append((start, end))
    # nsys's own pauses of a process (PROFILER_OVERHEAD): time in them with nothing running on
    # one of its GPUs is profiler overhead, not idle.
    pauses: dict[int, list[Interval]] = defaultdict(list)
    if "PROFILER_OVERHEAD" in tables:
        for gtid, start, end in con.execute(
            'SELECT globalTid, start, "end" FROM PROFILER_OVERHEAD'
        ):
            if gtid is not None:
                pauses[(gtid >> 24) & 0xFFFFFF].append((start, end))
    con.close()
    result = {}
    for key, s in sets.items():
        timed = [i for i in s["all"] if i[1] > i[0]]
        compute, comm, kernels = (union_length(s[n]) for n in ("compute", "comm", "kernel"))
        busy = union_length(s["all"])
        traced = union_length(s["kernel"] + s["memcpy"])  # what is known to run
        first, last = min(b for b, _ in timed), max(e for _, e in timed)
        span = last - first
        clipped = [(max(b, first), min(e, last)) for b, e in pauses[key[0]]]
        overhead = union_length(s["all"] + clipped) - busy
        result[key] = {
            "span_ns": span,
            "busy_ns": busy,
            "idle_ns": span - busy - overhead,
            "profiler_overhead_ns": overhead,
            "compute_ns": compute,
            "gemm_ns": union_length(s["gemm"]),
            "attention_ns": union_length(s["attention"]),
            "comm_ns": comm,
            "comm_sum_ns": sum(e - b for b, e in s["comm"] if e > b),
            "exposed_comm_ns": union_length(s["comm"] + s["compute"]) - compute,
            "memcpy_ns": union_length(s["memcpy"]),
            "exposed_memcpy_ns": traced - kernels,
            "graph_ns": union_length(s["graph"]),
            "graph_opaque_ns": busy - traced,
            "graph_launches": launches[key],
            "kernel_count": counts[key],
            "graph_kernel_count": graph_kernels[key],
        }
    return result


def layer_exposed_comm(path: Path, layer_pattern: str) -> dict[tuple[int, int, str], int]:
    """(pid, device, layer) -> layer comm union minus all compute, by plain Python loops.

    A kernel's layer is the innermost (latest-starting, then first-ending) range matching
    `layer_pattern` that contains its launch call on the launching thread; the layer is the
    matched text.
    """
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    names = dict(con.execute("SELECT id, value FROM StringIds"))
    launches = {
        ((tid >> 24), corr): (tid, start, end)
        for start, end, tid, corr in con.execute(
            'SELECT start, "end", globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME '
            "WHERE eventClass IN (0, 1)"
        )
    }
    pattern = re.compile(layer_pattern)
    ranges = defaultdict(list)
    for start, end, tid, text, text_id in con.execute(
        'SELECT start, "end", globalTid, text, textId FROM NVTX_EVENTS WHERE eventType IN (59, 60) '
        'AND "end" IS NOT NULL AND (endGlobalTid IS NULL OR endGlobalTid = globalTid)'
    ):
        name = names.get(text_id) if text_id is not None else text
        match = pattern.search(name or "")
        if match:
            ranges[tid].append((start, end, match.group(0)))
    comm: dict[tuple[int, int, str], list[Interval]] = defaultdict(list)
    compute: dict[tuple[int, int], list[Interval]] = defaultdict(list)
    for gpid, dev, start, end, name_id, corr in con.execute(
        'SELECT globalPid, deviceId, start, "end", demangledName, correlationId '
        "FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ):
        pid = (gpid >> 24) & 0xFFFFFF
        cls = kernel_class(names[name_id])
        if cls != "comm":
            compute[(pid, dev)].append((start, end))
            continue
        launch = launches.get((gpid >> 24, corr))
        layer = "(outside layers)"
        if launch is not None:
            tid, l_start, l_end = launch
            inside = [r for r in ranges[tid] if r[0] <= l_start and l_end <= r[1]]
            if inside:  # the latest start; of those starting together, the first to end
                layer = max(inside, key=lambda r: (r[0], -r[1]))[2]
        comm[(pid, dev, layer)].append((start, end))
    con.close()
    return {
        key: union_length(spans + compute[key[:2]]) - union_length(compute[key[:2]])
        for key, spans in comm.items()
    }
