"""Critical path: what set the length of the median step (or the middle window of a trace
without steps), as time by cause summing to the window, the ranks it ran on, and what the rank
that others waited for was doing (nsysreport.critical_path walks it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nsysreport.critical_path import CAUSES, GPU_CAUSES, HOST_CAUSES, GpuKey, Join, Walk
from nsysreport.units import fmt_ns, fmt_pct, pct, short_kernel_name

CAUSE_LABELS = {
    "compute": "compute",
    "communication": "communication transfer",
    "copy": "copies and memsets",
    "launch_latency": "launch latency",
    "cuda_api": "CUDA API calls",
    "synchronisation": "synchronisation",
    "host": "host time between CUDA calls",
    "gpu_wait": "GPU waiting on a dependency",
    "untraced": "untraced",
}
TOP_ITEMS = 10
# A path whose GPU waits on the host side this much of the window: the host's launches explain it.
HOST_BOUND_PCT = 10.0


@dataclass(frozen=True, slots=True)
class PathCause:
    cause: str  # one of nsysreport.critical_path.CAUSES
    label: str
    ns: int
    pct: float | None  # of the window


@dataclass(frozen=True, slots=True)
class PathShare:
    """Compute on the path split one way (by kernel class, or by layer)."""

    name: str
    ns: int
    pct: float | None


@dataclass(frozen=True, slots=True)
class PathItem:
    """One thing on the path (a kernel, copy, API call or NVTX range) on one rank, summed."""

    cause: str
    rank: int
    what: str | None  # None: no traced call or range
    layer: str | None
    ns: int
    pct: float | None

    @property
    def text(self) -> str:
        return what_text(self.cause, self.what, self.layer, quoted=False)


@dataclass(frozen=True, slots=True)
class PathRank:
    """One rank's part: time the path spent on it, its GPU's idle time in the window, and of
    that the idle time not on the path (slack: shortening it would not shorten the window)."""

    rank: int
    file: str
    pid: int
    device_id: int
    on_path_ns: int
    on_path_pct: float | None
    idle_ns: int
    slack_ns: int


@dataclass(frozen=True, slots=True)
class PathWait:
    """A collective on the path whose members waited for one of them: `last_rank` arrived
    `wait_ns` after the first; the path came to it on `path_rank` and went on from
    `last_rank` (`crossed`: they differ); while the others waited, `last_rank` was mostly in
    `doing` (a kernel, call or range; None: untraced) for `doing_ns`."""

    op: str
    ordinal: int
    path_rank: int
    last_rank: int
    crossed: bool
    wait_ns: int
    doing_cause: str | None
    doing: str | None
    doing_layer: str | None
    doing_ns: int

    @property
    def doing_text(self) -> str:
        if not self.doing_ns:
            return "–"
        return what_text(self.doing_cause, self.doing, self.doing_layer, quoted=False)


@dataclass(frozen=True, slots=True)
class PathPiece:
    """A stretch of the path on one rank, for the timeline: consecutive segments on it, on its
    GPU (`on_gpu`: a GPU cause) or waiting on the host side."""

    rank: int
    start_ns: int
    end_ns: int
    on_gpu: bool


@dataclass(frozen=True, slots=True)
class PathWhatIf:
    """A change and the window's length it gives: recomputed over the path's graph
    (`path_ns`), and where the span-based what-if of the step has the same change, its
    projection (`span_ns`, for the GPU where the window ends)."""

    change: str  # compute_2x, gemm_2x, layer_gemm_2x or comm_hidden
    label: str
    path_ns: int
    path_saved_pct: float | None  # of the window
    span_ns: int | None
    span_saved_pct: float | None


@dataclass(frozen=True, slots=True)
class CriticalPath:
    basis: str  # median step, middle of the trace or whole trace
    step: str | None  # the step's name
    start_ns: int
    end_ns: int
    length_ns: int
    end_rank: int  # where the window ended
    causes: tuple[PathCause, ...]  # every cause, summing to length_ns
    compute_classes: tuple[PathShare, ...]  # compute by kernel class
    compute_layers: tuple[PathShare, ...]  # compute by layer (empty without layer ranges)
    items: tuple[PathItem, ...]  # the longest things on the path
    ranks: tuple[PathRank, ...]
    waits: tuple[PathWait, ...]  # the latest first, as walked
    summary: str
    drill_down: str | None  # the costliest crossing, in a sentence
    what_if: tuple[PathWhatIf, ...] = ()
    what_if_note: str | None = None  # where the path and the span-based projection disagree
    pieces: tuple[PathPiece, ...] = ()  # the path in time order, for the timeline

    @property
    def longest_waits(self) -> tuple[PathWait, ...]:
        """The waits the report's table lists: the longest first."""
        ranked = sorted(self.waits, key=lambda w: (-w.wait_ns, w.op, w.ordinal))
        return tuple(ranked[:TOP_ITEMS])

    def share(self, cause: str) -> float | None:
        """`cause`'s % of the window; `host_side`: every host-side cause's together."""
        if cause == "host_side":
            return pct(sum(c.ns for c in self.causes if c.cause in HOST_CAUSES), self.length_ns)
        return next((c.pct for c in self.causes if c.cause == cause), None)


