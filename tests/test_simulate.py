"""The tensor-parallel simulator: hand-checked arithmetic, reproducibility and the sample traces."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from nsysreport.load import open_trace
from nsysreport.queries import run_query
from nsysreport.render import render_html
from nsysreport.report_builder import build_report
from nsysreport.synth import Kernel, NvtxRange, write_trace
from nsysreport.synth.simulate import (
    ALLGATHER,
    ALLREDUCE,
    LINKS,
    MODELS,
    PROG,
    GpuSpec,
    HostSpec,
    LinkSpec,
    ModelSpec,
    TensorParallelConfig,
    allgather_ns,
    allreduce_ns,
    app,
    attention_ns,
    config_from_args,
    gemm_ns,
    parse_args,
    sample_command,
    sample_configs,
    sample_name,
    tensor_parallel,
)
from nsysreport.synth.training import SAMPLE_NAME as TRAINING_SAMPLE

from conftest import REPO

SAMPLES = REPO / "sample_traces"
# Round numbers: 1 PFLOP/s for GEMMs (1/8 of it for attention), 10 TB/s HBM, kernels >= 1 µs.
ROUND_GPU = GpuSpec("round", 1e15, 1e13, 1.0, 0.125, 1.0, min_kernel_ns=1_000)
ROUND_LINK = LinkSpec("round", bus_bytes_per_s=1e11, base_ns=2_000, step_ns=500)
# 10 heads of 100, no GQA; at TP=2 each rank has 5 heads and half the 4000-wide FFN.
TINY = ModelSpec("tiny", hidden=1000, layers=1, ffn=4000, heads=10, kv_heads=10, vocab=1000)
# A host far faster than the GPU, so every kernel starts when the previous one ends.
FAST_HOST = HostSpec(launch_ns=100, gap_ns=0, queue_ns=100, nccl_ns=100, step_ns=0)
ONE_LAYER = TensorParallelConfig(
    model=TINY, phase="prefill", seq_len=500, tp=2, link=ROUND_LINK, gpu=ROUND_GPU, steps=1,
    host=FAST_HOST,
)  # fmt: skip


def durations(kernels: Iterable[Kernel], rank: int, fragment: str) -> list[int]:
    return [k.end - k.start for k in kernels if k.device == rank and fragment in k.name]


def test_gemm_time_is_the_slower_of_flops_and_bytes() -> None:
    # QKV of 500 tokens at TP=2: n = (5 + 2*5) heads * 100 = 1500, k = 1000.
    # 2*500*1500*1000 = 1.5e9 FLOP / 1e15 FLOP/s = 1500 ns; bytes (1.5e6 + 5e5 + 7.5e5) * 2
    # = 5.5e6 / 1e13 B/s = 550 ns, so compute-bound: 1500 ns.
    assert gemm_ns(500, 1500, 1000, ROUND_GPU, 2) == 1500
    # One token: 3e6 FLOP = 3 ns, but the 1500x1000 weights (3 MB) take 300 ns to read.
    # (1.5e6 + 1000 + 1500) * 2 = 3_005_000 B / 1e13 = 300.5 ns -> 300 (round half to even).
    assert gemm_ns(1, 1500, 1000, replace(ROUND_GPU, min_kernel_ns=0), 2) == 300
    # ...and no kernel is shorter than min_kernel_ns.
    assert gemm_ns(1, 1500, 1000, ROUND_GPU, 2) == 1000


def test_ring_collectives_pay_latency_per_step_and_bus_bytes_over_bus_bandwidth() -> None:
    # All-reduce of 1e6 B at TP=2: 2*(2-1)/2 * 1e6 = 1e6 bus bytes / 1e11 B/s = 10_000 ns,
    # plus 2_000 base + 2*(2-1) steps * 500 = 13_000 ns.
    assert allreduce_ns(1_000_000, 2, ROUND_LINK) == 13_000
    # TP=8: 14 steps * 500 + 2_000 = 9_000 ns of latency; 2*7/8 * 1e6 = 1.75e6 B -> 17_500 ns.
    assert allreduce_ns(1_000_000, 8, ROUND_LINK) == 26_500
    # All-gather of a 2000 B result at TP=2: 1 step, half the bytes cross: 2_000 + 500 + 10.
    assert allgather_ns(2_000, 2, ROUND_LINK) == 2_510
    assert allreduce_ns(1_000_000, 1, ROUND_LINK) == 0  # one rank: nothing to reduce
    # The scale: a decode all-reduce (16 KiB) costs a few µs on NVLink at TP=4 and
    # tens of µs on PCIe.
    decode_message = 1 * 1 * 8192 * 2
    assert 4_000 < allreduce_ns(decode_message, 4, LINKS["nvlink"]) < 10_000
    assert 20_000 < allreduce_ns(decode_message, 4, LINKS["pcie"]) < 100_000


def test_causal_attention_counts_half_the_query_key_pairs() -> None:
    # 500 tokens, 5 heads of 100: 4 * 500*500/2 * 5 * 100 = 2.5e8 FLOP at 1.25e14 = 2000 ns.
    assert attention_ns(1, 500, 500, 5, 5, 100, ROUND_GPU, 2, causal=True) == 2000


def test_one_layer_at_tp2_has_exactly_the_hand_computed_kernel_durations() -> None:
    kernels = list(tensor_parallel(ONE_LAYER).kernels)
    for rank in (0, 1):
        assert durations(kernels, rank, "nvjet_tst_192x192") == [1500, 4000]  # QKV, gate/up
        # o_proj: n=1000, k=500: 5e8 FLOP = 500 ns, raised to the 1000 ns floor.
        assert durations(kernels, rank, "sm90_xmma_gemm") == [1000]
        # down: n=1000, k=2000: 2e9 FLOP = 2000 ns (7e6 B = 700 ns).
        assert durations(kernels, rank, "nvjet_tst_192x208") == [2000]
        assert durations(kernels, rank, "flash_fwd_kernel") == [2000]
        # Embedding, attention and MLP all-reduces of 500*1000*2 = 1e6 B: 13_000 ns each.
        assert durations(kernels, rank, ALLREDUCE) == [13_000] * 3
        # Logits: 1 * 500 per rank * 2 ranks * 2 B = 2000 B gathered: 2_510 ns.
        assert durations(kernels, rank, ALLGATHER) == [2_510]


def test_with_a_straggler_the_early_rank_waits_inside_the_collective_for_its_lateness() -> None:
    config = replace(ONE_LAYER, straggler_rank=1, straggler_slowdown=1.5)
    kernels = list(tensor_parallel(config).kernels)
    nccl = [sorted((k for k in kernels if "nccl" in k.name and k.device == r), key=start)
            for r in (0, 1)]  # fmt: skip
    for early, late in zip(*nccl, strict=True):
        assert early.end == late.end  # a collective ends everywhere at once
        assert (early.end - early.start) - (late.end - late.start) == late.start - early.start
    # After the attention all-reduce both ranks resume together; rank 1 then runs the norm
    # (1000 floor), gate/up (4000), SiLU (1000 floor) and down (2000) 1.5x slower: it arrives
    # 0.5 * 8000 = 4000 ns late at the MLP all-reduce, and rank 0 waits exactly that long.
    mlp_early, mlp_late = nccl[0][2], nccl[1][2]
    assert mlp_late.start - mlp_early.start == 4_000
    assert mlp_early.end - mlp_early.start == 13_000 + 4_000


def start(kernel: Kernel) -> int:
    return kernel.start


def test_the_same_seed_writes_byte_identical_files_and_another_seed_does_not(
    tmp_path: Path,
) -> None:
    config = replace(ONE_LAYER, jitter=0.05, straggler_rank=0, straggler_slowdown=1.1)
    paths = [
        write_trace(tensor_parallel(replace(config, seed=seed)), tmp_path / f"{i}.sqlite")
        for i, seed in enumerate((7, 7, 8))
    ]
    first, again, other = (p.read_bytes() for p in paths)
    assert first == again
    assert first != other


def test_nvtx_ranges_contain_the_launches_of_their_kernels_on_the_same_thread() -> None:
    scenario = tensor_parallel(replace(ONE_LAYER, overlap=True, jitter=0.05))
    ranges = list(scenario.nvtx)
    for k in scenario.kernels:
        assert k.launch is not None
        names = {r.text for r in ranges if contains(r, k.pid, k.launch)}
        assert "step 0" in names
        if k.name == ALLREDUCE:
            assert "ncclAllReduce" in names
    nccl = [r for r in ranges if r.domain == "NCCL"]
    assert {(r.text, r.payload) for r in nccl} == {
        ("ncclAllReduce", 1_000_000),  # 500 tokens * 1000 hidden * 2 B
        ("ncclAllGather", 2_000),
    }
    assert all(r.registered for r in nccl)


def contains(r: NvtxRange, pid: int, launch: tuple[int, int]) -> bool:
    assert r.end is not None
    return r.pid == pid and r.start <= launch[0] and launch[1] <= r.end


def test_overlap_runs_the_allreduce_beside_the_next_gemm_on_its_own_stream() -> None:
    serial = list(tensor_parallel(ONE_LAYER).kernels)
    overlapped = list(tensor_parallel(replace(ONE_LAYER, overlap=True)).kernels)
    assert {k.stream for k in serial} == {7}
    assert {k.stream for k in overlapped if "nccl" in k.name} == {31}
    assert max(k.end for k in overlapped) < max(k.end for k in serial)


def test_a_tp_degree_that_does_not_divide_the_heads_is_refused() -> None:
    with pytest.raises(ValueError, match="TP=3"):
        tensor_parallel(replace(ONE_LAYER, tp=3))


def test_the_developer_command_writes_one_file(tmp_path: Path) -> None:
    out = tmp_path / "t.sqlite"
    run = CliRunner().invoke(app, ["--model", "llama8b", "--phase", "decode", "--tp", "2",
                                   "--layers", "1", "--steps", "1", "--out", str(out)])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert out.is_file()


def test_each_sample_command_describes_exactly_its_sample_configuration() -> None:
    for config in sample_configs():
        command = sample_command(config)
        assert command.endswith(f"--out sample_traces/{sample_name(config)}")
        argv = command.split()[3:]
        assert config_from_args(parse_args(argv)) == config


def test_the_committed_samples_are_what_the_simulator_writes_now(tmp_path: Path) -> None:
    # The TP x DP training sample is nsysreport.synth.training's (tests/test_communicators.py).
    committed = sorted(p.name for p in SAMPLES.glob("*.sqlite") if p.name != TRAINING_SAMPLE)
    assert committed == sorted(sample_name(c) for c in sample_configs())
    run = CliRunner().invoke(app, ["--samples", str(tmp_path)])
    assert run.exit_code == 0, run.output
    for name in committed:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), (
            f"sample_traces/{name} is stale: {PROG} --samples sample_traces/"
        )
    readme = (SAMPLES / "README.md").read_text()
    assert all(sample_command(c) in readme for c in sample_configs())


Opened = dict[str, duckdb.DuckDBPyConnection]


@pytest.fixture(scope="module")
def opened() -> Opened:
    """Every committed sample, loaded once for this module (loading is most of the cost)."""
    return {path.name: open_trace(path) for path in sorted(SAMPLES.glob("*.sqlite"))}


def step_time_ns(con: duckdb.DuckDBPyConnection) -> float:
    """Mean step time over every rank and step, as the report's step section shows it."""
    steps = run_query(con, "step_breakdown").to_dicts()
    return sum(s["step_time_ns"] for s in steps) / len(steps)


