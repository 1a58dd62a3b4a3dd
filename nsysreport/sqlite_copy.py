"""Copy the raw tables of an nsys SQLite export into DuckDB: DuckDB's sqlite_scanner where its
wheel matches this DuckDB (fast path), ADBC's SQLite driver otherwise, and the careful read
(value by value, `_Adbc`) for any table neither can read exactly.

Loader policy (README "What is skipped"): any bytes in a TEXT column load (invalid UTF-8 becomes
U+FFFD, NUL bytes are removed) and never change a number; a value in an integer column that is
not an integer (text, a BLOB, a fraction) makes its row unusable: the row is left out and
counted in `load_skipped` (source table, reason, count), which the `skipped_row` view reports
with the rows the base views leave out. The file is read as nsysreport.trace_file.readable
gives it: nothing is written beside the trace.

The SQL that names raw tables and their columns is built here from the RAW_TABLES declaration,
by necessity: which columns a statement lists, and how it reads each (by its declared type),
come from the declaration and from the columns the trace file really has, and SQL takes no
parameter for a table's or a column's name. Names are nsys's, quoted; values never enter the
text (they are bound as parameters). Every statement that is the same for every trace is a file
in queries/load/, run by run_loader.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport.errors import TraceError
from nsysreport.flops import SHAPED_OPS
from nsysreport.queries import run_loader
from nsysreport.raw_tables import FILE_ROW, RAW_TABLES, ROLELESS_KEPT, create_raw_tables
from nsysreport.source_schema import SourceSchema
from nsysreport.text_policy import register_text_functions
from nsysreport.trace_file import immutable_uri, readable, unreadable_message

if TYPE_CHECKING:
    # duckdb (0.08 s of start-up, python -X importtime), ADBC and pyarrow (0.3 s) are imported
    # in the functions that use them: a warm run, which writes the pages it kept, loads
    # nothing, and only the fast loader needs ADBC.
    import duckdb

# Called with the name of each step as it starts (while copying, the table's name).
Progress = Callable[[str], None]

INT_RANGE = 9.2e18  # a float in an integer column is taken as an integer when integral and below


def copy_tables(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    progress: Progress | None = None,
    nvtx_roles: str | None = None,
) -> str:
    """Copy the raw tables into `con` with the fastest offline loader; returns the loader's name.

    Both loaders give the same tables: each reads a table as it is (the scanner by its declared
    types, ADBC by the types of its values) and hands any table it cannot read exactly (bytes
    that are not UTF-8, a value of another type) to the careful read (_Adbc). The NVTX ranges
    of operator calls with shapes (PyTorch's emit_nvtx) fill op_call. With `nvtx_roles`
    (Patterns.role_pattern), NVTX ranges that can play no role stay in the file, counted in
    nvtx_unloaded (op calls among them too: they are in op_call alone).
    """
    import duckdb

    create_raw_tables(con)
    run_loader(con, "nvtx_roleless")  # the macro the scan's filter and the delete after it call
    run_loader(con, "nvtx_op_call")  # the macros the scan's filter and op_call_nvtx call
    loader = _pick_loader(con)
    present = [t for t in RAW_TABLES if t in schema.tables]
    try:
        with readable(path) as source, _Adbc(source) as adbc:
            if loader == "sqlite_scanner":
                _copy_with_scanner(con, source, schema, present, adbc, progress, nvtx_roles)
            else:
                for table in present:
                    if progress:
                        progress(table)
                    if not (table in schema.typed and adbc.copy(con, table, schema, exact=True)):
                        adbc.copy(con, table, schema, exact=False)
            if "NVTX_EVENTS" in present:
                run_loader(con, "op_call_nvtx", {"ops": list(SHAPED_OPS)})
            if nvtx_roles is not None and "NVTX_EVENTS" in present:
                _leave_roleless_ranges(con, source, nvtx_roles)
    except duckdb.OutOfMemoryException:
        raise  # not the trace's fault: the command's one line says so (cli._run)
    except (duckdb.Error, OSError, UnicodeDecodeError, _adbc_error()) as exc:
        # Chained: the cache tells a failure of its own disk from one of the trace by the cause.
        raise TraceError(unreadable_message(path, exc)) from exc
    return loader


def _leave_roleless_ranges(con: duckdb.DuckDBPyConnection, source: Path, roles: str) -> None:
    """Drop the NVTX rows that can play no role (the scanner never loaded them) and count them:
    the file's NVTX rows (SQLite counts a table's rows without reading them) less those loaded
    and those the careful read skipped, which every loader reads alike."""
    run_loader(con, "nvtx_roleless_delete", {"roles": roles})
    with closing(sqlite3.connect(immutable_uri(source), uri=True)) as src:
        in_file = src.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
    run_loader(con, "nvtx_unloaded_count", {"in_file": in_file})


def _adbc_error() -> type[Exception]:
    """ADBC's DB-API error base (its driver raises its own family, not sqlite3's)."""
    import adbc_driver_manager

    error: type[Exception] = adbc_driver_manager.Error
    return error


def _wanted(table: str, schema: SourceSchema) -> list[tuple[str, str]]:
    """(name, type) of the wanted columns the source table really has."""
    present = schema.columns[table]
    return [(name, type_) for name, type_, _ in RAW_TABLES[table] if name in present]


def _names(cols: list[tuple[str, str]]) -> str:
    return ", ".join(f'"{name}"' for name, _ in cols)


def _integer_sql(name: str) -> str:
    """SQLite: the column as an integer, NULL when it holds none (its row is then skipped)."""
    return (
        f'CASE WHEN typeof("{name}") = \'integer\' THEN "{name}" '
        f'WHEN {_integral_real(name)} THEN CAST("{name}" AS INTEGER) END'
    )


def _integral_real(name: str) -> str:
    return (
        f'(typeof("{name}") = \'real\' AND "{name}" = CAST("{name}" AS INTEGER) '
        f'AND abs("{name}") < {INT_RANGE})'
    )


def _reason_sql(cols: list[tuple[str, str]]) -> str:
    """SQLite: why a row cannot be loaded (its first integer column holding no integer: text,
    a BLOB, a fraction), NULL for a good row. The careful read keeps the rows where it is NULL
    and counts the others by it, so what is left out and what is counted cannot differ."""
    checks = [
        f"WHEN typeof(\"{name}\") NOT IN ('integer', 'null') AND NOT {_integral_real(name)} "
        f"THEN '{name} is not an integer'"
        for name, type_ in cols
        if type_ == "BIGINT"
    ]
    return f"CASE {' '.join(checks)} END" if checks else "NULL"


ADBC_BATCH_ROWS = 65536  # rows per Arrow batch from ADBC's SQLite driver


class _Adbc:
    """Reads of a table through ADBC's SQLite driver (immutable: no lock, no file beside it).

    `copy(exact=True)` reads the columns as they are, integer columns typed by the driver:
    it gives up (False, nothing inserted) unless every integer value is one, so what it loads
    is what the careful read would. `copy(exact=False)`, the careful read, goes value by value
    in SQLite: integer columns as integers (rows where one is not: counted in load_skipped).
    Text columns are read as bytes, which nsys_text decodes, in both. Opens the file only when
    a table needs it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.src: Any = None

    def __enter__(self) -> _Adbc:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.src is not None:
            self.src.close()

    def copy(
        self, con: duckdb.DuckDBPyConnection, table: str, schema: SourceSchema, exact: bool
    ) -> bool:
        import adbc_driver_sqlite.dbapi as adbc
        import duckdb
        import pyarrow as pa

        if self.src is None:
            self.src = adbc.connect(immutable_uri(self.path))
            register_text_functions(con)  # one connection per load: registered once, when needed
        cols = _wanted(table, schema)
        if not cols:
            return True  # none of the columns we read: the table stays empty, as when absent
        reason = _reason_sql(cols)
        values = ", ".join(
            (f'"{n}"' if exact else _integer_sql(n)) if t == "BIGINT" else f'CAST("{n}" AS BLOB)'
            for n, t in cols
        )
        # ADBC types a column by its first batch (and refuses another type later): a first
        # row of the right types, dropped below, keeps a column whose first values are all
        # NULL from being typed INT64.
        first = ", ".join(("0" if t == "BIGINT" else "x''") + f' AS "{n}"' for n, t in cols)
        # FILE_ROW: a table's rowid; a view's rows numbered as SQLite gives them (no rowid).
        row = "row_number() OVER ()" if table in schema.views else "rowid"
        sql = (
            f"SELECT 1 AS nsys_first, 0 AS {FILE_ROW}, {first} "
            f'UNION ALL SELECT 0, {row}, {values} FROM "{table}"'
        )
        if not exact:
            sql += f" WHERE ({reason}) IS NULL"
        names = _names(cols)
        decoded = ", ".join(f'"{n}"' if t == "BIGINT" else f'nsys_text("{n}")' for n, t in cols)
        with self.src.cursor() as cur:
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(ADBC_BATCH_ROWS)})
            cur.execute(sql)
            batches = cur.fetch_record_batch()
            # A float or text in an integer column of the first batch widens its type.
            if exact and any(
                batches.schema.field(n).type != pa.int64() for n, t in cols if t == "BIGINT"
            ):
                return False
            con.register("nsys_batches", batches)
            try:
                con.execute(
                    f'INSERT INTO main."{table}" ({FILE_ROW}, {names}) '
                    f"SELECT {FILE_ROW}, {decoded} FROM nsys_batches WHERE nsys_first = 0"
                )
            except (duckdb.Error, _adbc_error(), pa.ArrowException):
                if exact:
                    return False  # another type in a later batch: nothing was inserted
                raise
            finally:
                con.unregister("nsys_batches")
        if exact:
            return True
        with self.src.cursor() as cur:
            cur.execute(
                f'SELECT reason, count(*) FROM (SELECT {reason} AS reason FROM "{table}") '
                "WHERE reason IS NOT NULL GROUP BY reason ORDER BY reason"
            )
            rows = cur.fetchall()
        for why, count in rows:
            run_loader(con, "skipped_rows", {"source": table, "reason": why, "count": count})
        return True


