"""The progress line on a terminal while a report is made: which step runs and, while the
tables load, rows loaded of rows total, time elapsed and an estimate of the time left.

Only on a terminal: with --quiet, or when stderr is a pipe or a file (CI), nothing is printed.
Rows are counted per table, as each table is copied whole (one INSERT): the line names the table
being loaded and its rows, the rows of the tables done, and the time left at the rows-per-second
rate of the tables done, less the time the current table has taken so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from nsysreport.units import fmt_count

LOADING = "loading "  # the prefix of analysis.load_one's message for each table


@dataclass
class LoadState:
    """What the progress line says: the step, and the tables' rows (`totals`, in load order)."""

    totals: Mapping[str, int]
    started: float
    step: str = "starting"
    table: str | None = None  # the table being loaded
    done: list[str] = field(default_factory=list)  # tables loaded
    table_started: float = 0.0
    loaded_seconds: float = 0.0  # time spent on the tables done

    def update(self, message: str, now: float) -> None:
        name = message.removeprefix(LOADING)
        if self.table is not None:  # any next step ends the table being loaded
            self.done.append(self.table)
            self.loaded_seconds += now - self.table_started
            self.table = None
        if message.startswith(LOADING) and name in self.totals:
            self.table, self.table_started = name, now
        self.step = message

    def line(self, now: float) -> str:
        elapsed = f"{now - self.started:.1f} s elapsed"
        if self.table is None:
            return f"nsysreport: {self.step} ({elapsed})"
        total = sum(self.totals.values())
        loaded = sum(self.totals[t] for t in self.done)
        rows = fmt_count(self.totals[self.table])
        place = f"table {len(self.done) + 1} of {len(self.totals)}"
        text = (
            f"nsysreport: loading {self.table} ({rows} rows, {place}) · "
            f"{fmt_count(loaded)} of {fmt_count(total)} rows · {elapsed}"
        )
        left = remaining_seconds(loaded, total, self.loaded_seconds)
        if left is None:
            return text
        left = max(left - (now - self.table_started), 0.0)  # the current table is under way
        return text + (f", about {left:.0f} s left" if left >= 1 else ", under 1 s left")


def remaining_seconds(loaded: int, total: int, seconds: float) -> float | None:
    """Time left to load `total` rows at the rate of the `loaded` rows so far; None before a
    rate is known."""
    if loaded <= 0 or seconds <= 0:
        return None
    return (total - loaded) * seconds / loaded


@contextmanager
def terminal_progress(
    quiet: bool,
    stream: IO[str],
    totals: Mapping[str, int] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Callable[[str], None]]:
    """A callback taking each step's message, shown on `stream` with a spinner when it is a
    terminal; with `quiet` or another stream, a callback that prints nothing."""
    if quiet or not stream.isatty():
        yield lambda message: None
        return
    # Lazy: 50 ms of start-up (python -X importtime).
    from rich.console import Console
    from rich.text import Text

    state = LoadState(totals or {}, clock())

    class Line:
        """Rendered afresh at each refresh of the spinner, so the times stay current."""

        def __rich__(self) -> Any:
            # One line: a terminal narrower than the line cuts it rather than wrapping it.
            return Text(state.line(clock()), no_wrap=True, overflow="ellipsis")

    with Console(file=stream).status(Line()) as status:

        def show(message: str) -> None:
            state.update(message, clock())
            status.update(Line())

        yield show
