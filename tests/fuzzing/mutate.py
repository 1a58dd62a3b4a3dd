"""Mutations of a copied seed: SQL structure and values, raw bytes, Kineto JSON documents.

Each function changes the file at `path` in place (a case's own copy) and is deterministic
given its arguments; the randomness lives in the planner (cases.py), never here.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

INT64_MAX = (1 << 63) - 1
INJECTION = '<script>alert("fuzz")</script><img src=x onerror=fuzz()>'
# SQL value expressions by kind; `$old` is the column's current value.
VALUE_SQL = {
    "null": "NULL",
    "negative": "-1234567",
    "int64_max": str(INT64_MAX),
    "int64_min": str(-INT64_MAX - 1),
    "near_int64_max": str(INT64_MAX - 1000),
    "far_future": "$old + 100000000000000000",  # 1e17 ns: 3 years after the capture
    "float": "$old + 0.5",
    "text": "'12abc'",
    "blob": "X'00ff10'",
    "missing_ref": "987654321",
    "empty": "''",
    "unicode": "'Ω≈ç√ 漢字 🚀 ' || $old",
    "nul": "$old || char(0) || 'evil'",
    "invalid_utf8": "CAST(X'c328fffe' AS TEXT) || $old",
    "huge_text": "$old || replace(hex(zeroblob(100000)), '00', 'x')",
    "injection": f"'{INJECTION}' || $old",
    "integer": "12345",
}


@contextmanager
def writable(path: Path) -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("BEGIN")
        yield con
        con.execute("COMMIT")
    finally:
        con.close()


def _columns(con: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], r[2]) for r in con.execute(f'PRAGMA table_info("{table}")')]


def rebuild(
    con: sqlite3.Connection,
    table: str,
    drop: str | None = None,
    shuffle: random.Random | None = None,
    as_name: str | None = None,
) -> None:
    """Recreate `table` with the same declared types but no constraints (so any value fits),
    without column `drop`, rows shuffled by `shuffle`, under `as_name` (default: its own)."""
    cols = [(n, t) for n, t in _columns(con, table) if n != drop]
    names = ", ".join(f'"{n}"' for n, _ in cols)
    rows = con.execute(f'SELECT {names} FROM "{table}" ORDER BY rowid').fetchall()
    if shuffle is not None:
        shuffle.shuffle(rows)
    con.execute(f'DROP TABLE "{table}"')
    defs = ", ".join(f'"{n}" {t}' for n, t in cols)
    con.execute(f'CREATE TABLE "{as_name or table}" ({defs})')
    marks = ", ".join("?" * len(cols))
    con.executemany(f'INSERT INTO "{as_name or table}" VALUES ({marks})', rows)


def structure(path: Path, op: str, table: str, column: str | None, rng: random.Random) -> None:
    """One structural change to `table` (see cases.STRUCTURE_OPS for what each keeps)."""
    if op == "vacuum_page_size":
        con = sqlite3.connect(path, isolation_level=None)
        con.execute(f"PRAGMA page_size = {rng.choice((1024, 8192, 65536))}")
        con.execute("VACUUM")
        con.close()
        return
    with writable(path) as con:
        if op == "as_view":
            rebuild(con, table, as_name=f"{table}__data")
            con.execute(f'CREATE VIEW "{table}" AS SELECT * FROM "{table}__data"')
        elif op == "reorder_rows":
            rebuild(con, table, shuffle=rng)
        elif op == "strip_constraints":
            rebuild(con, table)
        elif op == "extra_column":
            con.execute(f"ALTER TABLE \"{table}\" ADD COLUMN fuzzExtra TEXT DEFAULT 'fuzz'")
        elif op == "extra_table":
            con.execute("CREATE TABLE FUZZ_UNKNOWN (a INTEGER, b TEXT)")
            con.execute("INSERT INTO FUZZ_UNKNOWN VALUES (1, 'x')")
        elif op == "index":
            con.execute(f'CREATE INDEX fuzz_idx ON "{table}" ("{column}")')
        elif op == "duplicate_all":
            rebuild(con, table)  # a primary key would refuse the copies
            con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}"')
        elif op == "duplicate_one":
            rebuild(con, table)  # a primary key would refuse the copy
            rowid = rng.choice([r[0] for r in con.execute(f'SELECT rowid FROM "{table}"')])
            con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE rowid = ?', [rowid])
        elif op == "drop_table":
            con.execute(f'DROP TABLE "{table}"')
        elif op == "empty_table":
            con.execute(f'DELETE FROM "{table}"')
        elif op == "rename_table":
            con.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_OLD"')
        elif op == "drop_column":
            rebuild(con, table, drop=column)
        else:
            raise ValueError(op)


def set_values(path: Path, table: str, column: str, kind: str, rowids: Sequence[int]) -> None:
    """Set `column` of the rows `rowids` to a value of `kind` (VALUE_SQL, or `swap`: start and
    end exchanged, so end < start)."""
    with writable(path) as con:
        rebuild(con, table)  # rowids survive: rebuild keeps the rowid order
        marks = ", ".join("?" * len(rowids))
        if kind == "swap":
            sql = f'UPDATE "{table}" SET start = "end", "end" = start WHERE rowid IN ({marks})'
        else:
            value = VALUE_SQL[kind].replace("$old", f'"{column}"')
            sql = f'UPDATE "{table}" SET "{column}" = {value} WHERE rowid IN ({marks})'
        con.execute(sql, list(rowids))


def damage_bytes(original: bytes, op: str, rng: random.Random) -> tuple[bytes, str]:
    """The file's bytes damaged, and what was done (for the case's description)."""
    data = bytearray(original)
    page = int.from_bytes(data[16:18], "big") or 65536
    pages = len(data) // page
    if op == "flip":
        spots = sorted(rng.randrange(100, len(data)) for _ in range(rng.randint(1, 16)))
        for at in spots:
            data[at] ^= 1 << rng.randrange(8)
        done = f"flipped bits at {spots}"
    elif op == "zero_page":
        n = rng.randrange(1, pages)
        data[n * page : (n + 1) * page] = bytes(page)
        done = f"zeroed page {n + 1} of {pages}"
    elif op == "truncate_page":
        n = rng.randrange(1, pages)
        del data[n * page :]
        done = f"cut to {n} of {pages} pages"
    elif op == "truncate_any":
        n = rng.randrange(100, len(data))
        del data[n:]
        done = f"cut at byte {n}"
    elif op == "header":
        field = rng.choice(("page_size", "page_count", "counter", "encoding", "format", "magic"))
        at = {
            "page_size": 16,
            "page_count": 28,
            "counter": 24,
            "encoding": 56,
            "format": 44,
            "magic": 3,
        }[field]
        value = {
            "page_size": b"\x03\x00",
            "page_count": b"\x7f\xff\xff\xff",
            "counter": b"\x00\x00\x12\x34",
            "encoding": b"\x00\x00\x00\x02",
            "format": b"\x00\x00\x00\x09",
            "magic": b"X",
        }[field]
        data[at : at + len(value)] = value
        done = f"header {field} set to {value.hex()}"
    elif op == "append":
        extra = rng.randbytes(rng.choice((1, 100, page, 3 * page)))
        data += extra
        done = f"appended {len(extra)} random bytes"
    else:
        raise ValueError(op)
    return bytes(data), done


# Kineto -------------------------------------------------------------------------------------


def gpu_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]


def kineto_doc(doc: dict[str, Any], op: str, rng: random.Random) -> str:
    """Change the parsed document; returns what was done."""
    events = doc["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    some = rng.sample(kernels, rng.choice((1, len(kernels) // 2, len(kernels))))
    key = rng.choice(("ts", "dur", "name", "args", "pid", "ph", "cat"))
    if op == "reorder_events":
        rng.shuffle(events)
        return "events shuffled"
    if op == "extra_keys":
        doc["fuzzUnknown"] = {"a": [1, 2]}
        for e in events:
            e["fuzz_extra"] = rng.choice((None, 1, "x", [1]))
        return "unknown keys added everywhere"
    if op == "extra_events":
        events += [
            {"ph": "f", "id": 1, "pid": 42, "tid": 43, "ts": 101, "cat": "ac2g", "name": "flow"},
            {
                "ph": "X",
                "cat": "python_function",
                "name": "fn",
                "pid": 42,
                "tid": 43,
                "ts": 90,
                "dur": 50,
            },
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        ]
        return "flow, python_function and metadata events added"
    if op == "remove_key":
        for e in some:
            e.pop(key, None)
        return f"{key!r} removed from {len(some)} kernel event(s)"
    if op == "wrong_type":
        key = rng.choice(("ts", "dur", "name", "args", "args.device", "args.correlation"))
        # A string is the right type of a name: "abc" there renames the kernel (and changes
        # its class, rightly), it is no wrong type.
        value = rng.choice([v for v in ("abc", None, [1], {"a": 1}, True, -1)
                            if not (key == "name" and isinstance(v, str))])  # fmt: skip
        for e in some:
            if key.startswith("args."):
                e["args"][key[5:]] = value
            else:
                e[key] = value
        return f"{key} set to {json.dumps(value)} in {len(some)} kernel event(s)"
    if op == "huge_number":
        key = rng.choice(("ts", "dur"))
        number = rng.choice((1e30, 9.3e15, 9223372036854775.807, -1e18, 1e300))
        for e in some:
            e[key] = number
        return f"{key} set to {number!r} in {len(some)} kernel event(s)"
    if op == "negative_dur":
        for e in some:
            e["dur"] = -abs(e["dur"])
        return f"dur negative in {len(some)} kernel event(s)"
    if op == "duplicate_events":
        events += [dict(e) for e in some]
        return f"{len(some)} kernel event(s) duplicated"
    if op in ("unicode_name", "nul_name", "injection_name"):
        text = {"unicode_name": "Ω≈ç√ 漢字 🚀 ", "nul_name": "a\x00b ", "injection_name": INJECTION}
        for e in some:
            e["name"] = text[op] + str(e.get("name"))
        return f"{op} on {len(some)} kernel event(s)"
    if op == "empty_events":
        events.clear()
        return "traceEvents emptied"
    raise ValueError(op)


def kineto_text(doc: dict[str, Any], style: str) -> bytes:
    """The document as bytes: `compact`, `pretty`, or `padded` (integers written as 1.000)."""
    if style == "pretty":
        return json.dumps(doc, indent=2).encode()
    text = json.dumps(doc, separators=(",", ":"))
    if style == "padded":
        text = re.sub(r'"(ts|dur)":(\d+)([,}])', r'"\1":\2.000\3', text)
    return text.encode()


def kineto_bytes(data: bytes, op: str, rng: random.Random) -> tuple[bytes, str]:
    """Byte-level damage to the JSON text (before any gzip)."""
    if op == "invalid_utf8_name":
        at = data.find(b'"name":"') + 8
        return data[:at] + b"\xff\xfe\xc3(" + data[at:], "invalid UTF-8 bytes in a name"
    if op == "truncate":
        n = rng.randrange(1, len(data))
        return data[:n], f"JSON text cut at byte {n} of {len(data)}"
    if op == "trailing_garbage":
        return data + b"\n}garbage", "garbage after the document"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "a UTF-8 byte order mark before the document"
    if op == "nan_token":
        at = data.find(b'"dur":') + 6
        end = data.find(b",", at)
        return data[:at] + b"NaN" + data[end:], "a dur written as NaN (not JSON)"
    raise ValueError(op)


def gzip_bytes(data: bytes, op: str, rng: random.Random) -> tuple[bytes, str]:
    if op == "plain":
        return gzip.compress(data, mtime=0), "gzip"
    if op == "multi_member":
        cut = rng.randrange(1, len(data))
        both = gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)
        return both, f"two gzip members split at byte {cut}"
    if op == "truncated":
        packed = gzip.compress(data, mtime=0)
        n = rng.randrange(10, len(packed) - 1)
        return packed[:n], f"gzip cut at byte {n} of {len(packed)}"
    if op == "not_gzip":
        return data, "plain JSON named .json.gz"
    raise ValueError(op)