def exposed_comm_pct(con: duckdb.DuckDBPyConnection) -> float:
    rows = run_query(con, "gpu_breakdown").to_dicts()
    return 100 * sum(r["exposed_comm_ns"] for r in rows) / sum(r["span_ns"] for r in rows)


def test_every_sample_loads_with_one_gpu_per_rank(opened: Opened) -> None:
    for config in sample_configs():
        rows = run_query(opened[sample_name(config)], "gpu_breakdown").to_dicts()
        assert [r["device_id"] for r in rows] == list(range(config.tp))
        assert all(r["comm_kernel_count"] > 0 and r["span_ns"] > 0 for r in rows)


def test_a_sample_report_shows_the_simulated_trace_banner(opened: Opened) -> None:
    path = SAMPLES / "llama70b_decode_tp2_pcie.sqlite"
    report = build_report(opened[path.name], path)
    assert report.traces[0].simulated is not None
    assert "not captured on a GPU" in report.traces[0].simulated
    assert len(report.steps) == 2 * 4  # ranks x steps
    html = render_html(report, "2025-01-01 00:00 UTC")
    assert "Simulated trace." in html and "TP=2 over pcie" in html


def test_on_pcie_decode_tp8_is_slower_than_tp4_but_on_nvlink_it_is_faster(opened: Opened) -> None:
    # Decode is latency-bound: TP=8 halves each rank's weight reads (~75 µs a layer) but its
    # 14-step rings cost 2 x 48 µs more latency per layer than TP=4's 6-step rings on PCIe.
    pcie = [step_time_ns(opened[f"llama70b_decode_tp{n}_pcie.sqlite"]) for n in (2, 4, 8)]
    nvlink = [step_time_ns(opened[f"llama70b_decode_tp{n}_nvlink.sqlite"]) for n in (2, 4, 8)]
    assert pcie[1] < pcie[0] and pcie[2] > pcie[1]
    assert nvlink[0] > nvlink[1] > nvlink[2]
    assert all(p > n for p, n in zip(pcie, nvlink, strict=True))


