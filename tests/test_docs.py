"""The user documentation against the code: every JSON field the report writes and every gate
metric is defined in docs/metrics.md, and the JSON reference lists no field the report lacks."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.multi import build_multi_report
from nsysreport.patterns import Patterns
from nsysreport.report_builder import build_report
from nsysreport.synth import Diagnostic, Gpu, GpuMetricSample, Kernel, Scenario, write_trace
from nsysreport.synth.kineto_ops import ShapedOp, ShapedTrace, write_shaped_trace
from nsysreport.synth.rank_files import write_rank_files
from nsysreport.synth.simulate import TensorParallelConfig, tensor_parallel

from conftest import REPO

METRICS_DOC = REPO / "docs" / "metrics.md"
JSON_REFERENCE = "## JSON reference"
# A PyTorch profiler trace with shapes: what writes the `compute` section's fields.
_BF16 = ["c10::BFloat16", "c10::BFloat16"]
SHAPED = ShapedTrace(
    [
        [
            ShapedOp(
                "aten::mm", [[512, 512], [512, 512]], _BF16, "gemm_bf16", 10, layer="layers.0"
            ),
            ShapedOp("aten::mm", [[64, 8], [9, 8]], _BF16, "gemm_bf16", 10),
        ]
    ]
)
GATE_METRICS = "## Gate metrics"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
# How docs/metrics.md names the JSON type of a Python value; `float` fields may hold whole
# numbers (a median of integers), and `?` after a type allows null.
JSON_TYPES = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "object"}
TYPE_ALLOWS = {"float": {"float", "int"}}
# Objects keyed by a label from the data, not by a field name: their keys are documented once,
# as the placeholder, and each label is listed in the document.
LABEL_KEYED = {
    "gpus[].gaps.histogram": "<bucket>",
    "gpus[].gaps.histogram_ns": "<bucket>",
    "step_stats[].shares_pct": "<part>",
    "step_stats[].median_step_shares_pct": "<part>",
}


def gate_metric_names() -> list[str]:
    """The names `nsysreport gate` accepts, from the gate's own catalogue."""
    from nsysreport.gate_metrics import METRICS

    return list(METRICS)


def fields(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every key of a JSON value as a dotted path, with its value; list items are `[]`, so all
    items of a list share their paths, and a label-keyed object's keys are its placeholder."""
    if isinstance(value, dict):
        placeholder = LABEL_KEYED.get(path)
        for key, item in value.items():
            child = f"{path}.{placeholder or key}" if path else key
            yield child, item
            yield from fields(item, child)
    elif isinstance(value, list):
        for item in value:
            yield from fields(item, f"{path}[]")


def _odd_trace(folder: Path) -> Path:
    """Two GPUs that ran different numbers of all-reduces (unmatched across GPUs), a kernel that
    ends before it starts (kept, with a note), an exact copy of a row (skipped), GPU metric
    samples, a listed GPU that ran nothing (device 2) and one of nsys's warnings."""
    kernels = [
        Kernel(1_000, 2_000, GEMM, device=0, pid=100),
        Kernel(2_000, 3_000, NCCL, device=0, pid=100),
        Kernel(4_000, 5_000, NCCL, device=0, pid=100),
        Kernel(6_000, 5_900, GEMM, device=0, pid=100),
        Kernel(1_000, 2_500, GEMM, device=1, pid=101),
        Kernel(2_500, 3_000, NCCL, device=1, pid=101),
    ]
    # GPU metric samples: a family counter on both GPUs, one in no family, one on a GPU
    # without activity (device 2).
    dram, clock = "DRAM Read Bandwidth [Throughput %]", "GPC Clock Frequency [MHz]"
    metrics = [
        GpuMetricSample(t, name, value, device)
        for device in (0, 1, 2)
        for name in (dram, clock)
        for t, value in ((0, 10), (2_500, 30), (5_000, 50))
    ]
    scenario = Scenario(
        kernels=kernels,
        gpu_metrics=metrics,
        gpus=[Gpu(0, pid=100), Gpu(1, pid=101), Gpu(2)],
        diagnostics=[Diagnostic(0, "CUPTI dropped 3 records", severity=2)],
    )
    path = write_trace(scenario, folder / "odd.sqlite")
    with sqlite3.connect(path) as con:
        table = "CUPTI_ACTIVITY_KIND_KERNEL"
        con.execute(f"INSERT INTO {table} SELECT * FROM {table} WHERE start = 1000")
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The JSON of a report on every sample trace, on per-rank files (ranks, clock alignment)
    and on a trace with rows skipped and collectives that do not match across GPUs."""
    folder = tmp_path_factory.mktemp("docs")
    built: list[Report] = [
        build_report(open_trace(p), p.relative_to(REPO))
        for p in sorted((REPO / "sample_traces").glob("*.sqlite"))
    ]
    run = TensorParallelConfig(tp=2, steps=2, layers_simulated=2, straggler_rank=1)
    files = write_rank_files(tensor_parallel(run), folder / "ranks", [0, 1_234_567])
    built.append(build_multi_report(files, Patterns(), cache=False))
    odd = _odd_trace(folder)
    built.append(build_report(open_trace(odd), Path(odd.name)))
    shaped = write_shaped_trace(SHAPED, folder / "shaped.json")
    built.append(build_report(open_trace(shaped), Path(shaped.name)))
    return [as_json(r) for r in built]


@pytest.fixture(scope="module")
def written(reports: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Every field path the sample reports write -> the JSON types its values had."""
    types: dict[str, set[str]] = {}
    for report in reports:
        for path, value in fields(report):
            types.setdefault(path, set()).add(JSON_TYPES.get(type(value), type(value).__name__))
    return types


def _section(heading: str) -> str:
    """The text of docs/metrics.md from `heading` to the next heading of its level."""
    text = METRICS_DOC.read_text(encoding="utf-8")
    start = text.index(heading)
    level = heading.split(" ")[0]
    end = text.find(f"\n{level} ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def table_names(heading: str) -> list[str]:
    """The `code` first cell of every table row in one section of docs/metrics.md."""
    return re.findall(r"^\| `([^`]+)` \|", _section(heading), re.M)


def json_reference() -> dict[str, str]:
    """field path -> its type cell, from the JSON reference tables of docs/metrics.md."""
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]*) \|", _section(JSON_REFERENCE), re.M)
    return {path: kind.strip() for path, kind in rows}


