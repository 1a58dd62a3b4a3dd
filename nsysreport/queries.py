"""Find, document, check and run the SQL files in queries/ (the analysis lives there, not here)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.errors import OptionError
from nsysreport.patterns import Patterns

if TYPE_CHECKING:
    import duckdb
    import polars as pl

PACKAGE_DIR = Path(__file__).resolve().parent
HEADER_LINE = re.compile(r"^--\s?(.*)$")
SUMMARY = re.compile(r"^(\w+):\s*(.+)$")
# A documented parameter or column: `$name TYPE default meaning` or `name TYPE meaning`.
PARAM_DOC = re.compile(r"^\s+\$(\w+)\s+(\w+(?:\[\])?)\s+(\S+)\s+(.+)$")
COLUMN_DOC = re.compile(r"^\s+(\w+)\s+(\w+(?:\[\])?)\s+(.+)$")
PARAM_TYPES: dict[str, type] = {"BIGINT": int, "INTEGER": int, "DOUBLE": float, "VARCHAR": str}


def resource_dir(name: str) -> Path:
    """`queries/` or `templates/`: inside the installed package, else beside it in a checkout."""
    packaged = PACKAGE_DIR / name
    return packaged if packaged.is_dir() else PACKAGE_DIR.parent / name


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str
    default: int | float | str | None
    meaning: str


@dataclass(frozen=True, slots=True)
class ColumnDoc:
    name: str
    type: str
    meaning: str


@dataclass(frozen=True, slots=True)
class QueryFile:
    """One SQL file and the contract its header states."""

    name: str
    path: Path
    summary: str
    params: tuple[Param, ...]
    columns: tuple[ColumnDoc, ...]
    sql: str
    reads: tuple[str, ...] = ()  # the tables and views it reads (`Reads:`), in the header's order
    writes: tuple[str, ...] = ()  # what a loader's step creates or fills (`Writes:`)


def parse_query_file(path: Path) -> QueryFile:
    """Read a SQL file's header: `-- name: summary`, free text, `Reads:` (and for a loader's
    step `Writes:`), `Params:`, `Columns:`."""
    sql = path.read_text(encoding="utf-8")
    header = []
    for line in sql.splitlines():
        match = HEADER_LINE.match(line)
        if not match:
            break
        header.append(match.group(1))
    first = SUMMARY.match(header[0]) if header else None
    if not first or first.group(1) != path.stem:
        raise ValueError(f"{path}: must start with '-- {path.stem}: <one-line summary>'")
    params: list[Param] = []
    columns: list[ColumnDoc] = []
    names: dict[str, list[str]] = {"Reads:": [], "Writes:": []}
    section = ""
    for line in header[1:]:
        if line.startswith(("Reads:", "Writes:")):
            section = line.split(":")[0] + ":"
            names[section] += _names(line.removeprefix(section))
        elif section in names and line.startswith("  "):
            names[section] += _names(line)
        elif line.strip() in ("Params:", "Columns:"):
            section = line.strip()
        elif section == "Params:" and (p := PARAM_DOC.match(line)):
            name, type_, default, meaning = p.groups()
            value = None if default == "-" else PARAM_TYPES[type_](default)  # "-": no default
            params.append(Param(name, type_, value, meaning))
        elif section == "Columns:" and (c := COLUMN_DOC.match(line)):
            columns.append(ColumnDoc(*c.groups()))
    sections = tuple(params), tuple(columns), sql, tuple(names["Reads:"]), tuple(names["Writes:"])
    return QueryFile(path.stem, path, first.group(2), *sections)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


@cache
def view_files() -> tuple[QueryFile, ...]:
    """The views (queries/views/: CREATE VIEW, renaming the raw tables) and the derived tables
    (queries/derived/: CREATE TABLE, the sweeps and projections materialised once), in the
    order their `Reads:` declarations give: each after everything it reads."""
    folder = resource_dir("queries")
    files = {
        q.name: q
        for q in map(
            parse_query_file, sorted([*folder.glob("views/*.sql"), *folder.glob("derived/*.sql")])
        )
    }
    graph = TopologicalSorter({q.name: [r for r in q.reads if r in files] for q in files.values()})
    try:
        return tuple(files[name] for name in graph.static_order())
    except CycleError as exc:
        raise ValueError(f"queries/: the Reads: declarations form a cycle: {exc.args[1]}") from exc


@cache
def query_files() -> tuple[QueryFile, ...]:
    """The report queries, one SELECT each, in queries/report/."""
    folder = resource_dir("queries") / "report"
    return tuple(parse_query_file(p) for p in sorted(folder.glob("*.sql")))


def find_query(name: str) -> QueryFile:
    for query in query_files():
        if query.name == name:
            return query
    names = ", ".join(q.name for q in query_files())
    raise OptionError(f"no query named {name!r}; the queries are: {names}")


def create_views(
    con: duckdb.DuckDBPyConnection,
    patterns: Patterns | None = None,
    timed: Callable[[str, float], None] | None = None,
) -> None:
    """Create the option tables (name patterns, message sizes) and every view and derived
    table, in the declared order; `timed(name, seconds)` hears how long each one took."""
    patterns = patterns or Patterns()
    rules = patterns.kernel_rules
    run_loader(
        con,
        "kernel_class_rule",
        {
            "priorities": list(range(len(rules))),
            "classes": [cls for cls, _ in rules],
            "patterns": [pattern for _, pattern in rules],
        },
    )
    sizes = patterns.comm_bytes
    run_loader(con, "comm_bytes_option", {"ops": list(sizes), "sizes": list(sizes.values())})
    run_loader(con, "time_bin")
    run_loader(con, "gpu_counter")
    gpus: list[tuple[int, int]] | None = None
    for view in view_files():
        began = time.perf_counter()
        if not _per_gpu(view):
            con.execute(view.sql, _bind(view, patterns.view_params()))
        else:
            if gpus is None:
                gpus = run_loader(con, "gpu_keys").fetchall()
            _create_per_gpu(con, view, patterns, gpus)
        if timed:
            timed(view.name, time.perf_counter() - began)


GPU_PARAMS = ("pid", "device_id")


def _per_gpu(view: QueryFile) -> bool:
    """A derived table built one GPU at a time: its file takes the GPU as `$pid` and
    `$device_id` (grouped_island.sql). Its sorts and windows then hold one GPU's rows, not the
    whole trace's: at 5M kernels grouped_island took 16 s built per GPU, 38 s in one piece
    (spilling past the memory limit); at 1M the same CPU time, and 1053 -> 455 MB."""
    return {p.name for p in view.params} >= set(GPU_PARAMS)


def _create_per_gpu(
    con: duckdb.DuckDBPyConnection,
    view: QueryFile,
    patterns: Patterns,
    gpus: list[tuple[int, int]],
) -> None:
    """CREATE TABLE with the first GPU's rows, then INSERT every other GPU's: the file's own
    statement, its query appended to the table for each GPU. Without GPUs the table is made
    empty (NULL matches no GPU)."""
    create = f"CREATE TABLE {view.name} AS"
    body = view.sql[view.sql.index(create) + len(create) :]
    insert = f"INSERT INTO {view.name}{body}"
    options = replace(view, params=tuple(p for p in view.params if p.name not in GPU_PARAMS))
    values = _bind(options, patterns.view_params())
    for i, (pid, device_id) in enumerate(gpus or [(None, None)]):
        con.execute(view.sql if i == 0 else insert, {**values, "pid": pid, "device_id": device_id})


@cache
def load_files() -> tuple[QueryFile, ...]:
    """The loaders' steps (queries/load/): statements that create and fill the raw tables, the
    tables beside them and the option tables, run by the code in the order it lists them."""
    folder = resource_dir("queries") / "load"
    return tuple(parse_query_file(p) for p in sorted(folder.glob("*.sql")))


def loader_step(name: str) -> QueryFile:
    """queries/load/<name>.sql (a name the code gives: unknown is a bug, not a user's error)."""
    for step in load_files():
        if step.name == name:
            return step
    raise ValueError(f"queries/load/ has no step {name!r}")


def run_loader(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object] | None = None
) -> duckdb.DuckDBPyConnection:
    """Run the statements of queries/load/<name>.sql in order, with exactly the parameters its
    header declares (DuckDB binds parameters in the last statement only: a step that takes
    some is one statement). Returns the connection, to fetch a step's SELECT."""
    step = loader_step(name)
    given = dict(params or {})
    declared = {p.name for p in step.params}
    if set(given) != declared:
        raise ValueError(f"{step.path}: takes {sorted(declared)}, given {sorted(given)}")
    return con.execute(step.sql, given) if given else con.execute(step.sql)


