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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb
    import numpy as np
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


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of the path: [start_ns, end_ns) spent on `cause`, on the GPU (pid,
    device_id) whose work it led to; `what`: the kernel, copy, API call or NVTX range;
    `kernel_class`: a GPU activity's class (gemm, attention, comm, ...)."""

    cause: str
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
    from_gpu: tuple[int, int]
    to_gpu: tuple[int, int]
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
    end_gpu: tuple[int, int]
    segments: tuple[Segment, ...]
    joins: tuple[Join, ...]
    idle: dict[tuple[int, int], tuple[int, int]]
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


def critical_path(con: duckdb.DuckDBPyConnection, start_ns: int, end_ns: int) -> Walk | None:
    """The path through [start_ns, end_ns) of the trace loaded in `con`, with the window's
    length under each of WHAT_IFS; None when no GPU activity overlaps the window."""
    from dataclasses import replace

    nodes = run_query(con, "path_node", {"start_ns": start_ns, "end_ns": end_ns})
    path = walk(nodes, start_ns, end_ns)
    if path is None:
        return None
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
        lengths[change] = recompute(nodes, start_ns, end_ns, factors)
    return replace(path, what_if=lengths, what_if_layer=top_layer)


def walk(nodes: pl.DataFrame, lo: int, hi: int) -> Walk | None:
    """The walk over path_node's rows (see the module's docstring)."""
    import numpy as np

    if hi <= lo:
        return None
    col = {
        name: nodes[name].fill_null(-1).to_numpy()
        for name in (
            "start_ns",
            "end_ns",
            "pred",
            "ready_ns",
            "last_node",
            "last_start_ns",
            "first_start_ns",
        )
    }
    start, end, pred, ready = col["start_ns"], col["end_ns"], col["pred"], col["ready_ns"]
    last, last_start, first_start = col["last_node"], col["last_start_ns"], col["first_start_ns"]
    is_gpu = (nodes["kind"] == "gpu").to_numpy()
    running = np.flatnonzero(is_gpu & (start < hi) & (end > lo))
    if not len(running):
        return None
    # The activity running at the window's end, else the one that ended last before it.
    reach = np.minimum(end[running], hi)
    end_node = int(running[np.lexsort((running, end[running], reach))[-1]])

    pid = nodes["pid"].to_list()
    device = nodes["device_id"].to_list()
    cls = nodes["class"].to_list()
    edge = nodes["edge"].to_list()
    steps: list[tuple[str, int, int, int, int]] = []  # (cause, node, gpu node, lo, hi)
    joins: list[tuple[int, int, int]] = []  # (node, last member's node, first step after)

    def add(cause: str, node: int, gpu_node: int, a: int, b: int) -> None:
        a = max(a, lo)
        if b > a:
            steps.append((cause, node, gpu_node, a, b))

    t, n, gpu_node = hi, end_node, end_node
    budget = len(start) + 2  # every node at most once: a guard against a cycle of equal times
    while t > lo and budget:
        budget -= 1
        if n < 0:
            add("untraced", -1, gpu_node, lo, t)
            break
        s = int(start[n])
        if is_gpu[n]:
            gpu_node = n
        other = int(last[n])
        if other >= 0 and other != n and s < last_start[n] <= t:
            # A collective this GPU reached before the last member: the transfer ran once
            # that member arrived; before, the path is that member's.
            add("communication", n, gpu_node, int(last_start[n]), t)
            joins.append((n, other, len(steps)))
            t, n = int(last_start[n]), other
            continue
        if other == n and first_start[n] < s and not (joins and joins[-1][1] == n):
            joins.append((n, n, len(steps)))
        p = int(pred[n])
        r = min(int(ready[n]), t) if p >= 0 else s
        own = EXEC_CAUSE.get(cls[n], "compute")
        if edge[n] == "sync" and not is_gpu[n]:
            own = "synchronisation"  # the call returned when the GPU work it waited for ended
        add(own, n, gpu_node, max(r, s), t)
        if r < s:
            add(GAP_CAUSE[edge[n]], n, gpu_node, r, s)
        t, n = (r, p) if p >= 0 else (s, -1)
    if t > lo and not budget:
        add("untraced", -1, gpu_node, lo, t)

    names, layers = nodes["name"].to_list(), nodes["layer"].to_list()
    ranges = nodes["host_range"].to_list()
    segments = []
    for cause, node, g, a, b in steps:
        if node < 0:
            what, layer, kind = None, None, None
        elif cause == "host":
            what, layer, kind = ranges[node], None, None
        else:
            what, layer, kind = names[node], layers[node], cls[node]
        segments.append(Segment(cause, pid[g], device[g], what, layer, kind, a, b))
    return Walk(
        start_ns=lo,
        end_ns=hi,
        end_gpu=(pid[end_node], device[end_node]),
        segments=tuple(segments),
        joins=tuple(
            Join(
                nodes["op"][n],
                nodes["ordinal"][n],
                (pid[n], device[n]),
                (pid[o], device[o]),
                int(start[o]),
                int(start[o] - first_start[o]),
                first,
            )
            for n, o, first in joins
        ),
        idle=_idle(nodes, is_gpu, segments, lo, hi),
        what_if={},
        what_if_layer=None,
    )


