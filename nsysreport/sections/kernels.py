"""Top kernels by class over all GPUs (kernel_top query)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True, slots=True)
class KernelSummary:
    kernel_class: str
    name: str
    name_rank: int
    instances: int
    gpus: int
    total_ns: int
    mean_ns: float
    max_ns: int
    pct_of_class: float | None


def build_kernels(con: duckdb.DuckDBPyConnection, top: int) -> tuple[KernelSummary, ...]:
    return tuple(
        KernelSummary(kernel_class=r.pop("class"), **r)
        for r in run_query(con, "kernel_top", {"top": top}).to_dicts()
    )
