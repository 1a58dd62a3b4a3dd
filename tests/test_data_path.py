"""The data path: achieved bandwidth of every stage against its ceiling, the bound rule, the
narrowest stage and the tensor-parallel structure (docs/metrics.md, "Data path")."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.analysis import analyse
from nsysreport.ceilings import model_of
from nsysreport.cli import app
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
from nsysreport.user_facts import Facts, ModelShape

ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def stage(report: Report, name: str, rank: int = 0) -> DataPathRow:
    return next(r for r in report.data_path if r.stage == name and r.rank == rank)


def copies_trace(tmp_path: Path, name: str = "NVIDIA H100 80GB HBM3") -> Path:
    """One GPU, HBM 2 TB/s by the export: four copies, each alone on the GPU.
    h2d 1 MB in 100 us, d2h 4 MB in 100 us, d2d 1 MB in 1 us, memset 1 MB in 1 us."""
    return write_trace(
        Scenario(
            memcpys=[
                Memcpy(1_000, 101_000, bytes=1_000_000, copy_kind=1),
                Memcpy(200_000, 300_000, bytes=4_000_000, copy_kind=2),
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
    assert h2d.bound == "latency"  # one size, below 25% of the ceiling
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


@pytest.mark.parametrize(("alpha_ns", "bound"), [(20_000, "bandwidth"), (50_000, "latency")])
def test_with_several_sizes_an_alpha_beta_fit_decides(
    tmp_path: Path, alpha_ns: int, bound: str
) -> None:
    # duration = alpha + bytes / (100 B/ns) for 1, 2 and 4 MB: the fit finds alpha and 0.01 ns/B.
    calls = [(size, alpha_ns + size // 100) for size in (1_000_000, 2_000_000, 4_000_000)]
    report = analyse(allreduce_trace(tmp_path, calls))
    ar = stage(report, "AllReduce")
    assert ar.sizes == 3
    assert ar.fit_alpha_ns == pytest.approx(alpha_ns)
    assert ar.fit_ns_per_byte == pytest.approx(0.01)
    # alpha x 3 calls against the calls' time: 60/130 us = 46% (bandwidth), 150/220 = 68%.
    assert ar.bound == bound
    share = 100 * 3 * alpha_ns / sum(d for _, d in calls)
    assert f"{share:.0f}% of time" in ar.bound_reason


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
    import json

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
