"""The timeline: every GPU's activities in one representative window (timeline_window query)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nsysreport.errors import OptionError
from nsysreport.units import pct

# Rows the timeline draws at most: the picture never grows with the trace.
MAX_ROWS = 6000
# Activities in the window when the trace has no steps to pick one from.
DEFAULT_ACTIVITIES = 1200

Piece = tuple[int, int]  # (start, end) in ns from the window start


@dataclass(frozen=True, slots=True)
class Lane:
    """One stream of one GPU: its activities in the window, by class."""

    stream_id: int
    pieces: dict[str, tuple[Piece, ...]]  # class -> pieces, in time order


@dataclass(frozen=True, slots=True)
class TimelineGpu:
    rank: int
    pid: int
    device_id: int
    lanes: tuple[Lane, ...]
    exposed_comm: tuple[Piece, ...]  # communication with no compute running, any stream
    gaps: tuple[Piece, ...]  # nothing running on the GPU
    exposed_comm_ns: int
    idle_ns: int
    exposed_comm_pct: float | None  # share of the window


@dataclass(frozen=True, slots=True)
class Timeline:
    basis: str  # median step | chosen step | chosen range | middle of the trace | whole trace
    step_name: str | None
    steps: int  # steps in the trace (0 without NVTX steps)
    start_ns: int  # trace time
    end_ns: int  # where the drawing ends: the window's end, or earlier when it held too much
    offset_ns: int  # start_ns minus the trace's first activity start
    duration_ns: int  # end_ns - start_ns
    window_ns: int  # the length of the chosen window
    gpus: tuple[TimelineGpu, ...]
    rows: int  # pieces drawn
    window_rows: int  # pieces in the whole window (more than `rows` when it was cut short)
    exposed_comm_mean_pct: float | None  # mean over GPUs
    most_exposed_rank: int | None
    longest_gap_ns: int | None

    @property
    def truncated(self) -> bool:
        """The window held more than MAX_ROWS pieces: only its first part is drawn."""
        return self.duration_ns < self.window_ns


RankOf = Callable[[str | None, int, int], int]  # (file, pid, device_id) -> rank


def assemble(
    basis: str,
    step_name: str | None,
    steps: int,
    lo: int,
    hi: int,
    first_ns: int,
    rows: list[dict[str, Any]],
    window_rows: int,
    rank_of: RankOf,
    cut: int | None,
) -> Timeline:
    """The Timeline of window [lo, hi) from timeline_window rows (a `file` key, when present,
    tells GPUs of different files apart), drawn only up to `cut` when the window held more rows
    than were fetched."""
    drawn_hi = hi
    if cut is not None and cut > lo:
        drawn_hi = cut
        rows = [{**r, "end_ns": min(r["end_ns"], cut)} for r in rows if r["start_ns"] < cut]
    gpus = _gpus(rows, rank_of, lo, drawn_hi)
    exposed = [g.exposed_comm_pct for g in gpus if g.exposed_comm_pct is not None]
    most = max(gpus, key=lambda g: (g.exposed_comm_ns, -g.rank), default=None)
    longest = max((end - start for g in gpus for start, end in g.gaps), default=None)
    return Timeline(
        basis=basis,
        step_name=step_name,
        steps=steps,
        start_ns=lo,
        end_ns=drawn_hi,
        offset_ns=lo - first_ns,
        duration_ns=drawn_hi - lo,
        window_ns=hi - lo,
        gpus=gpus,
        rows=len(rows),
        window_rows=window_rows,
        exposed_comm_mean_pct=sum(exposed) / len(exposed) if exposed else None,
        most_exposed_rank=most.rank if most is not None and most.exposed_comm_ns > 0 else None,
        longest_gap_ns=longest,
    )


def choose_window(
    steps: list[dict[str, Any]],
    middle: dict[str, Any],
    step: str | None,
    start_ns: int | None,
    end_ns: int | None,
) -> tuple[str, str | None, int, int]:
    """(basis, step name, start, end) of the window, in trace time."""
    first_ns = middle["first_ns"]
    if step is not None:
        chosen = _find_step(steps, step)
        return "chosen step", chosen["name"], chosen["start_ns"], chosen["end_ns"]
    if start_ns is not None or end_ns is not None:
        lo = first_ns + (start_ns or 0)
        hi = middle["last_ns"] if end_ns is None else first_ns + end_ns
        if hi <= lo:
            raise OptionError(f"timeline range: the end ({end_ns} ns) must come after the start")
        return "chosen range", None, lo, hi
    if steps:
        by_length = sorted(steps, key=lambda s: (s["duration_ns"], s["step_ordinal"]))
        median = by_length[(len(by_length) - 1) // 2]
        return "median step", median["name"], median["start_ns"], median["end_ns"]
    whole = (middle["start_ns"], middle["end_ns"]) == (first_ns, middle["last_ns"])
    basis = "whole trace" if whole else "middle of the trace"
    return basis, None, middle["start_ns"], middle["end_ns"]


def _find_step(steps: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """A step by its exact name, or by the number in its name."""
    for s in steps:
        if s["name"] == wanted or (wanted.isdigit() and s["step_index"] == int(wanted)):
            return s
    if not steps:
        raise OptionError(f"timeline step {wanted!r}: the trace has no NVTX steps")
    names = ", ".join(s["name"] for s in steps[:5]) + (", ..." if len(steps) > 5 else "")
    raise OptionError(f"timeline step {wanted!r} is not in the trace; its steps are: {names}")


def _gpus(rows: list[dict[str, Any]], rank_of: RankOf, lo: int, hi: int) -> tuple[TimelineGpu, ...]:
    by_gpu: dict[tuple[str | None, int, int], list[dict[str, Any]]] = {}
    for r in rows:
        by_gpu.setdefault((r.get("file"), r["pid"], r["device_id"]), []).append(r)
    out = []
    for (file, pid, device_id), group in by_gpu.items():
        lanes: dict[int, dict[str, list[Piece]]] = {}
        exposed: list[Piece] = []
        gaps: list[Piece] = []
        for r in group:
            piece = (r["start_ns"] - lo, r["end_ns"] - lo)
            if r["kind"] == "activity":
                lanes.setdefault(r["stream_id"], {}).setdefault(r["class"], []).append(piece)
            else:
                (exposed if r["kind"] == "exposed_comm" else gaps).append(piece)
        exposed_ns = sum(end - start for start, end in exposed)
        out.append(
            TimelineGpu(
                rank=rank_of(file, pid, device_id),
                pid=pid,
                device_id=device_id,
                lanes=tuple(
                    Lane(stream, {cls: tuple(p) for cls, p in sorted(classes.items())})
                    for stream, classes in sorted(lanes.items())
                ),
                exposed_comm=tuple(exposed),
                gaps=tuple(gaps),
                exposed_comm_ns=exposed_ns,
                idle_ns=sum(end - start for start, end in gaps),
                exposed_comm_pct=pct(exposed_ns, hi - lo),
            )
        )
    return tuple(sorted(out, key=lambda g: (g.rank, g.pid, g.device_id)))