def test_overlap_lowers_the_exposed_communication_share_of_nvlink_prefill(opened: Opened) -> None:
    serial = exposed_comm_pct(opened["llama70b_prefill_tp8_nvlink.sqlite"])
    overlapped = exposed_comm_pct(opened["llama70b_prefill_tp8_nvlink_overlap.sqlite"])
    assert overlapped < serial / 2
    # ...and PCIe prefill is dominated by its all-reduces.
    assert exposed_comm_pct(opened["llama70b_prefill_tp8_pcie.sqlite"]) > 50


def test_the_straggler_sample_makes_every_other_rank_wait_for_rank_3(opened: Opened) -> None:
    path = SAMPLES / "llama70b_decode_tp8_nvlink_straggler.sqlite"
    stragglers = build_report(opened[path.name], path).stragglers
    assert stragglers.straggler is not None and stragglers.straggler.rank == 3
    waits = {g.rank: g.wait_ns for g in stragglers.gpus}
    assert all(waits[3] * 10 < waits[r] for r in waits if r != 3)


def test_presets_have_the_llama_3_shapes() -> None:
    assert MODELS["llama70b"] == ModelSpec("llama70b", 8192, 80, 28672, 64, 8, 128_256)
    assert MODELS["llama8b"] == ModelSpec("llama8b", 4096, 32, 14336, 32, 8, 128_256)


def test_the_report_puts_each_layers_twelve_kernels_in_that_layer(write_and_open: Any) -> None:
    # Per layer: 2 norms, 4 GEMMs, rotary, cache write, attention, SiLU and 2 all-reduces.
    con = write_and_open(tensor_parallel(replace(ONE_LAYER, model=replace(TINY, layers=3))))
    rows = run_query(con, "layer_summary").to_dicts()
    per_layer = {(r["device_id"], r["layer"]): r["kernel_count"] for r in rows}
    for rank in (0, 1):
        assert [per_layer[(rank, f"model.layers.{i}")] for i in range(3)] == [12, 12, 12]
        # Embedding, its all-reduce, final norm, LM head, all-gather and argmax.
        assert per_layer[(rank, "(outside layers)")] == 6
