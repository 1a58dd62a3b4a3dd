"""Write a trace's analysed window as Chrome/Perfetto trace-event JSON (`report --perfetto`).

The file opens in ui.perfetto.dev (Open trace file) and in chrome://tracing. Each GPU is a
process; under it, one thread row per derived track (exposed comm, idle gap with its likely
cause, straggler wait, late to collective, step, layer: queries/report/perfetto_span.sql), then
one per CUDA stream (queries/report/perfetto_activity.sql). A process `nsysreport` on top holds
the report's timeline window as one span, so the window the report drew is found at a glance.

Which time it holds: the report's timeline window when the user chose one (--timeline-step,
--timeline-range), else the whole trace when it has at most WHOLE_TRACE_ACTIVITIES activities,
else the timeline window (the median step, or the middle of the trace). Times are microseconds
(floats, the format's unit) after the trace's first activity, the offsets the report prints.

Complete ("X") events on one thread must nest or not overlap in the format; spans of a track
that overlap (two layers whose kernels interleave, two kernels of one stream a few ns apart
in a real export) go on extra rows of that track, so no row holds a partial overlap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb

    from nsysreport.model import Report

# Whole-trace export up to this many activities (~40 MB of JSON at most, which the Perfetto
# UI opens in seconds); larger traces get the report's window.
WHOLE_TRACE_ACTIVITIES = 200_000
# The derived tracks, in the order they are shown above the streams of each GPU.
DERIVED_TRACKS = (
    "exposed comm",
    "idle gap",
    "late to collective",
    "straggler wait",
    "step",
    "layer",
)
# Thread ids of derived rows: far above any CUDA stream id, so the two never clash.
DERIVED_TID = 1_000_000
ROWS_PER_TRACK = 1_000  # thread ids set aside for the extra rows of one track
STREAM_EXTRA_TID = 10_000_000  # thread ids of a stream's extra rows start here
OPEN_HINT = "open it at https://ui.perfetto.dev (Open trace file)"


@dataclass(frozen=True, slots=True)
class PerfettoWindow:
    """The time the file holds, in trace time, and why it is that time."""

    start_ns: int
    end_ns: int
    basis: str  # "whole trace", or the timeline's basis ("median step", "chosen range", ...)
    first_ns: int  # the trace's first activity start: the file's time zero


def choose_window(
    con: duckdb.DuckDBPyConnection, report: Report, chosen: bool
) -> PerfettoWindow | None:
    """The whole trace when small and no window was `chosen`, else the report's timeline
    window; None when the trace has no GPU activity."""
    middle = run_query(con, "activity_middle", {"activities": 1}).to_dicts()
    if not middle:
        return None
    first, last, count = middle[0]["first_ns"], middle[0]["last_ns"], middle[0]["activity_count"]
    t = report.timeline
    if t is None or (not chosen and count <= WHOLE_TRACE_ACTIVITIES):
        return PerfettoWindow(first, last, "whole trace", first)
    return PerfettoWindow(t.start_ns, t.start_ns + t.window_ns, t.basis, first)


def trace_events(
    con: duckdb.DuckDBPyConnection, report: Report, chosen: bool = False
) -> dict[str, Any]:
    """The trace-event document (a dict, json.dumps-ready) of `report`'s trace on `con`.

    `chosen`: the user picked the timeline window, which the file then holds whatever the
    trace's size.
    """
    window = choose_window(con, report, chosen)
    events: list[dict[str, Any]] = []
    if window is None:
        return _document(events, None, 0)
    params = {"start_ns": window.start_ns, "end_ns": window.end_ns}
    activities = run_query(con, "perfetto_activity", params).to_dicts()
    spans = run_query(con, "perfetto_span", params).to_dicts()
    first_ns = window.first_ns
    ranks = {(g.pid, g.device_id): g.rank for g in report.gpus}
    gpus = sorted({(r["pid"], r["device_id"]) for r in (*activities, *spans)} | set(ranks))
    gpus.sort(key=lambda gpu: (ranks.get(gpu, 1 << 30), gpu))
    process = {gpu: i + 1 for i, gpu in enumerate(gpus)}  # pid 0 is the kernel's idle task

    def us(ns: int) -> float:
        return float((ns - first_ns) / 1000)

    for gpu, pid in process.items():
        rank = ranks.get(gpu)
        label = f"GPU {gpu[1]}" + (f" (rank {rank}, pid {gpu[0]})" if rank is not None else "")
        events += _metadata("process", pid, None, label, pid)
    for (gpu, stream), rows in _group(
        activities, lambda r: ((r["pid"], r["device_id"]), r["stream_id"])
    ):
        pid = process[gpu]
        for row_no, lane in enumerate(_lanes(rows)):
            # A stream's activities can overlap by a few ns in a real export (clock rounding).
            tid = stream if row_no == 0 else STREAM_EXTRA_TID + stream * ROWS_PER_TRACK + row_no
            name = f"stream {stream}" + (f" ({row_no + 1})" if row_no else "")
            order = DERIVED_TID + stream * ROWS_PER_TRACK + row_no  # below the derived rows
            events += _metadata("thread", pid, tid, name, order)
            events += [
                _complete(r["name"], r["class"], pid, tid, us(r["start_ns"]), r, _activity_args(r))
                for r in lane
            ]
    for (gpu, track), rows in _group(spans, lambda r: ((r["pid"], r["device_id"]), r["track"])):
        pid = process[gpu]
        base = DERIVED_TID + DERIVED_TRACKS.index(track) * ROWS_PER_TRACK
        for row_no, lane in enumerate(_lanes(rows)):
            tid = base + row_no
            name = track if row_no == 0 else f"{track} ({row_no + 1})"
            events += _metadata("thread", pid, tid, name, tid - DERIVED_TID)
            events += [
                _complete(r["name"], track, pid, tid, us(r["start_ns"]), r, _span_args(r))
                for r in lane
            ]
    t = report.timeline
    if t is not None:
        top = len(process) + 1
        events += _metadata("process", top, None, "nsysreport", -1)
        events += _metadata("thread", top, 1, "report timeline window", 0)
        window_row = {"start_ns": t.start_ns, "end_ns": t.start_ns + t.window_ns}
        name = f"report timeline: {t.basis}" + (f" {t.step_name}" if t.step_name else "")
        events.append(_complete(name, "window", top, 1, us(t.start_ns), window_row, {}))
    return _document(events, window, first_ns)


def trace_json(con: duckdb.DuckDBPyConnection, report: Report, chosen: bool = False) -> str:
    """trace_events as compact JSON text (the file can hold hundreds of thousands of events)."""
    return json.dumps(trace_events(con, report, chosen), separators=(",", ":")) + "\n"


def _document(
    events: list[dict[str, Any]], window: PerfettoWindow | None, first_ns: int
) -> dict[str, Any]:
    about: dict[str, Any] = {"written_by": "nsysreport", "time_zero_ns": first_ns}
    if window is not None:
        about.update(
            {
                "window": window.basis,
                "window_start_ns": window.start_ns,
                "window_end_ns": window.end_ns,
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": about}


def _group(rows: list[dict[str, Any]], key: Any) -> Iterable[tuple[Any, list[dict[str, Any]]]]:
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups.items()


def _lanes(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows (sorted by start) packed onto as few lanes as keep each lane free of overlaps:
    each goes on the first lane whose last span ended by its start."""
    lanes: list[list[dict[str, Any]]] = []
    ends: list[int] = []
    for r in sorted(rows, key=lambda r: (r["start_ns"], r["end_ns"])):
        for i, end in enumerate(ends):
            if end <= r["start_ns"]:
                lanes[i].append(r)
                ends[i] = r["end_ns"]
                break
        else:
            lanes.append([r])
            ends.append(r["end_ns"])
    return lanes


def _metadata(kind: str, pid: int, tid: int | None, name: str, order: int) -> list[dict[str, Any]]:
    """The "M" events that name a process (tid None) or a thread and set its place."""
    ids: dict[str, Any] = {"pid": pid} if tid is None else {"pid": pid, "tid": tid}
    return [
        {"ph": "M", "name": f"{kind}_name", **ids, "args": {"name": name}},
        {"ph": "M", "name": f"{kind}_sort_index", **ids, "args": {"sort_index": order}},
    ]


def _complete(
    name: str, category: str, pid: int, tid: int, ts: float, row: Mapping[str, Any], args: Any
) -> dict[str, Any]:
    return {
        "ph": "X",
        "name": name,
        "cat": category,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": (row["end_ns"] - row["start_ns"]) / 1000,
        "args": args,
    }


def _activity_args(r: Mapping[str, Any]) -> dict[str, Any]:
    return {"class": r["class"], "source": r["source"], "id": r["activity_id"]}


def _span_args(r: Mapping[str, Any]) -> dict[str, Any]:
    return {"detail": r["detail"]} if r["detail"] is not None else {}
