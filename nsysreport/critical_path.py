"""The critical path of one window of a trace: the chain of work, across streams, host threads
and ranks, that the window could not end without (docs/metrics.md "Critical path").

queries/report/path_node.sql gives every GPU activity and CUDA API call near the window with the
predecessor that was ready last. The walk starts at the activity running at the window's end and
follows those predecessors back to the window's start; at a collective it crosses to the rank
that arrived last. Each stretch of time on the way gets one cause, so the causes add up to the
window's length exactly. The walk visits the path's nodes only (one step each), never the whole
graph; the node table holds the window and a margin, never the whole trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb
    import polars as pl

# What the path was doing, in the order the report lists them. GPU causes: the path ran on a
# GPU; the others are times the path's GPU waited for the host, a launch or another stream.
GPU_CAUSES = ("compute", "communication", "copy")
HOST_CAUSES = ("launch_latency", "cuda_api", "synchronisation", "host", "gpu_wait", "untraced")
CAUSES = GPU_CAUSES + HOST_CAUSES

# The cause of the stretch between a node's predecessor being ready and the node starting,
# by the edge that joins them (path_node.sql's `edge`).
GAP_CAUSE = {
    "launch": "launch_latency",
    "stream": "gpu_wait",
    "event": "gpu_wait",
    "thread": "host",
    "sync": "synchronisation",
}
# The cause of a node's own time on the path, by its class.
EXEC_CAUSE = {"comm": "communication", "memcpy": "copy", "api": "cuda_api", "sync": "cuda_api"}


GpuKey = tuple[str, int, int]  # (file, pid, device_id)


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of the path: [start_ns, end_ns) spent on `cause`, on the GPU (pid,
    device_id) whose work it led to; `what`: the kernel, copy, API call or NVTX range;
    `kernel_class`: a GPU activity's class (gemm, attention, comm, ...)."""

    cause: str
    file: str
    pid: int
    device_id: int
    what: str | None
    layer: str | None
    kernel_class: str | None
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class Join:
    """A collective instance on the path that its members reached at different times: the
    path came to it on `from_gpu` and went on from `to_gpu`, the member that arrived last (at
    `arrival_ns`, `wait_ns` after the first member; the same GPU when the path was already on
    it); `first`: index of the first segment walked from there (what `to_gpu` was doing while
    the others waited)."""

    op: str
    ordinal: int
    from_gpu: GpuKey
    to_gpu: GpuKey
    arrival_ns: int
    wait_ns: int
    first: int


@dataclass(frozen=True, slots=True)
class Walk:
    """The path through [start_ns, end_ns): segments latest first, covering it exactly;
    `idle`: per GPU (pid, device_id), its idle time in the window and, of that, the idle time
    under the path's host-side segments on it (the rest is slack)."""

    start_ns: int
    end_ns: int
    end_gpu: GpuKey
    segments: tuple[Segment, ...]
    joins: tuple[Join, ...]
    idle: dict[GpuKey, tuple[int, int]]
    # WHAT_IFS' change -> the window's length recomputed under it (recompute); the layer whose
    # GEMMs `layer_gemm_2x` speeds up: the one with the most compute on the path.
    what_if: dict[str, int]
    what_if_layer: str | None


# The changes the what-if recomputes: each scales the own time of the GPU activities of some
# classes (path_node's `class`) by a factor.
COMPUTE_CLASSES = ("gemm", "attention", "other", "graph")
WHAT_IFS: dict[str, tuple[tuple[str, ...], float]] = {
    "compute_2x": (COMPUTE_CLASSES, 0.5),
    "gemm_2x": (("gemm",), 0.5),
    "layer_gemm_2x": (("gemm",), 0.5),  # in one layer: Walk.what_if_layer
    "comm_hidden": (("comm",), 0.0),
}


def critical_path(
    con: duckdb.DuckDBPyConnection, start_ns: int, end_ns: int, file: str = ""
) -> Walk | None:
    """The path through [start_ns, end_ns) of the trace loaded in `con`, with the window's
    length under each of WHAT_IFS; None when no GPU activity overlaps the window."""
    nodes = run_query(con, "path_node", {"start_ns": start_ns, "end_ns": end_ns})
    path = walk(nodes, start_ns, end_ns, file)
    return None if path is None else with_what_ifs(path, nodes)


