"""The progress line: rows loaded of rows total per table, elapsed and remaining time, only on
a terminal."""

from __future__ import annotations

import io
from pathlib import Path

from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.progress import LoadState, remaining_seconds, terminal_progress
from nsysreport.sqlite_copy import table_rows
from nsysreport.synth import Kernel, Memcpy, Scenario, write_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_line_counts_rows_per_table_and_estimates_the_time_left() -> None:
    state = LoadState({"A": 100, "B": 300}, started=0.0)
    state.update("checking the trace", 0.0)
    assert state.line(0.5) == "nsysreport: checking the trace (0.5 s elapsed)"
    state.update("loading A", 1.0)
    # No table done yet: no rate, so no estimate.
    assert state.line(1.5) == (
        "nsysreport: loading A (100 rows, table 1 of 2) · 0 of 400 rows · 1.5 s elapsed"
    )
    state.update("loading B", 3.0)
    # A's 100 rows took 2 s: B's 300 rows take 6 s at that rate, 2 of them gone at t = 5.
    assert state.line(5.0) == (
        "nsysreport: loading B (300 rows, table 2 of 2) · 100 of 400 rows · "
        "5.0 s elapsed, about 4 s left"
    )
    assert state.line(9.5).endswith("9.5 s elapsed, under 1 s left")
    state.update("deriving timelines", 10.0)
    assert state.line(10.0) == "nsysreport: deriving timelines (10.0 s elapsed)"
    assert state.done == ["A", "B"]


def test_the_time_left_is_unknown_until_rows_were_loaded() -> None:
    assert remaining_seconds(0, 10, 1.0) is None
    assert remaining_seconds(5, 10, 0.0) is None
    assert remaining_seconds(25, 100, 1.0) == 3.0


def test_a_terminal_sees_the_rows_of_the_table_being_loaded() -> None:
    terminal, clock = FakeTerminal(), Clock()
    with terminal_progress(False, terminal, {"A": 1200, "B": 10}, clock) as show:
        show("loading A")
        clock.now = 4.0
        show("loading B")
    # The line as it stood last (a terminal also sees each earlier state as it is redrawn).
    assert "loading B (10 rows, table 2 of 2) · 1,200 of 1,210 rows" in terminal.getvalue()


def test_quiet_or_a_pipe_gets_nothing() -> None:
    for quiet, stream in ((True, FakeTerminal()), (False, io.StringIO())):
        with terminal_progress(quiet, stream, {"A": 1}) as show:
            show("loading A")
        assert stream.getvalue() == ""


def test_the_rows_are_counted_in_the_trace_before_it_loads(tmp_path: Path) -> None:
    scenario = Scenario(
        kernels=[Kernel(0, 10, GEMM), Kernel(20, 30, GEMM), Kernel(40, 50, GEMM)],
        memcpys=[Memcpy(60, 70)],
    )
    rows = table_rows(write_trace(scenario, tmp_path / "t.sqlite"))
    assert (rows["CUPTI_ACTIVITY_KIND_KERNEL"], rows["CUPTI_ACTIVITY_KIND_MEMCPY"]) == (3, 1)
    not_sqlite = tmp_path / "x.sqlite"
    not_sqlite.write_text("not a database")
    assert table_rows(not_sqlite) == {}


def test_output_that_is_no_terminal_stays_as_it_was(tmp_path: Path) -> None:
    trace = write_trace(Scenario(kernels=[Kernel(0, 10, GEMM)]), tmp_path / "t.sqlite")
    result = CliRunner().invoke(app, ["report", str(trace), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert " rows · " not in result.output and "\x1b" not in result.output
    assert result.output.startswith(str(trace))  # the summary's first line, nothing before it
    quiet = CliRunner().invoke(app, ["report", str(trace), "-o", str(tmp_path / "q.html"), "-q"])
    assert quiet.exit_code == 0 and quiet.output == ""
