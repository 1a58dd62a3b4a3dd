"""The report in a notebook: Report._repr_html_, Report.frames(), and examples/report.ipynb."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import nbformat
import polars as pl
import pytest

from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.notebook import report_frames
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, Scenario, write_trace

from conftest import REPO

NOTEBOOK = REPO / "examples" / "report.ipynb"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


@pytest.fixture
def report(tmp_path: Path) -> Report:
    """One GPU: a GEMM [0, 1000) ns, then an all-reduce [1000, 2000) with nothing to hide it,
    then a GEMM [3000, 4000) after a 1000 ns gap: span 4000 ns, compute 50%, exposed comm 25%,
    idle 25%."""
    scenario = Scenario(
        kernels=[
            Kernel(0, 1000, GEMM),
            Kernel(1000, 2000, NCCL, stream=31),
            Kernel(3000, 4000, GEMM),
        ]
    )
    path = write_trace(scenario, tmp_path / "one.sqlite")
    return build_report(open_trace(path), path)


def test_jupyter_shows_the_verdict_the_key_numbers_and_the_gpu_table(report: Report) -> None:
    html = " ".join(report._repr_html_().split())
    assert f"<strong>Verdict:</strong> {report.bottleneck.summary}" in html
    assert "1 GPU; span 4 µs (longest GPU)" in html
    header = "<th>compute</th><th>exposed comm</th><th>exposed memcpy</th><th>idle</th>"
    assert header in html
    # The row of rank 0: span, then compute, exposed comm, exposed memcpy and idle shares.
    row = "<td>rank 0</td><td>100</td><td>0</td><td>4 µs</td>"
    assert row + " <td>50.0%</td><td>25.0%</td><td>0.0%</td><td>25.0%</td>" in html
    assert "<html" not in html  # a fragment for the notebook's cell, not a page
    # The exposed all-reduce (25% of the span) is the data path's narrowest stage.
    narrow = report.narrowest_stage
    assert narrow is not None and narrow.stage == "AllReduce"
    shown = narrow.summary.replace("'", "&#39;")  # as Jinja escapes it
    assert f"<strong>Data path:</strong> {shown}" in html


def test_frames_give_each_list_section_with_the_jsons_keys_as_columns(report: Report) -> None:
    frames = report.frames()
    data = as_json(report)
    lists = {key for key, value in data.items() if isinstance(value, list)}
    assert {"gpus", "steps", "layers", "collectives", "top_kernels"} <= lists
    assert set(frames) == lists | {"stragglers", "layers_across"}
    gpus = frames["gpus"]
    assert gpus.columns == list(data["gpus"][0])
    assert gpus.select("rank", "span_ns", "exposed_comm_ns", "idle_ns").rows() == [
        (0, 4000, 1000, 1000)
    ]
    assert gpus["gaps"].dtype.base_type() == pl.Struct  # nested objects stay together
    kernels = frames["top_kernels"]
    assert kernels.columns == list(data["top_kernels"][0])
    assert sorted(kernels.select("class", "total_ns").rows()) == [("comm", 1000), ("gemm", 2000)]
    assert frames["steps"].is_empty()  # no NVTX steps in this trace


def cells() -> list[Any]:
    return list(nbformat.read(NOTEBOOK, as_version=4).cells)


def test_the_example_notebook_is_valid_nbformat_4_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    json.loads(NOTEBOOK.read_text(encoding="utf-8"))  # plain JSON too


def test_the_example_notebooks_cells_run_in_order_on_the_sample_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each code cell runs as Jupyter would (its last expression is the cell's value), from a
    folder beside sample_traces, as examples/ is."""
    (tmp_path / "sample_traces").symlink_to(REPO / "sample_traces")
    (tmp_path / "examples").mkdir()
    monkeypatch.chdir(tmp_path / "examples")
    namespace: dict[str, Any] = {}
    shown = []
    for cell in cells():
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), namespace)
        if last is not None:
            shown.append(eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace))
    report = namespace["report"]
    assert isinstance(shown[0], Report) and "Verdict:" in shown[0]._repr_html_()
    assert shown[1] == sorted(report.frames())
    by_exposure = shown[2]
    assert by_exposure["exposed_comm_pct"].to_list() == sorted(
        (g["exposed_comm_pct"] for g in as_json(report)["gpus"]), reverse=True
    )
    # The sample's straggler is rank 3: the most waiting caused, first.
    assert shown[3]["rank"][0] == report.bottleneck.straggler.rank
    assert len(shown[4]) == 3
    written = tmp_path / "examples" / "straggler.perfetto.json"
    assert shown[5] == Path("straggler.perfetto.json") and written.is_file()
    assert json.loads(written.read_text())["traceEvents"]


def test_a_list_of_plain_values_is_one_column_named_as_the_list() -> None:
    data = {"stragglers": {"gpus": []}, "data_quality": ["a note", "another"], "skipped": []}
    frames = report_frames(data, [])
    assert frames["data_quality"].rows() == [("a note",), ("another",)]
    assert frames["skipped"].is_empty() and frames["stragglers"].is_empty()