def with_what_ifs(path: Walk, nodes: pl.DataFrame) -> Walk:
    """`path` (walked over `nodes`, path_node's rows) with the window's length under each of
    WHAT_IFS."""
    layers: dict[str, int] = {}
    for s in path.segments:
        if s.cause == "compute" and s.layer is not None and s.kernel_class == "gemm":
            layers[s.layer] = layers.get(s.layer, 0) + s.end_ns - s.start_ns
    top_layer = min(layers, key=lambda k: (-layers[k], k)) if layers else None
    classes, in_layer = nodes["class"].to_list(), nodes["layer"].to_list()
    lengths = {}
    for change, (scaled, factor) in WHAT_IFS.items():
        if change == "layer_gemm_2x" and top_layer is None:
            continue
        factors = [
            factor if c in scaled and (change != "layer_gemm_2x" or layer == top_layer) else 1.0
            for c, layer in zip(classes, in_layer, strict=True)
        ]
        lengths[change] = recompute(nodes, path.start_ns, path.end_ns, factors)
    return replace(path, what_if=lengths, what_if_layer=top_layer)


def walk(nodes: pl.DataFrame, lo: int, hi: int, file: str = "") -> Walk | None:
    """The walk over path_node's rows of `file` (see the module's docstring), crossing
    between its GPUs at collectives."""
    if hi <= lo:
        return None
    graph = Graph(nodes)
    end_node = graph.end_node(lo, hi)
    if end_node is None:
        return None
    steps, joins, _ = graph.walk_from(end_node, hi, lo, cross=True)
    segments = graph.segments(steps, file)
    return Walk(
        start_ns=lo,
        end_ns=hi,
        end_gpu=graph.gpu(file, end_node),
        segments=tuple(segments),
        joins=tuple(
            Join(
                graph.op[n],
                graph.ordinal[n],
                graph.gpu(file, n),
                graph.gpu(file, o),
                graph.start[o],
                graph.start[o] - graph.first_start[o],
                first,
            )
            for n, o, first in joins
        ),
        idle=idle_times(graph.busy_pieces(lo, hi), file, segments, lo, hi),
        what_if={},
        what_if_layer=None,
    )


Step = tuple[str, int, int, int, int]  # (cause, node, the GPU node it leads to, start, end)


