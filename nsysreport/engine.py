"""The interval engine: the ordered scans SQL does badly (the sweep of each GPU's activities,
running reach for group unions, clipping to windows), over columns SQL selects.

A derived table whose SQL file names an `Engine:` step (queries/derived/gpu_sweep.sql,
window_breakdown.sql, grouped_island.sql) is built here a batch of GPUs at a time: its SELECT
gives the step the batch's rows (pid and device_id first), the step scans them, and the rows
it returns become the table its header documents. Per GPU, one sort of the activities' start
and end events and one running sum give the segments with per-class counters (gpu_sweep);
prefix sums of each part's time over those segments then give any window's breakdown from two
binary searches (`Timeline.time_in`: windows of every scope, and the pieces of group unions).
The parts and their predicates are written once, in `in_part`.

A batch's GPUs share one time axis: a GPU's index in the batch above the time since the batch's
first event, in one integer, so one sort, one cumulative sum and one binary search serve every
GPU of the batch and never mix two GPUs' events. Every scan is a whole-array numpy operation (a
stable sort, cumsum, maximum.accumulate, searchsorted, reduceat): no Python loop over rows.
numba was measured first (docs/metrics.md, "The interval engine"): its import and the load of
its cached machine code cost 0.6-0.8 s in every fresh process, more than these scans take at 1M
kernels, and the selects feeding it, not the scans, were what cost. numpy and pyarrow are
imported in the functions that use them: 0.3 s of start-up (python -X importtime) that a warm
run, which imports this module through nsysreport.queries, never needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

# gpu_sweep's packed counters: 10-bit fields of one BIGINT, lowest first (the gpu_counter
# macros read them apart in SQL): compute, gemm, attention, comm, memcpy, graph.
FIELD_BITS = 10
FIELDS = ("compute", "gemm", "attention", "comm", "memcpy", "graph")

# The parts of a window's time (docs/metrics.md, "Time on one GPU"), each a predicate on the
# counters of the segments under it: in_part.
PARTS = (
    "busy",
    "compute",
    "gemm",
    "attention",
    "comm",
    "exposed_comm",
    "memcpy",
    "exposed_memcpy",
    "graph",
    "graph_opaque",
)

# grouped_island's members: the grouping and part of each input row (the `member` column its
# SELECT gives is the index here).
MEMBERS = (
    ("layer", "compute"),
    ("layer", "gemm"),
    ("layer", "comm"),
    ("layer", "memcpy"),
    ("op", "comm"),
    ("comm", "comm"),
    ("copy", "memcpy"),
)
# The part of the GPU's time that does not hide a piece: a comm piece is exposed where no
# compute runs, a copy where neither compute nor comm does.
EXPOSED_BY = {"comm": "exposed_comm", "memcpy": "exposed_memcpy"}
# The groupings whose every piece is kept (communicator_step counts each in the step it starts
# in); the others keep one row per group and part: first start, last end and the sums.
EVERY_PIECE = frozenset({"comm"})

# A composite sort key (small numbers above a time) must fit in 62 bits; the batches are made
# so that the GPU index, the time since the batch's first event and the sweep's delta rank
# (5 bits) fit. A trace's times span at most ~2^51 ns (nsysreport.unusable_row drops any time
# beyond 10x the capture's duration), so that is at least 64 GPUs a batch.
KEY_BITS = 62
RANK_BITS = 5
# The packed counters' increments, one per class (a gemm or attention kernel counts as compute
# too), as gpu_sweep.sql gives them, ends negative, in sorting order: an event's rank here
# orders the events of one instant.
_INCREMENTS = [1, 1 + (1 << 10), 1 + (1 << 20), 1 << 30, 1 << 40, 1 << 50]
DELTAS = tuple(sorted([-i for i in _INCREMENTS] + _INCREMENTS))
# The activities one batch selects at most (unless one GPU has more): the engine's input and
# its sorts then take a few hundred MB however large the trace (5M kernels: 2 batches).
BATCH_ACTIVITIES = 4_000_000


@dataclass(frozen=True, slots=True)
class Batch:
    """GPUs the engine takes together: `pids`, `device_ids` in order, their shared time axis
    from `low` with `time_bits` of room below the GPU index."""

    pids: tuple[int, ...]
    device_ids: tuple[int, ...]
    low: int
    time_bits: int

    @property
    def keys(self) -> list[int]:
        """Each GPU as the gpu_key macro (queries/load/gpu_key.sql) names it."""
        return [(p << 32) + d for p, d in zip(self.pids, self.device_ids, strict=True)]

    def index(self, pid: np.ndarray, device_id: np.ndarray) -> np.ndarray:
        """Each row's GPU as its place in the batch."""
        import numpy as np

        places: np.ndarray = np.searchsorted(np.array(self.keys, np.int64), (pid << 32) + device_id)
        return places

    def axis(self, gpu: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The batch's time axis: the GPU's index above the time since `low`."""
        import numpy as np

        # A time outside the batch's span (a window reaching past every activity) is clipped
        # to it: no segment lies beyond, so no breakdown changes.
        since = np.clip(t - self.low, 0, (1 << self.time_bits) - 1)
        axis: np.ndarray = (gpu << self.time_bits) | since
        return axis


def batches(gpus: Sequence[tuple[int, int, int, int, int]]) -> Iterator[Batch]:
    """The GPUs (pid, device_id, activities, first_ns, last_ns; gpu_keys) in batches of at
    most BATCH_ACTIVITIES activities (a larger GPU alone), each with a time axis that fits."""
    if not gpus:
        return
    low = min(g[3] for g in gpus)
    time_bits = max(max(g[4] for g in gpus) - low, 1).bit_length()
    most = 1 << max(KEY_BITS - RANK_BITS - time_bits, 0)  # GPUs the axis has room for
    batch: list[tuple[int, int, int, int, int]] = []
    for gpu in gpus:
        if batch and (
            sum(g[2] for g in batch) + gpu[2] > BATCH_ACTIVITIES or len(batch) + 1 > most
        ):
            yield _batch(batch, low, time_bits)
            batch = []
        batch.append(gpu)
    yield _batch(batch, low, time_bits)


def _batch(gpus: list[tuple[int, int, int, int, int]], low: int, time_bits: int) -> Batch:
    return Batch(tuple(g[0] for g in gpus), tuple(g[1] for g in gpus), low, time_bits)


def _gpu_columns(batch: Batch, gpu: np.ndarray) -> dict[str, np.ndarray]:
    """pid and device_id of each row from its place in the batch."""
    import numpy as np

    return {
        "pid": np.array(batch.pids, np.int64)[gpu],
        "device_id": np.array(batch.device_ids, np.int64)[gpu],
    }


def sweep(rows: pa.Table, batch: Batch) -> pa.Table:
    """gpu_sweep's rows from the batch's activities (pid, device_id, start_ns, end_ns,
    activity_key, delta: the packed counters' increment of its class; every end > start)."""
    import numpy as np
    import pyarrow as pa

    col = {name: rows[name].to_numpy() for name in rows.column_names}
    by_key = np.argsort(col["activity_key"], kind="stable")
    gpu = batch.index(col["pid"], col["device_id"])[by_key]
    start, end = col["start_ns"][by_key], col["end_ns"][by_key]
    key, delta = col["activity_key"][by_key], col["delta"][by_key]
    g = np.concatenate([gpu, gpu])
    t = np.concatenate([start, end])
    d = np.concatenate([delta, -delta])
    k = np.concatenate([key, key])
    # Events in (GPU, t, delta, activity_key) order: ends (negative deltas) before starts at
    # one instant, so touching activities leave a zero-length segment, not a gap. The events
    # are laid out in key order, so stable sorts keep key order in ties: first by GPU (a radix
    # sort of small integers), then by (axis, rank of delta) in one integer (timsort: each
    # GPU's events then come in two nearly sorted runs; 2M events, 8 GPUs: 0.05 s, against
    # 0.11 s for the one sort, whose runs the GPUs interleave).
    rank = np.searchsorted(np.array(DELTAS, np.int64), d)
    by_gpu = np.argsort(
        g.astype(np.int16 if len(batch.pids) < 1 << 15 else np.int64), kind="stable"
    )
    composite = ((batch.axis(g, t) << RANK_BITS) | rank)[by_gpu]
    order = by_gpu[np.argsort(composite, kind="stable")]
    g, t, k = g[order], t[order], k[order]
    # Each GPU's starts and ends cancel, so the running sum starts at 0 on every GPU.
    packed = np.cumsum(d[order])
    # Segment i lies between events i and i + 1 of one GPU; at one instant it has no length.
    cut = np.flatnonzero((t[1:] > t[:-1]) & (g[1:] == g[:-1]))
    first_event = np.r_[0, np.cumsum(np.bincount(g, minlength=len(batch.pids)))]
    first_event = first_event[g[cut]]  # seq counts each GPU's events from 1
    return pa.table(
        {
            **_gpu_columns(batch, g[cut]),
            "seq": cut - first_event + 1,
            "start_ns": t[cut],
            "end_ns": t[cut + 1],
            "packed": packed[cut],
            "before_key": k[cut],
            "after_key": k[cut + 1],
        }
    )


def running(packed: np.ndarray) -> dict[str, np.ndarray]:
    """Whether any activity of each class (FIELDS, and `all`) runs in each segment."""
    mask = (1 << FIELD_BITS) - 1
    runs = {name: (packed >> (i * FIELD_BITS)) & mask > 0 for i, name in enumerate(FIELDS)}
    return {"all": packed != 0, **runs}


def in_part(runs: Mapping[str, np.ndarray], part: str) -> np.ndarray:
    """Which segments count in `part` (PARTS): the one definition of the breakdown's
    predicates (docs/metrics.md, "Time on one GPU")."""

    counted: np.ndarray
    if part == "busy":
        counted = runs["all"]
    elif part == "exposed_comm":
        counted = runs["comm"] & ~runs["compute"]
    elif part == "exposed_memcpy":
        counted = runs["memcpy"] & ~runs["compute"] & ~runs["comm"]
    elif part == "graph_opaque":
        counted = runs["graph"] & ~runs["compute"] & ~runs["comm"] & ~runs["memcpy"]
    else:
        counted = runs[part]
    return counted


class Timeline:
    """The batch's segments (gpu_sweep) on its time axis, in order, and which classes run in
    each."""

    def __init__(self, rows: Mapping[str, np.ndarray], batch: Batch) -> None:
        import numpy as np

        gpu = batch.index(rows["pid"], rows["device_id"])
        order = np.argsort((gpu << 40) | rows["seq"], kind="stable")  # seq < 2^40 a GPU
        gpu = gpu[order]
        self.batch = batch
        self.start = batch.axis(gpu, rows["start_ns"][order])
        self.end = batch.axis(gpu, rows["end_ns"][order])
        self.runs = running(rows["packed"][order])

    def time_in(self, part: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The time of `part` in each window [lo, hi) (on the batch's axis): prefix sums of the
        part's time over the segments, read at each end with a binary search. A GPU's segments
        tile its timeline, so its time up to t is the prefix before t's segment plus that
        segment's part before t; before a GPU's first segment, the prefix at its start (the
        last segment found is an earlier GPU's, wholly before t)."""
        import numpy as np

        start, end = self.start, self.end
        counted = in_part(self.runs, part)
        prefix = np.concatenate([[0], np.cumsum(np.where(counted, end - start, 0))])
        if not start.size:
            return np.zeros_like(lo)

        def upto(t: np.ndarray) -> np.ndarray:
            i = np.searchsorted(start, t, side="right") - 1  # t's segment; -1: before all
            j = np.maximum(i, 0)
            inside = np.where(counted[j], np.minimum(t, end[j]) - start[j], 0)
            return np.where(i < 0, 0, prefix[j] + inside)

        parts: np.ndarray = upto(hi) - upto(lo)
        return parts


def window_parts(rows: pa.Table, timeline: Timeline) -> pa.Table:
    """The windows of `rows` (pid, device_id, start_ns, end_ns, and any other columns, kept)
    with each part's time clipped to them (PARTS, as <part>_ns)."""
    import pyarrow as pa

    batch = timeline.batch
    gpu = batch.index(rows["pid"].to_numpy(), rows["device_id"].to_numpy())
    lo = batch.axis(gpu, rows["start_ns"].to_numpy())
    hi = batch.axis(gpu, rows["end_ns"].to_numpy())
    parts = {f"{part}_ns": timeline.time_in(part, lo, hi) for part in PARTS}
    return pa.table({**dict(zip(rows.column_names, rows.columns, strict=True)), **parts})


def group_pieces(members: pa.Table, timeline: Timeline) -> pa.Table:
    """grouped_island's rows: each group's union as disjoint pieces (one row per group and part
    but for the EVERY_PIECE groupings), with the exposed time of comm and copy pieces (NULL for
    compute and GEMM)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = timeline.batch
    keys = pc.dictionary_encode(members["group_key"], null_encoding="encode").combine_chunks()
    gpu = batch.index(members["pid"].to_numpy(), members["device_id"].to_numpy())
    key = keys.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    # A group: its GPU, its key, then grouping and part (MEMBERS), in one integer.
    keys_per_gpu = max(len(keys.dictionary), 1)
    group = (gpu * keys_per_gpu + key) * len(MEMBERS) + members["member"].to_numpy()
    start = batch.axis(gpu, members["start_ns"].to_numpy())
    end = batch.axis(gpu, members["end_ns"].to_numpy())
    order = _group_order(group, start, end)
    group, start, end = group[order], start[order], end[order]
    # In (group, start, end) order an interval adds [max(start, reach), end) to its group's
    # union when it ends past the reach, the latest end of the group's earlier intervals.
    first = np.r_[True, group[1:] != group[:-1]]
    reach = np.where(first, start, _reach(group, end))
    kept = end > reach
    group, start, end = group[kept], np.maximum(start, reach)[kept], end[kept]
    kind = group % len(MEMBERS)
    exposed = np.full(group.size, -1, np.int64)  # -1: none
    for part, hidden_by in EXPOSED_BY.items():
        chosen = np.isin(kind, [i for i, (_, p) in enumerate(MEMBERS) if p == part])
        exposed[chosen] = timeline.time_in(hidden_by, start[chosen], end[chosen])
    every = np.isin(kind, [i for i, (g, _) in enumerate(MEMBERS) if g in EVERY_PIECE])
    summed = _group_sums(group[~every], start[~every], end[~every], exposed[~every])
    duration = np.concatenate([end[every] - start[every], summed[3]])
    group = np.concatenate([group[every], summed[0]])
    start = np.concatenate([start[every], summed[1]])
    end = np.concatenate([end[every], summed[2]])
    exposed = np.concatenate([exposed[every], summed[4]])
    kind = group % len(MEMBERS)
    key, gpu = np.divmod(group // len(MEMBERS), keys_per_gpu)[::-1]
    since = batch.low - (gpu << batch.time_bits)  # from the batch's axis to the GPU's clock
    return pa.table(
        {
            **_gpu_columns(batch, gpu),
            "grouping": pa.array([g for g, _ in MEMBERS]).take(kind),
            "group_key": keys.dictionary.take(key),
            "part": pa.array([p for _, p in MEMBERS]).take(kind),
            "start_ns": start + since,
            "end_ns": end + since,
            "duration_ns": duration,
            "exposed_ns": pa.array(exposed, mask=exposed < 0),
        }
    )


def _group_order(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order (group, start, end): two stable sorts, by end, then by group and start in one
    integer (the members come in nearly sorted runs, which timsort takes fast), else lexsort."""
    import numpy as np

    if not group.size:
        return np.zeros(0, np.int64)
    bits = int(start.max()).bit_length()
    if int(group.max()).bit_length() + bits <= KEY_BITS:
        by_end = np.argsort(end, kind="stable")
        return by_end[np.argsort((group[by_end] << bits) | start[by_end], kind="stable")]
    return np.lexsort((end, start, group))


def _reach(group: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Row i: the latest end among the rows before it in its group (rows sorted by group; the
    first row of a group gets an earlier group's value, which the caller replaces): a running
    maximum of (group, end) as one integer, so a new group starts above every earlier value.
    Where that does not fit, ends are replaced by their rank, which keeps their order."""
    import numpy as np

    if not end.size:
        return end
    values = end
    if int(group.max()).bit_length() + int(end.max()).bit_length() > KEY_BITS:
        values = np.unique(end, return_inverse=True)[1].astype(np.int64)
    bits = int(values.max()).bit_length()
    running_max = np.maximum.accumulate((group << bits) | values) & ((1 << bits) - 1)
    reach = running_max if values is end else np.unique(end)[running_max]
    before: np.ndarray = np.r_[reach[:1], reach[:-1]]
    return before


def _group_sums(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, exposed: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Per group (its pieces are consecutive and in time order): the group, its first start,
    last end, summed length and summed exposed time (-1: none)."""
    import numpy as np

    if group.size == 0:
        return (group,) * 5
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    last = np.r_[first[1:], group.size] - 1
    return (
        group[first],
        start[first],
        end[last],
        np.add.reduceat(end - start, first),
        np.where(exposed[first] < 0, -1, np.add.reduceat(np.maximum(exposed, 0), first)),
    )


# The steps that read the batch's timeline (queries/load/engine_timeline.sql) besides their rows.
TIMELINE_STEPS = frozenset({"window_parts", "group_pieces"})


def run_step(name: str, rows: pa.Table, batch: Batch, timeline: pa.Table | None) -> pa.Table:
    """The rows of an `Engine:` step's table for one batch: `rows` from the file's SELECT,
    `timeline` the batch's gpu_sweep segments (engine_timeline) for TIMELINE_STEPS."""
    if name == "sweep":
        return sweep(rows, batch)
    if timeline is None or name not in TIMELINE_STEPS:
        raise ValueError(f"the interval engine has no step {name!r} taking these inputs")
    segments = Timeline({c: timeline[c].to_numpy() for c in timeline.column_names}, batch)
    return window_parts(rows, segments) if name == "window_parts" else group_pieces(rows, segments)
