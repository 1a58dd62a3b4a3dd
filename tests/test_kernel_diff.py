"""compare's kernel diff and comparability verdict, and gate's kernel budgets, on scenarios whose
kernels, layers and steps are known, so every figure below can be worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.compare import as_json, compare, load_inputs
from nsysreport.load import open_trace
from nsysreport.model import Report
from nsysreport.model import as_json as report_json
from nsysreport.patterns import Patterns
from nsysreport.report_builder import build_report
from nsysreport.synth import Gpu, Kernel, NvtxRange, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<(int)4>(int)"
ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
NEW = "void new_fused_kernel<(int)8>(float *)"
runner = CliRunner()


@pytest.fixture(scope="module")
def saved_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """run()'s "a" as a saved report JSON, which gate reads back without loading a trace."""
    folder = tmp_path_factory.mktemp("budget")
    trace = run(folder, "a")
    path = folder / "a.json"
    path.write_text(json.dumps(report_json(build_report(open_trace(trace), trace))))
    return path


def run(
    folder: Path,
    name: str,
    gemm_ns: int = 100_000,
    gemms: int = 2,
    steps: int = 2,
    new: bool = False,
    gpu: str = "NVIDIA H100 80GB HBM3",
) -> Path:
    """One GPU, `steps` steps 1 ms apart. Each step launches, inside `layers.0`, `gemms` GEMMs
    of `gemm_ns` and a 20 µs elementwise kernel, then inside `layers.1` a 30 µs all-reduce (and
    with `new` a 10 µs kernel the other runs do not have), one after another on one stream."""
    kernels, nvtx = [], []
    for step in range(steps):
        t = 10_000 + 1_000_000 * step
        nvtx.append(NvtxRange(t - 9_000, t + 900_000, f"step {step}"))
        nvtx.append(NvtxRange(t - 8_000, t - 5_000, "layers.0"))
        nvtx.append(NvtxRange(t - 4_000, t - 1_000, "layers.1"))
        work = [(GEMM, gemm_ns)] * gemms + [(ELEMENTWISE, 20_000)]
        later = [(ALLREDUCE, 30_000)] + [(NEW, 10_000)] * new
        start, launch = t, t - 7_900
        for i, (kernel, ns) in enumerate(work + later):
            if i == len(work):
                launch = t - 3_900  # inside layers.1
            kernels.append(Kernel(start, start + ns, kernel, launch=(launch, launch + 10)))
            start, launch = start + ns, launch + 100
    scenario = Scenario(kernels=kernels, nvtx=nvtx, gpus=[Gpu(0, name=gpu, pid=100)])
    return write_trace(scenario, folder / f"{name}.sqlite")


def diff_of(*paths: Path):  # type: ignore[no-untyped-def]
    """The kernel diff of the second trace against the first (the baseline)."""
    c = compare(load_inputs([str(p) for p in paths], Patterns()))
    assert c.baseline == c.configs[0].label  # the first: the fewest GPUs, or the first of equals
    return c.kernel_diffs[0]


def test_the_one_kernel_slowed_from_100_to_150_us_is_named_first_with_its_exact_delta(
    tmp_path: Path,
) -> None:
    d = diff_of(run(tmp_path, "a"), run(tmp_path, "b", gemm_ns=150_000))
    first = d.by_time[0]
    # Per step and GPU: 2 GEMMs x 100 µs = 200 µs in layers.0, then 2 x 150 µs = 300 µs.
    assert (first.name, first.layer, first.status) == (GEMM, "layers.0", "changed")
    assert (first.base_ns, first.ns, first.delta_ns, first.delta_pct) == (
        200_000,
        300_000,
        100_000,
        50.0,
    )
    assert (first.base_count, first.count, first.matched) == (2, 2, 2)
    assert len(d.by_time) == 1 and not d.by_count and not d.new and not d.vanished
    # Every kernel per step: 200 + 20 + 30 = 250 µs, then 350 µs.
    assert (d.base_total_ns, d.total_ns, d.per) == (250_000, 350_000, "step and GPU")
    assert [(x.layer, x.delta_ns) for x in d.layers] == [("layers.0", 100_000), ("layers.1", 0)]
    assert d.comparable and d.verdict.startswith("b against a: comparable (same GPU model")


def test_a_kernel_only_the_second_run_has_is_new_and_one_instance_more_is_a_count_change(
    tmp_path: Path,
) -> None:
    d = diff_of(run(tmp_path, "a"), run(tmp_path, "c", gemms=3, new=True))
    assert [(x.name, x.layer, x.ns, x.count) for x in d.new] == [(NEW, "layers.1", 10_000, 1)]
    assert not d.vanished
    # A third GEMM per step: two pair with the baseline's in order, the third has no partner.
    gemm = d.by_count[0]
    assert (gemm.name, gemm.base_count, gemm.count, gemm.delta_count, gemm.matched) == (
        GEMM,
        2,
        3,
        1,
        2,
    )
    assert d.by_time[0].name == GEMM and d.by_time[0].delta_ns == 100_000
    assert d.by_time[1].name == NEW and d.by_time[1].status == "new"
    # The reverse: the kernel is gone from the second run.
    back = diff_of(run(tmp_path, "c2", new=True), run(tmp_path, "a2"))
    assert [(x.name, x.base_ns, x.ns) for x in back.vanished] == [(NEW, 10_000, 0)]
    # 10 µs of 250 + 360 µs per step is in a name one side lacks: 600 / 610 = 98.4 % shared,
    # above 90 %.
    kernel_set = next(x for x in d.checks if x.check == "kernel_set")
    assert kernel_set.ok and kernel_set.sentence.startswith("98.4% of the kernel time")


