"""The data path: per GPU and stage (copies by kind, each collective op), the bandwidth achieved
against the stage's ceiling and whether it is latency- or bandwidth-bound; the narrowest stage."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nsysreport import ceilings
from nsysreport.ceilings import Ceiling, GpuHardware
from nsysreport.sections.collectives import CollectiveReport, bus_factor
from nsysreport.sections.gpu_metrics import GpuMetric
from nsysreport.units import fmt_bytes, fmt_gbps, fmt_ns, pct

# The bound rule (docs/metrics.md, "Data path"). A copy stage with PAGEABLE_SHARE_PCT of its
# bytes or more to or from pageable host memory is bound by it (the driver stages such a copy
# through a pinned buffer, and it cannot overlap the host), unless its copies are so small that
# latency would dominate them at any speed. A stage whose bytes at the ceiling would take less
# than LATENCY_UTILISATION_PCT of its time pays mostly per-call cost (latency, and, for a
# collective, the wait for the other ranks): latency-bound; for copies only when they are small
# (below). Above that, with several message sizes, a least-squares line time = alpha + bytes *
# slope over the calls gives the per-call cost alpha; when the line explains the durations (r2 >=
# FIT_MIN_R2), alpha over all calls at LATENCY_SHARE_PCT of the time or more is latency-bound too
# (the small calls cost the time, the large ones carry the bytes). Otherwise bandwidth-bound.
# Without bytes, group size or ceiling the bound is unknown.
LATENCY_SHARE_PCT = 50.0
LATENCY_UTILISATION_PCT = 25.0
FIT_MIN_CALLS = 3
FIT_MIN_R2 = 0.8
PAGEABLE_SHARE_PCT = 50.0
# A copy's fixed cost on the GPU: the shortest copies in the real exports read (4 B to 2 kB) take
# 0.8 to 1.8 us (docs/metrics.md). Latency dominates a copy of fewer bytes than this cost times the
# link's peak (the latency-bandwidth product: 128 kB on PCIe Gen5 x16 at 64 GB/s); a copy stage is
# "small" when the copy at the middle of its time (time_median_bytes) is below that; with the
# link's peak unknown, below it at the slowest host link of the GPU model table (PCIe Gen3 x16,
# 16 GB/s: 32 kB), small on any link.
COPY_LATENCY_NS = 2_000
SLOWEST_HOST_GBPS = min(m.pcie_gbps for m in ceilings.GPU_MODELS)
# Below this share of all GPUs' time exposed, no stage is named the narrowest: it is noise.
NARROWEST_MIN_PCT = 1.0
# Copies that read and write HBM (device to device) move each byte twice through it.
HBM_PASSES = {"d2d": 2, "memset": 1}


@dataclass(frozen=True, slots=True)
class DataPathRow:
    """One stage on one GPU (docs/metrics.md, "Data path"; JSON `data_path`)."""

    file: str
    pid: int
    device_id: int
    rank: int
    kind: str  # copy or collective
    stage: str  # h2d, d2h, d2d, p2p, h2h, memset, unknown, or a collective op
    count: int
    sized: int  # calls whose bytes are known
    bytes: int | None
    time_ns: int
    timed_ns: int  # time of the calls whose bytes are known
    exposed_ns: int
    sizes: int
    min_bytes: int | None
    max_bytes: int | None
    time_median_bytes: int | None  # the size at the middle of the sized calls' time
    pageable_bytes: int | None  # copies: to or from pageable host memory; None for collectives
    pinned_bytes: int | None  # copies: to or from pinned host memory
    fit_alpha_ns: float | None
    fit_ns_per_byte: float | None
    fit_r2: float | None
    group_gpus: int | None  # collectives: GPUs in the group (bus bandwidth's n)
    link: str  # the link whose ceiling applies: hbm, nvlink, pcie, network, or host
    achieved_gbps: float | None
    busbw_gbps: float | None
    peak_gbps: float | None
    peak_source: str
    utilisation_pct: float | None
    bound: str  # pageable, latency, bandwidth or unknown
    bound_reason: str

    @property
    def pageable_pct(self) -> float | None:
        """The share of a copy stage's bytes to or from pageable host memory."""
        if self.pageable_bytes is None or self.bytes is None:
            return None
        return pct(self.pageable_bytes, self.bytes)

    @property
    def mean_bytes(self) -> float | None:
        return None if self.bytes is None or not self.sized else self.bytes / self.sized

    @property
    def rate_gbps(self) -> float | None:
        """What the utilisation measures: bus bandwidth for a collective, else achieved."""
        return self.busbw_gbps if self.kind == "collective" else self.achieved_gbps

    @property
    def peak_source_short(self) -> str:
        """Where the ceiling came from, without the datasheet's words (the JSON has them)."""
        return self.peak_source.split(" (", 1)[0]

    @property
    def bound_note(self) -> str | None:
        """Why the bound is what it is, when the utilisation beside it does not say: the fit
        decided, or something is unknown."""
        return None if self.bound_reason.endswith("% of the ceiling") else self.bound_reason


