"""Tests for the synthetic nsys SQLite writer, checked against the real DDL dumps and exports."""

from __future__ import annotations

import ast
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from nsysreport.synth import (
    VERSIONS,
    ApiCall,
    Gpu,
    Kernel,
    Memcpy,
    Memset,
    NvtxRange,
    Scenario,
    kernel_names,
    write_trace,
)

from conftest import REPO

SHARED = Path(__file__).parents[2] / "shared"
SCHEMA_DIR = SHARED / "nsys-schema"
REAL_2026 = SHARED / "traces" / "nsys" / "mfu_2gpu_before.sqlite"
DDL_FILES = {
    "2026.2": "nsys_2026.2.1.210_schema3.25.0_lazy.sql",
    "2026.1": "nsys_2026.1.1.204_schema3.24.14_lazy.sql",
    "2024.5": "nsys_2024.5.1.113_schema3.13.2_lazy.sql",
    "2022.2": "nsys_2022.2.1.31_schema2.9.1_full.sql",
}
# The dumped exports are lazy, so some tables we write are missing from them. Take those from the
# nearest dump that has them: 2026.1 for the GPU tables of 2026.2; for 2024.5, MEMSET as in 2026.2
# (same 3.x columns) and NVTX_EVENTS as in 2022.2 (binaryData only arrived with schema 3.16.1).
DDL_FALLBACK = {
    ("2026.2", "TARGET_INFO_GPU"): "2026.1",
    ("2026.2", "TARGET_INFO_CUDA_DEVICE"): "2026.1",
    ("2024.5", "CUPTI_ACTIVITY_KIND_MEMSET"): "2026.2",
    ("2024.5", "NVTX_EVENTS"): "2022.2",
}
# The 2022.2 source file had `, name TEXT` appended to these two tables by a user (ALTER TABLE).
USER_ADDED = {"CUPTI_ACTIVITY_KIND_RUNTIME": "name", "CUPTI_ACTIVITY_KIND_MEMCPY": "name"}
ENUM_DUMPS = {"2026.2": "enums_2026.2.1.210.txt", "2024.5": "enums_2024.5.1.113.txt"}

Columns = list[tuple[str, str, bool, bool]]  # name, type, NOT NULL, PRIMARY KEY

FLASH = (
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)64, cutlass::bfloat16_t>, "
    "(bool)0>(flash::Flash_fwd_params)"
)
NCCL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)"
NVJET = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"


# Exports of nsys 2020-2021: their sqlite_master, one line per table, kept in the project
# (tests/nsys_ddl/, each file naming its source) and read back through SQLite itself.
OLD_DDL = Path(__file__).parent / "nsys_ddl"
DDL_FILES.update({v: f"nsys_{v}.sql" for v in ("2023.2", "2021.2", "2020.5", "2020.3")})
# No export of those years holds NVTX: the writer uses 2022.2's columns (docs/export-format.md).
DDL_FALLBACK.update({(v, "NVTX_EVENTS"): "2022.2" for v in ("2021.2", "2020.5", "2020.3")})
# The 2023.2 export (one, lazy) holds neither memsets nor NVTX: 2022.2's columns.
DDL_FALLBACK[("2023.2", "CUPTI_ACTIVITY_KIND_MEMSET")] = "2022.2"
DDL_FALLBACK[("2023.2", "NVTX_EVENTS")] = "2022.2"
# No 2024.5 export here recorded an event: the User Guide's columns, 2.9.1's.
DDL_FALLBACK[("2024.5", "CUPTI_ACTIVITY_KIND_CUDA_EVENT")] = "2022.2"
# No 2020.3 export here holds memsets: 2020.5's columns.
DDL_FALLBACK[("2020.3", "CUPTI_ACTIVITY_KIND_MEMSET")] = "2020.5"


