"""How the host fed each GPU stream: kernels launched eagerly or from CUDA graphs, launch
latency and queue depth (queries/report/launch_summary.sql), and the sentence that explains a
host-bound step with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nsysreport.sections.idle_gaps import IdleGaps
from nsysreport.units import fmt_ns, fmt_pct, pct

# Below this mean queue depth the host launched just in time: any delay on it idled the GPU.
JUST_IN_TIME_QUEUE = 1.0


@dataclass(frozen=True, slots=True)
class LaunchStream:
    file: str
    pid: int
    device_id: int
    rank: int
    stream_id: int
    kernels: int
    graph_kernels: int  # replayed from CUDA graphs
    graph_launches: int  # CUDA graph launches traced whole (kernels not counted)
    launched: int  # eager kernels whose launching call is in the trace
    latency_p50_ns: float | None  # launching call's end to kernel start
    latency_p90_ns: float | None
    latency_p99_ns: float | None
    queue_mean: float | None  # kernels launched, not yet ended, at each eager launch
    queue_max: int | None

    @property
    def eager_pct(self) -> float | None:
        """Kernels launched eagerly, % of the stream's kernels."""
        return pct(self.kernels - self.graph_kernels, self.kernels)


def build_launches(
    rows: Iterable[dict[str, Any]], rank: Mapping[tuple[str, int, int], int]
) -> tuple[LaunchStream, ...]:
    out = [
        LaunchStream(rank=rank[(r["file"], r["pid"], r["device_id"])], **r)
        for r in rows
        if (r["file"], r["pid"], r["device_id"]) in rank
    ]
    return tuple(sorted(out, key=lambda x: (x.rank, x.file, x.pid, x.device_id, x.stream_id)))


def launch_sentence(
    streams: Sequence[LaunchStream], idle_gaps: IdleGaps | None = None
) -> str | None:
    """The busiest stream's launches in a sentence (None without kernels). With idle time
    concentrated in long gaps (`idle_gaps`), it says that the queue is measured at launches,
    within the bursts of launches between those gaps, whatever the queue's depth."""
    busy = [s for s in streams if s.kernels]
    if not busy:
        return None
    s = max(busy, key=lambda s: (s.kernels, -s.rank, -s.stream_id))
    kernels = sum(x.kernels for x in streams)
    graphs = sum(x.graph_kernels for x in streams)
    text = f"Kernels launched eagerly: {fmt_pct(pct(kernels - graphs, kernels))}"
    if graphs:
        text += f" ({fmt_pct(pct(graphs, kernels))} replayed from CUDA graphs)"
    if any(x.graph_launches for x in streams):
        text += f"; {sum(x.graph_launches for x in streams)} CUDA graph launches traced whole"
    if s.latency_p50_ns is None or s.queue_mean is None:
        return text + "."
    text += (
        f". On the busiest stream (rank {s.rank}, stream {s.stream_id}) a kernel started "
        f"{fmt_ns(s.latency_p50_ns)} after its launch returned (median; p99 "
        f"{fmt_ns(s.latency_p99_ns)}), with {s.queue_mean:.1f} kernels queued ahead of it on "
        "average"
    )
    if idle_gaps is not None and idle_gaps.summary is not None:
        n = idle_gaps.gaps
        text += (
            " (at its launch: a depth within the bursts of launches, which says nothing of the "
            f"{n} long idle gap{'' if n == 1 else 's'} between them)"
        )
    if s.queue_mean < JUST_IN_TIME_QUEUE:
        text += ": the host launched just in time, so any delay on the host idled the GPU"
    return text + "."