def build_critical_path(
    path: Walk,
    ranks: Mapping[GpuKey, int],
    basis: str,
    step: str | None,
    span_what_if: Mapping[str, int] | None = None,
) -> CriticalPath:
    """The section from one walk over the window `basis` names (`step`: its name);
    `ranks`: each GPU's rank; `span_what_if`: the span-based projections of the step on the
    GPU where the window ends, by the what-if change they make (None: not a step)."""
    length = path.end_ns - path.start_ns
    totals = dict.fromkeys(CAUSES, 0)
    per_rank: dict[GpuKey, int] = {}
    items: dict[tuple[str, int, str | None, str | None], int] = {}
    classes: dict[str, int] = {}
    layers: dict[str, int] = {}
    for s in path.segments:
        ns = s.end_ns - s.start_ns
        totals[s.cause] += ns
        gpu = (s.file, s.pid, s.device_id)
        per_rank[gpu] = per_rank.get(gpu, 0) + ns
        key = (s.cause, ranks[gpu], s.what, s.layer)
        items[key] = items.get(key, 0) + ns
        if s.cause == "compute":
            cls = s.kernel_class or "other"
            classes[cls] = classes.get(cls, 0) + ns
            if s.layer is not None:
                layers[s.layer] = layers.get(s.layer, 0) + ns
    causes = tuple(PathCause(c, CAUSE_LABELS[c], totals[c], pct(totals[c], length)) for c in CAUSES)
    longest = sorted(items.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][0], str(kv[0][2])))
    rank_rows = tuple(
        sorted(
            (
                PathRank(
                    rank=ranks[gpu],
                    file=gpu[0],
                    pid=gpu[1],
                    device_id=gpu[2],
                    on_path_ns=per_rank.get(gpu, 0),
                    on_path_pct=pct(per_rank.get(gpu, 0), length),
                    idle_ns=idle,
                    slack_ns=max(idle - under, 0),
                )
                for gpu, (idle, under) in path.idle.items()
            ),
            key=lambda r: (r.rank, r.file, r.pid, r.device_id),
        )
    )
    waits = tuple(_wait(path, j, ranks) for j in path.joins)
    end_rank = ranks[path.end_gpu]
    return CriticalPath(
        basis=basis,
        step=step,
        start_ns=path.start_ns,
        end_ns=path.end_ns,
        length_ns=length,
        end_rank=end_rank,
        causes=causes,
        compute_classes=_shares(classes, length),
        compute_layers=_shares(layers, length),
        items=tuple(
            PathItem(cause, rank, what, layer, ns, pct(ns, length))
            for (cause, rank, what, layer), ns in longest[:TOP_ITEMS]
        ),
        ranks=rank_rows,
        waits=waits,
        summary=_summary(causes, rank_rows, basis, step, length),
        drill_down=_drill_down(waits),
        what_if=(changes := _what_ifs(path, length, span_what_if or {})),
        what_if_note=_disagreement(changes, length),
        pieces=_pieces(path, ranks),
    )


def _pieces(path: Walk, ranks: Mapping[GpuKey, int]) -> tuple[PathPiece, ...]:
    """The path's segments in time order, consecutive ones on one rank and side joined."""
    out: list[PathPiece] = []
    for s in reversed(path.segments):
        rank, on_gpu = ranks[(s.file, s.pid, s.device_id)], s.cause in GPU_CAUSES
        last = out[-1] if out else None
        if last and (last.rank, last.on_gpu, last.end_ns) == (rank, on_gpu, s.start_ns):
            out[-1] = PathPiece(rank, last.start_ns, s.end_ns, on_gpu)
        else:
            out.append(PathPiece(rank, s.start_ns, s.end_ns, on_gpu))
    return tuple(out)


WHAT_IF_LABELS = {
    "compute_2x": "compute 2x faster",
    "gemm_2x": "GEMMs 2x faster",
    "layer_gemm_2x": "the GEMMs of {layer} 2x faster",
    "comm_hidden": "communication hidden (transfers take no time)",
}
# A path and a span projection that differ by more than this share of the window disagree.
DISAGREE_PCT = 5.0


def _what_ifs(path: Walk, length: int, span: Mapping[str, int]) -> tuple[PathWhatIf, ...]:
    out = []
    for change, ns in path.what_if.items():
        spanned = span.get(change)
        out.append(
            PathWhatIf(
                change=change,
                label=WHAT_IF_LABELS[change].format(layer=path.what_if_layer),
                path_ns=ns,
                path_saved_pct=pct(length - ns, length),
                span_ns=spanned,
                span_saved_pct=None if spanned is None else pct(length - spanned, length),
            )
        )
    return tuple(out)


