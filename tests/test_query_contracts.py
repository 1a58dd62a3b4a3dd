"""Every SQL file's header is its documentation: check it against what DuckDB really returns."""

from __future__ import annotations

import re

import duckdb
import pytest

from nsysreport.load import RAW_TABLES, open_trace
from nsysreport.queries import QueryFile, query_files, resource_dir, run_query, view_files

from conftest import real_trace

QUERIES = resource_dir("queries")


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return open_trace(real_trace("mfu_2gpu_before.sqlite"))


def describe(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE ({sql})").fetchall()]


def documented(q: QueryFile) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in q.columns]


@pytest.mark.parametrize("view", view_files(), ids=lambda v: v.name)
def test_each_view_returns_exactly_the_columns_its_header_documents(
    con: duckdb.DuckDBPyConnection, view: QueryFile
) -> None:
    assert describe(con, f"SELECT * FROM {view.name}") == documented(view)


@pytest.mark.parametrize("query", query_files(), ids=lambda q: q.name)
def test_each_query_returns_exactly_the_columns_its_header_documents(
    con: duckdb.DuckDBPyConnection, query: QueryFile
) -> None:
    frame = run_query(con, query.name)
    types = dict(describe(con, f"SELECT * FROM ({_with_defaults(query)})"))
    assert list(frame.columns) == [c.name for c in query.columns]
    assert [(c, types[c]) for c in frame.columns] == documented(query)


def _with_defaults(query: QueryFile) -> str:
    """The query text with its parameters replaced by their documented defaults (for DESCRIBE)."""
    sql = query.sql
    for p in query.params:
        sql = re.sub(rf"\${p.name}\b", repr(p.default), sql)
    return sql


@pytest.mark.parametrize("query", query_files(), ids=lambda q: q.name)
def test_each_query_ends_in_a_total_order(query: QueryFile) -> None:
    body = query.sql.strip().rstrip(";")
    assert re.search(r"ORDER BY [^)]*$", body), f"{query.name} must end in ORDER BY"


@pytest.mark.parametrize("query", [*view_files(), *query_files()], ids=lambda q: q.name)
def test_each_file_has_a_summary_and_documents_its_columns(query: QueryFile) -> None:
    assert query.summary and len(query.summary) < 100
    assert query.columns, f"{query.path} documents no Columns:"
    units = [c.name for c in query.columns if c.name.endswith(("_ns", "_pct", "_bytes"))]
    assert all(c.type in ("BIGINT", "DOUBLE") for c in query.columns if c.name in units)


def test_an_unknown_parameter_is_refused(con: duckdb.DuckDBPyConnection) -> None:
    from nsysreport.errors import OptionError

    with pytest.raises(OptionError, match="no parameter 'topp'"):
        run_query(con, "gap_top", {"topp": 3})


def test_parameters_change_the_result(con: duckdb.DuckDBPyConnection) -> None:
    assert run_query(con, "gap_top", {"top": 2}).height == 4  # 2 gaps on each of 2 GPUs
    assert run_query(con, "gap_top", {"top": "3"}).height == 6  # CLI strings are converted


RAW = {*RAW_TABLES, "load_skipped", "nvtx_unloaded", "source_table"}
OPTIONS = {"kernel_class_rule", "comm_bytes_option"}  # queries.create_views fills them


def relations_read(sql: str) -> set[str]:
    """The names after FROM or JOIN in `sql`, comments and strings left out."""
    body = "\n".join(line.split("--")[0] for line in sql.splitlines())
    return set(re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", re.sub(r"'[^']*'", "''", body), re.I))


@pytest.mark.parametrize("query", [*view_files(), *query_files()], ids=lambda q: q.name)
def test_each_file_declares_exactly_what_it_reads(query: QueryFile) -> None:
    known = {v.name for v in view_files()} | RAW | OPTIONS
    assert set(query.reads) == (relations_read(query.sql) & known) - {query.name}
    assert set(query.reads) <= known, "a declared read that nothing provides"


def test_views_come_after_everything_they_read() -> None:
    done: set[str] = set()
    for view in view_files():
        assert set(view.reads) - RAW - OPTIONS <= done, view.name
        done.add(view.name)
    assert done == {p.stem for p in QUERIES.glob("views/*.sql")} | {
        p.stem for p in QUERIES.glob("derived/*.sql")
    }


def test_the_folders_show_the_layers() -> None:
    # views rename (CREATE VIEW), derived tables materialise (CREATE TABLE), reports SELECT.
    for path in QUERIES.glob("views/*.sql"):
        assert "\nCREATE VIEW " in path.read_text(), path
    for path in QUERIES.glob("derived/*.sql"):
        assert "\nCREATE TABLE " in path.read_text(), path
    for query in query_files():
        assert "CREATE " not in query.sql, query.path
