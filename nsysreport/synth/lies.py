"""Captures that lie a little: scenarios turned into what real captures sometimes record.

- `late_starting_rank`: one rank starts (tracing, or running) seconds after the others. Each
  other rank ran up to its first collective that much earlier, and that collective's kernel
  spins on its GPU until the late rank arrives: it starts early and ends with everyone's.
- `overlapping_successors`: kernels whose end runs past the start of the next kernel on
  their stream, either as programmatic dependent launch (PDL) does (the successor starts
  early and ends after them) or as no GPU can (they end at or after their successor's end).

docs/metrics.md says what the report makes of each ("Ranks that start apart", "Kernels that
overlap on one stream").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from nsysreport.synth.trace import ApiCall, Kernel, Memcpy, Memset, NvtxRange, Scenario

_Copy = TypeVar("_Copy", Memcpy, Memset)

COMM_MARKERS = ("nccl", "rccl")
MARGIN_NS = 1_000_000  # where a scenario moved before 0 starts instead


def is_comm(k: Kernel) -> bool:
    """A communication kernel, by the marker its name carries (as the report's classes do)."""
    return any(m in k.name.lower() for m in COMM_MARKERS)


def late_starting_rank(scenario: Scenario, late_pid: int, delay_ns: int) -> Scenario:
    """`scenario` with every rank but `late_pid` `delay_ns` early up to its first collective.

    On each other GPU process, every kernel, copy, memset, API call and NVTX range that starts
    before its first communication kernel starts (that kernel's start included) moves
    `delay_ns` earlier; that kernel keeps its end, so it spins `delay_ns` longer, waiting for
    the late rank. The late rank's rows are as they were: its capture starts later.
    """
    kernels = list(scenario.kernels)
    first: dict[int, int] = {}
    for k in kernels:
        if is_comm(k) and k.pid != late_pid:
            first[k.pid] = min(first.get(k.pid, k.start), k.start)

    def early(pid: int | None, t: int) -> bool:
        return pid is not None and pid in first and t <= first[pid]

    def moved_kernel(k: Kernel) -> Kernel:
        if not early(k.pid, k.start):
            return k
        launch = None if k.launch is None else (k.launch[0] - delay_ns, k.launch[1] - delay_ns)
        spins = is_comm(k) and k.start == first[k.pid]
        end = k.end if spins else k.end - delay_ns
        return replace(k, start=k.start - delay_ns, end=end, launch=launch)

    def moved_range(r: NvtxRange) -> NvtxRange:
        if not early(r.pid, r.start):
            return r
        if r.end is not None and early(r.pid, r.end):
            return replace(r, start=r.start - delay_ns, end=r.end - delay_ns)
        return replace(r, start=r.start - delay_ns)  # open across the wait: it ends as it did

    def moved(op: _Copy) -> _Copy:
        if not early(op.pid, op.start):
            return op
        launch = None if op.launch is None else (op.launch[0] - delay_ns, op.launch[1] - delay_ns)
        return replace(op, start=op.start - delay_ns, end=op.end - delay_ns, launch=launch)

    def moved_call(a: ApiCall) -> ApiCall:
        if not early(a.pid, a.start):
            return a
        return replace(a, start=a.start - delay_ns, end=a.end - delay_ns)

    out = replace(
        scenario,
        kernels=[moved_kernel(k) for k in kernels],
        memcpys=[moved(m) for m in scenario.memcpys],
        memsets=[moved(m) for m in scenario.memsets],
        api_calls=[moved_call(a) for a in scenario.api_calls],
        nvtx=[moved_range(r) for r in scenario.nvtx],
    )
    # A scenario that starts less than `delay_ns` after 0 would now start before it: every
    # row moves later instead, the earliest to 1 ms (no time, default launches included, is
    # negative).
    ops: list[Kernel | Memcpy | Memset] = [*out.kernels, *out.memcpys, *out.memsets]
    starts = [x.start for x in ops] + [x.launch[0] for x in ops if x.launch is not None]
    starts += [a.start for a in out.api_calls] + [r.start for r in out.nvtx]
    earliest = min(starts, default=0)
    return shifted(out, MARGIN_NS - earliest) if earliest < MARGIN_NS else out


def shifted(scenario: Scenario, delta: int) -> Scenario:
    """Every kernel, copy, memset, API call and NVTX range of `scenario` `delta` ns later."""

    def launch(x: tuple[int, int] | None) -> tuple[int, int] | None:
        return None if x is None else (x[0] + delta, x[1] + delta)

    return replace(
        scenario,
        kernels=[
            replace(k, start=k.start + delta, end=k.end + delta, launch=launch(k.launch))
            for k in scenario.kernels
        ],
        memcpys=[
            replace(m, start=m.start + delta, end=m.end + delta, launch=launch(m.launch))
            for m in scenario.memcpys
        ],
        memsets=[
            replace(m, start=m.start + delta, end=m.end + delta, launch=launch(m.launch))
            for m in scenario.memsets
        ],
        api_calls=[
            replace(a, start=a.start + delta, end=a.end + delta) for a in scenario.api_calls
        ],
        nvtx=[
            replace(r, start=r.start + delta, end=None if r.end is None else r.end + delta)
            for r in scenario.nvtx
        ],
    )


def overlapping_successors(
    scenario: Scenario, pdl_every: int = 0, impossible_every: int = 0, overlap_ns: int = 1_000
) -> Scenario:
    """`scenario` with some kernels' ends past their successor's start on their stream.

    On each stream (process, device, stream), in start order, every `pdl_every`-th kernel
    with a successor ends `overlap_ns` after that successor starts (at most halfway into it:
    a PDL overlap, the successor still ending last), and every `impossible_every`-th one
    `overlap_ns` after that successor ends (a duration that cannot be); 0 stretches none. A
    kernel that both would stretch is impossible. Communication kernels are left as they are.
    """
    lanes: dict[tuple[int, int, int], list[Kernel]] = {}
    for k in scenario.kernels:
        lanes.setdefault((k.pid, k.device, k.stream), []).append(k)
    out: list[Kernel] = []
    for lane in lanes.values():
        lane.sort(key=lambda k: (k.start, k.end))
        for i, k in enumerate(lane):
            nxt = lane[i + 1] if i + 1 < len(lane) else None
            n = i + 1
            if nxt is None or is_comm(k) or nxt.end <= nxt.start:
                out.append(k)
            elif impossible_every and n % impossible_every == 0:
                out.append(replace(k, end=nxt.end + overlap_ns))
            elif pdl_every and n % pdl_every == 0:
                into = min(overlap_ns, (nxt.end - nxt.start) // 2)
                out.append(replace(k, end=max(k.end, nxt.start + into)))
            else:
                out.append(k)
    return replace(scenario, kernels=out)