@dataclass(frozen=True, slots=True)
class NarrowestStage:
    """The stage of the data path that costs the most exposed time, over all GPUs."""

    stage: str
    kind: str
    link: str
    bound: str
    exposed_ns: int
    share_pct: float  # of all GPUs' span
    gpus: int
    calls_per_gpu: float
    mean_bytes: float | None
    pageable_bytes: int | None  # copies: Σ over the GPUs; None for collectives
    pinned_bytes: int | None
    pageable_pct: float | None  # pageable_bytes as a share of the stage's bytes
    achieved_gbps: float | None  # bus bandwidth for collectives; median over the GPUs
    peak_gbps: float | None
    peak_source: str
    utilisation_pct: float | None
    # GPU metrics, when sampled: the link's counter (% of its peak) inside the stage's time
    # (exposed communication for a collective, copies for a copy), the mean over the GPUs
    sampled_link_pct: float | None
    sampled_metric: str | None  # which family: nvlink_rx, pcie_tx, dram_read, ...
    summary: str


def hardware(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int, int], GpuHardware]:
    """What gpu_hardware's stacked rows (a `file` column) tell of each GPU."""
    out = {}
    for r in rows:
        r = dict(r)
        key = (r.pop("file"), r.pop("pid"), r.pop("device_id"))
        out[key] = GpuHardware(**r)
    return out


def build_data_path(
    rows: Iterable[Mapping[str, Any]],
    rank: Mapping[tuple[str, int, int], int],
    collectives: Sequence[CollectiveReport],
    hw: Mapping[tuple[str, int, int], GpuHardware],
    user: Mapping[str, float],
    hosts: Mapping[str, int] | None = None,
) -> tuple[DataPathRow, ...]:
    """Each stage row (data_path_stage's stacked rows, a `file` column) with its ceiling,
    bandwidths, utilisation and bound. `hw` by (file, pid, device_id); `hosts`: per collective
    op, the hosts its GPUs are on (above 1: the network)."""
    groups = {(c.file, c.pid, c.device_id, c.op): c.group_gpus for c in collectives}
    out = []
    for r in rows:
        key = (r["file"], r["pid"], r["device_id"])
        r = {**r, "rank": rank[key]}
        gpu = hw.get(key) or GpuHardware(None, None, None, None, None)
        n = groups.get((*key, r["stage"])) if r["kind"] == "collective" else None
        between_hosts = r["kind"] == "collective" and (
            (hosts or {}).get(r["stage"], 1) > 1 or ceilings.spans_hosts(gpu, n)
        )
        out.append(derive(dict(r), n, _ceiling(r["kind"], r["stage"], gpu, user, between_hosts)))
    return tuple(sorted(out, key=lambda x: (x.rank, x.file, x.pid, x.device_id, -x.time_ns)))


