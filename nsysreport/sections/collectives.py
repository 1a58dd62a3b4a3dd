"""Collectives and stragglers: per-op latency and exposure, and who makes the others wait."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True, slots=True)
class CollectiveReport:
    file: str
    pid: int
    device_id: int
    rank: int
    op: str
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: int
    p99_ns: int
    max_ns: int
    exposed_ns: int
    group_gpus: int
    total_bytes: int | None
    algbw_gbps: float | None
    busbw_gbps: float | None


@dataclass(frozen=True, slots=True)
class StragglerGpu:
    file: str
    pid: int
    device_id: int
    rank: int
    matched_instances: int
    last_arrivals: int
    wait_ns: int
    caused_wait_ns: int
    max_skew_ns: int | None


@dataclass(frozen=True, slots=True)
class Stragglers:
    matched: int  # collective instances matched across GPUs
    unmatched: tuple[dict[str, Any], ...]  # {op, file, pid, device_id, rank, instances}
    gpus: tuple[StragglerGpu, ...]
    straggler: StragglerGpu | None  # the GPU that caused the most waiting, if any did


def bus_factor(op: str, group_gpus: int) -> float:
    """busbw / algbw for an op over n GPUs: NCCL's convention, as collective_summary.sql has it
    (several files are regrouped in Python; tests/test_multi.py checks the two agree)."""
    n = group_gpus
    if op == "AllReduce":
        return 2.0 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter"):
        return 1.0 * (n - 1) / n
    return 1.0


def regroup(collectives: Sequence[CollectiveReport]) -> list[CollectiveReport]:
    """Group sizes and bus bandwidth over all GPUs given (several files' collectives at once)."""
    groups: dict[str, int] = {}
    for c in collectives:
        groups[c.op] = groups.get(c.op, 0) + 1
    return [
        replace(
            c,
            group_gpus=groups[c.op],
            busbw_gbps=None
            if c.algbw_gbps is None
            else c.algbw_gbps * bus_factor(c.op, groups[c.op]),
        )
        for c in collectives
    ]


def build_collectives(
    con: duckdb.DuckDBPyConnection, file: str, ranks: Mapping[tuple[int, int], Any]
) -> tuple[CollectiveReport, ...]:
    rows = run_query(con, "collective_summary").to_dicts()
    out = [
        CollectiveReport(file=file, rank=ranks[(r["pid"], r["device_id"])][0], **r) for r in rows
    ]
    return tuple(sorted(out, key=lambda c: (c.rank, c.pid, c.device_id, -c.total_ns, c.op)))


def build_stragglers(
    con: duckdb.DuckDBPyConnection, file: str, ranks: Mapping[tuple[int, int], Any]
) -> Stragglers:
    gpus = tuple(
        sorted(
            (
                StragglerGpu(file=file, rank=ranks[(r["pid"], r["device_id"])][0], **r)
                for r in run_query(con, "straggler_gpu").to_dicts()
            ),
            key=lambda g: (g.rank, g.pid, g.device_id),
        )
    )
    unmatched = tuple(
        {**r, "file": file, "rank": ranks[(r["pid"], r["device_id"])][0]}
        for r in run_query(con, "straggler_unmatched").to_dicts()
    )
    return stragglers_of(gpus, unmatched)


def stragglers_of(
    gpus: tuple[StragglerGpu, ...], unmatched: tuple[dict[str, Any], ...]
) -> Stragglers:
    """The straggler (the GPU causing the most waiting, if any did) among straggler_gpu's rows."""
    worst = max(gpus, key=lambda g: (g.caused_wait_ns, -g.rank), default=None)
    straggler = worst if worst is not None and worst.caused_wait_ns > 0 else None
    matched = gpus[0].matched_instances if gpus else 0
    return Stragglers(matched, unmatched, gpus, straggler)
