"""Per-GPU time breakdown, gaps and what-if projections (gpu_breakdown, gap_* queries)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from nsysreport.patterns import DATA_LOADER_PATTERN
from nsysreport.queries import run_query
from nsysreport.units import pct

if TYPE_CHECKING:
    import duckdb
    import polars as pl

# A gap is long when it holds at least this share of its GPU's idle time (so a GPU has at most
# 20); docs/metrics.md, Idle concentration.
LONG_GAP_PCT = 5


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
    host_range: str | None = None  # the NVTX range the launching thread was in at the launch
    os_call: str | None = None  # the OS runtime call the launching thread was in during the gap
    # What the launching thread was doing during the gap (gap_top.sql): the innermost host event
    # covering half of it, and its kind (data_loading, python, os, nvtx, sync); None: unknown.
    host_cause: str | None = None
    cause_kind: str | None = None


@dataclass(frozen=True, slots=True)
class GapStats:
    count: int
    p50_ns: int | None
    p99_ns: int | None
    max_ns: int | None
    histogram: dict[str, int]  # bucket label -> gap count, buckets in length order
    histogram_ns: dict[str, int]  # bucket label -> total gap length
    top: tuple[Gap, ...]
    # Every long gap (each at least LONG_GAP_PCT of the GPU's idle time), longest first,
    # whatever --top: what idle concentration is judged on (verdict.idle_gaps).
    long: tuple[Gap, ...] = ()


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Projected span of one GPU (or step) under each change; assumptions in docs/metrics.md."""

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
    graph_ns: int  # union of CUDA graph launches traced as a whole (graph-level tracing)
    graph_opaque_ns: int  # of that, time no kernel or copy accounts for
    graph_launches: int
    graph_kernel_count: int  # kernels replayed from a graph (node-level tracing)
    # of those, kernels in no layer because the export records no node creation for them
    graph_kernels_without_layer: int
    gaps: GapStats
    what_if: WhatIf
    # nothing running while nsys paused the process for itself (PROFILER_OVERHEAD): neither
    # busy nor idle, never a gap (0 in reports written before it was a part)
    profiler_overhead_ns: int = 0

    @property
    def shares_pct(self) -> dict[str, float | None]:
        """Each part of the time breakdown as a share of the span (they sum to 100)."""
        return {part: pct(ns, self.span_ns) for part, ns in iter_breakdown(self)}


# The six parts of a time breakdown (GPU or step), which sum to its span, and the field that
# holds each. `graph opaque` is time inside CUDA graph launches traced as a whole: busy, but of
# unknown content; `profiler overhead` is time nothing runs while nsys pauses the process.
BREAKDOWN_FIELDS = {
    "compute": "compute_ns",
    "exposed comm": "exposed_comm_ns",
    "exposed memcpy": "exposed_memcpy_ns",
    "graph opaque": "graph_opaque_ns",
    "profiler overhead": "profiler_overhead_ns",
    "idle": "idle_ns",
}


def iter_breakdown(m: Any) -> Iterator[tuple[str, int]]:
    """The parts of the time breakdown of a GPU or a step, with their ns, in BREAKDOWN_FIELDS
    order."""
    for part, field in BREAKDOWN_FIELDS.items():
        yield part, getattr(m, field)


def what_if(m: Mapping[str, Any]) -> WhatIf:
    """docs/metrics.md's projections from one breakdown, rounded down to whole ns. Time inside
    graphs traced as a whole (G) and profiler overhead (P) are parts of their own: no change
    here touches them."""
    c, comm, o = m["compute_ns"], m["comm_ns"], m["overlapped_comm_ns"]
    x, y, i = m["exposed_comm_ns"], m["exposed_memcpy_ns"], m["idle_ns"]
    g = m.get("graph_opaque_ns", 0) + m.get("profiler_overhead_ns", 0)
    t = c + x + y + g + i
    return WhatIf(
        compute_2x_ns=c // 2 + (comm - min(o, c // 2)) + y + g + i,
        comm_2x_ns=t - x // 2,
        perfect_overlap_ns=max(c, comm) + y + g + i,
        no_idle_ns=t - i,
    )


GpuKey = tuple[str, int, int]  # (file, pid, device_id)
GpuLabel = tuple[int, str | None, str | None]  # (rank, host, GPU name)