def _ceiling(
    kind: str, stage: str, gpu: GpuHardware, user: Mapping[str, float], between_hosts: bool
) -> Ceiling:
    if kind == "collective" or stage == "p2p":
        return ceilings.gpu_to_gpu(gpu, user, between_hosts)
    if stage in ("h2d", "d2h"):
        return ceilings.host_copies(gpu, user)
    if stage in HBM_PASSES:
        c = ceilings.hbm(gpu, user)
        passes = HBM_PASSES[stage]
        if c.peak_gbps is None or passes == 1:
            return c
        return Ceiling(
            "hbm", c.peak_gbps / passes, f"{c.source}, halved: a device copy reads and writes"
        )
    return Ceiling("host", None, "unknown: no ceiling for a copy of this kind")


def derive(r: dict[str, Any], group_gpus: int | None, ceiling: Ceiling) -> DataPathRow:
    """A stage's bandwidths, utilisation and bound from its sums and its ceiling."""
    achieved = r["bytes"] / r["timed_ns"] if r["bytes"] is not None and r["timed_ns"] else None
    busbw = None
    factor = bus_factor(r["stage"], group_gpus) if r["kind"] == "collective" else None
    if achieved is not None and factor is not None:
        busbw = achieved * factor
    rate = busbw if r["kind"] == "collective" else achieved
    util = pct(rate, ceiling.peak_gbps) if rate is not None and ceiling.peak_gbps else None
    bound, reason = _bound(r, rate, util, ceiling.peak_gbps)
    return DataPathRow(
        **r,
        group_gpus=group_gpus,
        link=ceiling.link,
        achieved_gbps=achieved,
        busbw_gbps=busbw,
        peak_gbps=ceiling.peak_gbps,
        peak_source=ceiling.source,
        utilisation_pct=util,
        bound=bound,
        bound_reason=reason,
    )


def _bound(
    r: Mapping[str, Any], rate: float | None, util: float | None, peak: float | None
) -> tuple[str, str]:
    if r["bytes"] is None:
        return "unknown", "message sizes unknown"
    copy = r["kind"] == "copy"
    small = copy and _latency_sized(r, peak)
    share = pct(r["pageable_bytes"], r["bytes"]) if copy and r["pageable_bytes"] else None
    if share is not None and share >= PAGEABLE_SHARE_PCT and not small:
        return "pageable", f"{share:.0f}% of the bytes in pageable host memory"
    if rate is None:
        return "unknown", "group size unknown"
    if util is None:
        return "unknown", "ceiling unknown"
    if util > 100:
        # Faster than the link can go: the ceiling is too low, or the durations too short.
        return "bandwidth", f"{util:.0f}% of the ceiling: above it, so the ceiling is too low"
    if util < LATENCY_UTILISATION_PCT and (small or not copy):
        return "latency", f"{util:.1f}% of the ceiling"
    fitted = _fitted_latency_share(r) if small or not copy else None
    if fitted is not None:
        bound = "latency" if fitted >= LATENCY_SHARE_PCT else "bandwidth"
        alpha = fmt_ns(r["fit_alpha_ns"])
        return bound, f"fit over {r['sizes']} sizes: {alpha} per call, {fitted:.0f}% of time"
    if util < LATENCY_UTILISATION_PCT:
        # Slow, but too large for latency to explain: the link or the host is slower than the
        # ceiling (a narrower PCIe slot, a shared link, a busy host).
        return "bandwidth", (
            f"{util:.1f}% of the ceiling with copies of {fmt_bytes(r['time_median_bytes'])}: "
            "too large for latency"
        )
    return "bandwidth", f"{util:.1f}% of the ceiling"


def latency_bytes(peak_gbps: float) -> float:
    """The copy size below which a copy's fixed cost outlasts its bytes at the link's peak."""
    return COPY_LATENCY_NS * peak_gbps  # ns x bytes per ns


