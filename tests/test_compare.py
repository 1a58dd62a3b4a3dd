"""compare: exact speedups, efficiencies and loss parts on configurations with known step times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.compare import collective_sentence, compare, load_inputs
from nsysreport.patterns import Patterns
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
SAMPLES = Path(__file__).parents[1] / "sample_traces"


def config(
    tmp_path: Path, name: str, gpus: int, gemm: int, comm: int, idle: int, layers: int = 1
) -> Path:
    """`gpus` GPUs, two steps; per step a `gemm` ns GEMM, `idle` ns of nothing, then a `comm` ns
    all-reduce on the same stream, each launched inside `step N` and `layers.0` (and layers.1
    for the all-reduce when layers=2).
    """
    kernels, nvtx = [], []
    for g in range(gpus):
        pid = 100 + g
        for step in range(2):
            t = 10_000 * (step + 1)
            kernels.append(Kernel(t, t + gemm, GEMM, pid=pid, device=g, launch=(t - 100, t - 99)))
            nvtx.append(NvtxRange(t - 200, t - 50, f"step {step}", pid=pid))
            nvtx.append(NvtxRange(t - 150, t - 98, "layers.0", pid=pid))
            if comm:
                start = t + gemm + idle
                kernels.append(
                    Kernel(
                        start, start + comm, ALLREDUCE, pid=pid, device=g, launch=(t - 90, t - 89)
                    )
                )
                label = "layers.1" if layers == 2 else "layers.0"
                nvtx.append(NvtxRange(t - 95, t - 85, label, pid=pid))
    return write_trace(Scenario(kernels=kernels, nvtx=nvtx), tmp_path / f"{name}.sqlite")


@pytest.fixture
def three(tmp_path: Path) -> list[str]:
    # Step times: 1 GPU 1000 ns; 2 GPUs 500 + 100 comm = 600 ns;
    # 4 GPUs 250 + 50 idle + 150 comm = 450 ns.
    return [
        str(config(tmp_path, "c4", 4, 250, 150, 50, layers=2)),
        str(config(tmp_path, "c1", 1, 1000, 0, 0)),
        str(config(tmp_path, "c2", 2, 500, 100, 0)),
    ]


def test_speedup_efficiency_and_loss_parts_are_exact(three: list[str]) -> None:
    c = compare(load_inputs(three, Patterns()))
    assert [x.label for x in c.configs] == ["c1", "c2", "c4"] and c.baseline == "c1"
    assert [x.step_time_ns for x in c.configs] == [1000, 600, 450]
    assert [x.steps for x in c.configs] == [2, 2, 2]
    c2, c4 = c.configs[1], c.configs[2]
    assert c2.speedup == pytest.approx(1000 / 600) and c2.ideal_speedup == 2
    assert c2.scaling_efficiency == pytest.approx(1000 / 600 / 2)
    assert c4.speedup == pytest.approx(1000 / 450) and c4.scaling_efficiency == pytest.approx(
        1000 / 450 / 4
    )
    # Ideal for 2 GPUs: 1000 * 1/2 = 500 ns; the 100 ns gap is all exposed communication.
    assert c2.loss == {
        "compute_ns": 0,
        "exposed_comm_ns": 100,
        "exposed_memcpy_ns": 0,
        "idle_ns": 0,
        "total_ns": 100,
    }
    # Ideal for 4 GPUs: 250 ns; 150 ns of all-reduce and 50 ns of idle make the 200 ns gap.
    assert c4.loss == {
        "compute_ns": 0,
        "exposed_comm_ns": 150,
        "exposed_memcpy_ns": 0,
        "idle_ns": 50,
        "total_ns": 200,
    }
    assert c4.breakdown == {
        "compute_ns": 250,
        "exposed_comm_ns": 150,
        "exposed_memcpy_ns": 0,
        "idle_ns": 50,
    }
    assert c4.throughput == pytest.approx(1e9 / 450)


def test_mismatched_layer_sets_are_compared_on_what_they_share(three: list[str]) -> None:
    c = compare(load_inputs(three, Patterns()))
    rows = {r["layer"]: r["exposed_comm_ns"] for r in c.layers}
    assert rows["layers.1"] == {"c1": None, "c2": None, "c4": 150.0}  # per step and GPU
    assert rows["layers.0"]["c2"] == 100.0 and rows["layers.0"]["c4"] == 0.0
    assert any("c1 has no layer ranges named layers.1" in n for n in c.notes)


def test_configs_without_steps_are_compared_by_trace_window_and_say_so(
    tmp_path: Path, three: list[str]
) -> None:
    bare = write_trace(
        Scenario(kernels=[Kernel(0, 400, GEMM, device=d, pid=d + 1) for d in range(8)]),
        tmp_path / "c8.sqlite",
    )
    c = compare(load_inputs([*three, str(bare)], Patterns()))
    assert c.basis == "span" and any("c8 has no NVTX step ranges" in n for n in c.notes)


def test_the_cli_writes_the_json_contract_and_accepts_labels_json_and_a_baseline(
    three: list[str], tmp_path: Path
) -> None:
    saved = tmp_path / "two.json"
    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["report", three[2], "-o", str(tmp_path / "r.html"), "--json", str(saved), "-q"]
        ).exit_code
        == 0
    )
    out = tmp_path / "cmp.json"
    args = [
        "compare",
        f"four={three[0]}",
        f"one={three[1]}",
        f"two={saved}",
        "--baseline",
        "two",
        "--tokens-per-step",
        "8",
        "-o",
        str(tmp_path / "c.html"),
        "--json",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema_version"] == 1 and data["baseline"] == "two"
    assert set(data) >= {"configs", "layers", "collectives"}
    keys = {
        "label",
        "traces",
        "gpus",
        "steps",
        "step_time_ns",
        "throughput",
        "speedup",
        "ideal_speedup",
        "scaling_efficiency",
        "breakdown",
        "loss",
    }
    assert all(keys <= set(x) for x in data["configs"])
    by_label = {x["label"]: x for x in data["configs"]}
    assert (
        by_label["one"]["speedup"] == pytest.approx(600 / 1000)
        and by_label["one"]["ideal_speedup"] == 0.5
    )
    assert by_label["four"]["throughput"] == pytest.approx(8e9 / 450)
    assert "Scaling:" in result.stdout and (tmp_path / "c.html").is_file()


def test_bad_inputs_are_one_line_errors(three: list[str], tmp_path: Path) -> None:
    runner = CliRunner()
    one = runner.invoke(app, ["compare", three[0]])
    assert one.exit_code == 2 and one.stderr == "Error: compare needs at least two configurations\n"
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    bad = runner.invoke(app, ["compare", three[0], str(junk)])
    assert bad.exit_code == 1 and "is not an nsysreport report" in bad.stderr
    base = runner.invoke(app, ["compare", *three, "--baseline", "nope"])
    assert base.exit_code == 2 and "--baseline 'nope': not one of c1, c2, c4" in base.stderr


def test_pcie_decode_gets_slower_from_tp4_to_tp8_and_nvlink_decode_does_not() -> None:
    def steps(link: str) -> dict[str, float]:
        files = [str(SAMPLES / f"llama70b_decode_tp{n}_{link}.sqlite") for n in (2, 4, 8)]
        return {x.label: x.step_time_ns for x in compare(load_inputs(files, Patterns())).configs}

    pcie, nvlink = steps("pcie"), steps("nvlink")
    assert pcie["tp8"] > pcie["tp4"] < pcie["tp2"]
    assert nvlink["tp8"] < nvlink["tp4"] < nvlink["tp2"]


def test_across_tp_degrees_bus_bytes_grow_and_latency_bound_calls_do_not_shrink() -> None:
    files = [str(SAMPLES / f"llama70b_decode_tp{n}_pcie.sqlite") for n in (2, 4, 8)]
    c = compare(load_inputs(files, Patterns()))
    ar = next(op for op in c.collectives if op["op"] == "AllReduce")
    # 16 KiB messages (1 token x 8192 x bf16); each GPU moves 2(TP-1)/TP of them.
    assert ar["mean_bytes"] == {"tp2": 16_384, "tp4": 16_384, "tp8": 16_384}
    assert ar["bus_bytes"] == pytest.approx({"tp2": 16_384, "tp4": 24_576, "tp8": 28_672})
    assert ar["calls"] == {"tp2": 68, "tp4": 68, "tp8": 68}
    assert ar["bound"] == {"tp2": "latency", "tp4": "latency", "tp8": "latency"}
    assert ar["peak_gbps"] == {"tp2": 20.0, "tp4": 20.0, "tp8": 20.0}
    assert ar["mean_ns"]["tp2"] < ar["mean_ns"]["tp4"] < ar["mean_ns"]["tp8"]
    sentence = collective_sentence(c)
    assert sentence is not None
    assert sentence.startswith("AllReduce (tp2, tp4, tp8): 68 calls per GPU in every config")
    assert "latency-bound throughout" in sentence


def test_pytorch_profiler_json_traces_are_compared_as_traces_and_nan_is_refused(
    tmp_path: Path,
) -> None:
    def kineto(path: Path, gemm_us: int) -> Path:
        """One GPU: a GEMM of `gemm_us` µs from 1 µs, then a 1 µs all-reduce."""
        kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7}
        args = {"device": 0, "stream": 7}
        events = [
            {**kernel, "name": GEMM, "ts": 1, "dur": gemm_us, "args": {**args, "correlation": 1}},
            {**kernel, "name": ALLREDUCE, "ts": 1 + gemm_us, "dur": 1,
             "args": {**args, "correlation": 2}},
        ]  # fmt: skip
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
        return path

    a, b = kineto(tmp_path / "a.json", 3), kineto(tmp_path / "b.json", 1)  # spans 4 and 2 µs
    out = tmp_path / "c.json"
    runner = CliRunner()
    result = runner.invoke(app, ["compare", f"a={a}", f"b={b}", "-o", str(tmp_path / "c.html"),
                                 "--json", str(out), "-q", "--baseline", "a"])  # fmt: skip
    assert result.exit_code == 0, result.output
    by_label = {c["label"]: c for c in json.loads(out.read_text())["configs"]}
    assert by_label["b"]["speedup"] == pytest.approx(2.0)
    nan = tmp_path / "nan.json"
    nan.write_text('{"schema_version": 1, "gpus": [{"span_ns": NaN}]}')
    bad = runner.invoke(app, ["compare", str(a), str(nan)])
    assert bad.exit_code == 1 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith(f"Error: {nan}: not valid JSON (NaN is not a number JSON allows")
