"""nsys's Parquet export (`nsys export --type parquetdir`) and `.nsys-rep` reports (#35).

The synthetic writer's Parquet form of an export (nsysreport.synth.parquet) holds the same rows
as its SQLite form, so every number of the two reports must be equal; the layout it writes is
the one docs/export-format.md documents from NVIDIA's docs and public readers.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from nsysreport.analysis import analyse
from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.model import as_json
from nsysreport.synth import Gpu, Kernel, Memcpy, NvtxRange, Scenario, write_trace
from nsysreport.synth.parquet import write_parquet_dir
from nsysreport.synth.rank_files import write_rank_files

SHARED_TRACE = Path(__file__).parents[2] / "shared" / "traces" / "nsys" / "mfu_2gpu_before.sqlite"
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


def scenario() -> Scenario:
    """Per GPU (two processes): GEMM [0, 1000), copy [1000, 1200), all-reduce [1500, 3000 or
    2500); a step range around it and a layer range around the GEMM."""
    kernels, nvtx = [], []
    for rank, end in ((0, 3_000), (1, 2_500)):
        pid = 100 + rank
        kernels += [Kernel(0, 1_000, GEMM, device=rank, pid=pid),
                    Kernel(1_500, end, NCCL, device=rank, pid=pid)]  # fmt: skip
        nvtx += [
            NvtxRange(-100, 3_100, "step 1", pid=pid),
            NvtxRange(-50, 1_000, "layers.0", pid=pid),
        ]
    return Scenario(
        kernels=kernels,
        memcpys=[Memcpy(1_000, 1_200, device=r, pid=100 + r) for r in (0, 1)],
        nvtx=nvtx,
    )


def comparable(report: Any, *names: str) -> str:
    """The report's JSON with the trace's own path and file name left out."""
    data = as_json(report)
    for trace in data["traces"]:
        trace.pop("path")
    text = json.dumps(data, sort_keys=True)
    for name in names:
        text = text.replace(name, "TRACE")
    return text


def both(tmp_path: Path, sqlite: Path) -> tuple[Path, Path]:
    return sqlite, write_parquet_dir(sqlite, tmp_path / f"{sqlite.stem}_pqtdir")


def test_the_parquet_export_lays_out_one_file_per_table_with_unsigned_global_ids(
    tmp_path: Path,
) -> None:
    _, folder = both(tmp_path, write_trace(scenario(), tmp_path / "t.sqlite"))
    names = sorted(p.name for p in folder.iterdir())
    assert "CUPTI_ACTIVITY_KIND_KERNEL.parquet" in names and "StringIds.parquet" in names
    assert "META_DATA_EXPORT.parquet" in names
    assert "CUPTI_ACTIVITY_KIND_MEMSET.parquet" not in names  # lazy: no memset, no file
    kernel = pq.read_schema(folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet")
    assert kernel.field("globalPid").type == pa.uint64()
    assert kernel.field("start").type == pa.int64()


def test_a_report_of_the_parquet_export_equals_that_of_the_sqlite_one(tmp_path: Path) -> None:
    sqlite, folder = both(tmp_path, write_trace(scenario(), tmp_path / "t.sqlite"))
    a, b = analyse(sqlite), analyse(folder)
    assert comparable(a, sqlite.name) == comparable(b, folder.name)
    # By hand, rank 0: span 3000 = GEMM 1000 + copy 200 + idle 300 + exposed all-reduce 1500.
    g = b.gpus[0]
    assert (g.span_ns, g.compute_ns, g.exposed_memcpy_ns, g.idle_ns, g.exposed_comm_ns) == (
        3_000, 1_000, 200, 300, 1_500,
    )  # fmt: skip
    assert [s.name for s in b.steps] == ["step 1", "step 1"] and b.layers


def test_a_real_export_in_parquet_form_gives_the_same_report(tmp_path: Path) -> None:
    sqlite, folder = both(tmp_path, SHARED_TRACE)
    assert comparable(analyse(sqlite), sqlite.name) == comparable(analyse(folder), folder.name)


def test_a_global_id_above_2_to_63_reads_as_the_signed_value_sqlite_stores(
    tmp_path: Path,
) -> None:
    # A GlobalId with bit 63 set is negative in SQLite (a bad process id there: skipped and
    # counted); the Parquet export holds its bits unsigned: the same row is skipped alike.
    path = write_trace(scenario(), tmp_path / "t.sqlite")
    with sqlite3.connect(path) as con:
        con.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = globalPid - 9223372036854775807 - 1 "
            "WHERE rowid = 1"
        )
    sqlite, folder = both(tmp_path, path)
    column = pq.read_table(folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet").column("globalPid")
    assert column[0].as_py() >= 1 << 63
    a, b = analyse(sqlite), analyse(folder)
    assert comparable(a, sqlite.name) == comparable(b, folder.name)
    assert [(i.ledger_class, i.count) for i in b.quality.items] == [("bad_process", 1)]


def test_a_fraction_in_an_integer_column_leaves_its_row_out_and_counts_it(tmp_path: Path) -> None:
    _, folder = both(tmp_path, write_trace(scenario(), tmp_path / "t.sqlite"))
    file = folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet"
    table = pq.read_table(file)
    starts = [float(v) for v in table.column("start").to_pylist()]
    starts[0] += 0.5
    index = table.schema.get_field_index("start")
    pq.write_table(table.set_column(index, "start", pa.array(starts, pa.float64())), file)
    report = analyse(folder)
    assert [(i.ledger_class, i.source, i.count) for i in report.quality.items] == [
        ("untyped_value", "CUPTI_ACTIVITY_KIND_KERNEL", 1)
    ]
    assert sum(g.kernel_count for g in report.gpus) == 3


def test_a_folder_that_is_no_parquet_export_and_a_broken_file_are_one_line_errors(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        TraceError,
        match=r"is a directory with no \.sqlite, \.json\(\.gz\) or Parquet-export traces",
    ):
        analyse(tmp_path / "empty", cache=False)
    _, folder = both(tmp_path, write_trace(scenario(), tmp_path / "t.sqlite"))
    (folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(TraceError, match=r"CUPTI_ACTIVITY_KIND_KERNEL\.parquet: is not a readable"):
        analyse(folder)


def test_a_folder_of_per_rank_parquet_exports_is_one_job(tmp_path: Path) -> None:
    files = write_rank_files(scenario_with_gpus(), tmp_path / "sqlite", [0, 1_000])
    for f in files:
        write_parquet_dir(f, tmp_path / "parquet" / f.stem)
    a = analyse(tmp_path / "sqlite", jobs=1)
    b = analyse(tmp_path / "parquet", jobs=1)
    assert [g.span_ns for g in a.gpus] == [g.span_ns for g in b.gpus] and len(b.gpus) == 2
    assert [g.rank for g in b.gpus] == [0, 1]


def scenario_with_gpus() -> Scenario:
    return replace(scenario(), gpus=[Gpu(0, pid=100), Gpu(1, pid=101)])


FAKE_NSYS = """#!{python}
# A stand-in for nsys: `nsys export --type T --output OUT --force-overwrite true REPORT` writes
# the export of the SQLite file named by the report's text; --type parquetdir fails when
# NO_PARQUET is set, as an nsys older than 2024.6 does.
import os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_NSYS_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
kind, out, report = args[args.index("--type") + 1], args[args.index("--output") + 1], args[-1]
source = Path(Path(report).read_text().strip())
if kind == "parquetdir":
    if os.environ.get("NO_PARQUET"):
        print("Unknown export type: parquetdir", file=sys.stderr)
        sys.exit(1)
    from nsysreport.synth.parquet import write_parquet_dir
    write_parquet_dir(source, Path(out))
