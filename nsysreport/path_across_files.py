"""The critical path of a report over several files, one process per file's nodes.

Each file walks its own part where its nodes are (local_walks, in a worker): from the file's
last activity in the window, and from each collective kernel it ran there, back to the next
collective kernel or the window's start. A walk that reaches a node an earlier walk reached at
the same instant ends there (`tail`): the rest is the same, so the walks of a file hold each
node once and their cost is linear in the file's nodes. The client strings the parts together
(stitch) on the aligned clock: at each collective it goes on from the member that arrived last,
in whatever file, exactly as the walk of one file crosses between its GPUs
(nsysreport.critical_path). Neither side holds more than one file's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsysreport.critical_path import (
    Busy,
    GpuKey,
    Graph,
    Join,
    Segment,
    Step,
    Walk,
    idle_times,
)
from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True, slots=True)
class LocalWalk:
    """One walk of one file, on its own clock. `entry`: the collective kernel it starts at (op,
    ordinal, pid, device_id), arrived at its start `arrival_ns`; None: the walk from the file's
    end. How it ended: `stop`, the collective kernel reached (op, ordinal, pid, device_id, the
    instant, its name and layer) or `tail`, (walk, segment) of the earlier walk it joined;
    else it reached the window's start or a node with no predecessor."""

    entry: tuple[str, int, int, int] | None
    arrival_ns: int
    segments: tuple[Segment, ...]
    stop: tuple[str, int, int, int, int, str, str | None] | None
    tail: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class FilePath:
    """One file's walks through the window (walks[0] from its end, when it has a GPU activity
    in it: `end_reach_ns`, how far it reaches, on its end GPU `end_gpu`), and each GPU's
    activities there (pid, device_id) -> (starts, ends), for its idle time."""

    file: str
    walks: tuple[LocalWalk, ...]
    end_reach_ns: int | None
    end_gpu: tuple[int, int] | None
    activities: dict[tuple[int, int], tuple[list[int], list[int]]]


def local_walks(con: duckdb.DuckDBPyConnection, file: str, lo: int, hi: int) -> FilePath:
    """The walks of the trace loaded in `con` through [lo, hi) of its own clock."""
    graph = Graph(run_query(con, "path_node", {"start_ns": lo, "end_ns": hi}))
    end = graph.end_node(lo, hi) if hi > lo else None
    entries: list[int] = [] if end is None else [end]
    entries += [
        n
        for n, op in enumerate(graph.op)
        if op is not None and graph.is_gpu[n] and graph.end[n] > lo and graph.start[n] < hi
    ]
    memo: dict[int, tuple[int, int, int]] = {}
    walks = []
    steps: list[Step]
    for i, n in enumerate(entries):
        from_end = i == 0 and end is not None
        arrival = min(graph.end[n], hi) if from_end else graph.start[n]
        if from_end and graph.op[n] is not None:
            # The file ends in a collective: the stitching splits it (transfer, waiting).
            steps, how, node, t = [], "collective", n, arrival
        else:
            steps, _, (how, node, t) = graph.walk_from(n, arrival, lo, False, memo, i)
        stop = tail = None
        if how == "collective":
            stop = (graph.op[node], graph.ordinal[node], graph.pid[node], graph.device[node], t,
                    graph.names[node], graph.layers[node])  # fmt: skip
        elif how == "memo":
            tail = (node, t)  # (walk, segment index)
        entry = None if from_end else (graph.op[n], graph.ordinal[n], graph.pid[n], graph.device[n])
        walks.append(LocalWalk(entry, arrival, tuple(graph.segments(steps, file)), stop, tail))
    activities: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for n, gpu in enumerate(graph.is_gpu):
        if gpu:
            starts, ends = activities.setdefault((graph.pid[n], graph.device[n]), ([], []))
            starts.append(graph.start[n])
            ends.append(graph.end[n])
    return FilePath(
        file=file,
        walks=tuple(walks),
        end_reach_ns=None if end is None else min(graph.end[end], hi),
        end_gpu=None if end is None else (graph.pid[end], graph.device[end]),
        activities=activities,
    )


