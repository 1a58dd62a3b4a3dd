"""Exports of nsys 2020-2021 (#35): read by their own columns, with every number as today's.

The synthetic writer's 2020.3, 2020.5 and 2021.2 profiles write the layouts of real exports of
those releases (docs/export-format.md, "nsys 2020-2021"): no metadata, capture-duration or
session-start table, kernels of 25 or 26 columns, a GPU list keyed by `deviceId` (2020.5) or only
in TARGET_INFO_CUDA_GPU (2020.3). The same scenario written as 2026.2 gives the expected numbers.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.model import as_json
from nsysreport.report_builder import build_report
from nsysreport.synth import (
    Gpu,
    Kernel,
    Memcpy,
    Memset,
    NvtxRange,
    Scenario,
    write_trace,
)
from nsysreport.trace_file import inspect_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
OLD = ("2020.3", "2020.5", "2021.2")
# Columns of the real exports (docs/export-format.md): kernel, memcpy, runtime, GPU list.
COLUMNS = {
    "2020.3": {
        "CUPTI_ACTIVITY_KIND_KERNEL": 25,
        "CUPTI_ACTIVITY_KIND_MEMCPY": 17,
        "CUPTI_ACTIVITY_KIND_RUNTIME": 7,
        "TARGET_INFO_CUDA_GPU": 29,
    },
    "2020.5": {
        "CUPTI_ACTIVITY_KIND_KERNEL": 26,
        "CUPTI_ACTIVITY_KIND_MEMCPY": 18,
        "CUPTI_ACTIVITY_KIND_RUNTIME": 8,
        "TARGET_INFO_CUDA_GPU": 29,
        "TARGET_INFO_GPU": 5,
    },
    "2021.2": {
        "CUPTI_ACTIVITY_KIND_KERNEL": 26,
        "CUPTI_ACTIVITY_KIND_MEMCPY": 18,
        "CUPTI_ACTIVITY_KIND_RUNTIME": 8,
        "TARGET_INFO_GPU": 41,
    },
}


def scenario() -> Scenario:
    """Two GPUs of two processes and a third GPU listed but unused: per GPU a GEMM [0, 1000)
    and an all-reduce; GPU 0 also a copy [1000, 1500) and a memset [3000, 3100); a step range."""
    kernels = [
        Kernel(0, 1_000, GEMM, device=0, pid=100),
        Kernel(1_500, 3_000, NCCL, device=0, pid=100),
        Kernel(0, 1_000, GEMM, device=1, pid=101),
        Kernel(2_000, 3_000, NCCL, device=1, pid=101),
    ]
    return Scenario(
        kernels=kernels,
        memcpys=[Memcpy(1_000, 1_500, device=0, pid=100)],
        memsets=[Memset(3_000, 3_100, device=0, pid=100)],
        nvtx=[NvtxRange(-100, 3_200, "step 1", pid=p) for p in (100, 101)],
        gpus=[
            Gpu(0, name="Tesla V100-PCIE-32GB", pid=100),
            Gpu(1, name="Tesla V100-PCIE-32GB", pid=101),
            Gpu(2, name="Tesla V100-PCIE-32GB"),
        ],
    )


def report(tmp_path: Path, version: str) -> Any:
    path = write_trace(scenario(), tmp_path / f"{version}.sqlite", version=version)
    return build_report(open_trace(path), path)


def numbers(r: Any) -> dict[str, Any]:
    data = as_json(r)
    gpu_keys = ("rank", "device_id", "gpu_name", "span_ns", "compute_ns", "exposed_comm_ns")
    gpu_keys += ("exposed_memcpy_ns", "idle_ns")
    return {
        "gpus": [tuple(g[k] for k in gpu_keys) for g in data["gpus"]],
        "steps": [
            (s["rank"], s["name"], s["step_time_ns"], s["exposed_comm_ns"]) for s in data["steps"]
        ],
        "collectives": [
            (c["rank"], c["op"], c["count"], c["total_ns"]) for c in data["collectives"]
        ],
        "ledger": data["ledger"],
    }


@pytest.mark.parametrize("version", OLD)
def test_each_old_layout_has_the_real_exports_columns_and_no_metadata(
    tmp_path: Path, version: str
) -> None:
    path = write_trace(scenario(), tmp_path / "t.sqlite", version=version)
    with sqlite3.connect(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        for table, count in COLUMNS[version].items():
            assert len(con.execute(f"PRAGMA table_info({table})").fetchall()) == count, table
    gone = {"EXPORT_META_DATA", "META_DATA_EXPORT", "ANALYSIS_DETAILS", "PROCESSES"}
    assert not gone & tables and "TARGET_INFO_SESSION_START_TIME" not in tables
    assert ("TARGET_INFO_GPU" in tables) == (version != "2020.3")


@pytest.mark.parametrize("version", OLD)
def test_an_old_export_gives_every_number_of_a_current_one(tmp_path: Path, version: str) -> None:
    got, expected = numbers(report(tmp_path, version)), numbers(report(tmp_path, "2026.2"))
    assert got == expected
    # By hand, GPU 0: span [0, 3100) = GEMM 1000 + exposed comm [1500, 3000) 1500 + copy
    # [1000, 1500) 500 + memset 100; no idle. GPU 1: GEMM 1000 + idle 1000 + all-reduce 1000.
    assert [g[3:] for g in got["gpus"]] == [
        (3_100, 1_000, 1_500, 600, 0),
        (3_000, 1_000, 1_000, 0, 1_000),
    ]
    # The GPU's model comes from TARGET_INFO_GPU.deviceId (2020.5) or TARGET_INFO_CUDA_GPU (2020.3).
    assert {g[2] for g in got["gpus"]} == {"Tesla V100-PCIE-32GB"}  # fmt: skip


@pytest.mark.parametrize("version", OLD)
def test_the_capture_section_says_what_an_old_export_cannot_give(
    tmp_path: Path, version: str
) -> None:
    r = report(tmp_path, version)
    hint = r.capture.hints[0]
    assert hint.topic == "old_export"
    assert hint.finding.startswith(
        "an export of nsys 2021 or before (no EXPORT_META_DATA, ANALYSIS_DETAILS, "
        "TARGET_INFO_SESSION_START_TIME): the nsys version that wrote it is unknown"
    )
    assert [g.device_id for g in r.capture.unused_gpus] == [2]
    assert r.traces[0].nsys_version is None
    assert "old_export" not in [h.topic for h in report(tmp_path, "2026.2").capture.hints]


def test_a_kernel_on_a_device_the_2020_5_list_lacks_is_skipped(tmp_path: Path) -> None:
    # The list is keyed by deviceId there: a kernel on device 7 is no GPU of its own.
    base = scenario()
    kernels = [*base.kernels, Kernel(0, 10, GEMM, device=7, pid=100)]
    path = write_trace(
        Scenario(kernels=kernels, gpus=base.gpus, memcpys=base.memcpys),
        tmp_path / "t.sqlite",
        version="2020.5",
    )
    r = build_report(open_trace(path), path)
    assert sorted(g.device_id for g in r.gpus) == [0, 1]
    assert [(i.ledger_class, i.count) for i in r.quality.items] == [("unlisted_device", 1)]


def test_an_old_export_without_cuda_tables_has_no_gpu_activity(tmp_path: Path) -> None:
    # nsys 2021.3 with an application that never reached CUDA: StringIds and target tables
    # only, no metadata (a real export's layout): an export, with nothing to report.
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
        con.execute(
            "CREATE TABLE ThreadNames "
            "(nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER)"
        )
        con.execute(
            "CREATE TABLE TARGET_INFO_SESSION_START_TIME "
            "(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)"
        )
    with pytest.raises(TraceError, match="contains no GPU activity"):
        inspect_trace(path)
    with sqlite3.connect(tmp_path / "other.sqlite") as con:
        con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    with pytest.raises(TraceError, match="not an Nsight Systems export"):
        inspect_trace(tmp_path / "other.sqlite")
