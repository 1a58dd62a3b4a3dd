"""Each kernel name's instances and time per layer over all GPUs (kernel_layer_total query):
what compare's kernel diff and gate's kernel budgets read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nsysreport.sections.layers import OUTSIDE


@dataclass(frozen=True, slots=True)
class KernelLayerTotal:
    """One kernel name (or copy kind) in one layer, summed over every GPU of the report."""

    kernel_class: str
    name: str
    layer: str  # the layer label, or (outside layers)
    layer_index: int | None
    gpus: int  # on how many GPUs it ran in that layer
    instances: int
    total_ns: int  # sum of durations over those GPUs


def build_kernel_layers(rows: Iterable[dict[str, Any]]) -> tuple[KernelLayerTotal, ...]:
    """kernel_layer_total's stacked rows (a `file` column) summed over GPUs, in layer order
    (natural order of the label's number, then the label; outside layers last), then class and
    name."""
    sums: dict[tuple[str, str, str], list[Any]] = {}
    for r in rows:
        entry = sums.setdefault((r["class"], r["name"], r["layer"]), [r["layer_index"], 0, 0, 0])
        entry[1] += 1
        entry[2] += r["instances"]
        entry[3] += r["total_ns"]
    rows_out = [
        KernelLayerTotal(kernel_class, name, layer, index, gpus, instances, total)
        for (kernel_class, name, layer), (index, gpus, instances, total) in sums.items()
    ]
    rows_out.sort(key=layer_order)
    return tuple(rows_out)


def layer_order(x: KernelLayerTotal) -> tuple[bool, int, str, str, str]:
    """Layers in natural order, (outside layers) last; then class and name."""
    index = -1 if x.layer_index is None else x.layer_index
    return (x.layer == OUTSIDE, index, x.layer, x.kernel_class, x.name)
