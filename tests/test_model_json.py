"""Report.from_json: the JSON that as_json writes comes back as the same model, and a file of
another schema_version, or no report at all, is one line naming the file."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.model import JSON_SCHEMA_VERSION, JSON_SECTIONS, Report, as_json
from nsysreport.multi import build_multi_report
from nsysreport.outputs import json_text
from nsysreport.patterns import Patterns
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, Memcpy, NvtxRange, Scenario, write_trace

SAMPLES = Path(__file__).parents[1] / "sample_traces"
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


class Unreadable:
    """Stands for a Report field that a JSON key does not declare: any use of it fails."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"read .{name}")

    def __iter__(self) -> Any:
        raise AssertionError("iterated")

    def __len__(self) -> int:
        raise AssertionError("measured")

    def __bool__(self) -> bool:
        raise AssertionError("tested")

    def __eq__(self, other: object) -> bool:
        raise AssertionError("compared")

    __hash__ = None  # type: ignore[assignment]


def assert_json_keys_read_only_their_fields(report: Report) -> None:
    """Each key of model.JSON_SECTIONS is made from the fields it names alone: with every
    other field unreadable it is the same (a report with other display options reuses the
    text of the keys whose fields it kept, outputs.json_sections)."""
    data = as_json(report)
    names = [f.name for f in dataclasses.fields(Report)]
    assert [key for key, _, _ in JSON_SECTIONS] == list(data)
    for key, fields, make in JSON_SECTIONS:
        assert set(fields) <= set(names), key
        blind = dataclasses.replace(report, **{n: Unreadable() for n in names if n not in fields})
        assert make(blind) == data[key], key


def round_trip(report: Report, tmp_path: Path) -> Report:
    """`report --json` text of `report`, read back from a file as Report.from_json reads it."""
    saved = tmp_path / "saved.json"
    saved.write_text(json_text(report))
    back = Report.from_json(json.loads(saved.read_text()), saved)
    assert json_text(back) == saved.read_text()  # byte for byte: ints stay ints, floats floats
    # The same model, but for the timeline picture, which the JSON leaves out.
    assert back == dataclasses.replace(report, timeline=None)
    return back


@pytest.mark.parametrize("trace", sorted(SAMPLES.glob("*.sqlite")), ids=lambda p: p.stem)
def test_every_sample_trace_comes_back_from_its_json_as_the_same_report(
    trace: Path, tmp_path: Path
) -> None:
    report = build_report(open_trace(trace), trace)
    back = round_trip(report, tmp_path)
    assert back.gpus and back.steps and back.layers_across  # the samples have all of it
    assert_json_keys_read_only_their_fields(report)
    assert back.overview == report.overview  # so the report's key numbers are the same too


