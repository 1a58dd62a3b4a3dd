"""NCCL's own data in an nsys export (#35): the extended NVTX payloads NCCL attaches to its API
ranges (`nsys export --include-blobs=true`), decoded by the schema the export describes.

Scenario: two ranks (processes 100, 101), one communicator (commHash 0xabc...) of 2 ranks
initialised by ncclCommInitRankConfig on each, then one ncclAllReduce of 16 MiB each, whose
kernel runs [1000, 2000) inside the range. No trace metadata names a group: without payloads
the group size would come from the GPUs in the trace.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path
from typing import Any

from nsysreport.load import open_trace
from nsysreport.nvtx_payload import decode
from nsysreport.queries import run_query
from nsysreport.report_builder import build_report
from nsysreport.synth import (
    NCCL_ALL_REDUCE,
    NCCL_COMM_INIT,
    Kernel,
    NvtxRange,
    Scenario,
    nccl_payload,
    write_trace,
)
from nsysreport.synth.parquet import write_parquet_dir

NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
COMM = 0xABCDEF0123456789
BYTES = 16 << 20


def scenario(ranks: int = 2, blobs: bool = True) -> Scenario:
    kernels, nvtx = [], []
    for rank in range(2):
        pid = 100 + rank
        init = nccl_payload(NCCL_COMM_INIT, {"NCCL communicator ID": COMM, "No. of ranks": ranks,
                                             "Rank": rank, "CUDA device": rank})  # fmt: skip
        reduce = nccl_payload(
            NCCL_ALL_REDUCE, {"NCCL communicator ID": COMM, "Message size [bytes]": BYTES}
        )
        nvtx += [
            NvtxRange(0, 500, "ncclCommInitRankConfig", pid=pid, domain="NCCL", registered=True,
                      binary=init if blobs else None),
            NvtxRange(900, 950, "ncclAllReduce", pid=pid, domain="NCCL", registered=True,
                      binary=reduce if blobs else None),
        ]  # fmt: skip
        kernels.append(Kernel(1_000, 2_000, NCCL, device=rank, pid=pid, launch=(910, 920)))
    return Scenario(kernels=kernels, nvtx=nvtx, payload_schemas=[NCCL_COMM_INIT, NCCL_ALL_REDUCE])


def collectives(path: Path) -> list[dict[str, Any]]:
    rows = run_query(open_trace(path), "collective_summary").to_dicts()
    return sorted(rows, key=lambda r: r["device_id"])


def test_a_payload_decodes_by_the_schema_the_export_describes() -> None:
    entries = {(1, NCCL_ALL_REDUCE.schema_id): [("comm_hash", 18, 0), ("message_bytes", 22, 8)]}
    blob = nccl_payload(NCCL_ALL_REDUCE, {"NCCL communicator ID": COMM, "Message size [bytes]": 7})
    assert len(blob) == 32 + 24
    assert decode(blob, 1, entries) == {"comm_hash": "0xabcdef0123456789", "message_bytes": 7}
    assert decode(blob[:40], 1, entries) is None  # shorter than its fields: does not fit
    assert decode(blob, 2, entries) == {}  # another domain's schema: none of NCCL's
    other = blob[:8] + struct.pack("<Q", 99) + blob[16:]
    assert decode(other, 1, entries) == {}


def test_the_communicator_group_size_and_bytes_come_from_nccls_payloads(tmp_path: Path) -> None:
    path = write_trace(scenario(), tmp_path / "t.sqlite")
    con = open_trace(path)
    payloads = run_query(con, "collective_summary").to_dicts()
    assert payloads and all(r["group_gpus"] == 2 for r in payloads)
    report = build_report(con, path)
    for c in report.collectives:
        assert (c.op, c.group_gpus, c.group_source) == ("AllReduce", 2, "nccl_payload")
        assert c.total_bytes == BYTES
    channels = {r.channel for r in report.communicators}
    assert channels == {"NCCL communicator 0xabcdef0123456789"}


def test_the_payload_s_rank_count_wins_over_the_gpus_in_the_trace(tmp_path: Path) -> None:
    # A communicator of 8 ranks of which the trace holds 2: the payload says 8.
    path = write_trace(scenario(ranks=8), tmp_path / "t.sqlite")
    report = build_report(open_trace(path), path)
    assert {(c.group_gpus, c.group_source) for c in report.collectives} == {(8, "nccl_payload")}


def test_without_blobs_the_heuristics_stand(tmp_path: Path) -> None:
    path = write_trace(scenario(blobs=False), tmp_path / "t.sqlite")
    report = build_report(open_trace(path), path)
    assert {c.group_source for c in report.collectives} == {"gpus_in_trace"}
    assert {c.total_bytes for c in report.collectives} == {None}


def test_a_payload_too_short_for_its_schema_is_ignored_and_counted(tmp_path: Path) -> None:
    path = write_trace(scenario(), tmp_path / "t.sqlite")
    with sqlite3.connect(path) as con:
        row = con.execute(
            "SELECT rowid, binaryData FROM NVTX_EVENTS WHERE binaryData IS NOT NULL LIMIT 1"
        ).fetchone()
        con.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", (row[1][:36], row[0]))
    report = build_report(open_trace(path), path)
    assert [(i.ledger_class, i.source, i.count) for i in report.quality.items] == [
        ("unparsed_metadata", "NVTX_EVENTS", 1)
    ]


def test_the_parquet_export_s_payloads_decode_alike(tmp_path: Path) -> None:
    path = write_trace(scenario(), tmp_path / "t.sqlite")
    folder = write_parquet_dir(path, tmp_path / "t_pqtdir")
    a = build_report(open_trace(path), path)
    b = build_report(open_trace(folder), folder)
    assert [(c.group_gpus, c.group_source, c.total_bytes) for c in a.collectives] == [
        (c.group_gpus, c.group_source, c.total_bytes) for c in b.collectives
    ]
