"""What a trace file holds, as the loaders need it: its tables and the columns read of them,
and which loader reads it (nsysreport.trace_file makes it; the loaders take it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SourceSchema:
    """What a trace file holds: its tables and views and, for those we read, their columns.

    `typed`: the tables whose declared column types let the fast loader read them as they are
    (any other table, or one whose values turn out not to fit, is read value by value).
    `views`: those of `tables` that are views (no rowid: their rows are numbered as they come).
    """

    tables: frozenset[str]
    columns: dict[str, frozenset[str]]
    typed: frozenset[str] = frozenset()
    views: frozenset[str] = frozenset()
    kind: str = "sqlite"  # sqlite, kineto or parquetdir: which loader reads it
    types: dict[str, dict[str, str]] = field(default_factory=dict)  # parquetdir: DuckDB types


# What inspect_trace returns for a PyTorch profiler (Kineto) JSON trace: database.load_into reads
# it with nsysreport.kineto into the same raw tables instead of copying SQLite tables.
KINETO_SCHEMA = SourceSchema(frozenset({"<kineto traceEvents>"}), {}, kind="kineto")