class Graph:
    """path_node's rows as plain lists, and the walk over them."""

    def __init__(self, nodes: pl.DataFrame) -> None:
        def column(name: str) -> list[Any]:
            return nodes[name].to_list()

        self.start, self.end = column("start_ns"), column("end_ns")
        self.pred, self.ready = column("pred"), column("ready_ns")
        self.thread_pred, self.thread_ready = column("thread_pred"), column("thread_ready_ns")
        self.last, self.last_start = column("last_node"), column("last_start_ns")
        self.first_start = column("first_start_ns")
        self.is_gpu = (nodes["kind"] == "gpu").to_list()
        self.pid, self.device = column("pid"), column("device_id")
        self.cls, self.edge = column("class"), column("edge")
        self.op, self.ordinal = column("op"), column("ordinal")
        self.names, self.layers = column("name"), column("layer")
        self.ranges = column("host_range")

    def gpu(self, file: str, n: int) -> GpuKey:
        return (file, self.pid[n], self.device[n])

    def end_node(self, lo: int, hi: int) -> int | None:
        """The GPU activity running at the window's end, else the one that ended last before
        it (of equal ones, the last to start)."""
        best: tuple[int, int, int] | None = None
        for n, gpu in enumerate(self.is_gpu):
            if gpu and self.start[n] < hi and self.end[n] > lo:
                key = (min(self.end[n], hi), self.end[n], n)
                best = key if best is None or key > best else best
        return None if best is None else best[2]

    def walk_from(
        self,
        n: int | None,
        t: int,
        lo: int,
        cross: bool,
        memo: dict[int, tuple[int, int, int]] | None = None,
        walk_id: int = 0,
    ) -> tuple[list[Step], list[tuple[int, int, int]], tuple[str, int, int]]:
        """The walk from node n, arrived at at instant t, back to `lo`: its steps (latest
        first), its joins (node, the last member's node, index of the first step after) and
        how it ended: ("start", -1, lo) at the window's start, ("none", -1, t) before a node
        with no predecessor, ("collective", node, t) at a collective kernel reached (when not
        `cross`: where a walk of one file of several stops; the first node never stops), or
        ("memo", walk, step) at a node an earlier walk reached at the same instant (`memo`:
        node -> (walk, its step count then, arrival), filled as this walk goes)."""
        steps: list[Step] = []
        joins: list[tuple[int, int, int]] = []

        def add(cause: str, node: int, gpu_node: int, a: int, b: int) -> None:
            a = max(a, lo)
            if b > a:
                steps.append((cause, node, gpu_node, a, b))

        assert n is not None
        gpu_node, first = n, True
        budget = len(self.start) + 2  # each node at most once: a guard against equal times
        while t > lo and budget:
            budget -= 1
            if n is None:
                add("untraced", -1, gpu_node, lo, t)
                return steps, joins, ("none", -1, t)
            if memo is not None and not first:
                seen = memo.get(n)
                if seen is not None and seen[2] == t:
                    return steps, joins, ("memo", seen[0], seen[1])
                if seen is None:
                    memo[n] = (walk_id, len(steps), t)
            s = self.start[n]
            if self.is_gpu[n]:
                gpu_node = n
            other = self.last[n]
            if not cross and self.op[n] is not None and not first:
                return steps, joins, ("collective", n, t)
            first = False
            if cross and other is not None and other != n and s < self.last_start[n] <= t:
                # A collective this GPU reached before the last member: the transfer ran once
                # that member arrived; before, the path is that member's.
                add("communication", n, gpu_node, self.last_start[n], t)
                joins.append((n, other, len(steps)))
                t, n = self.last_start[n], other
                continue
            came_by_join = bool(joins) and joins[-1][1] == n
            if cross and other == n and self.first_start[n] < s and not came_by_join:
                joins.append((n, n, len(steps)))
            p, ready, edge = self.pred[n], self.ready[n], self.edge[n]
            if edge == "sync" and t < self.end[n]:
                # Reached from an activity it launched, before it returned (a synchronous
                # copy's copy): the call until then is its own time after its thread's last.
                p, ready, edge = self.thread_pred[n], self.thread_ready[n], "thread"
            r = s if p is None else min(ready, t)
            own = EXEC_CAUSE.get(self.cls[n], "compute")
            if edge == "sync":
                own = "synchronisation"  # the call returned when the GPU work it waited for ended
            add(own, n, gpu_node, max(r, s), t)
            if r < s:
                add(GAP_CAUSE[edge], n, gpu_node, r, min(s, t))  # never past the arrival
            t, n = (r, p) if p is not None else (s, None)
        if t > lo:
            add("untraced", -1, gpu_node, lo, t)
        return steps, joins, ("start", -1, lo)

    def segments(self, steps: list[Step], file: str) -> list[Segment]:
        out = []
        for cause, node, g, a, b in steps:
            if node < 0:
                what, layer, kind = None, None, None
            elif cause == "host":
                what, layer, kind = self.ranges[node], None, None
            else:
                what, layer, kind = self.names[node], self.layers[node], self.cls[node]
            out.append(Segment(cause, file, self.pid[g], self.device[g], what, layer, kind, a, b))
        return out

    def busy_pieces(self, lo: int, hi: int) -> dict[tuple[int, int], Busy]:
        """Per GPU (pid, device_id), its busy time in [lo, hi)."""
        per: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        for n, gpu in enumerate(self.is_gpu):
            if gpu:
                starts, ends = per.setdefault((self.pid[n], self.device[n]), ([], []))
                starts.append(self.start[n])
                ends.append(self.end[n])
        return {key: Busy(s, e, lo, hi) for key, (s, e) in per.items()}


def idle_times(
    busy: Mapping[tuple[int, int], Busy],
    file: str,
    segments: Sequence[Segment],
    lo: int,
    hi: int,
) -> dict[GpuKey, tuple[int, int]]:
    """Per GPU of `file` (`busy`: its busy time in [lo, hi)): its idle time in the window and
    the part of it under the path's host-side segments on that GPU."""
    out = {}
    for (pid, dev), b in busy.items():
        under = sum(
            (g.end_ns - g.start_ns) - b.within(g.start_ns, g.end_ns)
            for g in segments
            if (g.file, g.pid, g.device_id) == (file, pid, dev) and g.cause in HOST_CAUSES
        )
        out[(file, pid, dev)] = ((hi - lo) - b.total, under)
    return out


