"""Layers: per-GPU and across-GPU communication exposure per layer (layer_summary query)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

OUTSIDE = "(outside layers)"


@dataclass(frozen=True, slots=True)
class LayerReport:
    """One layer on one GPU."""

    file: str
    pid: int
    device_id: int
    rank: int
    layer: str
    layer_index: int | None
    occurrences: int
    kernel_count: int
    compute_ns: int
    gemm_ns: int
    comm_ns: int
    exposed_comm_ns: int
    exposed_memcpy_ns: int
    gpu_time_ns: int | None
    exposed_rank: int


@dataclass(frozen=True, slots=True)
class LayerAcrossGpus:
    """One layer over all GPUs: the mean per GPU, and the GPU where it is worst."""

    layer: str
    layer_index: int | None
    gpus: int
    occurrences: int
    compute_mean_ns: float
    comm_mean_ns: float
    exposed_comm_mean_ns: float
    exposed_comm_max_ns: int
    worst_rank: int
    gpu_time_mean_ns: float | None
    exposed_memcpy_mean_ns: float


def build_layers(
    rows: Iterable[dict[str, Any]], rank: Mapping[tuple[str, int, int], int]
) -> tuple[tuple[LayerReport, ...], tuple[LayerAcrossGpus, ...]]:
    """Each layer of each GPU, from layer_summary's stacked rows (a `file` column). A file none
    of whose ranges matched the layer pattern says nothing per layer: its rows are left out."""
    layers = [LayerReport(rank=rank[(r["file"], r["pid"], r["device_id"])], **r) for r in rows]
    with_layers = {x.file for x in layers if x.layer != OUTSIDE}
    kept = [x for x in layers if x.file in with_layers]
    kept.sort(key=lambda x: (x.rank, x.file, x.pid, x.device_id, x.exposed_rank))
    return tuple(kept), tuple(across_gpus(tuple(kept)))


def across_gpus(layers: tuple[LayerReport, ...]) -> list[LayerAcrossGpus]:
    by_name: dict[str, list[LayerReport]] = {}
    for layer in layers:
        by_name.setdefault(layer.layer, []).append(layer)
    out = []
    for name, group in by_name.items():
        worst = max(group, key=lambda g: (g.exposed_comm_ns, -g.rank))
        times = [g.gpu_time_ns for g in group if g.gpu_time_ns is not None]
        out.append(
            LayerAcrossGpus(
                layer=name,
                layer_index=group[0].layer_index,
                gpus=len(group),
                occurrences=max(g.occurrences for g in group),
                compute_mean_ns=statistics.fmean(g.compute_ns for g in group),
                comm_mean_ns=statistics.fmean(g.comm_ns for g in group),
                exposed_comm_mean_ns=statistics.fmean(g.exposed_comm_ns for g in group),
                exposed_comm_max_ns=worst.exposed_comm_ns,
                worst_rank=worst.rank,
                gpu_time_mean_ns=statistics.fmean(times) if times else None,
                exposed_memcpy_mean_ns=statistics.fmean(g.exposed_memcpy_ns for g in group),
            )
        )
    # Most exposed communication first; (outside layers) last among equals.
    out.sort(
        key=lambda x: (-x.exposed_comm_mean_ns, x.layer == OUTSIDE, x.layer_index or 0, x.layer)
    )
    return out
