"""Metadata of any bytes never stops a report: a value read as JSON or as a number that does not
parse is read as absent, so the report equals that of the same trace without it, and
the data-quality ledger counts the JSON values that did not parse (class unparsed_metadata)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.queries import run_query
from nsysreport.synth import Gpu, Kernel, Memcpy, Scenario, write_trace

runner = CliRunner()
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
KEY = "NSYSREPORT_SIMULATION"
# The simulator's configuration as gpu_hardware reads it: a 20 GB/s PCIe link between the GPUs
# and a 10 GB/s host copy rate, where the H100's model table says NVLink 450 and PCIe 64 GB/s.
SIMULATION = json.dumps(
    {"link": {"name": "pcie", "bus_bytes_per_s": 2e10}, "host": {"copy_bytes_per_s": 1e10}}
)
NOT_JSON = ["<html><body>simulated</body></html>", "<!-- c -->", "a\x00b", '{"link": ']
OTHER_SHAPE = ["[]", '{"link": {"name": 5}}']  # JSON, but no link of a kind the report knows
# What may differ between two reports of the same numbers: the path, and the data-quality
# notes, where a value that did not parse is counted.
BESIDE_THE_NUMBERS = ("traces", "ledger", "data_quality")


def two_gpus(path: Path, metadata: dict[str, str], capture_env: dict[str, str]) -> Path:
    """Two H100s, each a 1 MiB host copy [0, 100000) ns, a gemm, then an all-reduce."""
    kernels, memcpys = [], []
    for device in (0, 1):
        kernels += [
            Kernel(100_000, 110_000, "gemm_kernel", device=device),
            Kernel(110_000, 120_000, NCCL, device=device, stream=31),
        ]
        memcpys.append(Memcpy(0, 100_000, bytes=1 << 20, device=device))
    scenario = Scenario(
        kernels=kernels,
        memcpys=memcpys,
        gpus=[Gpu(0), Gpu(1)],
        metadata=metadata,
        capture_env=capture_env,
    )
    return write_trace(scenario, path)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace with its simulator's configuration; each test edits a copy of it."""
    folder = tmp_path_factory.mktemp("simulated")
    return two_gpus(folder / "t.sqlite", {KEY: SIMULATION}, {})


@pytest.fixture(scope="module")
def without_it(simulated: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of the simulated trace with its configuration's row deleted (made once)."""
    return module_report(with_value(simulated, tmp_path_factory.mktemp("without") / "a", None))


def module_report(trace: Path) -> dict[str, Any]:
    """report_json for a module's fixture, which runs before each test's own cache folder is
    set (conftest.isolated_cache): what it draws caches in a folder of its own."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(trace.parent / "xdg-cache"))
        return report_json(trace)


def with_value(original: Path, folder: Path, value: str | None) -> Path:
    """A copy of `original` (named alike: the report names its file) in `folder` with the
    configuration's value replaced by `value`, or its row deleted (None)."""
    folder.mkdir(parents=True)
    copy = Path(shutil.copyfile(original, folder / original.name))
    with sqlite3.connect(copy) as db:
        if value is None:
            db.execute("DELETE FROM META_DATA_EXPORT WHERE name = ?", (KEY,))
        else:
            db.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = ?", (value, KEY))
    return copy


def report_json(trace: Path) -> dict[str, Any]:
    """`nsysreport report TRACE --json`: it must succeed; its JSON without the trace's path and
    the data-quality notes."""
    html, saved = trace.with_suffix(".html"), trace.with_suffix(".report.json")
    options = ["-o", str(html), "--json", str(saved), "--no-cache"]
    result = runner.invoke(app, ["report", str(trace), *options])
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr and html.is_file()
    report = json.loads(saved.read_text())
    for trace_row in report["traces"]:
        del trace_row["path"]
    return {k: v for k, v in report.items() if k not in BESIDE_THE_NUMBERS} | {
        "traces": report["traces"]
    }


def unparsed(trace: Path) -> list[tuple[Any, ...]]:
    """The ledger's rows for metadata values (data_quality): (source, reason, count)."""
    rows = run_query(open_trace(trace), "data_quality").rows()
    return [(source, reason, n) for _, source, reason, n in rows if source == "META_DATA_EXPORT"]


def test_the_configuration_sets_the_link_ceilings(
    simulated: Path, tmp_path: Path, without_it: dict[str, Any]
) -> None:
    """The comparison below can tell: the configuration's ceilings are not the model table's."""
    with_it = report_json(with_value(simulated, tmp_path / "with", SIMULATION))
    without = without_it
    peaks = {(r["kind"], r["peak_gbps"]) for r in with_it["data_path"]}
    assert peaks == {("copy", 10.0), ("collective", 20.0)}
    assert {(r["kind"], r["peak_gbps"]) for r in without["data_path"]} == {
        ("copy", 64),
        ("collective", 450),
    }
    assert with_it["gpus"] == without["gpus"]
    assert unparsed(simulated) == []


@pytest.mark.parametrize("value", NOT_JSON + OTHER_SHAPE, ids=repr)
def test_a_configuration_that_is_not_one_reports_as_the_trace_without_it(
    simulated: Path, tmp_path: Path, without_it: dict[str, Any], value: str
) -> None:
    bad = with_value(simulated, tmp_path / "bad", value)
    assert report_json(bad) == without_it
    hardware = run_query(open_trace(bad), "gpu_hardware")
    assert hardware.select("sim_link", "sim_link_bps", "sim_copy_bps").unique().rows() == [
        (None, None, None)
    ]


@pytest.mark.parametrize("value", NOT_JSON, ids=repr)
def test_a_value_that_is_not_json_is_counted_once_for_its_key(
    simulated: Path, tmp_path: Path, value: str
) -> None:
    bad = with_value(simulated, tmp_path / "bad", value)
    assert unparsed(bad) == [("META_DATA_EXPORT", "text that is not JSON: ignored", 1)]
    result = runner.invoke(app, ["query", "gpu_hardware", str(bad), "--csv"])
    assert result.exit_code == 0
    assert result.stderr == (
        f"{bad.name}: 1 metadata value with text that is not JSON: ignored [unparsed_metadata]\n"
    )


@pytest.mark.parametrize("value", [*OTHER_SHAPE, None], ids=repr)
def test_json_of_another_shape_or_no_value_is_not_counted(
    simulated: Path, tmp_path: Path, value: str | None
) -> None:
    assert unparsed(with_value(simulated, tmp_path / "v", value)) == []


@pytest.mark.parametrize("rank", ["9" * 5000, "9223372036854775807", "2147483647"])
def test_a_rank_variable_that_is_no_rank_is_read_as_absent(
    tmp_path: Path, without_it: dict[str, Any], rank: str
) -> None:
    # 5000 digits: more than Python reads as an int; INT64_MAX: one more overflows in SQL;
    # 2^31 - 1: beyond MPI's int ranks (the highest rank of a job of 2^31 - 1 ranks is one less).
    (tmp_path / "rank").mkdir()
    odd = two_gpus(tmp_path / "rank" / "t.sqlite", {}, {"RANK": rank})
    assert report_json(odd) == without_it


# --- PyTorch profiler traces: their metadata is JSON of any shape ------------------------


def profiler_trace(path: Path, **top: Any) -> Path:
    """A gemm [1000, 3000) ns and an all-reduce [3000, 4000) ns on GPU 0, and `top`'s keys."""
    events = [
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
         "args": {"device": 0, "stream": 7, "correlation": corr}}
        for name, ts, dur, corr in (("gemm_kernel", 1, 2, 11), (NCCL, 3, 1, 12))
    ]  # fmt: skip
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path


