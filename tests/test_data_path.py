"""The data path: achieved bandwidth of every stage against its ceiling, the bound rule, the
narrowest stage and the tensor-parallel structure (docs/metrics.md, "Data path")."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.analysis import analyse
from nsysreport.ceilings import model_of
from nsysreport.cli import app
from nsysreport.gate_metrics import METRICS
from nsysreport.model import Report, as_json
from nsysreport.sections.data_path import DataPathRow
from nsysreport.synth import (
    Gpu,
    GpuMetricSample,
    Kernel,
    Memcpy,
    Memset,
    NvtxRange,
    Scenario,
    write_trace,
)
from nsysreport.synth.kineto_copies import write_kineto_copies
from nsysreport.user_facts import Facts, ModelShape

ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def stage(report: Report, name: str, rank: int = 0) -> DataPathRow:
    return next(r for r in report.data_path if r.stage == name and r.rank == rank)


def copies_trace(tmp_path: Path, name: str = "NVIDIA H100 80GB HBM3") -> Path:
    """One GPU, HBM 2 TB/s by the export: four copies, each alone on the GPU, the host side
    pinned. h2d 1 MB in 100 us, d2h 4 MB in 100 us, d2d 1 MB in 1 us, memset 1 MB in 1 us."""
    return write_trace(
        Scenario(
            memcpys=[
                Memcpy(1_000, 101_000, bytes=1_000_000, copy_kind=1, pinned=True),
                Memcpy(200_000, 300_000, bytes=4_000_000, copy_kind=2, pinned=True),
                Memcpy(400_000, 401_000, bytes=1_000_000, copy_kind=8),
            ],
            memsets=[Memset(500_000, 501_000, bytes=1_000_000)],
            gpus=[Gpu(0, name=name, memory_bandwidth=2_000_000_000_000)],
        ),
        tmp_path / "copies.sqlite",
    )


def test_copies_of_known_bytes_and_durations_give_exact_bandwidth(tmp_path: Path) -> None:
    report = analyse(copies_trace(tmp_path))
    h2d, d2h, d2d, memset = (stage(report, s) for s in ("h2d", "d2h", "d2d", "memset"))
    # 1e6 B / 1e5 ns = 10 GB/s against the H100's PCIe Gen5 x16, 64 GB/s per direction.
    assert h2d.achieved_gbps == pytest.approx(10.0)
    assert (h2d.link, h2d.peak_gbps, h2d.utilisation_pct) == ("pcie", 64.0, pytest.approx(15.625))
    assert "GPU model table: H100 SXM5, PCIe Gen5 x16" in h2d.peak_source
    # Below 25% of the ceiling, but 1 MB is no small copy: at 64 GB/s it takes 15.6 us, far more
    # than a copy's 2 us fixed cost (latency dominates below 2 us x 64 GB/s = 128 kB).
    assert h2d.time_median_bytes == 1_000_000 and h2d.bound == "bandwidth"
    assert h2d.bound_reason == "15.6% of the ceiling with copies of 1 MB: too large for latency"
    assert (h2d.pinned_bytes, h2d.pageable_bytes) == (1_000_000, 0)
    assert d2h.achieved_gbps == pytest.approx(40.0)
    assert d2h.utilisation_pct == pytest.approx(62.5) and d2h.bound == "bandwidth"
    # The HBM peak is the export's memoryBandwidth (2e12 B/s); a device copy reads and writes
    # every byte, so its ceiling is half of it: 1e6 B / 1e3 ns = 1000 GB/s = 100%.
    assert d2d.achieved_gbps == pytest.approx(1000.0)
    assert (d2d.link, d2d.peak_gbps, d2d.utilisation_pct) == ("hbm", 1000.0, pytest.approx(100.0))
    assert d2d.peak_source.startswith("export: TARGET_INFO_GPU.memoryBandwidth")
    assert memset.peak_gbps == 2000.0 and memset.utilisation_pct == pytest.approx(50.0)
    for row in (h2d, d2h, d2d, memset):
        assert row.exposed_ns == row.time_ns  # nothing else runs on the GPU
    # No host side: neither pinned nor pageable bytes.
    assert (d2d.pinned_bytes, d2d.pageable_bytes) == (memset.pinned_bytes, memset.pageable_bytes)
    assert (d2d.pinned_bytes, d2d.pageable_bytes) == (0, 0)


def test_link_peak_overrides_the_export_and_the_table(tmp_path: Path) -> None:
    facts = Facts(link_peaks={"pcie": 20.0, "hbm": 500.0})
    report = analyse(copies_trace(tmp_path), facts=facts)
    h2d, d2d = stage(report, "h2d"), stage(report, "d2d")
    assert (h2d.peak_gbps, h2d.peak_source) == (20.0, "--link-peak pcie")
    assert h2d.utilisation_pct == pytest.approx(50.0) and h2d.bound == "bandwidth"
    assert d2d.peak_gbps == 250.0 and d2d.peak_source.startswith("--link-peak hbm")


def test_a_gpu_model_not_in_the_table_has_unknown_link_ceilings(tmp_path: Path) -> None:
    report = analyse(copies_trace(tmp_path, name="Mystery Accelerator 9000"))
    h2d = stage(report, "h2d")
    assert h2d.peak_gbps is None and h2d.utilisation_pct is None and h2d.bound == "unknown"
    assert "'Mystery Accelerator 9000' is not in the table" in h2d.peak_source
    assert stage(report, "d2d").peak_gbps == 1000.0  # HBM still comes from the export


def allreduce_trace(tmp_path: Path, sizes_and_durations: list[tuple[int, int]]) -> Path:
    """8 GPUs, each running the same all-reduces back to back; the NCCL range's payload gives
    each call's message bytes."""
    kernels, nvtx = [], []
    for g in range(8):
        t = 1_000
        for i, (size, duration) in enumerate(sizes_and_durations):
            launch = 100 + 10 * i
            kernels.append(Kernel(t, t + duration, ALLREDUCE, pid=10 + g, device=g,
                                  launch=(launch, launch + 1)))  # fmt: skip
            nvtx.append(NvtxRange(launch - 1, launch + 2, "ncclAllReduce", pid=10 + g,
                                  registered=True, domain="NCCL", payload=size))  # fmt: skip
            t += duration + 1_000
    gpus = [Gpu(g, pid=10 + g) for g in range(8)]
    return write_trace(Scenario(kernels=kernels, nvtx=nvtx, gpus=gpus), tmp_path / "ar.sqlite")