def _idle(
    nodes: pl.DataFrame, is_gpu: np.ndarray, segments: list[Segment], lo: int, hi: int
) -> dict[tuple[int, int], tuple[int, int]]:
    """Per GPU of the window: (its idle time in [lo, hi), the part of it under the path's
    host-side segments on that GPU)."""
    gpu = nodes.filter(is_gpu).select("pid", "device_id", "start_ns", "end_ns")
    out = {}
    for (p, d), rows in gpu.group_by("pid", "device_id", maintain_order=True):
        busy = _Busy(rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy(), lo, hi)
        under = sum(
            (g.end_ns - g.start_ns) - busy.within(g.start_ns, g.end_ns)
            for g in segments
            if (g.pid, g.device_id) == (p, d) and g.cause in HOST_CAUSES
        )
        out[(int(p), int(d))] = ((hi - lo) - busy.total, under)
    return out


class _Busy:
    """One GPU's busy time in [lo, hi): the union of its activities, as pieces with the busy
    time before each, so that the busy time within any interval takes two binary searches."""

    def __init__(self, start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> None:
        import numpy as np

        s, e = np.clip(start, lo, hi), np.clip(end, lo, hi)
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
    launch latency, say, kept); a synchronising call returns as the GPU work it waited for
    ends; a collective's members end when the transfer after their last arrival does. The
    window keeps its start; its end is the last end of the GPU activities that ended in it.
    Nodes that ended before the window keep their times.
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

    def shift(c: int) -> int:
        """How much later (negative: earlier) node c ends now."""
        key = instance[c]
        if key is not None:
            arrival = max(new_start[m] for m in members[key])
            transfer = max(end[c] - last_start[c], 0) * factor[c]
            return round(float(arrival + transfer)) - int(end[c])
        return int(new_end[c]) - int(end[c])

    for n in range(len(start)):
        if end[n] <= lo:
            continue
        readies = [(p[n], r[n]) for p, r in preds if p[n] is not None]
        if readies:
            before = max(r for _, r in readies)
            now = max(r + shift(p) for p, r in readies)
            new_start[n] = start[n] + now - before
        if gpu[n]:
            new_end[n] = new_start[n] + round((end[n] - start[n]) * factor[n])
        elif waits[n] and sync_pred[n] is not None:
            returned = max(start[n], sync_ready[n])
            new_end[n] = max(new_start[n], sync_ready[n] + shift(sync_pred[n])) + end[n] - returned
        else:
            new_end[n] = new_start[n] + end[n] - start[n]
    ends = [end[n] + shift(n) for n in range(len(start)) if gpu[n] and lo < end[n] <= hi]
    return int(max(ends, default=hi)) - lo