def _pick_loader(con: duckdb.DuckDBPyConnection) -> str:
    """`sqlite_scanner` when its wheel matches this DuckDB (fast path), else `adbc` (any DuckDB)."""
    import duckdb

    if os.environ.get("NSYSREPORT_LOADER") == "adbc":
        return "adbc"
    extension = _scanner_extension_path()
    if extension is None:
        return "adbc"
    try:
        con.load_extension(str(extension))
    except duckdb.Error:
        return "adbc"  # built for another DuckDB version: refused cleanly, no crash
    return "sqlite_scanner"


def _scanner_extension_path() -> Path | None:
    import duckdb

    try:
        import duckdb_extension_sqlite_scanner as wheel
    except ImportError:
        return None
    path = (
        Path(wheel.__file__).parent
        / "extensions"
        / f"v{duckdb.__version__}"
        / "sqlite_scanner.duckdb_extension"
    )
    return path if path.is_file() else None


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


# The scan's filter for NVTX_EVENTS: the rows that can play a role (nvtx_roleless.sql).


def _copy_with_scanner(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    tables: list[str],
    adbc: _Adbc,
    progress: Progress | None,
    nvtx_roles: str | None,
) -> None:
    """The typed scan (all threads) for tables declared as we load them; a table it refuses
    (a value of another type, bytes that are not UTF-8) is read carefully instead. The scan
    refuses every such value, so where it succeeds the careful read would skip nothing."""
    import duckdb

    # DuckDB's ATTACH takes no parameter: the file's name is a quoted literal.
    con.execute(f"ATTACH '{_sql_string(str(path.resolve()))}' AS nsys (TYPE sqlite, READ_ONLY)")
    try:
        for table in tables:
            if progress:
                progress(table)
            cols = _wanted(table, schema)
            # A view has no rowid (FILE_ROW): the careful read numbers its rows in order.
            if cols and table in schema.typed and table not in schema.views:
                names = _names(cols)
                values = ", ".join(
                    f'"{n}"' if t == "BIGINT" else f"replace(\"{n}\", chr(0), '')" for n, t in cols
                )
                # Roleless NVTX ranges are never loaded, but for those that may be op calls with
                # shapes: op_call_nvtx reads them, then the delete after the load drops them.
                keep, params = "", {}
                if table == "NVTX_EVENTS" and nvtx_roles is not None:
                    keep, params = ROLELESS_KEPT, {"roles": nvtx_roles, "ops": list(SHAPED_OPS)}
                try:
                    con.execute(
                        f'INSERT INTO main."{table}" ({FILE_ROW}, {names}) '
                        f'SELECT rowid, {values} FROM nsys."{table}" {keep}',
                        params,
                    )
                    continue
                except (duckdb.Error, UnicodeDecodeError) as exc:
                    # DuckDB's message may quote the raw bytes, which Python then fails to
                    # decode: either way the careful read takes the table.
                    if "locked" in str(exc):
                        raise
            adbc.copy(con, table, schema, exact=False)
    finally:
        run_loader(con, "detach_trace")


def table_rows(path: Path) -> dict[str, int]:
    """Rows of each raw table the loader copies from `path`, in load order, for the progress
    line; {} when the file cannot be read that way (the load then says why). SQLite counts a
    table's rows from its b-tree pages without decoding them (the largest rowid would be
    quicker but is no count: StringIds' ids have holes)."""
    counts: dict[str, int] = {}
    try:
        with closing(sqlite3.connect(immutable_uri(path), uri=True)) as src:
            names = {row[0] for row in src.execute("SELECT name FROM sqlite_master")}
            for table in (t for t in RAW_TABLES if t in names):
                counts[table] = src.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    except sqlite3.Error:
        return {}
    return counts