def test_a_pytorch_profiler_trace_comes_back_from_its_json(tmp_path: Path) -> None:
    # One GPU: a GEMM [1000, 2000) ns, then a 500 ns all-reduce on the same stream, no steps.
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7}
    args = {"device": 0, "stream": 7}
    events = [
        {**kernel, "name": GEMM, "ts": 1, "dur": 1, "args": {**args, "correlation": 1}},
        {**kernel, "name": NCCL, "ts": 2, "dur": 0.5, "args": {**args, "correlation": 2}},
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    report = build_report(open_trace(path), path)
    assert report.traces[0].is_kineto and report.gpus[0].exposed_comm_ns == 500
    back = round_trip(report, tmp_path)
    assert back.capture is not None and back.capture.kineto
    assert_json_keys_read_only_their_fields(report)


def rows_with_notes(path: Path, pid: int) -> Path:
    """One GPU (process `pid`): GEMM [1000, 1100), all-reduce [1100, 1150), GEMM [1200, 1300)
    and a copy [1300, 1340); then the all-reduce gets device -5 (skipped: device id out of
    range), the second GEMM and the copy an end before their start (kept, with no time)."""
    scenario = Scenario(
        kernels=[
            Kernel(1000, 1100, GEMM, pid=pid),
            Kernel(1100, 1150, NCCL, pid=pid),
            Kernel(1200, 1300, GEMM, pid=pid),
        ],
        memcpys=[Memcpy(1300, 1340, pid=pid)],
        nvtx=[NvtxRange(990, 1400, "step 0", pid=pid)],
    )
    write_trace(scenario, path)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {KERNEL} SET deviceId = -5 WHERE start = 1100")
        db.execute(f'UPDATE {KERNEL} SET "end" = start - 10 WHERE start = 1200')
        db.execute('UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET "end" = start - 5')
    return path


def test_skipped_and_kept_rows_come_back_with_their_notes(tmp_path: Path) -> None:
    path = rows_with_notes(tmp_path / "notes.sqlite", 100)
    report = build_report(open_trace(path), path)
    assert as_json(report)["data_quality"] == [
        "1 kernel skipped: device id out of range",
        "1 kernel with end before start: counted, with no time",
        "1 memcpy with end before start: counted, with no time",
    ]
    back = round_trip(report, tmp_path)
    assert [(i.kind, i.source, i.count) for i in back.quality.items] == [
        ("skipped", KERNEL, 1),
        ("kept", KERNEL, 1),
        ("kept", "CUPTI_ACTIVITY_KIND_MEMCPY", 1),
    ]


def test_a_report_over_several_files_comes_back_with_ranks_clocks_and_each_file_s_notes(
    tmp_path: Path,
) -> None:
    first = rows_with_notes(tmp_path / "rank0.sqlite", 100)
    one_step = NvtxRange(990, 1500, "step 0", pid=200)
    scenario = Scenario(kernels=[Kernel(1000, 1400, GEMM, pid=200)], nvtx=[one_step])
    second = write_trace(scenario, tmp_path / "rank1.sqlite")
    report = build_multi_report([first, second], Patterns(), jobs=1, cache=False)
    assert len(report.ranks) == 2 and len(report.clocks) == 2
    assert as_json(report)["data_quality"][1] == (
        "rank0.sqlite: 1 kernel with end before start: counted, with no time"
    )
    round_trip(report, tmp_path)
    assert_json_keys_read_only_their_fields(report)


def saved(tmp_path: Path, **changes: Any) -> Path:
    """A report JSON of a one-GPU trace, with top-level keys replaced by `changes`."""
    trace = write_trace(Scenario(kernels=[Kernel(0, 100, GEMM)]), tmp_path / "t.sqlite")
    data = as_json(build_report(open_trace(trace), trace))
    data.update(changes)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("version", [JSON_SCHEMA_VERSION + 1, 0, "1"])
def test_another_schema_version_is_one_line_naming_the_file_and_both_versions(
    tmp_path: Path, version: object
) -> None:
    path = saved(tmp_path, schema_version=version)
    with pytest.raises(TraceError) as caught:
        Report.from_json(json.loads(path.read_text()), path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert f"schema_version {json.dumps(version)}" in message
    assert f"reads schema_version {JSON_SCHEMA_VERSION}" in message
    # compare and gate read saved reports through the same check
    runner = CliRunner()
    gate = ["gate", str(path), "--max", "idle_pct=5"]
    compare = ["compare", str(path), str(path), "-o", str(tmp_path / "c.html")]
    for args, code in ((gate, 2), (compare, 1)):
        result = runner.invoke(app, args)
        assert result.exit_code == code
        assert result.stderr == f"Error: {message}\n"


@pytest.mark.parametrize("data", [[1, 2], {"hello": 1}, "a string", None])
def test_json_that_is_no_report_at_all_is_one_line(tmp_path: Path, data: object) -> None:
    with pytest.raises(TraceError) as caught:
        Report.from_json(data, tmp_path / "x.json")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'x.json'}: is not an nsysreport report")


def test_a_value_of_the_wrong_kind_is_reported_before_a_missing_key(tmp_path: Path) -> None:
    data = json.loads(saved(tmp_path).read_text())
    del data["gpus"][0]["busy_ns"]
    data["steps"] = [{"step_time_ns": "long"}]
    with pytest.raises(TraceError, match=r"\(steps\[0\] step_time_ns is not a number\)"):
        Report.from_json(data, "r.json")
    data["steps"] = []
    with pytest.raises(TraceError, match=r"\(gpus\[0\] busy_ns is missing\)"):
        Report.from_json(data, "r.json")


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [("idle_ns", -3, "-3"), ("overlap_pct", 100.5, "100.5"), ("span_ns", 10**400, "huge")],
)
def test_a_number_no_report_holds_is_refused_by_name(
    tmp_path: Path, key: str, value: int, shown: str
) -> None:
    data = json.loads(saved(tmp_path).read_text())
    data["gpus"][0][key] = value
    with pytest.raises(TraceError, match=rf"gpus\[0\] {key} is {shown}, which no report holds"):
        Report.from_json(data, "r.json")


def test_the_json_made_and_written_a_block_at_a_time_is_json_dumps_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsysreport import outputs

    trace = sorted(SAMPLES.glob("*.sqlite"))[0]
    report = build_report(open_trace(trace), trace)
    whole = json.dumps(as_json(report), indent=2) + "\n"
    # Blocks of 3 pieces and writes of 1,000 characters: many of each, and a last short one.
    monkeypatch.setattr(outputs, "JSON_BLOCK_PIECES", 3)
    monkeypatch.setattr(outputs, "WRITE_CHARS", 1_000)
    blocks = list(outputs.json_blocks(report))
    assert len(blocks) > 100 and "".join(blocks) == whole == outputs.json_text(report)
    outputs.blocks_writer(lambda: outputs.json_blocks(report))(tmp_path / "blocks.json")
    assert (tmp_path / "blocks.json").read_text() == whole
    assert len(whole) > 10 * outputs.WRITE_CHARS
    outputs.text_writer(whole)(tmp_path / "text.json")
    assert (tmp_path / "text.json").read_text() == whole


def test_the_indented_json_is_json_dumps_text_for_every_kind_of_value() -> None:
    from nsysreport.json_indent import indented_blocks, object_blocks, value_blocks

    values: list[Any] = [
        {},
        [],
        {"a": [], "b": {}, "c": [[], {}], "d": [[[[1, [2, {"e": None}]]]]]},
        {7: "int key", 2.5: "float key", True: "bool key", False: "no", None: "none key"},
        [float("nan"), float("inf"), -float("inf"), -0.0, 1e16, 1e-7, 0.1, 2**70, -3],
        ["é", "\u2028", '"quoted"\\', "\x00", "plain"],
        (True, False, None, (1, 2)),
        {"rows": [{"x": i, "y": [i, {"z": i * 0.5}]} for i in range(50)]},
    ]
    for value in values:
        whole = json.dumps(value, indent=2) + "\n"
        for pieces in (1, 3, 8192):
            assert "".join(indented_blocks(value, pieces)) == whole, (value, pieces)
            if isinstance(value, dict):  # made a key at a time, as the report cache keeps it
                keys = ((k, value_blocks(v, pieces)) for k, v in value.items())
                assert "".join(object_blocks(keys)) == whole, (value, pieces)
    assert len(list(indented_blocks(values[-1], 3))) > 40  # a block between the rows
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        list(indented_blocks({"a": [{"b": {1}}]}, 3))
