"""Loading real exports: every table optional, read-only, and both loaders agree."""

from __future__ import annotations

import hashlib

import pytest

from nsysreport.database import connect
from nsysreport.load import open_trace
from nsysreport.raw_tables import RAW_TABLES
from nsysreport.sqlite_copy import copy_tables
from nsysreport.trace_file import inspect_trace

from conftest import NSYS_TRACES, real_trace

REAL = sorted(p.name for p in NSYS_TRACES.glob("*.sqlite"))


@pytest.mark.parametrize("name", REAL)
def test_every_real_export_loads_with_all_views(name: str) -> None:
    con = open_trace(real_trace(name))
    for view in ("kernel", "memcpy", "activity", "launch", "nvtx_range", "gpu", "trace_meta"):
        con.execute(f"SELECT * FROM {view} LIMIT 1").fetchall()
    (kernels,) = con.execute("SELECT count(*) FROM kernel").fetchone()  # type: ignore[misc]
    assert kernels > 0


@pytest.mark.parametrize("name", REAL)
def test_loading_never_writes_to_the_trace_or_beside_it(name: str) -> None:
    path = real_trace(name)
    before = (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    siblings = set(path.parent.iterdir())
    open_trace(path)
    assert (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()) == before
    assert set(path.parent.iterdir()) == siblings


def test_kernels_missing_from_the_names_table_keep_a_placeholder_name() -> None:
    con = open_trace(real_trace("rtx3080_tiny_2026.1.sqlite"))
    names = [r[0] for r in con.execute("SELECT name FROM kernel ORDER BY start_ns").fetchall()]
    assert len(names) == 2 and all(names)


@pytest.mark.parametrize("name", REAL)
def test_the_fast_and_the_fallback_loader_load_identical_tables(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = real_trace(name)
    schema = inspect_trace(path)
    fast = connect()
    assert copy_tables(fast, path, schema) == "sqlite_scanner"
    monkeypatch.setenv("NSYSREPORT_LOADER", "adbc")
    slow = connect()
    assert copy_tables(slow, path, schema) == "adbc"
    for table in RAW_TABLES:
        query = f'SELECT * FROM "{table}" ORDER BY ALL'
        assert fast.execute(query).fetchall() == slow.execute(query).fetchall(), table


def test_absent_tables_are_created_empty_so_views_still_work() -> None:
    # The 2024.5 CloverLeaf export has no NVTX_EVENTS and no MEMSET table.
    con = open_trace(real_trace("perlmutter-cloverleaf-cuda.sqlite"))
    assert con.execute("SELECT count(*) FROM nvtx_range").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone() == (0,)


def test_trace_meta_reads_the_version_and_host_of_a_2024_export() -> None:
    con = open_trace(real_trace("perlmutter-cloverleaf-cuda.sqlite"))
    nsys, schema, host = con.execute(
        "SELECT nsys_version, schema_version, host FROM trace_meta"
    ).fetchone()  # type: ignore[misc]
    assert (nsys, schema) == ("2024.5.1.113", "3.13.2")
    assert host == "nid008553"


def test_gpu_names_come_from_target_info_gpu_when_present() -> None:
    con = open_trace(real_trace("rtx3080_tiny_2026.1.sqlite"))
    (name,) = con.execute("SELECT gpu_name FROM gpu").fetchone()  # type: ignore[misc]
    assert "3080" in name


def test_api_names_lose_their_version_suffix() -> None:
    con = open_trace(real_trace("mfu_2gpu_before.sqlite"))
    names = {r[0] for r in con.execute("SELECT DISTINCT name FROM launch").fetchall()}
    assert "cudaLaunchKernel" in names
    assert not any(n.endswith(("_v7000", "_v3020")) for n in names)


def test_connections_cannot_autoload_extensions() -> None:
    con = connect()
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('autoinstall_known_extensions', 'autoload_known_extensions')"
        ).fetchall()
    )
    assert settings == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
