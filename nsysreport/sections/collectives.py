"""Collectives and stragglers: per-op latency and exposure, and who makes the others wait."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any


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
    group_gpus: int | None  # ranks of the op's communicator (bus bandwidth's n); None: unknown
    group_source: str | None  # where group_gpus comes from (queries/derived/collective.sql)
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


# Where a group size came from when it counts GPUs rather than reading the communicator: the
# fallback that several files together can count better than each file alone.
COUNTED = "gpus_in_trace"


# The ops whose bus bandwidth scales with the group size; every other op's factor is 1.
SCALED_BY_GROUP = {"AllReduce": 2.0, "AllGather": 1.0, "ReduceScatter": 1.0, "AllToAll": 1.0}


def bus_factor(op: str, group_gpus: int | None) -> float | None:
    """busbw / algbw for an op over n ranks: NCCL's convention, as collective_summary.sql has it
    (several files are regrouped in Python; tests/test_group_size.py checks the two agree). None
    when the factor depends on n and n is unknown."""
    scale = SCALED_BY_GROUP.get(op)
    if scale is None:
        return 1.0
    if group_gpus is None or group_gpus < 1:
        return None
    return scale * (group_gpus - 1) / group_gpus


def regroup(
    collectives: Sequence[CollectiveReport], gpus: int, ranks_seen: int
) -> list[CollectiveReport]:
    """Group sizes and bus bandwidth over all GPUs given (several files' collectives at once).

    A size a file read from its trace (the communicator, the job's world size) stands. Where a
    file could only count its own GPUs, or could not tell because it holds some of the job's
    ranks, the op's group is counted over the `gpus` GPUs of every file instead, unless those
    are still fewer than the job's ranks (`ranks_seen`: the highest rank named plus one): then
    it is unknown. A count of one GPU is no group size either.
    """
    counted: dict[str, int] = {}
    for c in collectives:
        counted[c.op] = counted.get(c.op, 0) + 1
    whole_job = ranks_seen <= gpus
    out = []
    for c in collectives:
        if c.group_source is not None and c.group_source != COUNTED:
            out.append(c)
            continue
        n = counted[c.op] if whole_job and counted[c.op] >= 2 else None
        factor = bus_factor(c.op, n)
        out.append(
            replace(
                c,
                group_gpus=n,
                group_source=None if n is None else COUNTED,
                busbw_gbps=None
                if c.algbw_gbps is None or factor is None
                else c.algbw_gbps * factor,
            )
        )
    return out


def build_collectives(
    rows: Iterable[dict[str, Any]], rank: Mapping[tuple[str, int, int], int]
) -> list[CollectiveReport]:
    """Each collective op of each GPU, from collective_summary's stacked rows (a `file`
    column), in report order."""
    out = [CollectiveReport(rank=rank[(r["file"], r["pid"], r["device_id"])], **r) for r in rows]
    return sorted(out, key=lambda c: (c.rank, c.file, c.pid, c.device_id, -c.total_ns, c.op))


def stragglers_of(
    gpus: tuple[StragglerGpu, ...], unmatched: tuple[dict[str, Any], ...]
) -> Stragglers:
    """The straggler (the GPU causing the most waiting, if any did) among straggler_gpu's rows."""
    worst = max(gpus, key=lambda g: (g.caused_wait_ns, -g.rank), default=None)
    straggler = worst if worst is not None and worst.caused_wait_ns > 0 else None
    matched = gpus[0].matched_instances if gpus else 0
    return Stragglers(matched, unmatched, gpus, straggler)