def _disagreement(changes: tuple[PathWhatIf, ...], length: int) -> str | None:
    """The change whose path and span projections differ most, when by more than
    DISAGREE_PCT of the window, in a sentence."""
    both = [w for w in changes if w.span_ns is not None]
    if not both or not length:
        return None
    w = max(both, key=lambda w: abs((w.span_ns or 0) - w.path_ns))
    if abs((w.span_ns or 0) - w.path_ns) * 100 <= DISAGREE_PCT * length:
        return None
    return (
        f"{w.label.capitalize()}: the span-based projection gives {fmt_ns(w.span_ns)} "
        f"({fmt_pct(w.span_saved_pct)} saved), the path's recomputation {fmt_ns(w.path_ns)} "
        f"({fmt_pct(w.path_saved_pct)} saved): "
        + (
            "the path leads through work the change does not touch (host, launches, waits)."
            if w.path_ns > (w.span_ns or 0)
            else "the span-based projection misses time the change takes off other ranks' paths."
        )
    )


def _shares(parts: dict[str, int], length: int) -> tuple[PathShare, ...]:
    ordered = sorted(parts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(PathShare(name, ns, pct(ns, length)) for name, ns in ordered)


def _wait(path: Walk, j: Join, ranks: Mapping[GpuKey, int]) -> PathWait:
    """A join, with what the last member was doing while the first waited: the segments
    walked on it from the join on, within [first arrival, its arrival), summed per thing, the
    longest."""
    since = j.arrival_ns - j.wait_ns
    doing: dict[tuple[str, str | None, str | None], int] = {}
    for s in path.segments[j.first :]:
        if (s.file, s.pid, s.device_id) != j.to_gpu or s.end_ns <= since:
            break
        ns = min(s.end_ns, j.arrival_ns) - max(s.start_ns, since)
        if ns > 0:
            key = (s.cause, s.what, s.layer)
            doing[key] = doing.get(key, 0) + ns
    top = min(doing.items(), key=lambda kv: (-kv[1], kv[0][0], str(kv[0][1]))) if doing else None
    return PathWait(
        op=j.op,
        ordinal=j.ordinal,
        path_rank=ranks[j.from_gpu],
        last_rank=ranks[j.to_gpu],
        crossed=j.from_gpu != j.to_gpu,
        wait_ns=j.wait_ns,
        doing_cause=top[0][0] if top else None,
        doing=top[0][1] if top else None,
        doing_layer=top[0][2] if top else None,
        doing_ns=top[1] if top else 0,
    )


def what_text(cause: str | None, what: str | None, layer: str | None, quoted: bool = True) -> str:
    """A thing on the path as the report names it: a kernel by its short name, an API call or
    NVTX range by its text (`quoted`: in backticks, for a sentence), and where nothing was
    traced, the cause itself."""
    if what is None:
        return "untraced host code" if cause == "host" else CAUSE_LABELS.get(cause or "", "?")
    name = short_kernel_name(what) if cause in GPU_CAUSES else what
    name = f"`{name}`" if quoted else name
    if cause == "host":
        return f"host code in {name}"
    return name + (f" ({layer})" if layer else "")


def _summary(
    causes: tuple[PathCause, ...],
    ranks: tuple[PathRank, ...],
    basis: str,
    step: str | None,
    length: int,
) -> str:
    """One line: the window, its three largest causes and the rank the path was on most."""
    where = f"{step}, " if step else ""
    top = sorted((c for c in causes if c.ns), key=lambda c: (-c.ns, CAUSES.index(c.cause)))[:3]
    parts = ", ".join(f"{c.label} {fmt_pct(c.pct)}" for c in top)
    text = f"{basis.capitalize()} ({where}{fmt_ns(length)}): {parts}"
    if len(ranks) > 1:
        most = max(ranks, key=lambda r: (r.on_path_ns, -r.rank))
        text += f"; {fmt_pct(most.on_path_pct)} of it on rank {most.rank}"
    host = sum(c.ns for c in causes if c.cause in HOST_CAUSES)
    if host:
        text += f"; the GPU waited on the host or a dependency {fmt_pct(pct(host, length))}"
    return text + "."


def _drill_down(waits: tuple[PathWait, ...]) -> str | None:
    """The collective on the path its members waited longest at, in a sentence."""
    if not waits:
        return None
    w = max(waits, key=lambda w: (w.wait_ns, -w.ordinal))
    text = f"Rank {w.last_rank} arrived {fmt_ns(w.wait_ns)} late at {w.op} #{w.ordinal}"
    if w.doing_ns:
        doing = what_text(w.doing_cause, w.doing, w.doing_layer)
        text += f"; before it, rank {w.last_rank} was in {doing} for {fmt_ns(w.doing_ns)}"
    return text + "."
