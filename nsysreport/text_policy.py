"""The text policy every loader applies to text columns: any bytes load (invalid UTF-8 becomes
U+FFFD, NUL bytes are removed) and never change a number (README, "What is skipped")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsysreport.queries import run_loader

if TYPE_CHECKING:
    import duckdb


def safe_text(data: bytes) -> str:
    """The text policy: bytes as UTF-8, invalid sequences as U+FFFD, NUL bytes removed."""
    return data.decode("utf-8", "replace").replace("\x00", "")


def register_text_functions(con: duckdb.DuckDBPyConnection) -> None:
    """nsys_text(BLOB) -> VARCHAR, the text policy in SQL (queries/load/nsys_text.sql): DuckDB
    decodes valid UTF-8 (nearly every value), Python only the rare rest."""
    import duckdb

    con.create_function(
        "nsys_decode_rest",
        safe_text,
        [duckdb.sqltype("BLOB")],
        duckdb.sqltype("VARCHAR"),
        side_effects=False,
    )
    run_loader(con, "nsys_text")