def run_query(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object] | None = None
) -> pl.DataFrame:
    """Run queries/<name>.sql with its documented defaults overridden by `params`."""
    query = find_query(name)
    given = dict(params or {})
    unknown = set(given) - {p.name for p in query.params}
    if unknown:
        raise OptionError(f"query {name} has no parameter {sorted(unknown)[0]!r}")
    if not query.params:
        kept = _kept_result(con, name)
        if kept is not None:
            return kept
    return con.execute(query.sql, _bind(query, given)).pl()


# A cached trace keeps the result of every report query that takes no parameter (it depends
# on the trace and the patterns alone, as the cache does): a run with other display options
# (--top, --timeline-step) reads them and computes only the few queries those options feed.
RESULT_TABLE = "result_{}"
RESULT_ROW = "result_row"  # the query's row order (a table's scan order is not guaranteed)
# Not kept: collective_instances, read once per report, where a copy of one row per collective
# call costs every first run more than it saves (5M kernels: 1M rows, 0.9 s to keep, against
# 0.3 s to run where it is read); and the queries the report builder runs over the stacked
# frames of every file (nsysreport.report_builder), never over one file's database.
UNKEPT = frozenset({"collective_instances", "straggler_gpu", "straggler_unmatched", "step_span"})


def keep_results(con: duckdb.DuckDBPyConnection) -> None:
    """Store the result of every parameterless report query (but UNKEPT) in `con` (the cache
    database)."""
    import pyarrow as pa

    for query in query_files():
        if not query.params and query.name not in UNKEPT:
            table = con.sql(query.sql).to_arrow_table()
            table = table.append_column(RESULT_ROW, pa.array(range(table.num_rows), pa.int64()))
            con.from_arrow(table).create(RESULT_TABLE.format(query.name))


