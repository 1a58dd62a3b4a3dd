"""NCCL's NVTX extended payloads, decoded at load: for each NCCL API range whose payload the
export holds (`nsys export --include-blobs=true`: NVTX_EVENTS.binaryData), its communicator
(NCCL's commHash, the same on every rank of one communicator), the communicator's rank count
and the rank (init calls), and the message size in bytes (collectives), into `nccl_payload`.

The layout is NCCL's own (docs/export-format.md, "NCCL's own data"): a payload is a C struct
whose fields the export describes in NVTX_PAYLOAD_SCHEMA_ENTRIES (name, type, offset; the
schema ids change between NCCL releases, so fields are found by name, never by id), stored
after a 32-byte header whose second 64-bit word is the schema id. A payload shorter than its
schema says, or of a schema the export does not describe, is ignored and counted
(`load_kept`). Binary data is read as bytes beside the NVTX copy (which never loads it): the
column is declared TEXT but holds raw bytes, so the text policy must not touch it.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport.queries import run_loader
from nsysreport.source_schema import SourceSchema
from nsysreport.trace_file import immutable_uri, readable

if TYPE_CHECKING:
    import duckdb

HEADER_BYTES = 32
SCHEMA_ID_AT = 8  # the header's second 64-bit word
# NVTX payload entry types (nvToolsExtPayload.h) -> struct format, little-endian.
ENTRY_FORMATS = {5: "<i", 6: "<I", 15: "<i", 16: "<I", 17: "<q", 18: "<Q", 22: "<Q", 23: "<Q"}
# Entry names NCCL registers (src/include/nvtx_payload_schemas.h) -> nccl_payload's column.
FIELDS = {
    "NCCL communicator ID": "comm_hash",
    "No. of ranks": "nranks",
    "Rank": "rank",
    "Message size [bytes]": "message_bytes",
}
IGNORED = "payload that does not fit its schema: ignored"
Entries = dict[tuple[int, int], list[tuple[str, int, int]]]  # (domain, schema) -> fields


def load_nccl_payloads(con: duckdb.DuckDBPyConnection, path: Path, schema: SourceSchema) -> None:
    """Decode the NCCL payloads of the export at `path` into nccl_payload; nothing when it has
    no binary payloads or no NCCL payload schema."""
    if "binaryData" not in schema.columns.get("NVTX_EVENTS", frozenset()):
        return
    entries = _nccl_entries(con)
    if not entries:
        return
    rows, ignored = [], 0
    for range_id, domain, blob in _blobs(path, schema):
        fields = decode(blob, domain, entries)
        if fields is None:
            ignored += 1
        elif fields.get("comm_hash") is not None:
            rows.append((range_id, *(fields.get(c) for c in FIELDS.values())))
    if rows:
        con.executemany("INSERT INTO nccl_payload VALUES (?, ?, ?, ?, ?)", rows)
    if ignored:
        run_loader(con, "payload_ignored", {"reason": IGNORED, "count": ignored})


def decode(blob: bytes, domain: int | None, entries: Entries) -> dict[str, int | str] | None:
    """The NCCL fields of one payload ({} when its schema is none of NCCL's), None when it
    does not fit the schema the export describes for it."""
    if len(blob) < HEADER_BYTES:
        return None
    (schema_id,) = struct.unpack_from("<Q", blob, SCHEMA_ID_AT)
    fields = entries.get((domain or 0, schema_id))
    if fields is None:
        return {}
    out: dict[str, int | str] = {}
    for column, kind, offset in fields:
        fmt = ENTRY_FORMATS[kind]
        at = HEADER_BYTES + offset
        if at + struct.calcsize(fmt) > len(blob):
            return None
        (value,) = struct.unpack_from(fmt, blob, at)
        out[column] = f"0x{value:016x}" if column == "comm_hash" else value
    return out


def _nccl_entries(con: duckdb.DuckDBPyConnection) -> Entries:
    """The NCCL fields of each payload schema the export describes (rows listed once per
    process that registered them count once)."""
    rows = con.execute(
        'SELECT DISTINCT domainId, schemaId, name, type, coalesce("offset", 0) '
        "FROM NVTX_PAYLOAD_SCHEMA_ENTRIES "
        "WHERE name IN $names AND schemaId IS NOT NULL AND type IS NOT NULL",
        {"names": list(FIELDS)},
    ).fetchall()
    entries: Entries = {}
    for domain, schema_id, name, kind, offset in rows:
        if kind in ENTRY_FORMATS and offset >= 0:
            entries.setdefault((domain or 0, schema_id), []).append((FIELDS[name], kind, offset))
    return entries


Blob = tuple[int, int | None, bytes]  # range_id (the row's file_row), its domainId, the bytes


def _blobs(path: Path, schema: SourceSchema) -> Iterator[Blob]:
    """Every NVTX row with binary data."""
    if schema.kind == "parquetdir":
        yield from _parquet_blobs(path / "NVTX_EVENTS.parquet")
        return
    with readable(path) as read, closing(sqlite3.connect(immutable_uri(read), uri=True)) as src:
        yield from src.execute(
            "SELECT rowid, domainId, CAST(binaryData AS BLOB) FROM NVTX_EVENTS "
            "WHERE binaryData IS NOT NULL"
        )


def _parquet_blobs(file: Path) -> Iterable[Blob]:
    """The column as bytes whatever its declared type: nsys 2026 marks it UTF-8 though it holds
    raw bytes (docs/export-format.md), which DuckDB's reader refuses."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(file, columns=["domainId", "binaryData"])
    data = table.column("binaryData")
    if pa.types.is_string(data.type):
        data = data.cast(pa.binary())
    elif pa.types.is_large_string(data.type):
        data = data.cast(pa.large_binary())
    domains = table.column("domainId").to_pylist()
    return (
        (i + 1, domains[i], blob) for i, blob in enumerate(data.to_pylist()) if blob is not None
    )