def _latency_sized(r: Mapping[str, Any], peak: float | None) -> bool:
    """A copy stage whose copy at the middle of its time is below the latency-bandwidth
    product of its link (of the slowest host link when its peak is unknown)."""
    size = r["time_median_bytes"]
    return size is not None and size < latency_bytes(peak or SLOWEST_HOST_GBPS)


def dominant_bound(rows: Sequence[DataPathRow]) -> str | None:
    """The bound that holds the most of these rows' time (one stage over its GPUs)."""
    by_time: dict[str, int] = {}
    for r in rows:
        by_time[r.bound] = by_time.get(r.bound, 0) + r.time_ns
    return max(by_time, key=lambda b: (by_time[b], b)) if by_time else None


def _fitted_latency_share(r: Mapping[str, Any]) -> float | None:
    """The per-call cost's share of the stage's time by the least-squares line, when it holds
    (several sizes, FIT_MIN_CALLS calls, r2 >= FIT_MIN_R2, a cost and a slope >= 0)."""
    alpha, slope, r2 = r["fit_alpha_ns"], r["fit_ns_per_byte"], r["fit_r2"]
    if (
        r["sizes"] < 2
        or r["sized"] < FIT_MIN_CALLS
        or alpha is None
        or slope is None
        or r2 is None
        or alpha < 0
        or slope <= 0
        or r2 < FIT_MIN_R2
        or not r["timed_ns"]
    ):
        return None
    return float(100.0 * alpha * r["sized"] / r["timed_ns"])


def narrowest(
    rows: Sequence[DataPathRow], span_ns: int, metrics: Sequence[GpuMetric] = ()
) -> NarrowestStage | None:
    """The stage with the most exposed time over all GPUs (None when it is under
    NARROWEST_MIN_PCT of their span), with what the GPU metrics sampled on its link."""
    totals: dict[tuple[str, str], int] = {}
    for r in rows:
        totals[(r.kind, r.stage)] = totals.get((r.kind, r.stage), 0) + r.exposed_ns
    if not totals:
        return None
    kind, stage = max(totals, key=lambda k: (totals[k], k))
    if (pct(totals[(kind, stage)], span_ns) or 0.0) < NARROWEST_MIN_PCT:
        return None
    mine = [r for r in rows if (r.kind, r.stage) == (kind, stage)]
    bound = dominant_bound(mine) or "unknown"
    known = [r.rate_gbps for r in mine if r.rate_gbps is not None]
    peaks = [r.peak_gbps for r in mine if r.peak_gbps is not None]
    sized = sum(r.sized for r in mine)
    mean_bytes = sum(r.bytes or 0 for r in mine) / sized if sized else None
    achieved = statistics.median(known) if known else None
    peak = statistics.median(peaks) if peaks else None
    first = next((r for r in mine if r.peak_gbps is not None), mine[0])
    util = pct(achieved, peak) if achieved is not None and peak else None
    share = pct(totals[(kind, stage)], span_ns) or 0.0
    family, sampled = _sampled(first.link, kind, mine, metrics)
    pageable = _total(r.pageable_bytes for r in mine)
    found = NarrowestStage(
        stage=stage,
        kind=kind,
        link=first.link,
        bound=bound,
        exposed_ns=totals[(kind, stage)],
        share_pct=share,
        gpus=len(mine),
        calls_per_gpu=statistics.fmean(r.count for r in mine),
        mean_bytes=mean_bytes,
        pageable_bytes=pageable,
        pinned_bytes=_total(r.pinned_bytes for r in mine),
        pageable_pct=None if pageable is None else pct(pageable, sum(r.bytes or 0 for r in mine)),
        achieved_gbps=achieved,
        peak_gbps=peak,
        peak_source=first.peak_source,
        utilisation_pct=util,
        sampled_link_pct=sampled,
        sampled_metric=family,
        summary="",
    )
    return replace(found, summary=_sentence(found))


