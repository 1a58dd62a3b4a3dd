"""A trace's GPU list is evidence, not a filter (issue #46): a list that numbers the GPUs
otherwise than the rows (a ROCm profiler trace taken with one GPU visible lists it as 0 while
its kernels carry 2) is matched to them one to one and noted; a stray device, unlisted and too
small for a GPU, is still skipped; a trace whose kernels are all strays is refused with a
message that is true of it (queries/load/gpu_list_match.sql)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fuzzing.oracle import fingerprint

from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.report_builder import build_report
from nsysreport.sections.quality import kept_from_note
from nsysreport.synth import Gpu, Kernel, Memcpy, Scenario, write_trace
from nsysreport.synth.kineto_ops import ShapedOp, ShapedTrace, write_shaped_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_tn"
BF16 = ["c10::BFloat16", "c10::BFloat16"]
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def report_json(report: Report, folder: Path) -> dict[str, Any]:
    """The report as JSON with its folder named DIR, so that two copies of a trace compare."""
    return dict(json.loads(json.dumps(as_json(report)).replace(str(folder), "DIR")))


def without_notes(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("ledger", "data_quality")}


def kineto_pair(tmp_path: Path) -> tuple[Report, Report, Path, Path]:
    """Two steps, each one 4096x8192 @ 8192x1024 BF16 GEMM of 500 µs on device 2: listed in
    deviceProperties as 0 (as ROCm profiler traces of one visible GPU are), and as 2."""
    op = ShapedOp("aten::mm", [[4096, 8192], [8192, 1024]], BF16, GEMM, 500)
    reports = []
    folders = []
    for name, listed in (("renumbered", 0), ("numbered", 2)):
        folder = tmp_path / name
        folder.mkdir()
        path = write_shaped_trace(
            ShapedTrace([[op], [op]], device=2, listed_as=listed), folder / "t.json"
        )
        reports.append(build_report(open_trace(path), path))
        folders.append(folder)
    return reports[0], reports[1], folders[0], folders[1]


def test_a_profiler_trace_listing_its_gpu_as_0_reports_it_as_its_kernels_device(
    tmp_path: Path,
) -> None:
    renumbered, numbered, a, b = kineto_pair(tmp_path)
    # Step 1: the kernel at 1000 + 10 + 5 = 1015 µs for 500 µs; 10 µs to the step's end and 10
    # after it, then 10 of gap and 5 to the launch: the second at 2050 - 500 = 1550 µs. Span
    # 1015 .. 2050 = 1,035 µs, busy 2 x 500 µs, idle 35 µs.
    (gpu,) = renumbered.gpus
    assert (gpu.device_id, gpu.rank, gpu.gpu_name) == (2, 0, H100)
    assert (gpu.span_ns, gpu.busy_ns, gpu.idle_ns, gpu.kernel_count) == (
        1_035_000,
        1_000_000,
        35_000,
        2,
    )
    # The listed GPU's properties stay with it: the H100's BF16 peak (989.5 TFLOP/s) for MFU.
    assert renumbered.compute is not None
    assert renumbered.compute.families[0].peak_tflops == 989.5
    # Every number is the correctly numbered trace's; only the note differs.
    one, other = report_json(renumbered, a), report_json(numbered, b)
    assert without_notes(one) == without_notes(other)
    assert other["ledger"] == []
    assert one["ledger"] == [
        {
            "file": "t.json",
            "class": "renumbered_device",
            "table": "TARGET_INFO_GPU",
            "rows": 1,
            "treatment": "renumbered to theirs",
            "reason": "another id than its activities carry (0 in the list; 2 on the activities)"
            ": renumbered to theirs",
        }
    ]
    # A saved report's note reads back as the same ledger item (gate on a report JSON).
    (note,) = one["data_quality"]
    assert note == "1 listed GPU with " + one["ledger"][0]["reason"]
    assert kept_from_note(note, "t.json") == renumbered.quality.items[0]


def two_gpus(listed: tuple[int, int] | None, extra: list[Kernel] | None = None) -> Scenario:
    """Processes 100 and 101 drive devices 2 and 3: device 2 GEMMs [1000, 1400) and
    [1500, 1700), device 3 one [1000, 1300). The list names device 2 an A100 and 3 an H100,
    under the ids `listed` (None: 2 and 3, as the rows)."""
    ids = listed or (2, 3)
    kernels = [
        Kernel(1000, 1400, GEMM, device=2, pid=100),
        Kernel(1500, 1700, GEMM, device=2, pid=100),
        Kernel(1000, 1300, GEMM, device=3, pid=101),
        *(extra or []),
    ]
    gpus = [
        Gpu(2, name=A100, pid=100, listed_as=ids[0]),
        Gpu(3, name=H100, pid=101, listed_as=ids[1]),
    ]
    return Scenario(kernels=kernels, gpus=gpus)


def test_an_nsys_list_numbering_two_gpus_otherwise_is_matched_in_ascending_order(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    renumbered_path = write_trace(two_gpus((0, 1)), tmp_path / "a" / "t.sqlite")
    numbered_path = write_trace(two_gpus(None), tmp_path / "b" / "t.sqlite")
    renumbered = build_report(open_trace(renumbered_path), renumbered_path)
    numbered = build_report(open_trace(numbered_path), numbered_path)
    # Device 2: span 1000 .. 1700 = 700, busy 400 + 200, idle 100; device 3: 300, all busy.
    assert [
        (g.device_id, g.rank, g.gpu_name, g.span_ns, g.busy_ns, g.idle_ns) for g in renumbered.gpus
    ] == [(2, 0, A100, 700, 600, 100), (3, 1, H100, 300, 300, 0)]
    one = report_json(renumbered, tmp_path / "a")
    other = report_json(numbered, tmp_path / "b")
    assert without_notes(one) == without_notes(other)
    assert [(i.ledger_class, i.source, i.count, i.reason) for i in renumbered.quality.items] == [
        (
            "renumbered_device",
            "TARGET_INFO_GPU",
            2,
            "another id than its activities carry (0, 1 in the list; 2, 3 on the activities)"
            ": renumbered to theirs",
        )
    ]
    assert numbered.quality.items == ()


def test_a_stray_device_beside_a_renumbered_list_is_still_skipped(tmp_path: Path) -> None:
    # 30 more 5 ns GEMMs on each of devices 2 and 3 (32 and 31 rows) and one kernel on device 9:
    # 1 row, under a tenth of device 2's 32, is a stray; devices 2 and 3 then match the list's
    # two ids one to one.
    many = [
        Kernel(2000 + 10 * i, 2005 + 10 * i, GEMM, device=d, pid=98 + d)
        for d in (2, 3)
        for i in range(30)
    ]
    stray = Kernel(1100, 1200, GEMM, device=9, pid=100)
    path = write_trace(two_gpus((0, 1), [*many, stray]), tmp_path / "t.sqlite")
    clean = write_trace(two_gpus((0, 1), many), tmp_path / "clean.sqlite")
    report = build_report(open_trace(path), path)
    assert [(g.device_id, g.gpu_name) for g in report.gpus] == [(2, A100), (3, H100)]
    assert fingerprint(as_json(report), "full") == fingerprint(
        as_json(build_report(open_trace(clean), clean)), "full"
    )
    assert [(i.ledger_class, i.source, i.count) for i in report.quality.items] == [
        ("unlisted_device", KERNEL, 1),
        ("renumbered_device", "TARGET_INFO_GPU", 2),
    ]


def test_a_stray_row_among_listed_devices_is_skipped_and_its_gpu_keeps_its_numbers(
    tmp_path: Path,
) -> None:
    # The list numbers the rows' GPUs as they do (2 and 3). A kernel on device 7: its 1 row is
    # neither under a tenth of device 2's 2 nor fewer than device 3's 1, but it would be a third
    # GPU beside a list of two: skipped, and devices 2 and 3 keep their numbers and ranks.
    stray = Kernel(1100, 1200, GEMM, device=7, pid=100)
    path = write_trace(two_gpus(None, [stray]), tmp_path / "t.sqlite")
    report = build_report(open_trace(path), path)
    assert [(g.device_id, g.rank, g.span_ns, g.busy_ns, g.kernel_count) for g in report.gpus] == [
        (2, 0, 700, 600, 2),
        (3, 1, 300, 300, 1),
    ]
    assert [(i.ledger_class, i.source, i.count, i.treatment) for i in report.quality.items] == [
        ("unlisted_device", KERNEL, 1, "skipped")
    ]


def test_a_device_the_list_neither_holds_nor_matches_is_a_gpu_without_properties(
    tmp_path: Path,
) -> None:
    # The list holds 0 and 1 (neither used); every row is on device 5: one device for two
    # entries, no one-to-one match. Its 3 kernels are counted on GPU 5, with no listed name.
    kernels = [Kernel(1000 + 500 * i, 1200 + 500 * i, GEMM, device=5, pid=100) for i in range(3)]
    scenario = Scenario(kernels=kernels, gpus=[Gpu(0, name=H100), Gpu(1, name=H100)])
    path = write_trace(scenario, tmp_path / "t.sqlite")
    report = build_report(open_trace(path), path)
    # Span 1000 .. 2200 = 1,200 ns, busy 3 x 200.
    assert [(g.device_id, g.gpu_name, g.span_ns, g.busy_ns) for g in report.gpus] == [
        (5, None, 1200, 600)
    ]
    assert [(i.ledger_class, i.source, i.count, i.treatment) for i in report.quality.items] == [
        ("unmatched_device", KERNEL, 3, "counted, with no GPU properties")
    ]


@pytest.mark.parametrize(
    ("kernels", "copies", "reason"),
    [
        # One kernel on device 7 against 20 copies on listed device 0: under a tenth.
        (
            1,
            20,
            "its one kernel was skipped (device not in the trace); it ran on device 7, which "
            "the GPU list (0) does not hold, with 1 GPU row against device 0's 20: too few for "
            "a GPU, so nsysreport takes them for damaged rows",
        ),
        # Three kernels on device 7 against 5 copies on device 0: not under a tenth, but fewer
        # rows than listed device 0 has, and a second GPU beside a list of one.
        (
            3,
            5,
            "all 3 kernels were skipped (device not in the trace); they ran on device 7, which "
            "the GPU list (0) does not hold, though the other rows ran on devices it holds: "
            "beside such a list, a device it lacks, with fewer rows than a listed GPU or one "
            "GPU more than it lists, is taken for damaged rows",
        ),
    ],
)
def test_a_trace_whose_kernels_are_all_strays_is_refused_with_what_the_file_holds(
    tmp_path: Path, kernels: int, copies: int, reason: str
) -> None:
    scenario = Scenario(
        kernels=[Kernel(1000 + 100 * i, 1050 + 100 * i, GEMM, device=7) for i in range(kernels)],
        memcpys=[Memcpy(1000 + 100 * i, 1020 + 100 * i, device=0) for i in range(copies)],
        gpus=[Gpu(0)],
    )
    path = write_trace(scenario, tmp_path / "t.sqlite")
    with pytest.raises(TraceError) as caught:
        open_trace(path)
    assert str(caught.value) == f"{path}: no kernel can be used: {reason}"