def real_ddl(version: str) -> dict[str, Columns]:
    """Columns of every table in a real `.schema` dump, as PRAGMA table_info would list them."""
    if (OLD_DDL / DDL_FILES[version]).exists():
        with closing(sqlite3.connect(":memory:")) as con:
            con.executescript((OLD_DDL / DDL_FILES[version]).read_text())
            return {name: table_columns(con, name) for name in table_names(con)}
    tables: dict[str, Columns] = {}
    current: Columns = []
    for line in (SCHEMA_DIR / DDL_FILES[version]).read_text().splitlines():
        if m := re.match(r"CREATE TABLE (\w+) \(", line):
            current = tables.setdefault(m.group(1), [])
        elif m := re.match(r"    (\w+)\s+(INTEGER|TEXT|REAL)\b(.*)", line):
            rest = m.group(3).split("--")[0]
            current.append((m.group(1), m.group(2), "NOT NULL" in rest, "PRIMARY KEY" in rest))
        elif m := re.match(r", (\w+) (INTEGER|TEXT|REAL)\);", line):
            current.append((m.group(1), m.group(2), False, False))
    return tables


def table_columns(con: sqlite3.Connection, table: str) -> Columns:
    return [
        (name, sql_type, bool(not_null), bool(pk))
        for _, name, sql_type, not_null, _, pk in con.execute(f"PRAGMA table_info({table})")
    ]


def table_names(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


@pytest.fixture
def trace(tmp_path: Path) -> Iterator[Callable[..., sqlite3.Connection]]:
    """Write a scenario and open the result; connections close when the test ends."""
    opened: list[sqlite3.Connection] = []

    def write(scenario: Scenario, version: str = "2026.2") -> sqlite3.Connection:
        path = write_trace(scenario, tmp_path / f"trace-{len(opened)}.sqlite", version)
        opened.append(sqlite3.connect(path))
        return opened[-1]

    yield write
    for con in opened:
        con.close()


def everything() -> Scenario:
    return Scenario(
        kernels=[Kernel(100, 200, FLASH), Kernel(300, 400, NVJET, pid=200, device=1)],
        memcpys=[Memcpy(40, 60, copy_kind=1), Memcpy(410, 450, copy_kind=2, pid=200, device=1)],
        memsets=[Memset(70, 80, value=7)],
        api_calls=[ApiCall(500, 600, "cudaDeviceSynchronize_v3020")],
        nvtx=[NvtxRange(10, 700, "step 0"), NvtxRange(90, 210, "ncclSend", domain="NCCL")],
        gpus=[Gpu(0, pid=100), Gpu(1, pid=200)],
    )


def test_no_runtime_module_imports_the_generators() -> None:
    """nsysreport.synth is for tests, benchmarks and samples: no import of it, lazy ones too."""
    runtime = [p for p in (REPO / "nsysreport").rglob("*.py") if "synth" not in p.parts]
    assert len(runtime) > 20 and REPO / "nsysreport" / "cli.py" in runtime
    found = []
    for path in runtime:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if re.search(r"(^|\.)synth(\.|$)", n)]
    assert found == []


def test_an_unknown_version_is_rejected_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'2023\.1'.*2026\.2, 2024\.5, 2023\.2, 2022\.2"):
        write_trace(Scenario(), tmp_path / "t.sqlite", version="2023.1")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "2026.2",
            "StringIds TARGET_INFO_SYSTEM_ENV TARGET_INFO_SESSION_START_TIME ANALYSIS_DETAILS "
            "CUPTI_ACTIVITY_KIND_MEMSET CUPTI_ACTIVITY_KIND_MEMCPY CUPTI_ACTIVITY_KIND_KERNEL "
            "PROCESSES CUPTI_ACTIVITY_KIND_RUNTIME NVTX_EVENTS ThreadNames TARGET_INFO_GPU "
            "TARGET_INFO_CUDA_DEVICE ENUM_NSYS_EVENT_TYPE ENUM_CUDA_MEMCPY_OPER META_DATA_CAPTURE "
            "META_DATA_EXPORT",
        ),
        (
            "2024.5",
            "StringIds TARGET_INFO_SYSTEM_ENV TARGET_INFO_SESSION_START_TIME ANALYSIS_DETAILS "
            "PROCESSES CUPTI_ACTIVITY_KIND_RUNTIME CUPTI_ACTIVITY_KIND_KERNEL "
            "CUPTI_ACTIVITY_KIND_MEMCPY CUPTI_ACTIVITY_KIND_MEMSET NVTX_EVENTS ThreadNames "
            "TARGET_INFO_GPU ENUM_NSYS_EVENT_TYPE ENUM_CUDA_MEMCPY_OPER META_DATA_CAPTURE "
            "META_DATA_EXPORT",
        ),
        (
            "2022.2",
            "StringIds ThreadNames TARGET_INFO_SYSTEM_ENV TARGET_INFO_SESSION_START_TIME "
            "ANALYSIS_DETAILS TARGET_INFO_GPU EXPORT_META_DATA CUPTI_ACTIVITY_KIND_MEMCPY "
            "CUPTI_ACTIVITY_KIND_MEMSET CUPTI_ACTIVITY_KIND_KERNEL CUPTI_ACTIVITY_KIND_RUNTIME "
            "NVTX_EVENTS PROCESSES",
        ),
    ],
)
def test_each_version_creates_its_own_tables_in_its_creation_order(
    trace: Callable[..., sqlite3.Connection], version: str, expected: str
) -> None:
    con = trace(everything(), version)
    assert table_names(con) == expected.split()