def test_a_16_kb_all_reduce_on_8_gpus_is_latency_bound(tmp_path: Path) -> None:
    report = analyse(allreduce_trace(tmp_path, [(16_384, 10_000)] * 4))
    ar = stage(report, "AllReduce")
    # 16384 B / 10 us = 1.6384 GB/s algorithm bandwidth; bus bandwidth x 2(8-1)/8.
    assert ar.achieved_gbps == pytest.approx(1.6384)
    assert ar.busbw_gbps == pytest.approx(1.6384 * 1.75) and ar.group_gpus == 8
    # The H100's NVLink 4: 450 GB/s per direction.
    assert (ar.link, ar.peak_gbps) == ("nvlink", 450.0)
    assert ar.utilisation_pct == pytest.approx(100 * 1.6384 * 1.75 / 450)
    assert ar.bound == "latency"
    narrow = report.narrowest_stage
    assert narrow is not None and (narrow.stage, narrow.bound) == ("AllReduce", "latency")
    assert "a faster link would not help" in narrow.summary.lower()


def test_a_256_mb_all_reduce_near_the_ceiling_is_bandwidth_bound(tmp_path: Path) -> None:
    size = 256 << 20
    report = analyse(allreduce_trace(tmp_path, [(size, 1_250_000)] * 3))
    ar = stage(report, "AllReduce")
    busbw = size / 1_250_000 * 1.75  # 375.8 GB/s of 450
    assert ar.busbw_gbps == pytest.approx(busbw)
    assert ar.utilisation_pct == pytest.approx(100 * busbw / 450)
    assert ar.bound == "bandwidth"
    narrow = report.narrowest_stage
    assert narrow is not None and narrow.bound == "bandwidth"
    assert "a faster link" in narrow.summary.lower() and "would not help" not in narrow.summary