def _total(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# The GPU-metric families that measure each link, busiest direction first chosen by value.
_LINK_FAMILIES = {
    "nvlink": ("nvlink_rx", "nvlink_tx"),
    "pcie": ("pcie_rx", "pcie_tx"),
    "hbm": ("dram_read", "dram_write"),
}


def _sampled(
    link: str, kind: str, rows: Sequence[DataPathRow], metrics: Sequence[GpuMetric]
) -> tuple[str | None, float | None]:
    """The busier direction of the link's sampled counter inside the stage's time (exposed
    comm for collectives, copies for copies), the mean over the stage's GPUs."""
    gpus = {(r.file, r.pid, r.device_id) for r in rows}
    best: tuple[str | None, float | None] = (None, None)
    for family in _LINK_FAMILIES.get(link, ()):
        values = [
            m.during_exposed_comm if kind == "collective" else m.during_copies
            for m in metrics
            if m.family == family and (m.file, m.pid, m.device_id) in gpus
        ]
        known = [v for v in values if v is not None]
        if known and (best[1] is None or statistics.fmean(known) > best[1]):
            best = (family, statistics.fmean(known))
    return best


_LINK_NAMES = {"nvlink": "NVLink", "pcie": "PCIe", "hbm": "HBM", "network": "the network",
               "host": "host memory"}  # fmt: skip
_MOVES = {
    ("collective", "latency"): (
        "A faster link would not help: the time is per-call cost (latency, and waiting for "
        "the other ranks), not bytes; fewer or fused collectives, a lower TP degree or overlap "
        "with compute would."
    ),
    ("collective", "bandwidth"): (
        "A faster link, fewer bytes (lower precision, compression) or overlap with compute "
        "would move it."
    ),
    ("copy", "latency"): (
        "Batching the small copies into fewer large ones, or overlapping them with compute "
        "on another stream, would move it."
    ),
    ("copy", "bandwidth"): (
        "Pinned host memory, fewer bytes, or copies overlapped with compute on another "
        "stream would move it."
    ),
    ("copy", "pageable"): (
        "Pinned host memory would move it: a pageable copy is staged through a driver buffer "
        "and holds the host (PyTorch: pin_memory=True, tensor.pin_memory(), a pinned buffer "
        "copied with non_blocking=True; CUDA: cudaMallocHost, cudaHostRegister)."
    ),
}
# A bandwidth-bound copy stage that reads or writes no pageable memory is already pinned.
_PINNED_BANDWIDTH = (
    "Fewer bytes, or copies overlapped with compute on another stream, would move it."
)
_HOST_SIDE = {"h2d": "from", "d2h": "to"}


COPY_NAMES = {"h2d": "host-to-device copies", "d2h": "device-to-host copies",
               "d2d": "device-to-device copies", "p2p": "peer-to-peer copies",
               "h2h": "host-to-host copies", "memset": "memsets"}  # fmt: skip


def _sentence(s: NarrowestStage) -> str:
    if s.kind == "collective":
        what = f"{s.stage} is"
    else:
        what = f"{COPY_NAMES.get(s.stage, s.stage + ' copies').capitalize()} are"
    bound = {"unknown": "", "pageable": ", bound by pageable host memory"}.get(
        s.bound, f", {s.bound}-bound"
    )
    calls = f"{s.calls_per_gpu:.0f} call{'' if round(s.calls_per_gpu) == 1 else 's'}"
    size = "" if s.mean_bytes is None else f" of {fmt_bytes(s.mean_bytes)}"
    link = _LINK_NAMES.get(s.link, s.link)
    rate = " bus bandwidth" if s.kind == "collective" else ""
    source = s.peak_source.split(" (", 1)[0]  # the datasheet is in the JSON and the table's tip
    if s.mean_bytes is None:
        speed = "; their bandwidth is unknown (message sizes unknown: give --comm-bytes OP=BYTES)"
    elif s.achieved_gbps is None:
        speed = "; their bus bandwidth is unknown (the group's size is unknown)"
    elif s.peak_gbps is None:
        speed = (
            f" at {fmt_gbps(s.achieved_gbps)}{rate}; the {link} ceiling is unknown "
            f"(give --link-peak {s.link}=GBPS)"
        )
    else:
        speed = (
            f" at {fmt_gbps(s.achieved_gbps)}{rate} against {fmt_gbps(s.peak_gbps)} of "
            f"{link} ({source}), {s.utilisation_pct:.1f}% of it"
        )
    move = _MOVES.get((s.kind, s.bound), "")
    if (s.kind, s.bound) == ("copy", "bandwidth") and not s.pageable_bytes and s.pinned_bytes:
        move = _PINNED_BANDWIDTH
    speed += _host_memory(s)
    if s.sampled_link_pct is not None and s.sampled_metric is not None:
        during = "exposed communication" if s.kind == "collective" else "the copies"
        name = (
            s.sampled_metric.replace("_", " ")
            .replace("nvlink", "NVLink")
            .replace("pcie", "PCIe")
            .replace("dram", "DRAM")
            .replace(" rx", " RX")
            .replace(" tx", " TX")
        )
        move = f"GPU metrics: {name} at {s.sampled_link_pct:.0f}% of peak during {during}. {move}"
    return (
        f"{what} the narrowest stage of the data path{bound}: {calls}{size} per GPU{speed}; "
        f"they leave {fmt_ns(s.exposed_ns)} exposed ({s.share_pct:.1f}% of all GPUs' time). "
        f"{move}"
    ).strip()


def _host_memory(s: NarrowestStage) -> str:
    """`; per GPU 804 MB (98%) to pageable host memory, 16 MB pinned` for a copy stage with a
    host side (the larger kind first); empty otherwise."""
    pageable, pinned = (s.pageable_bytes or 0) / s.gpus, (s.pinned_bytes or 0) / s.gpus
    side = _HOST_SIDE.get(s.stage, "to or from")
    if pageable and (s.bound == "pageable" or pageable >= pinned):
        of = "" if s.pageable_pct is None else f" ({s.pageable_pct:.0f}%)"
        rest = f", {fmt_bytes(pinned)} pinned" if pinned else ""
        return f"; per GPU {fmt_bytes(pageable)}{of} {side} pageable host memory{rest}"
    if pinned:
        rest = f", {fmt_bytes(pageable)} pageable" if pageable else ""
        return f"; per GPU {fmt_bytes(pinned)} {side} pinned host memory{rest}"
    return ""


def bound_rule() -> str:
    """The bound rule in words, printed beside the table (docs/metrics.md has the same)."""
    return (
        f"Bound: a copy stage with {PAGEABLE_SHARE_PCT:.0f}% or more of its bytes to or from "
        "pageable host memory is bound by it (pageable), unless its copies are small (below). "
        "Latency-bound when the stage's bytes at the ceiling would take less than "
        f"{LATENCY_UTILISATION_PCT:.0f}% of its time (utilisation below "
        f"{LATENCY_UTILISATION_PCT:.0f}%: per-call cost, and for a collective the wait for the "
        "other ranks, takes the time); for copies only when they are small: the copy at the "
        f"middle of the stage's time would take under {COPY_LATENCY_NS / 1000:.0f} µs at the "
        "link's peak (128 kB at 64 GB/s), else bandwidth-bound. Above that, with "
        f"{FIT_MIN_CALLS} or more calls of several sizes (small ones, for copies), a "
        "least-squares line time = a + bytes / b gives the per-call cost a; "
        f"when it explains the durations (r² ≥ {FIT_MIN_R2}) and a over all the calls is "
        f"{LATENCY_SHARE_PCT:.0f}% of the time or more, latency-bound too. Otherwise "
        "bandwidth-bound; unknown without bytes, group size or ceiling. Collectives are "
        "measured by bus bandwidth (NCCL's convention: all-reduce x 2(n-1)/n; all-gather, "
        "reduce-scatter and all-to-all x (n-1)/n; n the GPUs in the group); a "
        "device-to-device copy's ceiling is half the HBM peak, as it reads and writes every "
        "byte."
    )