else:
    shutil.copyfile(source, out)
"""


@pytest.fixture
def fake_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `nsys` on PATH that exports reports (see FAKE_NSYS); returns its log of calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nsys = bin_dir / "nsys"
    nsys.write_text(FAKE_NSYS.format(python=sys.executable))
    nsys.chmod(nsys.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "nsys.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return log


def report_file(tmp_path: Path) -> tuple[Path, Path]:
    """A trace, and an .nsys-rep (for the fake nsys: the trace's path) in a folder of its own."""
    sqlite = write_trace(scenario(), tmp_path / "t.sqlite")
    folder = tmp_path / "reports"
    folder.mkdir()
    rep = folder / "run.nsys-rep"
    rep.write_text(str(sqlite))
    return sqlite, rep


def test_an_nsys_rep_is_exported_once_into_the_cache_and_reported(
    tmp_path: Path, fake_nsys: Path
) -> None:
    sqlite, rep = report_file(tmp_path)
    first = analyse(rep)
    assert comparable(first, rep.name) == comparable(analyse(sqlite), sqlite.name)
    assert first.traces[0].path == str(rep)
    again = analyse(rep)
    assert comparable(again, rep.name) == comparable(first, rep.name)
    calls = fake_nsys.read_text().splitlines()
    assert len(calls) == 1 and "--type parquetdir" in calls[0]  # the second run reused it
    assert sorted(p.name for p in rep.parent.iterdir()) == ["run.nsys-rep"]  # nothing beside it
    assert any((tmp_path / "cache" / "nsysreport" / "exports").iterdir())


def test_an_nsys_without_parquet_export_falls_back_to_sqlite(
    tmp_path: Path, fake_nsys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PARQUET", "1")
    sqlite, rep = report_file(tmp_path)
    assert comparable(analyse(rep), rep.name) == comparable(analyse(sqlite), sqlite.name)
    kinds = [c.split("--type ")[1].split()[0] for c in fake_nsys.read_text().splitlines()]
    assert kinds == ["parquetdir", "sqlite"]


def test_without_nsys_an_nsys_rep_is_a_one_line_error_with_the_export_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys there
    rep = tmp_path / "run.nsys-rep"
    rep.write_text("not used")
    out = CliRunner().invoke(app, ["report", str(rep), "-o", str(tmp_path / "r.html")])
    assert out.exit_code != 0
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "nsys is not on PATH" in lines[0]
    assert "nsys export --type sqlite --output run.sqlite run.nsys-rep" in lines[0]
