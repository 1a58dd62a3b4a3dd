"""Build the report model from query results: frozen dataclasses of plain values, and its JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport import __version__
from nsysreport.queries import run_query
from nsysreport.units import pct

if TYPE_CHECKING:
    import duckdb

JSON_SCHEMA_VERSION = 1
COMPUTE_BOUND_PCT = 80.0


@dataclass(frozen=True, slots=True)
class TraceInfo:
    path: str
    nsys_version: str | None
    schema_version: str | None
    host: str | None
    duration_ns: int | None
    simulated: str | None


@dataclass(frozen=True, slots=True)
class Gap:
    start_ns: int
    offset_ns: int  # start_ns minus the GPU's first activity start
    duration_ns: int
    before_name: str | None
    before_class: str | None
    after_name: str | None
    after_class: str | None
    sync_call: str | None


@dataclass(frozen=True, slots=True)
class GapStats:
    count: int
    p50_ns: int | None
    p99_ns: int | None
    max_ns: int | None
    histogram: dict[str, int]  # bucket label -> gap count, buckets in length order
    histogram_ns: dict[str, int]  # bucket label -> total gap length
    top: tuple[Gap, ...]


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Projected span of one GPU under each change; assumptions in METRICS.md."""

    compute_2x_ns: int
    comm_2x_ns: int
    perfect_overlap_ns: int
    no_idle_ns: int


@dataclass(frozen=True, slots=True)
class GpuReport:
    file: str
    pid: int
    device_id: int
    rank: int
    host: str | None
    gpu_name: str | None
    span_ns: int
    busy_ns: int
    idle_ns: int
    compute_ns: int
    gemm_ns: int
    attention_ns: int
    comm_ns: int
    comm_sum_ns: int
    exposed_comm_ns: int
    overlapped_comm_ns: int
    overlap_pct: float | None
    memcpy_ns: int
    exposed_memcpy_ns: int
    kernel_count: int
    comm_kernel_count: int
    memcpy_count: int
    gaps: GapStats
    what_if: WhatIf

    @property
    def label(self) -> str:
        return f"rank {self.rank} (pid {self.pid}, GPU {self.device_id})"

    @property
    def shares_pct(self) -> dict[str, float | None]:
        """Each part of the time breakdown as a share of the span (they sum to 100)."""
        return {part: pct(ns, self.span_ns) for part, ns in iter_breakdown(self)}


@dataclass(frozen=True, slots=True)
class KernelSummary:
    kernel_class: str
    name: str
    name_rank: int
    instances: int
    gpus: int
    total_ns: int
    mean_ns: float
    max_ns: int
    pct_of_class: float | None


@dataclass(frozen=True, slots=True)
class Bottleneck:
    stage: str  # compute | communication | memcpy | host
    share_pct: float  # share of all GPUs' span spent in that stage
    gain_pct: float  # span saved by fixing it (what-if), share of all GPUs' span
    straggler: dict[str, Any] | None
    summary: str


@dataclass(frozen=True, slots=True)
class Report:
    tool_version: str
    traces: tuple[TraceInfo, ...]
    gpus: tuple[GpuReport, ...]
    top_kernels: tuple[KernelSummary, ...]
    bottleneck: Bottleneck


def build_report(con: duckdb.DuckDBPyConnection, trace_path: Path, top: int = 10) -> Report:
    """Run the report queries on a loaded trace and assemble the model."""
    meta = con.execute(
        "SELECT nsys_version, schema_version, host, duration_ns, simulated FROM trace_meta"
    ).fetchone()
    assert meta is not None  # trace_meta always has exactly one row
    trace = TraceInfo(str(trace_path), *meta)
    file = trace_path.name
    ranks = {
        (pid, dev): (rank, host, name)
        for pid, dev, rank, host, name in con.execute(
            "SELECT pid, device_id, rank, host, gpu_name FROM gpu ORDER BY pid, device_id"
        ).fetchall()
    }
    summaries = _by_gpu(run_query(con, "gap_summary").to_dicts())
    histograms = _group_by_gpu(run_query(con, "gap_histogram").to_dicts())
    tops = _group_by_gpu(run_query(con, "gap_top", {"top": top}).to_dicts())
    gpus = []
    for row in run_query(con, "gpu_breakdown").to_dicts():
        key = (row["pid"], row["device_id"])
        rank, host, gpu_name = ranks[key]
        gaps = _gap_stats(
            summaries.get(key), histograms.get(key, []), tops.get(key, []), row["first_start_ns"]
        )
        fields = {k: v for k, v in row.items() if k not in ("first_start_ns", "last_end_ns")}
        gpus.append(
            GpuReport(
                file=file,
                rank=rank,
                host=host,
                gpu_name=gpu_name,
                gaps=gaps,
                what_if=what_if(row),
                **fields,
            )
        )
    gpus.sort(key=lambda g: (g.rank, g.pid, g.device_id))
    kernels = tuple(
        KernelSummary(kernel_class=r.pop("class"), **r)
        for r in run_query(con, "kernel_top", {"top": top}).to_dicts()
    )
    return Report(__version__, (trace,), tuple(gpus), kernels, bottleneck(gpus))


