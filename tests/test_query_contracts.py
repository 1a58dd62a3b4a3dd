"""Every SQL file's header is its documentation: check it against what DuckDB really returns."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

import nsysreport
from nsysreport import kineto
from nsysreport.database import connect
from nsysreport.load import open_trace
from nsysreport.queries import (
    QueryFile,
    load_files,
    query_files,
    resource_dir,
    run_loader,
    run_query,
    view_files,
)
from nsysreport.raw_tables import RAW_TABLES

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


RAW = {
    *RAW_TABLES,
    "load_skipped",
    "load_kept",
    "gpu_device",
    "nvtx_unloaded",
    "source_table",
    "comm_group_launch",
    "job_world",
    "nccl_payload",
    "op_call",
    "python_call",
}
OPTIONS = {"kernel_class_rule", "comm_bytes_option"}  # queries.create_views fills them
# What the loaders' steps create or fill: the raw and option tables, and the Kineto loader's
# temporary tables, view and macros.
LOADED = {name for step in load_files() for name in step.writes}
WRITES = re.compile(
    r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|DROP\s+(?:TABLE|VIEW|MACRO)(?:\s+IF\s+EXISTS)?"
    r"|CREATE(?:\s+OR\s+REPLACE)?(?:\s+TEMP)?\s+(?:TABLE|VIEW|MACRO))\s+(?:temp\.)?(\w+)",
    re.I,
)


def code(sql: str) -> str:
    """`sql` without its comments, and with every string literal emptied."""
    body = "\n".join(line.split("--")[0] for line in sql.splitlines())
    return re.sub(r"'[^']*'", "''", body)


def relations_read(sql: str) -> set[str]:
    """The names after FROM or JOIN in `sql`, comments and strings left out."""
    return set(re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", code(sql), re.I))


def relations_written(sql: str) -> set[str]:
    """The names `sql` creates, inserts into, updates, deletes from or drops."""
    return set(WRITES.findall(code(sql)))


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


def test_the_folders_show_the_layers_and_nothing_lies_outside_them() -> None:
    folders = {p.parent.relative_to(QUERIES).as_posix() for p in QUERIES.rglob("*.sql")}
    assert folders == {"views", "derived", "report", "load"}


@pytest.mark.parametrize(
    "query", [*view_files(), *query_files(), *load_files()], ids=lambda q: q.name
)
def test_each_file_declares_exactly_the_parameters_it_uses(query: QueryFile) -> None:
    assert set(re.findall(r"\$(\w+)", code(query.sql))) == {p.name for p in query.params}


@pytest.mark.parametrize("step", load_files(), ids=lambda s: s.name)
def test_each_loader_step_has_a_summary_and_declares_exactly_what_it_reads_and_writes(
    step: QueryFile,
) -> None:
    assert step.summary and len(step.summary) < 100
    assert not step.columns, "a loader's step documents no Columns: (it feeds code, not users)"
    if step.params:  # DuckDB binds parameters in a script's last statement only
        assert ";" not in code(step.sql).strip().rstrip(";"), "a step with Params: is one statement"
    known = {v.name for v in view_files()} | RAW | OPTIONS | LOADED
    assert set(step.reads) == relations_read(step.sql) & known
    assert set(step.writes) == relations_written(step.sql)


def test_every_loader_step_is_run_by_the_code_and_every_step_it_runs_exists() -> None:
    package = Path(nsysreport.__file__).parent
    source = "\n".join(p.read_text(encoding="utf-8") for p in package.rglob("*.py"))
    run = set(re.findall(r'run_loader\(\s*\w+,\s*"(\w+)"', source)) | set(kineto.STEPS)
    assert run == {step.name for step in load_files()}


def test_the_kineto_steps_come_after_what_they_read() -> None:
    steps = {step.name: step for step in load_files()}
    done = set(steps["kineto_doc"].writes)  # read first, with the trace's path
    for name in kineto.STEPS:
        assert set(steps[name].reads) - RAW <= done, name
        done |= set(steps[name].writes)
    assert set(steps["kineto_cleanup"].writes) == done - RAW, "cleanup drops every temporary"


def test_a_loader_step_takes_exactly_the_parameters_it_declares() -> None:
    con = connect()
    with pytest.raises(ValueError, match=r"takes \['in_file'\], given \[\]"):
        run_loader(con, "nvtx_unloaded_count")
    with pytest.raises(ValueError, match="has no step 'nope'"):
        run_loader(con, "nope")