def code_spans(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


def test_every_json_field_the_report_writes_is_in_the_json_reference(
    written: dict[str, set[str]],
) -> None:
    missing = sorted(set(written) - set(table_names(JSON_REFERENCE)))
    assert not missing, f"fields the report writes that docs/metrics.md does not list: {missing}"


def test_the_json_reference_lists_only_fields_the_report_writes_with_their_types(
    written: dict[str, set[str]],
) -> None:
    listed = table_names(JSON_REFERENCE)
    assert len(listed) == len(set(listed)), "a field is listed twice"
    stale = sorted(set(listed) - set(written))
    assert not stale, f"docs/metrics.md lists fields no sample report writes: {stale}"
    wrong = []
    for path, kind in json_reference().items():
        base = kind.removesuffix("?")
        allowed = TYPE_ALLOWS.get(base, {base}) | ({"NoneType"} if kind.endswith("?") else set())
        if not written[path] <= allowed:
            wrong.append(f"{path}: documented {kind}, written {sorted(written[path])}")
    assert not wrong, wrong


def test_every_label_of_a_label_keyed_object_is_named_in_the_document(
    reports: list[dict[str, Any]],
) -> None:
    def objects(value: Any, path: str, target: str) -> Iterator[dict[str, Any]]:
        if path == target and isinstance(value, dict):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from objects(item, f"{path}.{key}" if path else key, target)
        elif isinstance(value, list):
            for item in value:
                yield from objects(item, f"{path}[]", target)

    named = code_spans(_section(JSON_REFERENCE))
    for target in LABEL_KEYED:
        labels = {k for r in reports for o in objects(r, "", target) for k in o}
        assert labels, f"no sample report has {target}"
        assert labels <= named, f"{target}: labels not named: {sorted(labels - named)}"


def test_every_gate_metric_is_defined_in_the_metrics_document() -> None:
    defined = table_names(GATE_METRICS)
    missing = [name for name in gate_metric_names() if name not in defined]
    assert not missing, f"gate metrics that docs/metrics.md does not define: {missing}"
    unknown = [name for name in defined if name not in gate_metric_names()]
    assert not unknown, f"docs/metrics.md defines metrics the gate does not know: {unknown}"


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def test_every_link_between_the_docs_leads_to_a_file_and_heading_that_exist() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if "://" in target:
                continue
            name, _, anchor = target.partition("#")
            linked = (page.parent / name).resolve() if name else page
            if not linked.is_file():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and anchor not in _anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_every_field_of_compare_s_kernel_diff_is_in_the_kernel_diff_table(tmp_path: Path) -> None:
    from nsysreport.compare import as_json as compare_json
    from nsysreport.compare import compare, load_inputs

    # A GEMM slowed and a kernel only the second run has: every row list is written.
    runs = []
    for name, gemm, extra in (("a", 1_000, []), ("b", 1_500, [Kernel(4_000, 4_100, NCCL)])):
        scenario = Scenario(kernels=[Kernel(1_000, 1_000 + gemm, GEMM), *extra])
        runs.append(str(write_trace(scenario, tmp_path / f"{name}.sqlite")))
    data = compare_json(compare(load_inputs(runs, Patterns())))
    rows = ("by_time", "by_count", "new", "vanished")
    written = {
        # The four row lists share their fields: documented once, under by_time.
        re.sub(rf"\.({'|'.join(rows)})\[\]", ".by_time[]", path)
        for path, _ in fields({"kernel_diff": data["kernel_diff"]})
    }
    assert data["kernel_diff"][0]["new"] and data["kernel_diff"][0]["by_time"]
    documented = set(table_names("## Kernel diff"))
    assert not written - documented, sorted(written - documented)
    assert not documented - written - {f"kernel_diff[].{r}" for r in rows}, sorted(
        documented - written
    )