@pytest.mark.parametrize("version", list(VERSIONS))
def test_tables_follow_the_creation_order_of_the_real_dump(
    trace: Callable[..., sqlite3.Connection], version: str
) -> None:
    real_order = list(real_ddl(version))
    written = [t for t in table_names(trace(everything(), version)) if t in real_order]
    assert written == sorted(written, key=real_order.index)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_a_kernel_only_trace_has_no_copy_nvtx_or_gpu_tables(
    trace: Callable[..., sqlite3.Connection], version: str
) -> None:
    tables = set(table_names(trace(Scenario(kernels=[Kernel(10, 20, NVJET)]), version)))
    assert {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"} <= tables
    assert ("PROCESSES" in tables) == ("PROCESSES" in VERSIONS[version].tables)  # 2022.1 on
    assert not tables & {
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "NVTX_EVENTS",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_DEVICE",
    }


def test_an_empty_scenario_still_writes_the_export_skeleton(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    con = trace(Scenario())
    assert table_names(con) == [
        "StringIds",
        "TARGET_INFO_SYSTEM_ENV",
        "TARGET_INFO_SESSION_START_TIME",
        "ANALYSIS_DETAILS",
        "ENUM_NSYS_EVENT_TYPE",
        "ENUM_CUDA_MEMCPY_OPER",
        "META_DATA_CAPTURE",
        "META_DATA_EXPORT",
    ]
    assert con.execute("SELECT duration, startTime, stopTime FROM ANALYSIS_DETAILS").fetchall() == [
        (0, 0, 0)
    ]


@pytest.mark.parametrize(
    ("version", "meta_table", "product", "schema"),
    [
        ("2026.2", "META_DATA_EXPORT", "2026.2.1.210", "3.25.0"),
        ("2024.5", "META_DATA_EXPORT", "2024.5.1.113", "3.13.2"),
        ("2023.2", "EXPORT_META_DATA", "2023.2.3.0", "3.1.7"),
        ("2022.2", "EXPORT_META_DATA", "2022.2.1.31", "2.9.1"),
    ],
)
def test_export_metadata_names_the_nsys_and_schema_versions(
    trace: Callable[..., sqlite3.Connection],
    version: str,
    meta_table: str,
    product: str,
    schema: str,
) -> None:
    con = trace(Scenario(), version)
    meta = dict(con.execute(f"SELECT name, value FROM {meta_table}").fetchall())
    assert meta["EXPORT_PRODUCT_VERSION"] == product
    assert meta["EXPORT_SCHEMA_VERSION"] == schema
    assert meta["EXPORT_SCHEMA_VERSION_MAJOR"] == schema.split(".")[0]
    assert meta["EXPORT_HOST"] == "synth-host"


def test_2022_exports_keep_metadata_in_export_meta_data_and_have_no_enum_tables(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    tables = set(table_names(trace(everything(), "2022.2")))
    assert "EXPORT_META_DATA" in tables
    assert not tables & {"META_DATA_EXPORT", "META_DATA_CAPTURE"}
    assert not [t for t in tables if t.startswith("ENUM_")]


@pytest.mark.parametrize("version", list(VERSIONS))
def test_every_written_table_has_the_columns_of_the_real_ddl(
    trace: Callable[..., sqlite3.Connection], version: str
) -> None:
    con = trace(everything(), version)
    dumps = {v: real_ddl(v) for v in DDL_FILES}
    for table in table_names(con):
        source = version if table in dumps[version] else DDL_FALLBACK[(version, table)]
        expected = dumps[source][table]
        if source == "2022.2" and table in USER_ADDED:
            expected = [c for c in expected if c[0] != USER_ADDED[table]]
        assert table_columns(con, table) == expected, table


@pytest.mark.parametrize("version", list(VERSIONS))
@pytest.mark.parametrize(
    "table",
    [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
    ],
)
def test_gpu_timeline_tables_have_the_real_column_order(
    trace: Callable[..., sqlite3.Connection], version: str, table: str
) -> None:
    con = trace(everything(), version)
    source = version if table in real_ddl(version) else DDL_FALLBACK[(version, table)]
    expected = [c[0] for c in real_ddl(source)[table] if c[0] != USER_ADDED.get(table)]
    assert [c[0] for c in table_columns(con, table)] == expected


@pytest.mark.parametrize("version", ["2026.2", "2024.5", "2023.2", "2022.2"])
def test_event_records_and_synchronisations_have_the_real_columns_and_sync_types(
    trace: Callable[..., sqlite3.Connection], version: str
) -> None:
    """A record of event 3 on stream 8 and a cudaEventSynchronize on it: a CUDA_EVENT row with
    the record call's correlation id and a SYNCHRONIZATION row with the wait's, its syncType as
    the release writes it (2023.2: 2; the enum table's 1 elsewhere), the stream it names none
    of 0xFFFFFFFF; the columns of each release's real DDL."""
    calls = [
        ApiCall(10, 20, "cudaEventRecord_v3020", event=3, stream=8),
        ApiCall(30, 40, "cudaEventSynchronize_v3020", event=3),
    ]
    con = trace(Scenario(kernels=[Kernel(5, 15, NVJET, stream=8)], api_calls=calls), version)
    dumps = {v: real_ddl(v) for v in DDL_FILES}
    for table in ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
        source = version if table in dumps[version] else DDL_FALLBACK[(version, table)]
        assert table_columns(con, table) == dumps[source][table], table
    assert con.execute(
        "SELECT streamId, eventId, r.start FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT"
        " JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r USING (correlationId)"
    ).fetchall() == [(8, 3, 10)]
    assert con.execute(
        "SELECT streamId, eventId, syncType, r.start FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        " JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r USING (correlationId)"
    ).fetchall() == [(4294967295, 3, 2 if version == "2023.2" else 1, 30)]
    without = trace(Scenario(api_calls=calls, cuda_events=False), version)
    assert "CUPTI_ACTIVITY_KIND_CUDA_EVENT" not in table_names(without)


def test_2026_kernel_columns_equal_those_of_a_real_2026_export(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    con = trace(everything(), "2026.2")
    with sqlite3.connect(f"file:{REAL_2026}?mode=ro&immutable=1", uri=True) as real:
        expected = table_columns(real, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert table_columns(con, "CUPTI_ACTIVITY_KIND_KERNEL") == expected


def test_green_context_is_zero_in_2026_null_in_2024_and_absent_in_2022(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    scenario = Scenario(kernels=[Kernel(10, 20, NVJET)])
    for version, expected in (("2026.2", 0), ("2024.5", None)):
        con = trace(scenario, version)
        assert con.execute("SELECT greenContextId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (
            expected,
        )
    names = [c[0] for c in table_columns(trace(scenario, "2022.2"), "CUPTI_ACTIVITY_KIND_KERNEL")]
    assert "greenContextId" not in names


def test_2026_kernels_fill_the_appended_not_null_columns(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    con = trace(Scenario(kernels=[Kernel(10, 20, NVJET)]))
    row = con.execute(
        "SELECT tensorSizeMinusOneElements, launchType, cacheConfig, sharedMemoryLimitConfig,"
        " graphNodeId, contextId FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchone()
    assert row == ("[]", 1, 1, 0, None, 1)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_each_gpu_operation_joins_exactly_one_launch_row(
    trace: Callable[..., sqlite3.Connection], version: str
) -> None:
    con = trace(everything(), version)
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        # NVIDIA's join; SQLite reads the hex mask as a signed 64-bit integer, as nsys intends.
        counts = con.execute(
            f"""SELECT count(r.start) FROM CUPTI_ACTIVITY_KIND_{table} AS g
                LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
                  ON r.correlationId = g.correlationId
                 AND g.globalPid = r.globalTid & 0xFFFFFFFFFF000000
                GROUP BY g.rowid"""
        ).fetchall()
        assert counts and all(c == (1,) for c in counts), table


def test_two_processes_reuse_the_same_correlation_ids(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    kernels = [Kernel(10 * i + 100, 10 * i + 105, NVJET, pid=100 + i % 2) for i in range(6)]
    con = trace(Scenario(kernels=kernels))
    rows = con.execute(
        "SELECT globalPid >> 24 & 0xFFFFFF, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchall()
    assert sorted(rows) == [(100, 1), (100, 2), (100, 3), (101, 1), (101, 2), (101, 3)]


def test_correlation_ids_follow_launch_order_within_a_process(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    # Given out of order; the memcpy is launched first although its copy starts last.
    scenario = Scenario(
        kernels=[Kernel(300, 310, NVJET, launch=(30, 40))],
        memcpys=[Memcpy(400, 410, launch=(10, 20))],
        api_calls=[ApiCall(25, 28, "cudaStreamSynchronize_v3020")],
    )
    con = trace(scenario)
    runtime = con.execute(
        "SELECT s.value, r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r"
        " JOIN StringIds AS s ON s.id = r.nameId ORDER BY r.start"
    ).fetchall()
    assert runtime == [
        ("cudaMemcpyAsync_v3020", 1),
        ("cudaStreamSynchronize_v3020", 2),
        ("cudaLaunchKernel_v7000", 3),
    ]
    assert con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall() == [(3,)]


def test_global_ids_pack_the_vm_pid_and_thread(trace: Callable[..., sqlite3.Connection]) -> None:
    con = trace(Scenario(kernels=[Kernel(10, 20, NVJET, pid=144), Kernel(30, 40, NVJET, tid=7)]))
    assert con.execute(
        "SELECT k.globalPid, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
        " JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r USING (correlationId)"
        " WHERE k.globalPid = r.globalTid & 0xFFFFFFFFFF000000 ORDER BY k.start"
    ).fetchall() == [
        ((1 << 48) | (144 << 24), (1 << 48) | (144 << 24) | 144),
        ((1 << 48) | (100 << 24), (1 << 48) | (100 << 24) | 7),
    ]
    assert con.execute("SELECT globalPid, pid, name FROM PROCESSES ORDER BY pid").fetchall() == [
        ((1 << 48) | (100 << 24), 100, "python3"),
        ((1 << 48) | (144 << 24), 144, "python3"),
    ]


def test_default_launch_window_is_the_two_nanoseconds_before_the_kernel(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    con = trace(Scenario(kernels=[Kernel(100, 200, NVJET)]))
    assert con.execute(
        "SELECT start, end, eventClass, returnValue FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    ).fetchall() == [(98, 99, 0, 0)]


def test_kernel_names_resolve_through_string_ids(trace: Callable[..., sqlite3.Connection]) -> None:
    kernels = [Kernel(10, 20, FLASH), Kernel(30, 40, NCCL), Kernel(50, 60, NVJET)]
    con = trace(Scenario(kernels=kernels))
    rows = con.execute(
        "SELECT d.value, s.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
        " JOIN StringIds AS d ON d.id = k.demangledName"
        " JOIN StringIds AS s ON s.id = k.shortName"
        " JOIN StringIds AS m ON m.id = k.mangledName ORDER BY k.start"
    ).fetchall()
    assert [(d, s) for d, s, _ in rows] == [
        (FLASH, "flash_fwd_kernel"),
        (NCCL, "ncclDevKernel_SendRecv"),
        (NVJET, NVJET),
    ]
    assert rows[0][2].startswith("_ZN5flash16flash_fwd_kernelI")
    assert rows[1][2].startswith("_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorage")
    assert rows[2][2] == NVJET


def test_short_names_match_those_of_real_nsys_exports() -> None:
    real: set[tuple[str, str, str]] = set()
    for path in sorted((SHARED / "traces" / "nsys").glob("*.sqlite")):
        with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
            real |= set(
                con.execute(
                    "SELECT d.value, s.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k"
                    " JOIN StringIds AS d ON d.id = k.demangledName"
                    " JOIN StringIds AS s ON s.id = k.shortName"
                    " JOIN StringIds AS m ON m.id = k.mangledName"
                ).fetchall()
            )
    assert len(real) > 100
    for demangled, short, mangled in real:
        ours = kernel_names(demangled)
        assert ours[1] == short, demangled
        assert ours[2].startswith("_Z") or ours[2] == mangled == demangled


def test_string_ids_are_interned_and_unique(trace: Callable[..., sqlite3.Connection]) -> None:
    kernels = [
        Kernel(10 * i, 10 * i + 5, [FLASH, NVJET][i % 2], pid=100 + i % 3) for i in range(12)
    ]
    con = trace(Scenario(kernels=kernels, backtrace_duplicates=True))
    assert con.execute("SELECT count(*) - count(DISTINCT value) FROM StringIds").fetchone() == (0,)
    assert con.execute(
        "SELECT count(DISTINCT demangledName), count(DISTINCT shortName) FROM"
        " CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchone() == (2, 2)
    dangling = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        " WHERE nameId NOT IN (SELECT id FROM StringIds)"
    ).fetchone()
    assert dangling == (0,)


def test_driver_launches_keep_their_event_class_and_api_name(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    kernel = Kernel(100, 200, NVJET, api="cuLaunchKernelEx", event_class=1)
    con = trace(Scenario(kernels=[kernel]))
    assert con.execute(
        "SELECT r.eventClass, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r"
        " JOIN StringIds AS s ON s.id = r.nameId"
    ).fetchall() == [(1, "cuLaunchKernelEx")]


def test_backtrace_duplicates_add_one_class_67_row_per_launch(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    scenario = Scenario(
        kernels=[Kernel(100, 200, NVJET, launch=(50, 60))],
        memcpys=[Memcpy(300, 400, launch=(250, 270))],
        api_calls=[ApiCall(500, 510, "cudaDeviceSynchronize_v3020")],
        backtrace_duplicates=True,
    )
    con = trace(scenario)
    rows = con.execute(
        "SELECT r.start, r.end, r.eventClass, r.correlationId, s.value"
        " FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId"
        " ORDER BY r.correlationId, r.eventClass"
    ).fetchall()
    assert rows == [
        (50, 60, 0, 1, "cudaLaunchKernel_v7000"),
        (49, 61, 67, 1, "cudaLaunchKernel"),
        (250, 270, 0, 2, "cudaMemcpyAsync_v3020"),
        (249, 271, 67, 2, "cudaMemcpyAsync"),
        (500, 510, 0, 3, "cudaDeviceSynchronize_v3020"),
    ]
    # A naive join now doubles each kernel; restricting to runtime/driver classes does not.
    join = (
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r"
        " ON r.correlationId = k.correlationId AND k.globalPid = r.globalTid & 0xFFFFFFFFFF000000"
    )
    assert con.execute(join).fetchone() == (2,)
    assert con.execute(join + " AND r.eventClass IN (0, 1)").fetchone() == (1,)


def test_registered_nvtx_text_uses_a_string_id_and_inline_text_does_not(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    scenario = Scenario(
        nvtx=[NvtxRange(10, 20, "inline"), NvtxRange(30, 40, "ncclAllReduce", registered=True)]
    )
    con = trace(scenario)
    rows = con.execute(
        "SELECT n.text, n.textId, s.value, n.domainId FROM NVTX_EVENTS AS n"
        " LEFT JOIN StringIds AS s ON s.id = n.textId ORDER BY n.start"
    ).fetchall()
    assert rows[0] == ("inline", None, None, 0)
    assert rows[1][0] is None and rows[1][2] == "ncclAllReduce"


def test_a_named_domain_is_announced_once_per_process(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    scenario = Scenario(
        nvtx=[
            NvtxRange(10, 20, "ncclSend", domain="NCCL", registered=True),
            NvtxRange(30, 40, "ncclRecv", domain="NCCL", registered=True),
            NvtxRange(50, 60, "forward", domain="app"),
            NvtxRange(15, 25, "ncclSend", domain="NCCL", pid=200),
        ]
    )
    con = trace(scenario)
    creates = con.execute(
        "SELECT start, end, text, domainId, globalTid >> 24 & 0xFFFFFF FROM NVTX_EVENTS"
        " WHERE eventType = 75 ORDER BY start"
    ).fetchall()
    assert creates == [
        (10, None, "NCCL", 1, 100),
        (15, None, "NCCL", 1, 200),
        (50, None, "app", 2, 100),
    ]
    ranges = con.execute(
        "SELECT start, domainId FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY start"
    ).fetchall()
    assert ranges == [(10, 1), (15, 1), (30, 1), (50, 2)]


def test_range_ids_end_threads_payloads_and_open_ranges_are_written(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    scenario = Scenario(
        nvtx=[
            NvtxRange(10, 90, "push"),
            NvtxRange(20, 80, "async", event_type=60, end_tid=101, payload=4096),
            NvtxRange(30, None, "never closed", event_type=60),
        ]
    )
    con = trace(scenario)
    base = (1 << 48) | (100 << 24)
    assert con.execute(
        "SELECT start, end, eventType, rangeId, globalTid, endGlobalTid, uint64Value"
        " FROM NVTX_EVENTS ORDER BY start"
    ).fetchall() == [
        (10, 90, 59, None, base | 100, None, None),
        (20, 80, 60, 1, base | 100, base | 101, 4096),
        (30, None, 60, 2, base | 100, None, None),
    ]


def test_analysis_details_span_every_row(trace: Callable[..., sqlite3.Connection]) -> None:
    scenario = Scenario(
        kernels=[Kernel(100, 200, NVJET, launch=(5, 6))],
        nvtx=[NvtxRange(50, 900, "step"), NvtxRange(60, None, "open")],
        backtrace_duplicates=True,
    )
    con = trace(scenario)
    assert con.execute(
        "SELECT globalVid, duration, startTime, stopTime FROM ANALYSIS_DETAILS"
    ).fetchall() == [(1 << 48, 896, 4, 900)]
    assert con.execute("SELECT systemClockNs FROM TARGET_INFO_SESSION_START_TIME").fetchone() == (
        4,
    )


def test_gpus_are_described_and_mapped_to_their_processes(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    gpus = [Gpu(0, pid=144), Gpu(1, name="NVIDIA A100-SXM4-80GB", pid=145)]
    con = trace(Scenario(gpus=gpus))
    assert con.execute("SELECT vmId, id, name FROM TARGET_INFO_GPU ORDER BY id").fetchall() == [
        (1 << 48, 0, "NVIDIA H100 80GB HBM3"),
        (1 << 48, 1, "NVIDIA A100-SXM4-80GB"),
    ]
    assert con.execute(
        "SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE ORDER BY gpuId"
    ).fetchall() == [(0, 0, 144), (1, 0, 145)]
    assert con.execute("SELECT pid FROM PROCESSES ORDER BY pid").fetchall() == [(144,), (145,)]


def test_two_gpus_with_one_device_id_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="device id"):
        write_trace(Scenario(gpus=[Gpu(0), Gpu(0)]), tmp_path / "t.sqlite")


def test_a_pid_beyond_24_bits_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="24-bit"):
        write_trace(Scenario(kernels=[Kernel(1, 2, NVJET, pid=1 << 24)]), tmp_path / "t.sqlite")


def test_hostname_metadata_and_capture_environment_are_written(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    scenario = Scenario(
        host="node-7",
        metadata={"NSYSREPORT_SIMULATED": "tensor_parallel 2", "EXPORT_USER": "ci"},
        capture_env={"RANK": "3", "LOCAL_RANK": "1"},
    )
    con = trace(scenario)
    hostname = con.execute(
        "SELECT globalVid, devStateName, nameEnum, value FROM TARGET_INFO_SYSTEM_ENV"
        " WHERE name = 'Hostname'"
    ).fetchall()
    assert hostname == [(1 << 48, "Local (CLI)", 619, "node-7")]
    meta = con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
    assert meta[-1] == ("NSYSREPORT_SIMULATED", "tensor_parallel 2")
    assert ("EXPORT_USER", "ci") in meta
    assert [n for n, _ in meta].count("EXPORT_USER") == 1
    env = con.execute(
        "SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'"
    ).fetchall()
    assert env == [('RANK="3"',), ('LOCAL_RANK="1"',)]


@pytest.mark.parametrize("version", ["2026.2", "2024.5"])
def test_enum_tables_hold_every_row_of_the_real_dump(
    trace: Callable[..., sqlite3.Connection], version: str
) -> None:
    dump: dict[str, list[tuple[int, str, str]]] = {}
    rows: list[tuple[int, str, str]] = []
    for line in (SCHEMA_DIR / ENUM_DUMPS[version]).read_text().splitlines():
        if line.startswith("## "):
            rows = dump.setdefault(line[3:], [])
        elif line:
            ident, name, label = line.split("|")
            rows.append((int(ident), name, label))
    con = trace(Scenario(), version)
    for table in ("ENUM_NSYS_EVENT_TYPE", "ENUM_CUDA_MEMCPY_OPER"):
        assert (
            con.execute(f"SELECT id, name, label FROM {table} ORDER BY id").fetchall()
            == dump[table]
        )


def test_memcpy_kinds_join_their_enum_label(trace: Callable[..., sqlite3.Connection]) -> None:
    memcpys = [Memcpy(10, 20, copy_kind=k) for k in (1, 2, 8, 10)]
    con = trace(Scenario(memcpys=memcpys))
    assert con.execute(
        "SELECT e.label, m.srcKind, m.dstKind, m.bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m"
        " JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind ORDER BY m.copyKind"
    ).fetchall() == [
        ("Host-to-Device", 0, 2, 1 << 20),
        ("Device-to-Host", 2, 0, 1 << 20),
        ("Device-to-Device", 2, 2, 1 << 20),
        ("Peer-to-Peer", 2, 2, 1 << 20),
    ]


def test_the_file_looks_like_a_real_export(trace: Callable[..., sqlite3.Connection]) -> None:
    con = trace(everything())
    assert con.execute("PRAGMA page_size").fetchone() == (4096,)
    # Header bytes 18-19 are 1 for a rollback-journal file (2 would mean WAL).
    path = Path(con.execute("PRAGMA database_list").fetchone()[2])
    assert path.read_bytes()[18:20] == b"\x01\x01"
    assert con.execute("PRAGMA user_version").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM sqlite_master WHERE type != 'table'").fetchone() == (
        0,
    )


def test_gpu_rows_are_written_in_start_order(trace: Callable[..., sqlite3.Connection]) -> None:
    kernels = [Kernel(s, s + 5, NVJET) for s in (300, 100, 200)]
    con = trace(Scenario(kernels=kernels))
    rows = con.execute("SELECT start, gridId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid")
    assert rows.fetchall() == [(100, 1), (200, 2), (300, 3)]


@pytest.mark.parametrize("version", list(VERSIONS))
def test_writing_the_same_scenario_twice_gives_identical_bytes(
    tmp_path: Path, version: str
) -> None:
    first = write_trace(everything(), tmp_path / "a.sqlite", version)
    second = write_trace(everything(), tmp_path / "b.sqlite", version)
    assert first.read_bytes() == second.read_bytes()


def test_an_existing_file_is_replaced_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    path.write_text("not a database")
    assert write_trace(Scenario(kernels=[Kernel(1, 2, NVJET)]), path) == path
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (1,)
    con.close()
    assert [p.name for p in tmp_path.iterdir()] == ["t.sqlite"]


def test_a_failed_write_leaves_the_old_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    path.write_text("old")

    def failing() -> Iterator[Kernel]:
        yield Kernel(1, 2, NVJET)
        raise RuntimeError("scenario broke")

    with pytest.raises(RuntimeError):
        write_trace(Scenario(kernels=failing()), path)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.sqlite"]


def test_a_hundred_thousand_kernels_from_a_generator_are_all_written(
    trace: Callable[..., sqlite3.Connection],
) -> None:
    n = 100_000
    kernels = (
        Kernel(1000 * i, 1000 * i + 700, [FLASH, NCCL, NVJET][i % 3], device=i % 4, pid=100 + i % 4)
        for i in range(n)
    )
    con = trace(Scenario(kernels=kernels))
    assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (n,)
    assert con.execute(
        "SELECT count(*), max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    ).fetchone() == (n, n // 4)