def _by_gpu(rows: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    return {(r["pid"], r["device_id"]): r for r in rows}


def _group_by_gpu(rows: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    grouped: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((r["pid"], r["device_id"]), []).append(r)
    return grouped


def _gap_stats(
    summary: Mapping[str, Any] | None,
    histogram: list[dict[str, Any]],
    top: list[dict[str, Any]],
    first_start_ns: int,
) -> GapStats:
    summary = summary or {"gap_count": 0, "p50_ns": None, "p99_ns": None, "max_ns": None}
    gap_fields = {f.name for f in dataclasses.fields(Gap)}
    return GapStats(
        count=summary["gap_count"],
        p50_ns=summary["p50_ns"],
        p99_ns=summary["p99_ns"],
        max_ns=summary["max_ns"],
        histogram={h["bucket"]: h["gap_count"] for h in histogram},
        histogram_ns={h["bucket"]: h["gap_ns"] for h in histogram},
        top=tuple(
            Gap(
                offset_ns=g["start_ns"] - first_start_ns,
                **{k: v for k, v in g.items() if k in gap_fields},
            )
            for g in top
        ),
    )


def what_if(m: Mapping[str, Any]) -> WhatIf:
    """METRICS.md's projections from one GPU's (or step's) breakdown, rounded down to ns."""
    c, comm, o = m["compute_ns"], m["comm_ns"], m["overlapped_comm_ns"]
    x, y, i = m["exposed_comm_ns"], m["exposed_memcpy_ns"], m["idle_ns"]
    t = c + x + y + i
    return WhatIf(
        compute_2x_ns=c // 2 + (comm - min(o, c // 2)) + y + i,
        comm_2x_ns=t - x // 2,
        perfect_overlap_ns=max(c, comm) + y + i,
        no_idle_ns=t - i,
    )


def bottleneck(gpus: list[GpuReport]) -> Bottleneck:
    """The stage that costs most besides compute, over all GPUs, and what fixing it buys."""
    span = sum(g.span_ns for g in gpus)
    compute = sum(g.compute_ns for g in gpus)
    parts = {
        "communication": sum(g.exposed_comm_ns for g in gpus),
        "memcpy": sum(g.exposed_memcpy_ns for g in gpus),
        "host": sum(g.idle_ns for g in gpus),
    }
    gains = {
        "compute": sum(g.span_ns - g.what_if.compute_2x_ns for g in gpus),
        "communication": sum(g.span_ns - g.what_if.perfect_overlap_ns for g in gpus),
        "memcpy": parts["memcpy"],
        "host": parts["host"],
    }
    compute_pct = pct(compute, span) or 0.0
    if compute_pct >= COMPUTE_BOUND_PCT:
        stage, share = "compute", compute_pct
    else:
        stage = max(parts, key=lambda k: parts[k])
        share = pct(parts[stage], span) or 0.0
    gain = pct(gains[stage], span) or 0.0
    return Bottleneck(stage, share, gain, None, _verdict_sentence(stage, share, gain, len(gpus)))


def _verdict_sentence(stage: str, share: float, gain: float, n_gpus: int) -> str:
    where = "the GPU" if n_gpus == 1 else f"the {n_gpus} GPUs"
    if stage == "compute":
        return (
            f"Compute-bound: kernels keep {where} busy {share:.1f}% of the time; "
            f"2x faster compute would cut the span by {gain:.1f}%."
        )
    if stage == "communication":
        return (
            f"GPU-to-GPU communication is the bottleneck: {share:.1f}% of the time on {where} "
            f"is communication not hidden behind compute; perfect overlap would cut the span by "
            f"{gain:.1f}%."
        )
    if stage == "memcpy":
        return (
            f"Host-to-device copies are the bottleneck: {share:.1f}% of the time on {where} is "
            f"memcpy with no kernel running; hiding the copies would cut the span by {gain:.1f}%."
        )
    return (
        f"The host is the bottleneck: {where} sit idle {share:.1f}% of the time waiting for "
        f"launches or synchronisation; removing the idle time would cut the span by {gain:.1f}%."
    )


def as_json(report: Report) -> dict[str, Any]:
    """The JSON contract of METRICS.md (schema_version 1); sections not built yet are empty."""
    gpus = []
    for g in report.gpus:
        row = dataclasses.asdict(g)
        row.update({f"{part.replace(' ', '_')}_pct": v for part, v in g.shares_pct.items()})
        row["gaps"] = {
            "count": g.gaps.count,
            "p50_ns": g.gaps.p50_ns,
            "p99_ns": g.gaps.p99_ns,
            "max_ns": g.gaps.max_ns,
            "histogram": g.gaps.histogram,
            "histogram_ns": g.gaps.histogram_ns,
            "top": [dataclasses.asdict(gap) for gap in g.gaps.top],
        }
        gpus.append(row)
    kernels = []
    for k in report.top_kernels:
        row = dataclasses.asdict(k)
        row["class"] = row.pop("kernel_class")
        kernels.append(row)
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool_version": report.tool_version,
        "traces": [dataclasses.asdict(t) for t in report.traces],
        "gpus": gpus,
        "steps": [],
        "layers": [],
        "collectives": [],
        "stragglers": {"matched": 0, "unmatched": [], "gpus": []},
        "bottleneck": dataclasses.asdict(report.bottleneck),
        "top_kernels": kernels,
    }


def iter_breakdown(g: GpuReport) -> Iterator[tuple[str, int]]:
    """The four parts of the time breakdown of one GPU, which sum to its span."""
    yield "compute", g.compute_ns
    yield "exposed comm", g.exposed_comm_ns
    yield "exposed memcpy", g.exposed_memcpy_ns
    yield "idle", g.idle_ns
