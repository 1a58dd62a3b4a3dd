"""The GPU metrics section: sampled counters per GPU and family, weighted by time, overall and
inside the GPU's exposed communication and copies.

Every scenario has a few samples at round timestamps, so each mean is a short weighted sum
written next to it. A sample at t[i] covers (t[i-1], t[i]]; a counter's first sample weighs
nothing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nsysreport.load import open_trace
from nsysreport.model import Report, as_json
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.sections.gpu_metrics import GpuMetric
from nsysreport.summary import print_summary
from nsysreport.synth import GpuMetricSample, Kernel, Memcpy, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
DRAM = "DRAM Read Bandwidth [Throughput %]"


def report_of(scenario: Scenario, tmp_path: Path, version: str = "2026.2") -> Report:
    path = write_trace(scenario, tmp_path / "t.sqlite", version)
    return build_report(open_trace(path), path)


def series(name: str, *points: tuple[int, int], device: int = 0) -> list[GpuMetricSample]:
    return [GpuMetricSample(t, name, value, device) for t, value in points]


def family(report: Report, name: str, device_id: int = 0) -> GpuMetric:
    (row,) = [m for m in report.gpu_metrics if m.family == name and m.device_id == device_id]
    return row


# DRAM at 20% over (0, 1000] and 80% over (1000, 2000] (the sample at 0 weighs nothing).
DRAM_20_80 = series(DRAM, (0, 55), (1000, 20), (2000, 80))


@pytest.mark.parametrize("version", ["2026.2", "2024.5"])
def test_an_all_reduce_across_the_change_sees_the_mean_of_both_halves(
    tmp_path: Path, version: str
) -> None:
    # exposed all-reduce [500, 1500): 500 ns at 20% and 500 ns at 80%
    scenario = Scenario(kernels=[Kernel(500, 1500, NCCL)], gpu_metrics=DRAM_20_80)
    dram = family(report_of(scenario, tmp_path, version), "dram_read")
    assert dram.overall == pytest.approx(50.0)  # (20*1000 + 80*1000) / 2000
    assert dram.during_exposed_comm == pytest.approx(50.0)  # (20*500 + 80*500) / 1000
    assert dram.exposed_comm_ns == 1000
    assert dram.during_copies is None and dram.copies_ns == 0  # no copies
    assert (dram.samples, dram.unit, dram.metrics) == (2, "%", DRAM)


def test_compute_over_the_all_reduce_shrinks_its_exposed_part_and_copies_have_their_own(
    tmp_path: Path,
) -> None:
    # all-reduce [500, 1500), GEMM [1250, 1500): exposed comm [500, 1250); a copy [1600, 1800)
    scenario = Scenario(
        kernels=[Kernel(500, 1500, NCCL), Kernel(1250, 1500, GEMM)],
        memcpys=[Memcpy(1600, 1800)],
        gpu_metrics=DRAM_20_80,
    )
    dram = family(report_of(scenario, tmp_path), "dram_read")
    assert dram.overall == pytest.approx(50.0)
    assert dram.during_exposed_comm == pytest.approx(40.0)  # (20*500 + 80*250) / 750
    assert dram.exposed_comm_ns == 750
    assert dram.during_copies == pytest.approx(80.0)  # all 200 ns in (1000, 2000]
    assert dram.copies_ns == 200


def test_unequal_sample_intervals_weigh_by_their_length(tmp_path: Path) -> None:
    # 10% over (0, 100], 70% over (100, 400]: overall (10*100 + 70*300) / 400 = 55; the
    # arithmetic mean of the two samples (40) would be wrong. Copy [50, 150): 50 ns each.
    scenario = Scenario(
        kernels=[Kernel(0, 400, GEMM)],
        memcpys=[Memcpy(50, 150)],
        gpu_metrics=series("SMs Active [Throughput %]", (0, 0), (100, 10), (400, 70)),
    )
    sm = family(report_of(scenario, tmp_path), "sm_active")
    assert sm.overall == pytest.approx(55.0)
    assert sm.during_copies == pytest.approx(40.0)  # (10*50 + 70*50) / 100
    assert sm.during_exposed_comm is None  # no communication at all


def test_nvlink_counters_of_one_direction_are_summed_into_its_family(tmp_path: Path) -> None:
    rx = (
        "NVLink RX Requests User Data [Throughput %]",
        "NVLink RX Responses User Data [Throughput %]",
    )
    tx = "NVLink TX Responses User Data [Throughput %]"
    samples = [
        *series(rx[0], (0, 0), (1000, 2)),
        *series(rx[1], (0, 0), (1000, 3)),
        *series(tx, (0, 0), (1000, 7)),
    ]
    report = report_of(Scenario(kernels=[Kernel(0, 1000, NCCL)], gpu_metrics=samples), tmp_path)
    nvlink_rx = family(report, "nvlink_rx")
    assert nvlink_rx.overall == pytest.approx(5.0)  # 2 + 3
    assert nvlink_rx.during_exposed_comm == pytest.approx(5.0)
    assert nvlink_rx.metrics == "; ".join(rx)
    assert family(report, "nvlink_tx").overall == pytest.approx(7.0)
    assert [m.family for m in report.gpu_metrics] == ["nvlink_rx", "nvlink_tx"]


def test_names_without_a_unit_from_older_exports_join_their_families(tmp_path: Path) -> None:
    samples = [
        *series("SM Active", (0, 0), (100, 30)),
        *series("DRAM Read Throughput", (0, 0), (100, 40)),
        *series("PCIe TX Throughput", (0, 0), (100, 50)),
    ]
    report = report_of(Scenario(kernels=[Kernel(0, 100, GEMM)], gpu_metrics=samples), tmp_path)
    overall = {m.family: m.overall for m in report.gpu_metrics}
    assert overall == {"dram_read": 40.0, "pcie_tx": 50.0, "sm_active": 30.0}


def test_a_counter_in_no_family_is_listed_as_ignored_not_guessed(tmp_path: Path) -> None:
    samples = [
        *DRAM_20_80,
        *series("Tensor Active [Throughput %]", (0, 0), (1000, 90)),
        *series("PCIe Read Bandwidth [GB/s]", (0, 0), (1000, 12)),  # not a percentage
        *series("GPC Clock Frequency [MHz]", (0, 0), (1000, 1755)),
    ]
    report = report_of(Scenario(kernels=[Kernel(500, 1500, NCCL)], gpu_metrics=samples), tmp_path)
    assert [m.family for m in report.gpu_metrics] == ["dram_read"]
    ignored = {(i.metric_name, i.reason, i.devices) for i in report.gpu_metrics_ignored}
    assert ignored == {
        ("Tensor Active [Throughput %]", "in no family", 1),
        ("PCIe Read Bandwidth [GB/s]", "in no family", 1),
        ("GPC Clock Frequency [MHz]", "in no family", 1),
    }
    html = render_html(report, "1970-01-01 00:00 UTC")
    assert "Counters not shown:" in html and "Tensor Active [Throughput %] (in no family)" in html


def test_samples_belong_to_their_device_and_a_device_without_activity_is_listed(
    tmp_path: Path,
) -> None:
    # rank 0: device 0 (pid 100), rank 1: device 1 (pid 101); device 2 ran nothing traced
    samples = [
        *series(DRAM, (0, 0), (1000, 10), device=0),
        *series(DRAM, (0, 0), (1000, 60), device=1),
        *series(DRAM, (0, 0), (1000, 99), device=2),
    ]
    kernels = [Kernel(0, 1000, GEMM, device=0, pid=100), Kernel(0, 1000, GEMM, device=1, pid=101)]
    report = report_of(Scenario(kernels=kernels, gpu_metrics=samples), tmp_path)
    rows = [(m.rank, m.pid, m.device_id, m.overall) for m in report.gpu_metrics]
    assert rows == [(0, 100, 0, 10.0), (1, 101, 1, 60.0)]
    assert [(i.metric_name, i.reason) for i in report.gpu_metrics_ignored] == [
        (DRAM, "on a GPU the trace has no activity on")
    ]


def test_two_processes_on_one_device_each_see_its_counters(tmp_path: Path) -> None:
    # pids 100 and 101 share device 0; only pid 101 communicates, over (500, 1000]
    kernels = [Kernel(0, 1000, GEMM, pid=100), Kernel(500, 1000, NCCL, pid=101)]
    samples = series(DRAM, (0, 0), (500, 20), (1000, 60))
    report = report_of(Scenario(kernels=kernels, gpu_metrics=samples), tmp_path)
    rows = {m.pid: (m.overall, m.during_exposed_comm) for m in report.gpu_metrics}
    # exposed comm is per process (its own kernels), the counters per device
    assert rows == {100: (40.0, None), 101: (40.0, 60.0)}


def test_a_trace_without_gpu_metrics_says_not_captured(tmp_path: Path) -> None:
    report = report_of(Scenario(kernels=[Kernel(0, 100, GEMM)]), tmp_path)
    assert report.gpu_metrics == () and report.gpu_metrics_ignored == ()
    assert as_json(report)["gpu_metrics"] == []
    html = render_html(report, "1970-01-01 00:00 UTC")
    assert (
        "GPU metrics were not captured (<code>nsys profile --gpu-metrics-devices=all</code>)"
        in html
    )


def test_tables_without_usable_samples_say_so_instead_of_not_captured(tmp_path: Path) -> None:
    path = write_trace(Scenario(kernels=[Kernel(0, 100, GEMM)]), tmp_path / "t.sqlite")
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER, "
            "metricId INTEGER, value INTEGER)"
        )
    report = build_report(open_trace(path), path)
    assert report.gpu_metrics == ()
    html = render_html(report, "1970-01-01 00:00 UTC")
    assert "The trace has GPU metric tables, but no samples" in html
    assert "GPU metrics were not captured" not in html


def test_the_html_table_has_a_column_per_family_and_a_row_per_interval(tmp_path: Path) -> None:
    samples = [*DRAM_20_80, *series("SMs Active [Throughput %]", (0, 0), (2000, 90))]
    scenario = Scenario(kernels=[Kernel(500, 1500, NCCL)], gpu_metrics=samples)
    html = render_html(report_of(scenario, tmp_path), "1970-01-01 00:00 UTC")
    section = html[html.index('<section id="gpu_metrics">') :]
    section = section[: section.index("</section>")]
    assert "<th>SM active</th><th>DRAM read</th>" in section  # FAMILIES order
    assert '<th scope="row" class="left">during exposed comm</th>' in section
    assert '<td data-sort="90.0">90.0%</td><td data-sort="50.0">50.0%</td>' in section
    assert 'during copies</th><td data-sort="">–</td>' in section


def test_the_json_round_trip_keeps_the_rows_and_older_reports_read_as_none(
    tmp_path: Path,
) -> None:
    samples = [*DRAM_20_80, *series("SM Issue [Throughput %]", (0, 0), (1000, 5))]
    report = report_of(Scenario(kernels=[Kernel(500, 1500, NCCL)], gpu_metrics=samples), tmp_path)
    data: dict[str, Any] = json.loads(json.dumps(as_json(report)))
    again = Report.from_json(data, "saved.json")
    assert again.gpu_metrics == report.gpu_metrics and len(again.gpu_metrics) == 1
    assert again.gpu_metrics_ignored == report.gpu_metrics_ignored
    del data["gpu_metrics"], data["gpu_metrics_ignored"]
    older = Report.from_json(data, "older.json")
    assert older.gpu_metrics == () and older.gpu_metrics_ignored == ()


def test_the_terminal_summary_has_a_gpu_metrics_line_only_when_sampled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = Scenario(kernels=[Kernel(500, 1500, NCCL)], gpu_metrics=DRAM_20_80)
    print_summary(report_of(scenario, tmp_path), [])
    assert "GPU metrics: DRAM read 50% (50% in exposed comm)" in capsys.readouterr().out
    print_summary(report_of(Scenario(kernels=[Kernel(0, 100, GEMM)]), tmp_path), [])
    assert "GPU metrics:" not in capsys.readouterr().out


def test_the_2022_writer_refuses_samples_whose_layout_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"GPU metrics layout of nsys 2022\.2\.1\.31"):
        write_trace(Scenario(gpu_metrics=DRAM_20_80), tmp_path / "t.sqlite", "2022.2")


def test_the_weighted_means_match_a_nanosecond_by_nanosecond_count(tmp_path: Path) -> None:
    # An independent reference: walk every nanosecond, find the sample interval (t[i-1], t[i]]
    # holding it and whether exposed comm or a copy runs in it (kernels are [start, end)).
    kernels = [
        Kernel(40, 400, NCCL),
        Kernel(300, 520, GEMM, stream=8),
        Kernel(700, 1300, NCCL),
        Kernel(900, 1000, GEMM, stream=8),
        Kernel(1500, 1900, NCCL),
    ]
    copies = [Memcpy(250, 760, stream=9), Memcpy(1450, 1600, stream=9)]
    times = [0, 130, 250, 371, 600, 777, 1010, 1234, 1500, 1733, 1999, 2100]
    values = [0, 13, 95, 40, 7, 66, 81, 12, 3, 58, 100, 44]
    scenario = Scenario(
        kernels=kernels, memcpys=copies, gpu_metrics=series(DRAM, *zip(times, values, strict=True))
    )
    dram = family(report_of(scenario, tmp_path), "dram_read")

    def running(ns: int, spans: list[tuple[int, int]]) -> bool:
        return any(a <= ns < b for a, b in spans)

    comm = [(k.start, k.end) for k in kernels if k.name == NCCL]
    compute = [(k.start, k.end) for k in kernels if k.name == GEMM]
    copy = [(c.start, c.end) for c in copies]
    sums = {"all": [0.0, 0], "exposed": [0.0, 0], "copies": [0.0, 0]}
    for i in range(1, len(times)):
        for ns in range(times[i - 1], times[i]):  # (t[i-1], t[i]] as the ns [t, t+1) it holds
            kinds = ["all"]
            if running(ns, comm) and not running(ns, compute):
                kinds.append("exposed")
            if running(ns, copy):
                kinds.append("copies")
            for kind in kinds:
                sums[kind][0] += values[i]
                sums[kind][1] += 1
    assert dram.overall == pytest.approx(sums["all"][0] / sums["all"][1])
    assert dram.during_exposed_comm == pytest.approx(sums["exposed"][0] / sums["exposed"][1])
    assert dram.during_copies == pytest.approx(sums["copies"][0] / sums["copies"][1])
    assert (dram.exposed_comm_ns, dram.copies_ns) == (sums["exposed"][1], sums["copies"][1])


def test_a_report_over_two_files_keeps_each_files_counters_with_its_rank(tmp_path: Path) -> None:
    from nsysreport.multi import build_multi_report
    from nsysreport.patterns import Patterns

    paths = []
    for i, value in enumerate((10, 70)):
        scenario = Scenario(
            kernels=[Kernel(0, 1000, NCCL, pid=100 + i)],
            gpu_metrics=[
                *series(DRAM, (0, 0), (1000, value)),
                *series("SM Issue [Throughput %]", (0, 0), (1000, 1)),
            ],
        )
        paths.append(write_trace(scenario, tmp_path / f"rank{i}.sqlite"))
    report = build_multi_report(paths, Patterns(), align=False, cache=False)
    rows = [(m.file, m.rank, m.overall, m.during_exposed_comm) for m in report.gpu_metrics]
    assert rows == [("rank0.sqlite", 0, 10.0, 10.0), ("rank1.sqlite", 1, 70.0, 70.0)]
    assert [i.file for i in report.gpu_metrics_ignored] == ["rank0.sqlite", "rank1.sqlite"]
