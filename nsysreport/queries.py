"""Find, document, check and run the SQL files in queries/ (the analysis lives there, not here)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
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
PARAM_DOC = re.compile(r"^\s+\$(\w+)\s+(\w+)\s+(\S+)\s+(.+)$")
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


def parse_query_file(path: Path) -> QueryFile:
    """Read a SQL file's header: `-- name: summary`, free text, `Params:` and `Columns:`."""
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
    section = ""
    for line in header[1:]:
        if line.strip() in ("Params:", "Columns:"):
            section = line.strip()
        elif section == "Params:" and (p := PARAM_DOC.match(line)):
            name, type_, default, meaning = p.groups()
            value = None if default == "-" else PARAM_TYPES[type_](default)  # "-": no default
            params.append(Param(name, type_, value, meaning))
        elif section == "Columns:" and (c := COLUMN_DOC.match(line)):
            columns.append(ColumnDoc(*c.groups()))
    return QueryFile(path.stem, path, first.group(2), tuple(params), tuple(columns), sql)


@cache
def view_files() -> tuple[QueryFile, ...]:
    """The CREATE VIEW files, one view each, in queries/views/."""
    return tuple(
        parse_query_file(p) for p in sorted((resource_dir("queries") / "views").glob("*.sql"))
    )


@cache
def query_files() -> tuple[QueryFile, ...]:
    """The report queries, one SELECT each, in queries/."""
    return tuple(parse_query_file(p) for p in sorted(resource_dir("queries").glob("*.sql")))


def find_query(name: str) -> QueryFile:
    for query in query_files():
        if query.name == name:
            return query
    names = ", ".join(q.name for q in query_files())
    raise OptionError(f"no query named {name!r}; the queries are: {names}")


def create_views(con: duckdb.DuckDBPyConnection, patterns: Patterns | None = None) -> None:
    """Create the option tables (name patterns, message sizes) and every view, in order."""
    import duckdb  # lazy: 0.08 s of start-up (python -X importtime) a warm run never needs

    patterns = patterns or Patterns()
    _option_table(
        con,
        "kernel_class_rule",
        "priority INTEGER, class VARCHAR, pattern VARCHAR",
        [(i, cls, pattern) for i, (cls, pattern) in enumerate(patterns.kernel_rules)],
    )
    _option_table(
        con, "comm_bytes_option", "op VARCHAR, bytes BIGINT", list(patterns.comm_bytes.items())
    )
    pending = list(view_files())
    # Views read other views; retry the ones whose dependencies do not exist yet.
    while pending:
        failed: list[QueryFile] = []
        last_error: duckdb.Error | None = None
        for view in pending:
            try:
                con.execute(view.sql, _bind(view, patterns.view_params()))
            except duckdb.CatalogException as exc:
                failed.append(view)
                last_error = exc
        if len(failed) == len(pending) and last_error is not None:
            raise last_error
        pending = failed


def _option_table(
    con: duckdb.DuckDBPyConnection, name: str, columns: str, rows: Sequence[tuple[object, ...]]
) -> None:
    """A small table of user options that the views join (patterns are data, not SQL text)."""
    con.execute(f"CREATE OR REPLACE TABLE {name} ({columns})")
    if rows:
        marks = ", ".join("?" for _ in rows[0])
        con.executemany(f"INSERT INTO {name} VALUES ({marks})", list(rows))


def run_query(
    con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object] | None = None
) -> pl.DataFrame:
    """Run queries/<name>.sql with its documented defaults overridden by `params`."""
    query = find_query(name)
    given = dict(params or {})
    unknown = set(given) - {p.name for p in query.params}
    if unknown:
        raise OptionError(f"query {name} has no parameter {sorted(unknown)[0]!r}")
    return con.execute(query.sql, _bind(query, given)).pl()


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