def build_gpus(
    breakdown: Iterable[dict[str, Any]],
    gap_summary: Iterable[dict[str, Any]],
    gap_histogram: Iterable[dict[str, Any]],
    gap_top: Iterable[dict[str, Any]],
    graph_layer_gap: Iterable[dict[str, Any]],
    labels: Mapping[GpuKey, GpuLabel],
    top: int = 10,
) -> tuple[GpuReport, ...]:
    """Every GPU's row from the rows (each with its `file`) of gpu_breakdown, gap_summary,
    gap_histogram, gap_top (run with `top`) and graph_layer_gap."""
    summaries = {gpu_key(r): r for r in gap_summary}
    histograms = group_by_gpu(gap_histogram)
    tops = group_by_gpu(gap_top)
    unplaced = {gpu_key(r): r["no_layer_no_origin"] for r in graph_layer_gap}
    gpus = []
    for row in breakdown:
        key = gpu_key(row)
        rank, host, gpu_name = labels[key]
        gaps = _gap_stats(
            summaries.get(key),
            histograms.get(key, []),
            tops.get(key, []),
            row["first_start_ns"],
            top,
        )
        fields = {k: v for k, v in row.items() if k not in ("first_start_ns", "last_end_ns")}
        gpus.append(
            GpuReport(
                rank=rank,
                host=host,
                gpu_name=gpu_name,
                gaps=gaps,
                what_if=what_if(row),
                graph_kernels_without_layer=unplaced.get(key, 0),
                **fields,
            )
        )
    return tuple(sorted(gpus, key=lambda g: (g.rank, g.file, g.pid, g.device_id)))


def with_top_gaps(
    con: duckdb.DuckDBPyConnection, gpus: Sequence[GpuReport], top: int
) -> tuple[GpuReport, ...]:
    """`gpus` (of the one trace loaded in `con`) with their `top` longest gaps, all else as it
    is (the only part of a GPU's row that --top changes)."""
    tops = group_by_gpu(
        [{"file": g.file, **r} for g in gpus[:1] for r in gap_top_rows(con, top).to_dicts()]
    )
    first = {
        (r["pid"], r["device_id"]): r["first_start_ns"]
        for r in run_query(con, "gpu_breakdown").to_dicts()
    }
    return tuple(
        replace(
            g,
            gaps=replace(
                g.gaps,
                top=_gaps(_ranked(tops.get(gpu_key(g), []), top), first[(g.pid, g.device_id)]),
            ),
        )
        for g in gpus
    )


def gap_top_rows(con: duckdb.DuckDBPyConnection, top: int) -> pl.DataFrame:
    """The `top` longest gaps of each GPU and its long ones, as gap_top.sql gives them."""
    params = {"top": top, "long_pct": LONG_GAP_PCT, "data_loader": DATA_LOADER_PATTERN}
    return run_query(con, "gap_top", params)


def _ranked(rows: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The rows of the `top` longest gaps (gap_top.sql also gives long gaps beyond them)."""
    return [r for r in rows if r["gap_rank"] <= top]


def gpu_key(row: Mapping[str, Any] | Any) -> GpuKey:
    """(file, pid, device_id) of a row (a dict) or of a model object."""
    if isinstance(row, Mapping):
        return (row["file"], row["pid"], row["device_id"])
    return (row.file, row.pid, row.device_id)


def group_by_gpu(rows: Iterable[dict[str, Any]]) -> dict[GpuKey, list[dict[str, Any]]]:
    grouped: dict[GpuKey, list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault(gpu_key(r), []).append(r)
    return grouped


def _gap_stats(
    summary: Mapping[str, Any] | None,
    histogram: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    first_start_ns: int,
    top: int,
) -> GapStats:
    summary = summary or {"gap_count": 0, "p50_ns": None, "p99_ns": None, "max_ns": None}
    return GapStats(
        count=summary["gap_count"],
        p50_ns=summary["p50_ns"],
        p99_ns=summary["p99_ns"],
        max_ns=summary["max_ns"],
        histogram={h["bucket"]: h["gap_count"] for h in histogram},
        histogram_ns={h["bucket"]: h["gap_ns"] for h in histogram},
        top=_gaps(_ranked(rows, top), first_start_ns),
        long=_gaps([r for r in rows if r["long_gap"]], first_start_ns),
    )


def _gaps(rows: list[dict[str, Any]], first_start_ns: int) -> tuple[Gap, ...]:
    gap_fields = {f.name for f in dataclasses.fields(Gap)}
    return tuple(
        Gap(
            offset_ns=g["start_ns"] - first_start_ns,
            **{k: v for k, v in g.items() if k in gap_fields},
        )
        for g in rows
    )
