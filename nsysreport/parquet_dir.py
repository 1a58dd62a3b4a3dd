"""An nsys Parquet export (`nsys export --type parquetdir`): a folder with one `<TABLE>.parquet`
per table, the SQLite export's tables and columns (docs/export-format.md, "Parquet and Arrow
exports"). Recognise it, list its tables and columns, and copy the raw tables out of it.

The copy gives the raw tables the SQLite copy (nsysreport.sqlite_copy) gives for the same
capture, row for row: FILE_ROW is a row's place in its file (its SQLite rowid less one, when
nsys writes both in the same order), text columns follow the same text policy, and an unsigned
64-bit id (globalTid, globalPid and vmId may be UBIGINT in Parquet) is read as the signed
integer SQLite stores for the same bits. A value in an integer column that is not an integer
(a fraction, text) leaves its row out, counted in `load_skipped` by reason, as the SQLite copy
does. Nothing is written into the folder.

Table and column names enter SQL quoted, from RAW_TABLES and from the files' own schemas, by
necessity (SQL takes no parameter for a name); file paths are bound as parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.errors import TraceError
from nsysreport.flops import SHAPED_OPS
from nsysreport.queries import run_loader
from nsysreport.raw_tables import (
    FILE_ROW,
    GPU_TABLES,
    RAW_TABLES,
    ROLELESS_KEPT,
    create_raw_tables,
)
from nsysreport.source_schema import SourceSchema
from nsysreport.text_policy import register_text_functions

if TYPE_CHECKING:
    import duckdb

    from nsysreport.sqlite_copy import Progress
SUFFIX = ".parquet"
# A folder is an nsys Parquet export when it holds one of these: the metadata every export has,
# or a table of GPU activity (docs/export-format.md).
MARKERS = ("META_DATA_EXPORT", *GPU_TABLES)
INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER")
TWO_TO_64 = 18446744073709551616


def is_parquet_dir(path: Path) -> bool:
    """Whether `path` is a folder that nsys export --type parquetdir wrote."""
    return path.is_dir() and any((path / f"{t}{SUFFIX}").is_file() for t in MARKERS)


def table_files(path: Path) -> dict[str, Path]:
    """Each table of the export -> its file (the file's stem is the table's name)."""
    return {f.stem: f for f in sorted(path.glob(f"*{SUFFIX}")) if f.is_file()}


def parquet_schema(path: Path) -> tuple[SourceSchema, bool]:
    """The tables and the read columns of the export at `path` (each column's DuckDB type in
    `types`), and whether it has GPU rows; a file that is not Parquet is a one-line error."""
    import duckdb

    files = table_files(path)
    columns: dict[str, frozenset[str]] = {}
    types: dict[str, dict[str, str]] = {}
    has_gpu_rows = False
    con = duckdb.connect()
    try:
        for table, file in files.items():
            if table not in RAW_TABLES:
                continue
            try:
                kinds = {
                    r[0]: r[1]
                    for r in con.execute(
                        "DESCRIBE SELECT * FROM read_parquet(?)", [str(file)]
                    ).fetchall()
                }
                rows = con.execute(
                    "SELECT sum(num_rows) FROM parquet_file_metadata(?)", [str(file)]
                ).fetchone()
            except duckdb.Error as exc:
                raise TraceError(
                    f"{file}: is not a readable Parquet file ({_first_line(exc)}); "
                    "export the trace again"
                ) from None
            columns[table] = frozenset(kinds)
            types[table] = kinds
            if table in GPU_TABLES and rows is not None and (rows[0] or 0) > 0:
                has_gpu_rows = True
    finally:
        con.close()
    schema = SourceSchema(frozenset(files), columns, kind="parquetdir", types=types)
    return schema, has_gpu_rows


def copy_parquet(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    schema: SourceSchema,
    progress: Progress | None = None,
    nvtx_roles: str | None = None,
) -> None:
    """Copy the raw tables of the Parquet export at `path` into `con` (see the module's doc);
    NVTX ranges of operator calls with shapes fill op_call; with `nvtx_roles`, NVTX ranges
    that can play no role are dropped and counted (op calls among them too)."""
    import duckdb

    create_raw_tables(con)
    register_text_functions(con)
    run_loader(con, "nvtx_roleless")
    run_loader(con, "nvtx_op_call")
    files = table_files(path)
    in_file = 0
    try:
        for table in RAW_TABLES:
            if table not in files or table not in schema.columns:
                continue
            if progress:
                progress(table)
            _copy_table(con, table, files[table], schema, nvtx_roles)
            if table == "NVTX_EVENTS":
                in_file = _rows_in(con, files[table])
                run_loader(con, "op_call_nvtx", {"ops": list(SHAPED_OPS)})
        if nvtx_roles is not None and "NVTX_EVENTS" in files:
            run_loader(con, "nvtx_roleless_delete", {"roles": nvtx_roles})
            run_loader(con, "nvtx_unloaded_count", {"in_file": in_file})
    except duckdb.OutOfMemoryException:
        raise  # not the trace's fault: the command's one line says so (cli._run)
    except duckdb.Error as exc:
        raise TraceError(
            f"{path}: could not be read ({_first_line(exc)}); export the trace again"
        ) from exc


# The columns the NVTX role filter reads (queries/load/nvtx_roleless.sql).
ROLE_COLUMNS = ("eventType", "end", "endGlobalTid", "globalTid", "textId", "text")


def _copy_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    file: Path,
    schema: SourceSchema,
    nvtx_roles: str | None,
) -> None:
    """One table: the rows whose integer columns all hold integers, and the rest counted. NVTX
    ranges that can play no role are not loaded (as the SQLite copy's scan leaves them)."""
    types = schema.types[table]
    wanted = [(n, t) for n, t, _ in RAW_TABLES[table] if n in types]
    if not wanted:
        return
    names = ", ".join(f'"{n}"' for n, _ in wanted)
    # A row is left out when an integer column holds a value that is not an integer: the
    # first such column names the reason, as the SQLite copy's careful read does. Columns of
    # an integer type need no check (nsys writes every integer column so).
    bad = [
        f'WHEN "{n}" IS NOT NULL AND {_integer_sql(n, types[n])} IS NULL '
        f"THEN '{n} is not an integer'"
        for n, t in wanted
        if t == "BIGINT" and types[n] not in INTEGER_TYPES
    ]
    reason = f"CASE {' '.join(bad)} END" if bad else "NULL"
    typed = (
        f"SELECT file_row_number + 1 AS {FILE_ROW}, "
        + ", ".join(f'{_value_sql(n, t, types[n])} AS "{n}"' for n, t in wanted)
        + f" FROM read_parquet($file, file_row_number = true) WHERE ({reason}) IS NULL"
    )
    params: dict[str, str | list[str]] = {"file": str(file)}
    keep = ""
    if table == "NVTX_EVENTS" and nvtx_roles is not None and all(c in types for c in ROLE_COLUMNS):
        keep, params["roles"], params["ops"] = ROLELESS_KEPT, nvtx_roles, list(SHAPED_OPS)
    con.execute(
        f'INSERT INTO main."{table}" ("{FILE_ROW}", {names}) '
        f'SELECT "{FILE_ROW}", {names} FROM ({typed}) {keep}',
        params,
    )
    if bad:
        con.execute(
            f"INSERT INTO load_skipped SELECT $table, reason, count(*) FROM "
            f"(SELECT {reason} AS reason FROM read_parquet($file)) "
            "WHERE reason IS NOT NULL GROUP BY reason",
            {"table": table, "file": str(file)},
        )


def _value_sql(name: str, wanted: str, actual: str) -> str:
    if wanted == "BIGINT":
        return _integer_sql(name, actual)
    if actual == "BLOB":
        return f'nsys_text("{name}")'
    return f"replace(\"{name}\"::VARCHAR, chr(0), '')"  # the text policy: NUL bytes removed


def _integer_sql(name: str, actual: str) -> str:
    """The column as BIGINT: integers as they are, an unsigned 64-bit value as the signed one
    SQLite stores for its bits, an integral float (below 2^63) as its integer, else NULL."""
    if actual in INTEGER_TYPES:
        return f'"{name}"::BIGINT'
    if actual in ("UBIGINT", "HUGEINT", "UHUGEINT"):
        return (
            f'CASE WHEN "{name}" BETWEEN -9223372036854775808 AND 9223372036854775807 '
            f'THEN "{name}"::BIGINT WHEN "{name}" BETWEEN 9223372036854775808 AND '
            f'{TWO_TO_64 - 1} THEN ("{name}"::HUGEINT - {TWO_TO_64})::BIGINT END'
        )
    if actual in ("FLOAT", "DOUBLE") or actual.startswith("DECIMAL"):
        return (
            f'CASE WHEN "{name}" = trunc("{name}") AND abs("{name}") < 9.2e18 '
            f'THEN "{name}"::BIGINT END'
        )
    return "NULL"  # text or bytes: no integer, as SQLite's careful read finds


def _rows_in(con: duckdb.DuckDBPyConnection, file: Path) -> int:
    """A file's rows, from its footer."""
    row = con.execute("SELECT sum(num_rows) FROM parquet_file_metadata(?)", [str(file)]).fetchone()
    return int(row[0] or 0) if row else 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