class Busy:
    """One GPU's busy time in [lo, hi): the union of its activities, as pieces with the busy
    time before each, so that the busy time within any interval takes two binary searches."""

    def __init__(self, start: Sequence[int], end: Sequence[int], lo: int, hi: int) -> None:
        import numpy as np

        s = np.clip(np.asarray(start, dtype=np.int64), lo, hi)
        e = np.clip(np.asarray(end, dtype=np.int64), lo, hi)
        order = np.argsort(s, kind="stable")
        s, e = s[order], np.maximum.accumulate(e[order])
        new = np.ones(len(s), dtype=bool)  # a piece starts where no earlier activity reaches
        new[1:] = s[1:] > e[:-1]
        self.starts = s[new]
        self.ends = np.maximum.reduceat(e, np.flatnonzero(new))
        self.before = np.concatenate(([0], np.cumsum(self.ends - self.starts)))
        self.total = int(self.before[-1])

    def within(self, a: int, b: int) -> int:
        return self._until(b) - self._until(a)

    def _until(self, x: int) -> int:
        """Busy time before instant x."""
        import numpy as np

        i = int(np.searchsorted(self.starts, x, side="right"))  # pieces starting at or before x
        if i == 0:
            return 0
        return int(self.before[i - 1]) + int(min(self.ends[i - 1], x) - self.starts[i - 1])


CANDIDATES = ("stream", "event", "launch", "sync", "thread")


def recompute(nodes: pl.DataFrame, lo: int, hi: int, factor: Sequence[float]) -> int:
    """The window's length were each GPU activity's own time scaled by `factor` (one per node
    of path_node's rows; a collective's transfer, from its last member's arrival, scales).

    One pass in start order: a node starts as much earlier or later as the candidate
    predecessor ready last now is, against the one ready last before (every wait after it, a
    launch latency, say, kept); a call starts as its thread lets it, and a synchronising call
    returns as the GPU work it waited for ends (worked out when first asked: a synchronous
    copy's copy starts after its call); an activity that started before its call returned
    moves with the call's start; a collective's members end when the transfer after their
    last arrival does. The window keeps its start; its end is the last end of the GPU
    activities that ended in it. Nodes that ended before the window keep their times.
    """
    start, end = nodes["start_ns"].to_list(), nodes["end_ns"].to_list()
    gpu = (nodes["kind"] == "gpu").to_list()
    waits = (nodes["class"] == "sync").to_list()
    preds = [(nodes[f"{c}_pred"].to_list(), nodes[f"{c}_ready_ns"].to_list()) for c in CANDIDATES]
    sync_pred, sync_ready = preds[CANDIDATES.index("sync")]
    members: dict[tuple[str, int], list[int]] = {}
    instance: list[tuple[str, int] | None] = [None] * len(start)
    for n, (op, ordinal, last) in enumerate(
        zip(
            nodes["op"].to_list(),
            nodes["ordinal"].to_list(),
            nodes["last_start_ns"].to_list(),
            strict=True,
        )
    ):
        if op is not None and last is not None:
            instance[n] = (op, ordinal)
            members.setdefault((op, ordinal), []).append(n)
    last_start = nodes["last_start_ns"].to_list()
    new_start, new_end = list(start), list(end)
    pending: set[int] = set()  # synchronising calls whose return is not worked out yet

    def shift(c: int) -> int:
        """How much later (negative: earlier) node c ends now."""
        key = instance[c]
        if key is not None:
            arrival = max(new_start[m] for m in members[key])
            transfer = max(end[c] - last_start[c], 0) * factor[c]
            return round(float(arrival + transfer)) - int(end[c])
        if c in pending:
            pending.discard(c)
            returned = max(start[c], sync_ready[c])
            waited = sync_ready[c] + shift(sync_pred[c])
            new_end[c] = max(new_start[c], waited) + end[c] - returned
        return int(new_end[c]) - int(end[c])

    def moved(edge: str, p: int, r: int) -> int:
        """How much later candidate p of that edge, ready at r, is ready now."""
        if edge == "launch" and not gpu[p] and r < end[p]:
            return int(new_start[p]) - int(start[p])  # launched before the call returned
        return shift(p)

    for n in range(len(start)):
        if end[n] <= lo:
            continue
        readies = [
            (edge, p[n], r[n])
            for edge, (p, r) in zip(CANDIDATES, preds, strict=True)
            if p[n] is not None and (gpu[n] or edge != "sync")
        ]
        if readies:
            before = max(r for _, _, r in readies)
            now = max(r + moved(edge, p, r) for edge, p, r in readies)
            new_start[n] = start[n] + now - before
        if gpu[n]:
            new_end[n] = new_start[n] + round((end[n] - start[n]) * factor[n])
        elif waits[n] and sync_pred[n] is not None:
            pending.add(n)
        else:
            new_end[n] = new_start[n] + end[n] - start[n]
    ends = [end[n] + shift(n) for n in range(len(start)) if gpu[n] and lo < end[n] <= hi]
    return int(max(ends, default=hi)) - lo