def _kept_result(con: duckdb.DuckDBPyConnection, name: str) -> pl.DataFrame | None:
    import duckdb

    try:
        kept = con.table(RESULT_TABLE.format(name))
    except duckdb.CatalogException:
        return None  # not a cached trace, or one loaded in memory
    columns = [c for c in kept.columns if c != RESULT_ROW]
    return kept.order(RESULT_ROW).select(*columns).pl()


def _bind(query: QueryFile, given: Mapping[str, object]) -> dict[str, object]:
    """The values of the parameters `query` declares: given, else its documented default."""
    values: dict[str, object] = {}
    for p in query.params:
        value = given.get(p.name, p.default)
        if value is None:
            raise OptionError(f"query {query.name} needs the parameter {p.name}")
        try:
            values[p.name] = PARAM_TYPES[p.type](value)
        except ValueError as exc:
            raise OptionError(f"query {query.name}: parameter {p.name} must be {p.type}") from exc
    return values


def listing() -> str:
    """`nsysreport queries`: each query with its summary and parameters, then the views."""
    width = max(len(q.name) for q in query_files())
    lines = []
    for q in query_files():
        params = " ".join(f"${p.name}={p.default}" for p in q.params)
        lines.append(f"{q.name:<{width}}  {q.summary}" + (f"  [{params}]" if params else ""))
    views = ", ".join(v.name for v in view_files())
    return "\n".join(lines) + "\n\nViews (usable in any query): " + views


def frame_text(frame: pl.DataFrame, csv: bool) -> str:
    """A query's rows for the terminal: CSV, or a table with every row and column."""
    if csv:
        return frame.write_csv()
    # Lazy: polars is loaded already (the frame is one); at module top it would cost every
    # import of this module 0.1 s (python -X importtime), a warm run's too.
    import polars as pl

    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=80, tbl_width_chars=200):
        return str(frame) + "\n"