def test_another_gpu_model_is_stated_in_the_verdict_but_the_diff_is_still_made(
    tmp_path: Path,
) -> None:
    d = diff_of(run(tmp_path, "a"), run(tmp_path, "d", gpu="NVIDIA A100-SXM4-80GB"))
    assert not d.comparable
    assert d.verdict == (
        "d against a: not like for like: The GPU model differs: a ran on NVIDIA H100 80GB "
        "HBM3, d on NVIDIA A100-SXM4-80GB."
    )
    assert d.by_time == ()  # the same kernels, the same times


def test_a_capture_window_twice_as_long_with_twice_the_steps_is_stated(tmp_path: Path) -> None:
    d = diff_of(run(tmp_path, "a"), run(tmp_path, "e", steps=4))
    window = next(x for x in d.checks if x.check == "window")
    # Spans: 1 ms + 250 µs, and 3 ms + 250 µs (+160 %); 2 steps per GPU against 4.
    assert window.ok is False
    assert window.sentence == (
        "The capture windows differ: 1.25 ms per GPU (2 steps) for a, 3.25 ms (4 steps) for e "
        "(+160%); figures are per step."
    )
    assert not d.comparable and d.by_time == ()  # per step, nothing changed


def test_a_scaling_comparison_is_not_called_a_mismatch(tmp_path: Path) -> None:
    tp2 = Path(__file__).parents[1] / "sample_traces" / "llama70b_decode_tp2_pcie.sqlite"
    tp4 = tp2.with_name("llama70b_decode_tp4_pcie.sqlite")
    d = diff_of(tp2, tp4)
    checks = {x.check: x for x in d.checks}
    assert checks["gpu_count"].ok and "a scaling comparison" in checks["gpu_count"].sentence
    assert checks["window"].ok  # the same 4 steps per GPU, in less time
    assert d.comparable


def test_the_cli_prints_and_writes_the_diff(tmp_path: Path) -> None:
    a, b = run(tmp_path, "a"), run(tmp_path, "b", gemm_ns=150_000)
    out = tmp_path / "c.json"
    args = ["compare", str(a), str(b), "--baseline", "a", "-o", str(tmp_path / "c.html")]
    result = runner.invoke(app, [*args, "--json", str(out)], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())["kernel_diff"][0]
    assert data["by_time"][0]["name"] == GEMM and data["by_time"][0]["delta_ns"] == 100_000
    assert data["by_time"][0]["class"] == "gemm" and data["checks"][0]["check"] == "gpu_model"
    text = runner.invoke(app, args, env={"COLUMNS": "240"}).stdout
    assert "Kernel diff: b against a: comparable" in text
    assert "+100 µs (+50%)" in text
    html = (tmp_path / "c.html").read_text()
    assert 'id="kernel-diff"' in html and "b against a: comparable" in html


def test_the_kernel_table_comes_back_from_the_report_json_and_older_json_reads_as_none(
    tmp_path: Path,
) -> None:
    path = run(tmp_path, "a")
    report = build_report(open_trace(path), path)
    rows = {(k.name, k.layer): (k.instances, k.total_ns, k.gpus) for k in report.kernel_layers}
    assert rows == {
        (GEMM, "layers.0"): (4, 400_000, 1),
        (ELEMENTWISE, "layers.0"): (2, 40_000, 1),
        (ALLREDUCE, "layers.1"): (2, 60_000, 1),
    }
    data = report_json(report)
    assert data["kernel_layers"][0]["class"] == "gemm"
    back = Report.from_json(json.loads(json.dumps(data)), "saved.json")
    assert back.kernel_layers == report.kernel_layers
    del data["kernel_layers"]
    older = Report.from_json(json.loads(json.dumps(data)), "older.json")
    assert older.kernel_layers == ()
    # compare still runs on it, with nothing to diff.
    diff = compare([("old", older), ("new", report)], baseline="old").kernel_diffs[0]
    assert [x.status for x in diff.new] == ["new"] * 3
    assert as_json(compare([("old", older), ("new", report)]))["kernel_diff"]


@pytest.mark.parametrize(
    ("check", "at_limit", "past_limit"),
    [
        # 2 GEMMs x 100 µs per step and GPU.
        ("kernel_time_ns[gemm]", "200000", "199999"),
        # The all-reduce by name: 30 µs per step.
        ("kernel_time_ns[AllReduce]", "30000", "29999"),
        # GEMMs: 200 of 250 µs of kernel time.
        ("kernel_time_pct[gemm]", "80", "79.99"),
        ("kernel_time_pct[elementwise|nccl]", "20", "19.99"),
    ],
)
def test_a_kernel_budget_passes_at_its_exact_value_and_fails_just_past_it(
    saved_report: Path, check: str, at_limit: str, past_limit: str
) -> None:
    path = saved_report
    for limit, code in ((at_limit, 0), (past_limit, 1)):
        result = runner.invoke(app, ["gate", str(path), "--max", f"{check}={limit}"])
        assert result.exit_code == code, result.output


def test_a_kernel_budget_without_a_family_or_with_a_bad_regex_is_a_usage_error(
    tmp_path: Path,
) -> None:
    path = run(tmp_path, "a")
    bare = runner.invoke(app, ["gate", str(path), "--max", "kernel_time_ns=1"])
    assert bare.exit_code == 2 and "kernel_time_ns needs a [CLASS]" in bare.stderr
    bad = runner.invoke(app, ["gate", str(path), "--max", "kernel_time_pct[(]=1"])
    assert bad.exit_code == 2 and "not a regular expression" in bad.stderr