@pytest.mark.parametrize(("alpha_ns", "bound"), [(2_000, "bandwidth"), (20_000, "latency")])
def test_with_several_sizes_an_alpha_beta_fit_decides(
    tmp_path: Path, alpha_ns: int, bound: str
) -> None:
    # duration = alpha + bytes / (200 B/ns) for 1, 2 and 4 MB: the fit finds alpha, 0.005 ns/B.
    calls = [(size, alpha_ns + size // 200) for size in (1_000_000, 2_000_000, 4_000_000)]
    report = analyse(allreduce_trace(tmp_path, calls))
    ar = stage(report, "AllReduce")
    assert ar.sizes == 3
    assert ar.fit_alpha_ns == pytest.approx(alpha_ns)
    assert ar.fit_ns_per_byte == pytest.approx(0.005)
    # Both are above 25% of NVLink's 450 GB/s: 7 MB x 1.75 in 41 us = 299 GB/s (66%); in 95 us
    # = 129 GB/s (29%). So the fit decides: alpha x 3 calls is 6/41 us = 15% of the time
    # (bandwidth), 60/95 us = 63% (latency: the per-call cost takes the time).
    total = sum(d for _, d in calls)
    assert ar.utilisation_pct == pytest.approx(100 * 7_000_000 / total * 1.75 / 450)
    assert ar.utilisation_pct > 25
    assert ar.bound == bound
    assert f"{100 * 3 * alpha_ns / total:.0f}% of time" in ar.bound_reason


def test_without_message_sizes_bandwidth_and_bound_are_unknown(tmp_path: Path) -> None:
    kernels = [Kernel(1_000, 11_000, ALLREDUCE, pid=10 + g, device=g) for g in range(2)]
    report = analyse(write_trace(Scenario(kernels=kernels), tmp_path / "nobytes.sqlite"))
    ar = stage(report, "AllReduce")
    assert ar.bytes is None and ar.achieved_gbps is None and ar.busbw_gbps is None
    assert ar.utilisation_pct is None and ar.bound == "unknown"
    narrow = report.narrowest_stage
    assert narrow is not None and narrow.achieved_gbps is None
    assert "unknown" in narrow.summary and "--comm-bytes" in narrow.summary


def test_nothing_exposed_names_no_narrowest_stage(tmp_path: Path) -> None:
    # The all-reduce runs entirely under a GEMM: no stage of the data path is exposed.
    kernels = [
        Kernel(1_000, 50_000, GEMM),
        Kernel(10_000, 20_000, ALLREDUCE, stream=31),
    ]
    report = analyse(write_trace(Scenario(kernels=kernels), tmp_path / "hidden.sqlite"))
    assert stage(report, "AllReduce").exposed_ns == 0
    assert report.narrowest_stage is None
    assert as_json(report)["data_path_verdict"] is None


def test_the_pcie_decode_sample_names_latency_bound_all_reduces() -> None:
    report = analyse(SAMPLES / "llama70b_decode_tp8_pcie.sqlite")
    narrow = report.narrowest_stage
    assert narrow is not None
    assert (narrow.stage, narrow.bound, narrow.link) == ("AllReduce", "latency", "pcie")
    # The simulator's PCIe ring: 20 GB/s bus bandwidth; 16 KiB messages (1 token x 8192 x bf16).
    assert narrow.peak_gbps == 20.0 and narrow.peak_source == "simulated link bus bandwidth"
    assert narrow.mean_bytes == 16_384 and narrow.calls_per_gpu == 68
    assert narrow.utilisation_pct is not None and narrow.utilisation_pct < 5
    # HBM from the export, host copies at the simulated copy rate
    assert stage(report, "h2d").peak_gbps == 25.0


def test_the_prefill_sample_is_bandwidth_bound() -> None:
    report = analyse(SAMPLES / "llama70b_prefill_tp8_pcie.sqlite")
    narrow = report.narrowest_stage
    assert narrow is not None and (narrow.stage, narrow.bound) == ("AllReduce", "bandwidth")
    assert narrow.mean_bytes == 4096 * 8192 * 2  # 4096 tokens x hidden 8192 x bf16


def test_two_all_reduces_per_layer_and_the_models_bytes() -> None:
    facts = Facts(model=ModelShape(hidden=8192, dtype="bf16", tokens=1))
    report = analyse(SAMPLES / "llama70b_decode_tp8_pcie.sqlite", facts=facts)
    rows = [t for t in report.tp_structure if t.op == "AllReduce"]
    assert len(rows) == 8
    for t in rows:
        assert t.per_layer == 2.0 and t.group_gpus == 8
        assert t.mean_message_bytes == t.expected_message_bytes == 8192 * 2
        assert t.bus_bytes == t.expected_bus_bytes == pytest.approx(2 * 7 / 8 * 16_384)


def test_gpu_models_resolve_by_name() -> None:
    def label(name: str) -> str | None:
        m = model_of(name)
        return None if m is None else m.label

    assert label("NVIDIA H100 80GB HBM3") == "H100 SXM5"
    assert label("NVIDIA H100 PCIe") == "H100 PCIe"
    assert label("NVIDIA H200 NVL") == "H200 NVL"
    assert label("NVIDIA A100-SXM4-80GB") == "A100 SXM4"
    assert label("NVIDIA A100 80GB PCIe") == "A100 PCIe"
    assert label("NVIDIA GeForce RTX 3080") == "GeForce RTX 3080"
    assert label("NVIDIA L40S") == "L40S"
    assert label("AMD Instinct MI300X") == "Instinct MI300X"
    assert label("Mystery") is None


def test_several_hosts_put_collectives_on_the_network(tmp_path: Path) -> None:
    files = []
    for rank in range(2):
        kernels = [Kernel(1_000, 11_000, ALLREDUCE, pid=10, device=0, launch=(100, 101))]
        nvtx = [NvtxRange(99, 102, "ncclAllReduce", pid=10, registered=True, domain="NCCL",
                          payload=1_000_000)]  # fmt: skip
        scenario = Scenario(kernels=kernels, nvtx=nvtx, host=f"node{rank}", gpus=[Gpu(0, pid=10)])
        files.append(write_trace(scenario, tmp_path / f"rank{rank}.sqlite"))
    report = analyse(files, jobs=1)
    ar = stage(report, "AllReduce")
    assert ar.link == "network" and ar.peak_gbps is None and ar.bound == "unknown"
    assert ar.group_gpus == 2
    given = analyse(files, jobs=1, facts=Facts(link_peaks={"network": 25.0}))
    ar = stage(given, "AllReduce")
    # 1 MB in 10 us = 100 GB/s algorithm bandwidth x 2(2-1)/2 = 100 GB/s bus: 400% of 25 GB/s
    # (an impossible figure the user's peak exposes).
    assert (ar.peak_gbps, ar.peak_source) == (25.0, "--link-peak network")
    assert ar.busbw_gbps == pytest.approx(100.0) and ar.utilisation_pct == pytest.approx(400.0)
    assert ar.bound_reason == "400% of the ceiling: above it, so the ceiling is too low"
    back = Report.from_json(as_json(given), "r.json")  # a share above 100 reads back
    assert stage(back, "AllReduce").utilisation_pct == pytest.approx(400.0)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--link-peak", "nvlink", "expected LINK=GBPS"),
        ("--link-peak", "disk=3", "LINK one of hbm, nvlink, pcie, network"),
        ("--link-peak", "pcie=-1", "GBPS > 0"),
        ("--model", "hidden=abc", "expected hidden=H"),
        ("--model", "hidden=8192,dtype=int3", "dtype must be one of"),
    ],
)
def test_bad_data_path_options_are_one_line_errors(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    trace = SAMPLES / "llama70b_decode_tp2_pcie.sqlite"
    result = CliRunner().invoke(app, ["report", str(trace), "-o", str(tmp_path / "r.html"),
                                      option, value])  # fmt: skip
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r.html").exists()


def test_the_report_prints_and_writes_the_data_path(tmp_path: Path) -> None:
    trace = SAMPLES / "llama70b_decode_tp8_pcie.sqlite"
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    args = ["report", str(trace), "-o", str(out), "--json", str(js), "--no-cache",
            "--link-peak", "pcie=32"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Data path: AllReduce is the narrowest stage of the data path, latency-bound" in (
        result.output
    )
    page = out.read_text()
    assert 'id="data_path"' in page and "--link-peak pcie" in page
    data = json.loads(js.read_text())
    ar = next(r for r in data["data_path"] if r["stage"] == "AllReduce")
    assert ar["peak_gbps"] == 32.0 and ar["bound"] == "latency"
    assert data["data_path_verdict"]["stage"] == "AllReduce"


def test_a_line_that_does_not_explain_the_durations_leaves_the_bound_to_the_ceiling(
    tmp_path: Path,
) -> None:
    # Waiting, not bytes, sets these durations: the line (55 us + 3.57 us per MB) explains 2%
    # of their variance, so the fit does not decide.
    calls = [(1_000_000, 90_000), (2_000_000, 30_000), (4_000_000, 100_000),
             (1_000_000, 30_000), (2_000_000, 90_000), (4_000_000, 40_000)]  # fmt: skip
    ar = stage(analyse(allreduce_trace(tmp_path, calls)), "AllReduce")
    assert ar.fit_alpha_ns == pytest.approx(55_000)
    assert ar.fit_r2 == pytest.approx(0.0215, abs=1e-4)
    # 14 MB x 1.75 in 380 us = 64.5 GB/s bus bandwidth: 14% of NVLink's 450, latency-bound.
    assert ar.busbw_gbps == pytest.approx(14_000_000 / 380_000 * 1.75)
    assert ar.bound == "latency" and ar.bound_reason.endswith("% of the ceiling")


def test_a_stage_under_one_percent_of_the_time_is_not_named(tmp_path: Path) -> None:
    # A 1 us copy exposed in a 1 ms GEMM trace: 0.1% of the time.
    scenario = Scenario(
        kernels=[Kernel(10_000, 1_010_000, GEMM)], memcpys=[Memcpy(1_000, 2_000, bytes=8)]
    )
    report = analyse(write_trace(scenario, tmp_path / "tiny.sqlite"))
    assert stage(report, "h2d").exposed_ns == 1_000
    assert report.narrowest_stage is None


def test_sampled_nvlink_counters_join_the_narrowest_stage(tmp_path: Path) -> None:
    # An exposed 16 KB all-reduce [1000, 11000) on one H100 pair (2 GPUs); NVLink RX sampled at
    # 3% over (0, 20000] and TX at 1%: the verdict quotes the busier direction, 3%.
    kernels, nvtx = [], []
    for g in range(2):
        kernels.append(Kernel(1_000, 11_000, ALLREDUCE, pid=10 + g, device=g, launch=(100, 101)))
        nvtx.append(NvtxRange(99, 102, "ncclAllReduce", pid=10 + g, registered=True,
                              domain="NCCL", payload=16_384))  # fmt: skip
    samples = [
        GpuMetricSample(t, f"NVLink {d} Requests User Data [Throughput %]", v, g)
        for g in range(2)
        for d, v in (("RX", 3), ("TX", 1))
        for t in (0, 20_000)
    ]
    scenario = Scenario(kernels=kernels, nvtx=nvtx, gpu_metrics=samples,
                        gpus=[Gpu(g, pid=10 + g) for g in range(2)])  # fmt: skip
    narrow = analyse(write_trace(scenario, tmp_path / "m.sqlite")).narrowest_stage
    assert narrow is not None and narrow.link == "nvlink"
    assert (narrow.sampled_metric, narrow.sampled_link_pct) == ("nvlink_rx", pytest.approx(3.0))
    assert "GPU metrics: NVLink RX at 3% of peak during exposed communication" in narrow.summary


def test_a_group_larger_than_one_host_rides_the_network(tmp_path: Path) -> None:
    # Rank 0 of a 16-rank job in one file: 16 GPUs cannot share one 8-GPU H100 board, so the
    # all-reduce's ceiling is the network's, unknown unless given.
    kernels = [Kernel(1_000, 11_000, ALLREDUCE, pid=10, device=0, launch=(100, 101))]
    nvtx = [NvtxRange(99, 102, "ncclAllReduce", pid=10, registered=True, domain="NCCL",
                      payload=1_000_000)]  # fmt: skip
    scenario = Scenario(kernels=kernels, nvtx=nvtx, gpus=[Gpu(0, pid=10)],
                        capture_env={"WORLD_SIZE": "16", "RANK": "0"})  # fmt: skip
    path = write_trace(scenario, tmp_path / "rank0.sqlite")
    ar = stage(analyse(path), "AllReduce")
    assert ar.group_gpus == 16 and ar.link == "network" and ar.peak_gbps is None
    given = stage(analyse(path, facts=Facts(link_peaks={"network": 50.0})), "AllReduce")
    # 1 MB in 10 us = 100 GB/s x 2(16-1)/16 = 187.5 GB/s of 50: the given peak is too low.
    assert given.busbw_gbps == pytest.approx(187.5) and given.peak_gbps == 50.0


def pageable_copies() -> list[Memcpy]:
    """The issue's capture on one H100: one 804 MB device-to-host copy to pageable memory at
    3 GB/s (268 ms), four 4 MB pinned device-to-host copies of 100 us, and 100 host-to-device
    copies of 4 kB from pinned memory, 2 us each."""
    copies = [Memcpy(1_000, 268_001_000, bytes=804_000_000, copy_kind=2)]
    copies += [
        Memcpy(270_000_000 + i * 200_000, 270_100_000 + i * 200_000, bytes=4_000_000,
               copy_kind=2, pinned=True)
        for i in range(4)
    ]  # fmt: skip
    copies += [
        Memcpy(270_800_000 + i * 10_000, 270_802_000 + i * 10_000, bytes=4_096, copy_kind=1,
               pinned=True)
        for i in range(100)
    ]  # fmt: skip
    return copies


def check_pageable_report(report: Report) -> None:
    d2h, h2d = stage(report, "d2h"), stage(report, "h2d")
    # d2h: 804e6 + 4 x 4e6 = 820e6 B in 268e6 + 4 x 1e5 = 268.4e6 ns: 3.055 GB/s, 4.77% of PCIe
    # Gen5's 64 GB/s. 804e6 B (98.05%) pageable, 16e6 B pinned. Half its time (134.2 ms) is in
    # the 804 MB copy: far above the 2 us x 64 GB/s = 128 kB where latency would dominate, so
    # the slowness is the pageable memory, not latency (the old rule: 4.77% < 25%, latency).
    assert (d2h.count, d2h.bytes, d2h.timed_ns) == (5, 820_000_000, 268_400_000)
    assert (d2h.pageable_bytes, d2h.pinned_bytes) == (804_000_000, 16_000_000)
    assert d2h.pageable_pct == pytest.approx(100 * 804 / 820)
    assert d2h.time_median_bytes == 804_000_000
    assert d2h.achieved_gbps == pytest.approx(820 / 268.4)
    assert d2h.utilisation_pct == pytest.approx(100 * 820 / 268.4 / 64)
    assert d2h.bound == "pageable"
    assert d2h.bound_reason == "98% of the bytes in pageable host memory"
    # h2d: 100 x 4096 B pinned in 100 x 2 us: 2.048 GB/s, 3.2% of 64; 4 kB < 128 kB: latency.
    assert (h2d.pageable_bytes, h2d.pinned_bytes, h2d.time_median_bytes) == (0, 409_600, 4_096)
    assert h2d.achieved_gbps == pytest.approx(2.048)
    assert h2d.bound == "latency" and h2d.bound_reason == "3.2% of the ceiling"
    narrow = report.narrowest_stage
    assert narrow is not None and (narrow.stage, narrow.bound) == ("d2h", "pageable")
    assert (narrow.pageable_bytes, narrow.pinned_bytes) == (804_000_000, 16_000_000)
    assert narrow.exposed_ns == 268_400_000
    assert narrow.summary.startswith(
        "Device-to-host copies are the narrowest stage of the data path, bound by pageable "
        "host memory: 5 calls of 164 MB per GPU at 3.06 GB/s against 64 GB/s of PCIe (GPU "
        "model table: H100 SXM5, PCIe Gen5 x16), 4.8% of it; per GPU 804 MB (98%) to pageable "
        "host memory, 16 MB pinned; they leave 268 ms exposed"
    )
    assert "Pinned host memory would move it" in narrow.summary
    assert "pin_memory=True" in narrow.summary and "cudaMallocHost" in narrow.summary
    assert "latency" not in narrow.summary and "Batching" not in narrow.summary


def test_a_large_copy_to_pageable_memory_is_bound_by_it_not_by_latency(tmp_path: Path) -> None:
    scenario = Scenario(memcpys=pageable_copies(), gpus=[Gpu(0, name="NVIDIA H100 80GB HBM3")])
    path = write_trace(scenario, tmp_path / "pageable.sqlite")
    # The export's memory kinds (ENUM_CUDA_MEM_KIND: 0 Pageable, 1 Pinned, 2 Device).
    with closing(sqlite3.connect(path)) as con:
        kinds = con.execute(
            "SELECT copyKind, srcKind, dstKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ).fetchall()
    assert kinds == [(1, 1, 2, 100), (2, 2, 0, 1), (2, 2, 1, 4)]
    report = analyse(path)
    check_pageable_report(report)
    js = as_json(report)
    row = next(r for r in js["data_path"] if r["stage"] == "d2h")
    assert (row["pageable_bytes"], row["pinned_bytes"], row["bound"]) == (
        804_000_000, 16_000_000, "pageable")  # fmt: skip
    assert js["data_path_verdict"]["pageable_pct"] == pytest.approx(100 * 804 / 820)
    check_pageable_report(Report.from_json(js, "r.json"))  # the new fields read back


def test_kineto_names_give_the_same_pinned_and_pageable_bytes(tmp_path: Path) -> None:
    path = write_kineto_copies(pageable_copies(), tmp_path / "pageable.json")
    names = {e["name"] for e in json.loads(path.read_text())["traceEvents"]}
    assert {"Memcpy DtoH (Device -> Pageable)", "Memcpy DtoH (Device -> Pinned)",
            "Memcpy HtoD (Pinned -> Device)"} <= names  # fmt: skip
    check_pageable_report(analyse(path))


def test_small_pageable_copies_are_latency_bound_and_unknown_ceilings_still_tell_pageable(
    tmp_path: Path,
) -> None:
    # 100 pageable 8-byte copies of 1 us: 8 B < 128 kB, so pinning would not help; latency.
    small = [Memcpy(1_000 + i * 10_000, 2_000 + i * 10_000, bytes=8) for i in range(100)]
    big = [Memcpy(2_000_000, 12_000_000, bytes=100_000_000, copy_kind=2)]  # 10 GB/s, pageable
    h100 = write_trace(Scenario(memcpys=small + big, gpus=[Gpu(0)]), tmp_path / "h100.sqlite")
    report = analyse(h100)
    assert stage(report, "h2d").pageable_bytes == 800
    assert stage(report, "h2d").bound == "latency"
    assert stage(report, "d2h").bound == "pageable"  # 10 GB/s, 15.6%: pageable, not latency
    # A GPU outside the model table: no PCIe ceiling. 100 MB pageable is still pageable; 8 B
    # copies are small on any host link (under 2 us x 16 GB/s = 32 kB, PCIe Gen3 x16).
    gpu = [Gpu(0, name="Mystery Accelerator 9000")]
    mystery = analyse(write_trace(Scenario(memcpys=small + big, gpus=gpu), tmp_path / "m.sqlite"))
    assert stage(mystery, "d2h").bound == "pageable"
    assert (stage(mystery, "h2d").bound, stage(mystery, "h2d").bound_reason) == (
        "unknown", "ceiling unknown")  # fmt: skip


def test_the_gate_checks_the_pageable_share_of_host_copies(tmp_path: Path) -> None:
    scenario = Scenario(memcpys=pageable_copies(), gpus=[Gpu(0, name="NVIDIA H100 80GB HBM3")])
    path = write_trace(scenario, tmp_path / "pageable.sqlite")
    # Host-side bytes of a known kind: d2h 804e6 pageable + 16e6 pinned, h2d 409,600 pinned.
    share = 100 * 804_000_000 / (804_000_000 + 16_000_000 + 409_600)  # 98.0002%
    measure = METRICS["pageable_copy_pct"].compute(analyse(path), None)
    assert measure.value == pytest.approx(share) and measure.note == "rank 0, whole trace"
    args = ["gate", str(path), "--max", "pageable_copy_pct=50", "--no-cache"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "240"})
    assert result.exit_code == 1 and "pageable_copy_pct" in result.stdout
    # No copy to or from host memory: nothing to check, skipped.
    alone = write_trace(Scenario(kernels=[Kernel(0, 100, GEMM)]), tmp_path / "solo.sqlite")
    skipped = METRICS["pageable_copy_pct"].compute(analyse(alone), None)
    assert skipped.value is None and "no copy to or from" in skipped.note
