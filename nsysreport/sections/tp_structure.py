"""The tensor-parallel structure: per GPU and collective op, its calls per layer occurrence
(Megatron-style TP: 2 all-reduces per layer) and the bytes each call moves, beside the bytes the
model's shape (--model) predicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nsysreport.sections.collectives import CollectiveReport, bus_factor
from nsysreport.sections.layers import LayerReport
from nsysreport.user_facts import ModelShape


@dataclass(frozen=True, slots=True)
class TpStructure:
    """One collective op's calls inside layers on one GPU, and the model's expected bytes."""

    file: str
    pid: int
    device_id: int
    rank: int
    op: str
    in_layers: int
    layer_occurrences: int
    per_layer: float  # calls per layer occurrence (Megatron-style TP: 2 all-reduces)
    group_gpus: int | None
    mean_message_bytes: float | None
    bus_bytes: float | None  # measured: the bytes each GPU moves per call (NCCL's factor)
    expected_message_bytes: int | None  # from --model: tokens x hidden x sizeof(dtype)
    expected_bus_bytes: float | None  # 2(TP-1)/TP of it, TP the group size


def build_tp_structure(
    rows: Iterable[Mapping[str, Any]],
    rank: Mapping[tuple[str, int, int], int],
    collectives: Sequence[CollectiveReport],
    layers: Sequence[LayerReport],
    model: ModelShape | None,
) -> tuple[TpStructure, ...]:
    """Calls per layer occurrence (layer_summary's occurrences, all layers of the GPU) and
    bytes against --model's, per GPU and op; `rows`: layer_collective's stacked rows (a `file`
    column)."""
    groups = {(c.file, c.pid, c.device_id, c.op): c.group_gpus for c in collectives}
    occurrences: dict[tuple[str, int, int], int] = {}
    for x in layers:
        key = (x.file, x.pid, x.device_id)
        occurrences[key] = occurrences.get(key, 0) + x.occurrences
    out = []
    for r in rows:
        runs = occurrences.get((r["file"], r["pid"], r["device_id"]), 0)
        if not runs:
            continue  # calls inside layer ranges whose layers ran no GPU work: no layer runs
        n = groups.get((r["file"], r["pid"], r["device_id"], r["op"]))
        mean = r["mean_bytes"]
        factor = bus_factor(r["op"], n)
        expected = model.message_bytes if model is not None and r["op"] == "AllReduce" else None
        out.append(
            TpStructure(
                file=r["file"],
                pid=r["pid"],
                device_id=r["device_id"],
                rank=rank[(r["file"], r["pid"], r["device_id"])],
                op=r["op"],
                in_layers=r["in_layers"],
                layer_occurrences=runs,
                per_layer=r["in_layers"] / runs,
                group_gpus=n,
                mean_message_bytes=mean,
                bus_bytes=None if mean is None or factor is None else mean * factor,
                expected_message_bytes=expected,
                expected_bus_bytes=None
                if expected is None or factor is None
                else expected * factor,
            )
        )
    return tuple(sorted(out, key=lambda t: (t.rank, t.file, t.pid, t.device_id, t.op)))
