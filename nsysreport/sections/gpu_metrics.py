"""GPU metrics: sampled DRAM, NVLink, PCIe and SM activity per GPU, over the capture and inside
its exposed communication and its copies (queries/report/gpu_metric_summary.sql)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The families in the order the report shows them, with their column headings
# (queries/views/gpu_metric_series.sql maps nsys's counter names to them).
FAMILIES: dict[str, str] = {
    "sm_active": "SM active",
    "dram_read": "DRAM read",
    "dram_write": "DRAM write",
    "nvlink_rx": "NVLink RX",
    "nvlink_tx": "NVLink TX",
    "pcie_rx": "PCIe RX",
    "pcie_tx": "PCIe TX",
}


@dataclass(frozen=True, slots=True)
class GpuMetric:
    """One metric family of one GPU: time-weighted means of its sampled counters."""

    file: str
    pid: int
    device_id: int
    rank: int
    family: str
    unit: str
    overall: float | None
    during_exposed_comm: float | None  # None: no exposed comm time covered by samples
    during_copies: float | None  # None: no copy time covered by samples
    exposed_comm_ns: int
    copies_ns: int
    samples: int
    metrics: str  # the raw counter names summed into the family, "; " between


@dataclass(frozen=True, slots=True)
class IgnoredGpuMetric:
    """A sampled counter the report does not show, and why."""

    file: str
    metric_name: str
    reason: str
    devices: int


@dataclass(frozen=True, slots=True)
class GpuMetricTable:
    """One GPU's families, for the section's table (the template does no lookups)."""

    file: str
    pid: int
    device_id: int
    rank: int
    columns: tuple[str, ...]  # family headings, in FAMILIES order
    rows: tuple[tuple[str, tuple[float | None, ...]], ...]  # (row label, value per column)
    covered: tuple[int, int]  # exposed comm and copy time covered by samples, ns


def build_gpu_metrics(
    summary: Iterable[dict[str, Any]],
    ignored: Iterable[dict[str, Any]],
    rank: Mapping[tuple[str, int, int], int],
) -> tuple[tuple[GpuMetric, ...], tuple[IgnoredGpuMetric, ...]]:
    """The families of every GPU (gpu_metric_summary's stacked rows, a `file` column), and the
    counters left out (gpu_metric_ignored's)."""
    rows = [GpuMetric(rank=rank[(r["file"], r["pid"], r["device_id"])], **r) for r in summary]
    return tuple(sorted(rows, key=metric_order)), tuple(IgnoredGpuMetric(**r) for r in ignored)


def metric_order(m: GpuMetric) -> tuple[int, str, int, int, int]:
    order = list(FAMILIES)
    return (m.rank, m.file, m.pid, m.device_id, order.index(m.family))


def tables(metrics: Sequence[GpuMetric]) -> tuple[GpuMetricTable, ...]:
    """A table per GPU: the families it has as columns; overall, during exposed comm and
    during copies as rows."""
    by_gpu: dict[tuple[int, str, int, int], list[GpuMetric]] = {}
    for m in sorted(metrics, key=metric_order):
        by_gpu.setdefault((m.rank, m.file, m.pid, m.device_id), []).append(m)
    out = []
    for (rank, file, pid, device_id), ms in by_gpu.items():
        out.append(
            GpuMetricTable(
                file=file,
                pid=pid,
                device_id=device_id,
                rank=rank,
                columns=tuple(FAMILIES[m.family] for m in ms),
                rows=(
                    ("overall", tuple(m.overall for m in ms)),
                    ("during exposed comm", tuple(m.during_exposed_comm for m in ms)),
                    ("during copies", tuple(m.during_copies for m in ms)),
                ),
                covered=(max(m.exposed_comm_ns for m in ms), max(m.copies_ns for m in ms)),
            )
        )
    return tuple(out)


def summary_line(metrics: Sequence[GpuMetric]) -> str | None:
    """The terminal's line: per family, the range over GPUs of the overall mean and of the mean
    during exposed comm; None without samples."""
    if not metrics:
        return None
    parts = []
    for family, heading in FAMILIES.items():
        ms = [m for m in metrics if m.family == family]
        if not ms:
            continue
        text = f"{heading} {_span([m.overall for m in ms])}"
        during = [m.during_exposed_comm for m in ms if m.during_exposed_comm is not None]
        if during:
            text += f" ({_span(during)} in exposed comm)"
        parts.append(text)
    return "GPU metrics: " + ", ".join(parts)


def _span(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    lo, hi = min(known), max(known)
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"