def stitch(parts: list[FilePath], offsets: list[int], lo: int, hi: int) -> Walk | None:
    """The job's path through [lo, hi) of the reference clock from every file's walks
    (`offsets`: each file's clock onto the reference)."""
    ends = [
        (p.end_reach_ns + off, -i)
        for i, (p, off) in enumerate(zip(parts, offsets, strict=True))
        if p.end_reach_ns is not None
    ]
    if not ends:
        return None
    first = -max(ends)[1]
    # Each collective instance's members over every file: (start, file index, walk, GPU).
    members: dict[tuple[str, int], list[tuple[int, int, int, GpuKey]]] = {}
    for i, (p, off) in enumerate(zip(parts, offsets, strict=True)):
        for w, walk in enumerate(p.walks):
            if walk.entry is not None:
                op, ordinal, pid, dev = walk.entry
                member = (walk.arrival_ns + off, i, w, (p.file, pid, dev))
                members.setdefault((op, ordinal), []).append(member)
    segments: list[Segment] = []
    joins: list[Join] = []

    def shifted(s: Segment, off: int, a: int | None = None, b: int | None = None) -> Segment:
        start = s.start_ns + off if a is None else a
        end = s.end_ns + off if b is None else b
        return Segment(s.cause, s.file, s.pid, s.device_id, s.what, s.layer, s.kernel_class,
                       start, end)  # fmt: skip

    i, w, pos = first, 0, 0
    budget = sum(len(p.walks) for p in parts) * 2 + 2
    while budget:
        budget -= 1
        part, off = parts[i], offsets[i]
        walk = part.walks[w]
        segments += [shifted(s, off) for s in walk.segments[pos:]]
        if walk.tail is not None:
            w, pos = walk.tail
            continue
        if walk.stop is None:
            break
        op, ordinal, pid, dev, t_local, name, layer = walk.stop
        t, me = t_local + off, (part.file, pid, dev)
        found = members.get((op, ordinal), [])
        mine = next((m for m in found if m[3] == me), None)
        if mine is None:  # not an entry: a kernel the walk reached is always one; a guard
            segments.append(Segment("untraced", *me, None, None, None, lo, t))
            break
        last = max(found, key=lambda m: (m[0], -m[1]))
        arrived = min(m[0] for m in found)
        transfer = Segment("communication", *me, name, layer, "comm", 0, 0)
        if last[3] != me and mine[0] < last[0] <= t:
            # The others waited for `last`: the transfer ran from its arrival; before, the path
            # is its file's walk from that collective kernel.
            if t > max(last[0], lo):
                segments.append(shifted(transfer, 0, max(last[0], lo), t))
            joins.append(Join(op, ordinal, me, last[3], last[0], last[0] - arrived, len(segments)))
            i, w, pos = last[1], last[2], 0
            continue
        if t > max(mine[0], lo):
            segments.append(shifted(transfer, 0, max(mine[0], lo), t))
        if arrived < mine[0]:
            joins.append(Join(op, ordinal, me, me, mine[0], mine[0] - arrived, len(segments)))
        i, w, pos = mine[1], mine[2], 0
    idle = {}
    for p, off in zip(parts, offsets, strict=True):
        busy = {
            key: Busy([s + off for s in starts], [e + off for e in ends], lo, hi)
            for key, (starts, ends) in p.activities.items()
        }
        idle.update(idle_times(busy, p.file, segments, lo, hi))
    return Walk(
        start_ns=lo,
        end_ns=hi,
        end_gpu=_gpu(parts[first]),
        segments=tuple(segments),
        joins=tuple(joins),
        idle=idle,
        what_if={},
        what_if_layer=None,
    )


def _gpu(part: FilePath) -> GpuKey:
    assert part.end_gpu is not None
    return (part.file, *part.end_gpu)