@pytest.fixture(scope="module")
def plain_profiler(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of the profiler trace without metadata (made once)."""
    return module_report(profiler_trace(tmp_path_factory.mktemp("plain") / "rank0.json"))


@pytest.mark.parametrize(
    "top",
    [
        {"deviceProperties": {"id": 0, "name": "NVIDIA H100 80GB HBM3"}},  # not a list
        {"deviceProperties": "<html>"},
        {"deviceProperties": [1, "a", None, [0], {"id": "zero"}]},
        {"distributedInfo": "<!-- c -->"},
        {"distributedInfo": {"rank": "a", "world_size": [2], "hostname": None}},
        {"distributedInfo": {"rank": 10**30, "world_size": 10**30}},
        {"distributedInfo": {"pg_config": [1, "a", None, {"pg_name": 5, "pg_size": "x"}]}},
    ],
    ids=lambda top: json.dumps(top)[:40],
)
def test_profiler_metadata_of_another_shape_reports_as_the_trace_without_it(
    tmp_path: Path, plain_profiler: dict[str, Any], top: dict[str, Any]
) -> None:
    odd = profiler_trace(tmp_path / "odd" / "rank0.json", **top)
    assert report_json(odd) == plain_profiler


@pytest.mark.parametrize(
    ("ts", "dur", "reason"),
    [
        ("1e300", "1", "no start time"),  # beyond any BIGINT of ns
        ("NaN", "1", "no start time"),
        ("1" + "0" * 45, "1", "no start time"),  # more digits than any integer type holds
        ("5", "-1e300", "no end time"),
        ("9223372036854775", "9223372036854775", "no end time"),  # each fits, their sum not
    ],
)
def test_a_profiler_time_that_is_no_number_of_ns_skips_its_kernel_only(
    tmp_path: Path, ts: str, dur: str, reason: str
) -> None:
    good = profiler_trace(tmp_path / "t.json")
    doc = good.read_text()
    odd = '{"ph": "X", "cat": "kernel", "name": "g", "pid": 0, "tid": 7, "ts": %s, "dur": %s, '
    odd += '"args": {"device": 0, "stream": 7}}, '
    good.write_text(doc.replace('"traceEvents": [', '"traceEvents": [' + odd % (ts, dur)))
    con = open_trace(good)
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert (row["kernel_count"], row["busy_ns"], row["span_ns"]) == (2, 3000, 3000)
    assert con.sql("SELECT * FROM skipped_row").fetchall() == [
        ("CUPTI_ACTIVITY_KIND_KERNEL", reason, 1)
    ]
