"""The picture worker (nsysreport.picture_worker): a large trace's pictures are drawn in a
second process while the JSON is made, and the report is the same as one drawn here, with the
cache or without, and when the worker cannot do its job."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsysreport import picture_worker
from nsysreport.cli import app
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

GEMM = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Two steps of a GEMM and an all-reduce: every picture has something to show."""
    kernels = [Kernel(0, 50, GEMM), Kernel(60, 110, NCCL), Kernel(200, 250, GEMM)]
    kernels += [Kernel(270, 330, NCCL)]
    nvtx = [NvtxRange(-5, 150, "step 1"), NvtxRange(190, 400, "step 2")]
    nvtx += [NvtxRange(-4, 140, "model.layers.0"), NvtxRange(191, 390, "model.layers.0")]
    return write_trace(Scenario(kernels=kernels, nvtx=nvtx), tmp_path / "t.sqlite")


def report(trace: Path | list[Path], out: Path, *options: str) -> tuple[str, str]:
    html, js = out.with_suffix(".html"), out.with_suffix(".json")
    traces = [str(t) for t in (trace if isinstance(trace, list) else [trace])]
    result = CliRunner().invoke(
        app, ["report", *traces, "-o", str(html), "--json", str(js), *options]
    )
    assert result.exit_code == 0, result.output
    return html.read_text(), js.read_text()


def draws_counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the pictures handed to a worker from now on (by chart function)."""
    handed: list[str] = []
    real = picture_worker.PictureWorker.draw

    def counting(self, fn, pickled_args):  # type: ignore[no-untyped-def]
        handed.append(fn.__name__)
        return real(self, fn, pickled_args)

    monkeypatch.setattr(picture_worker.PictureWorker, "draw", counting)
    return handed


@pytest.mark.parametrize("options", [(), ("--no-cache",)])
def test_a_worker_draws_the_pictures_of_the_report_drawn_here(
    trace: Path,
    tmp_path: Path,
    isolated_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: tuple[str, ...],
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    here = report(trace, tmp_path / "here", "--no-cache")  # the trace is far below the size
    handed = draws_counted(monkeypatch)
    monkeypatch.setattr(picture_worker, "WORKER_MIN_BYTES", 0)

    def not_here(*_: object) -> str:
        raise AssertionError("drawn here, not by the worker")

    monkeypatch.setattr(picture_worker, "_draw", not_here)  # the fallback, in this process
    there = report(trace, tmp_path / "there", *options)
    assert {"breakdown_chart", "timeline_chart", "step_series_chart"} <= set(handed)
    assert there == here


def test_a_small_trace_starts_no_worker(
    trace: Path, isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = draws_counted(monkeypatch)
    report(trace, tmp_path / "r")
    assert handed == []
    assert picture_worker.start([trace]) is None
    assert picture_worker.start([trace, trace]) is None  # together, still far below the size


def test_a_worker_draws_the_pictures_of_a_report_over_several_files(
    trace: Path, tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several traces large enough together: their merged report's pictures go to the worker,
    and the report is the one drawn here."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    other = tmp_path / "other.sqlite"
    other.write_bytes(trace.read_bytes())
    here = report([trace, other], tmp_path / "here", "--no-cache")
    handed = draws_counted(monkeypatch)
    monkeypatch.setattr(picture_worker, "WORKER_MIN_BYTES", 2 * trace.stat().st_size)
    there = report([trace, other], tmp_path / "there", "--no-cache")
    assert {"breakdown_chart", "timeline_chart", "step_series_chart"} <= set(handed)
    assert there == here


@pytest.mark.parametrize(
    "worker",
    [("-c", "pass"), ("-c", "import sys; sys.stdin.buffer.read(9); sys.stdout.buffer.write(b'x')")],
)
def test_when_the_worker_dies_the_pictures_are_drawn_here(
    trace: Path,
    tmp_path: Path,
    isolated_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    worker: tuple[str, ...],
) -> None:
    """A worker that exits at once, or answers nonsense and exits: the same report."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    here = report(trace, tmp_path / "here", "--no-cache")
    handed = draws_counted(monkeypatch)
    monkeypatch.setattr(picture_worker, "WORKER_MIN_BYTES", 0)
    monkeypatch.setattr(picture_worker, "WORKER_ARGS", worker)
    assert report(trace, tmp_path / "there") == here
    assert handed  # the pictures went to the worker first


def test_a_drawing_error_in_the_worker_is_raised_here_as_without_one() -> None:
    import pickle

    worker = picture_worker.PictureWorker()
    try:
        args = pickle.dumps(("not a number",))
        future = worker.draw(int, args)  # int("not a number") fails in the worker
        with pytest.raises(ValueError, match="invalid literal"):
            picture_worker.result(future, int, args)
        assert worker.draw(str, pickle.dumps((12,))).result(timeout=60) == "12"
    finally:
        worker.close()


def test_closing_a_worker_with_pictures_left_stops_it_instead_of_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report that fails or is interrupted does not wait for the pictures it no longer needs."""
    import pickle
    import time

    monkeypatch.setattr(picture_worker, "EXIT_WAIT_S", 1)
    worker = picture_worker.PictureWorker()
    assert worker.draw(str, pickle.dumps((1,))).result(timeout=60) == "1"  # it has started
    stuck = worker.draw(time.sleep, pickle.dumps((600,)))  # ten minutes, in the worker
    began = time.monotonic()
    worker.close()
    assert time.monotonic() - began < 60
    with pytest.raises(EOFError):
        stuck.result(timeout=0)
