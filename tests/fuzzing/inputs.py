"""Families that mutate the trace itself: SQL structure, values, bytes, Kineto JSON."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from fuzzing import mutate
from fuzzing.cases import NEUTRAL, Case, Context, Expect, Setup, expect
from fuzzing.seeds import kineto_document
from nsysreport.raw_tables import GPU_TABLES, RAW_TABLES

T = TypeVar("T")
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def pick(rng: random.Random, weighted: Sequence[tuple[T, int]]) -> T:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def sqlite_seed(rng: random.Random) -> str:
    return pick(rng, [("synth", 5), ("synth_2022", 1), ("sample", 2), ("rtx3080", 2)])


def _read_table(ctx: Context, seed: str, rng: random.Random, nonempty: bool = True) -> str:
    shape = ctx.shape(seed)
    tables = [t for t in RAW_TABLES if t in shape.columns and (shape.rowids[t] or not nonempty)]
    return pick(rng, [(t, 6 if t == KERNEL else 2 if t in GPU_TABLES else 1) for t in tables])


def _adbc(rng: random.Random) -> bool:
    """A fifth of the cases read the trace with the fallback loader (ADBC), which platforms
    without the sqlite_scanner wheel use: it must read every trace the same way."""
    return rng.random() < 0.2


def _loader(setup: Setup, adbc: bool) -> Setup:
    if adbc:
        setup.env["NSYSREPORT_LOADER"] = "adbc"
    return setup


# Structure -----------------------------------------------------------------------------------

NEUTRAL_OPS = (
    "as_view",
    "reorder_rows",
    "strip_constraints",
    "extra_column",
    "extra_table",
    "index",
    "vacuum_page_size",
)
DAMAGE_OPS = (
    "duplicate_all",
    "duplicate_one",
    "drop_table",
    "empty_table",
    "rename_table",
    "drop_column",
)


def structure_expect(op: str, table: str) -> Expect:
    if op in NEUTRAL_OPS:
        return NEUTRAL
    if op in ("drop_table", "empty_table", "rename_table"):
        if table in GPU_TABLES:
            return expect(0, 1, numbers="any")  # a trace without that table is still a trace
        return expect(0, 1) if table == "StringIds" else expect(0)
    return expect(0, 1)  # duplicated rows, a dropped column: counted and reported, or refused


def plan_structure(ctx: Context, seed: int, index: int, rng: random.Random) -> Case:
    base = sqlite_seed(rng)
    op = rng.choice(NEUTRAL_OPS if rng.random() < 0.5 else DAMAGE_OPS)
    table = _read_table(ctx, base, rng)
    column = None
    if op in ("index", "drop_column"):
        cols = ctx.shape(base).columns[table]
        used = [c for c, _, _ in RAW_TABLES[table] if c in cols]
        column = rng.choice(used if used and rng.random() < 0.8 else list(cols))
    what = op if op in ("extra_table", "vacuum_page_size") else f"{op} {table}"
    what += f".{column}" if column else ""
    mrng = random.Random(rng.random())

    def prepare(ctx: Context, folder: Path) -> Setup:
        trace = ctx.copy_seed(base, folder / "in")
        mutate.structure(trace, op, table, column, mrng)
        return ctx.report_setup(trace, folder)

    return Case("structure", index, seed, base, what, structure_expect(op, table), prepare)


# Values --------------------------------------------------------------------------------------

TIME = (
    "null",
    "negative",
    "int64_max",
    "int64_min",
    "near_int64_max",
    "far_future",
    "float",
    "text",
    "blob",
    "swap",
)
IDS = ("null", "negative", "int64_max", "float", "text", "blob")
REFS = ("null", "missing_ref", "negative", "float", "text", "blob")
TEXT = (
    "null",
    "empty",
    "unicode",
    "nul",
    "invalid_utf8",
    "huge_text",
    "injection",
    "integer",
    "blob",
)
VALID_TEXT = ("unicode", "nul", "huge_text", "injection")  # keep the old text: same numbers
COLUMNS: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    (KERNEL, "start", TIME, 6),
    (KERNEL, "end", TIME, 6),
    (KERNEL, "deviceId", IDS, 2),
    (KERNEL, "streamId", IDS, 1),
    (KERNEL, "globalPid", IDS, 2),
    (KERNEL, "correlationId", IDS, 1),
    (KERNEL, "demangledName", REFS, 3),
    (KERNEL, "shortName", REFS, 2),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "start", TIME, 2),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "end", TIME, 1),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "bytes", IDS, 1),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "copyKind", IDS, 1),
    ("CUPTI_ACTIVITY_KIND_MEMSET", "start", TIME, 1),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "start", TIME, 1),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", IDS, 1),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", REFS, 1),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", IDS, 1),
    ("NVTX_EVENTS", "start", TIME, 1),
    ("NVTX_EVENTS", "end", TIME, 1),
    ("NVTX_EVENTS", "text", TEXT, 2),
    ("NVTX_EVENTS", "textId", REFS, 1),
    ("StringIds", "value", TEXT, 5),
    ("TARGET_INFO_GPU", "name", TEXT, 1),
    ("TARGET_INFO_SYSTEM_ENV", "value", TEXT, 1),
    ("TARGET_INFO_SESSION_START_TIME", "utcEpochNs", TIME, 1),
)


def plan_values(ctx: Context, seed: int, index: int, rng: random.Random) -> Case:
    base = sqlite_seed(rng)
    shape = ctx.shape(base)
    usable = [
        ((t, c, kinds), w)
        for t, c, kinds, w in COLUMNS
        if c in shape.columns.get(t, ()) and shape.rowids.get(t)
    ]
    table, column, kinds = pick(rng, usable)
    kind = rng.choice(kinds if column in ("start", "end") else [k for k in kinds if k != "swap"])
    rowids = list(shape.rowids[table])
    if table == "StringIds" and shape.kernel_names and rng.random() < 0.8:
        rowids = [i for i in rowids if i in shape.kernel_names]  # kernel names (id is rowid)
    mode = pick(rng, [("one", 6), ("half", 3), ("all", 1)])
    rows = {
        "one": [rng.choice(rowids)],
        "half": rng.sample(rowids, max(1, len(rowids) // 2)),
        "all": rowids,
    }[mode]
    what = f"{table}.{column} := {kind} on {mode} ({len(rows)} rows)"
    want = expect(0) if kind in VALID_TEXT else expect(0, 1)
    if kind == "integer" and table == "StringIds":
        # TEXT affinity stores 12345 as the text '12345': a kernel renamed, not a damaged
        # value; its new name may rightly put it in another class, so only sanity is checked.
        want = expect(0, 1, numbers="any")
    adbc = _adbc(rng)

    def prepare(ctx: Context, folder: Path) -> Setup:
        trace = ctx.copy_seed(base, folder / "in")
        mutate.set_values(trace, table, column, kind, sorted(rows))
        return _loader(ctx.report_setup(trace, folder), adbc)

    return Case(
        "values", index, seed, base, what + (" [ADBC loader]" if adbc else ""), want, prepare
    )


# Bytes ---------------------------------------------------------------------------------------

BYTE_OPS = (
    ("flip", 4),
    ("zero_page", 2),
    ("truncate_page", 2),
    ("truncate_any", 1),
    ("header", 2),
    ("append", 1),
)


def plan_bytes(ctx: Context, seed: int, index: int, rng: random.Random) -> Case:
    base = pick(rng, [("synth", 3), ("synth_2022", 1), ("sample", 1), ("rtx3080", 1)])
    op = pick(rng, BYTE_OPS)
    # Done now, so that the description says which bytes before the case runs.
    data, what = mutate.damage_bytes(ctx.seed_file(base).read_bytes(), op, rng)
    want = expect(0, 1, numbers="gpus" if op == "append" else "any")
    adbc = _adbc(rng)

    def prepare(ctx: Context, folder: Path) -> Setup:
        (folder / "in").mkdir()
        trace = folder / "in" / "t.sqlite"
        trace.write_bytes(data)
        return _loader(ctx.report_setup(trace, folder), adbc)

    what = f"{op}: {what}"[:150] + (" [ADBC loader]" if adbc else "")
    return Case("bytes", index, seed, base, what, want, prepare)


# Kineto --------------------------------------------------------------------------------------

KINETO_OPS: tuple[tuple[str, str, Expect, int], ...] = (
    ("reorder_events", "doc", NEUTRAL, 2),
    ("extra_keys", "doc", NEUTRAL, 1),
    ("extra_events", "doc", NEUTRAL, 1),
    ("pretty", "style", NEUTRAL, 1),
    ("padded", "style", NEUTRAL, 1),
    ("multi_member", "gzip", NEUTRAL, 2),
    ("remove_key", "doc", expect(0, 1), 4),
    ("wrong_type", "doc", expect(0, 1), 4),
    ("huge_number", "doc", expect(0, 1), 3),
    ("negative_dur", "doc", expect(0, 1), 1),
    ("duplicate_events", "doc", expect(0, 1), 2),
    ("unicode_name", "doc", expect(0), 1),
    ("nul_name", "doc", expect(0), 1),
    ("injection_name", "doc", expect(0), 1),
    ("empty_events", "doc", expect(1, numbers="any"), 1),
    ("invalid_utf8_name", "bytes", expect(0, 1, forbid=("Malformed JSON",)), 2),
    ("truncate", "bytes", expect(1, numbers="any"), 2),
    ("trailing_garbage", "bytes", expect(0, 1), 1),
    ("bom", "bytes", expect(0, 1), 1),
    ("nan_token", "bytes", expect(0, 1), 1),
    ("truncated", "gzip", expect(1, numbers="any"), 2),
    ("not_gzip", "gzip", expect(0, 1), 1),
)


def plan_kineto(ctx: Context, seed: int, index: int, rng: random.Random) -> Case:
    op, layer, want, _ = pick(rng, [(o, o[3]) for o in KINETO_OPS])
    gz = layer == "gzip" or rng.random() < 0.4
    base = "kineto_gz" if gz else "kineto"
    mrng = random.Random(rng.random())
    doc = kineto_document()
    what = mutate.kineto_doc(doc, op, mrng) if layer == "doc" else ""
    data = mutate.kineto_text(doc, op if layer == "style" else "compact")
    if layer == "bytes":
        data, what = mutate.kineto_bytes(data, op, mrng)
    if gz:
        data, done = mutate.gzip_bytes(data, op if layer == "gzip" else "plain", mrng)
        what = what or done
    what = what or f"{op} JSON text"

    def prepare(ctx: Context, folder: Path) -> Setup:
        (folder / "in").mkdir()
        trace = folder / "in" / ("t.json.gz" if gz else "t.json")
        trace.write_bytes(data)
        return ctx.report_setup(trace, folder)

    return Case("kineto", index, seed, base, what, want, prepare)
