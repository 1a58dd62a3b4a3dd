"""A fuzz case: what it runs and expects, the context it runs in, and the checks after it."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzing import oracle, runner
from fuzzing.oracle import Failure
from fuzzing.runner import Result
from fuzzing.seeds import SEEDS, SqliteShape, build, sqlite_shape


@dataclass(frozen=True, slots=True)
class Expect:
    """Acceptable exits, and how the numbers of an exit-0 report must relate to the seed's:
    `full` equal (neutral mutations), `gpus` per-GPU numbers equal unless the report notes
    skipped rows, `any` only sane."""

    exits: frozenset[int]
    numbers: str = "gpus"
    forbid: tuple[str, ...] = ()  # misleading phrases the error line must not use


def expect(*exits: int, numbers: str = "gpus", forbid: tuple[str, ...] = ()) -> Expect:
    return Expect(frozenset(exits), numbers, forbid)


NEUTRAL = expect(0, numbers="full")


@dataclass(slots=True)
class Setup:
    """One case made concrete in its folder: the command and what the checks look at."""

    argv: list[str]
    cwd: Path
    inputs: list[Path]  # must keep their bytes and mtime
    watch: list[Path]  # folders that may gain only `outputs`
    outputs: list[Path]  # written on success, absent on failure
    report_json: Path | None = None  # the report whose numbers are checked on exit 0
    html: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    subprocess: bool = False
    no_dac: bool = False  # file permissions apply (a subprocess without root's override)
    fsize: int | None = None
    timeout: float = 60
    gate: bool = False  # exit 1 is a verdict (outputs written), 2 the error
    alt_baselines: list[dict[str, Any]] = field(default_factory=list)
    pre: Callable[[], list[Failure]] | None = None  # before the snapshot (warm-ups, swaps)
    main: Callable[[], Result] | None = None  # instead of the single run (concurrency)
    post: Callable[[Result], list[Failure]] | None = None  # extra checks after the run


Prepare = Callable[["Context", Path], Setup]


@dataclass(frozen=True, slots=True)
class Case:
    family: str
    index: int
    seed: int
    base: str  # the seed input
    what: str
    expect: Expect
    prepare: Prepare

    @property
    def name(self) -> str:
        return f"{self.family}:{self.index}"

    def repro(self) -> str:
        return (
            f"python benchmarks/fuzz.py --seed {self.seed} --case {self.name}"
            f"   # {self.base}: {self.what}"
        )


@dataclass(slots=True)
class Outcome:
    case: str
    repro: str
    failures: list[Failure]
    seconds: float


class Context:
    """The workspace of a fuzz run: seeds built once, baseline reports, case folders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._shapes: dict[str, SqliteShape] = {}
        self._baselines: dict[str, dict[str, Any]] = {}

    def seed_file(self, seed: str) -> Path:
        path = self.root / "seeds" / seed / SEEDS[seed].filename
        if not path.exists():  # built by the first caller (the pool builds all before workers)
            build(seed, path.parent)
        return path

    def shape(self, seed: str) -> SqliteShape:
        if seed not in self._shapes:
            self._shapes[seed] = sqlite_shape(self.seed_file(seed))
        return self._shapes[seed]

    def copy_seed(self, seed: str, folder: Path, name: str | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (name or SEEDS[seed].filename)
        shutil.copyfile(self.seed_file(seed), path)
        return path

    def report_setup(self, trace: Path, folder: Path, *extra: str, cache: bool = False) -> Setup:
        """`report TRACE -o out/r.html --json out/r.json -q` with the trace's folder watched."""
        out = folder / "out"
        out.mkdir(exist_ok=True)
        html, js = out / "r.html", out / "r.json"
        argv = ["report", str(trace), "-o", str(html), "--json", str(js), "-q", *extra]
        if not cache:
            argv.append("--no-cache")
        return Setup(
            argv,
            folder,
            [trace],
            [trace.parent],
            [html, js],
            js,
            html,
            env={"XDG_CACHE_HOME": str(folder / "xdg")},
        )

    def baseline(self, seed: str) -> dict[str, Any]:
        """The unmutated seed's report JSON (computed once per workspace, kept on disk)."""
        if seed in self._baselines:
            return self._baselines[seed]
        folder = self.root / "baselines" / seed
        js = folder / "out" / "r.json"
        if not js.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            setup = self.report_setup(self.copy_seed(seed, folder / "in"), folder)
            result = runner.run_inproc(setup.argv, setup.env, setup.cwd)
            if result.code != 0:
                raise RuntimeError(f"seed {seed} fails unmutated: {result.crash or result.stderr}")
        self._baselines[seed] = json.loads(js.read_text())
        return self._baselines[seed]

    def run(self, setup: Setup) -> Result:
        if setup.subprocess:
            return runner.run_subprocess(
                setup.argv, setup.env, setup.cwd, setup.timeout, setup.no_dac, setup.fsize
            )
        return runner.run_inproc(setup.argv, setup.env, setup.cwd)


def execute(ctx: Context, case: Case, keep: bool = False) -> Outcome:
    """Prepare the case in a fresh folder, run it, and check every promise."""
    started = time.perf_counter()
    folder = ctx.root / "cases" / f"{case.family}-{case.index}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    failures: list[Failure] = []
    try:
        setup = case.prepare(ctx, folder)
        if setup.pre is not None:
            failures += setup.pre()
        before = runner.snapshot(setup.inputs, setup.watch)
        existed = {p for p in setup.outputs if p.exists()}
        result = setup.main() if setup.main is not None else ctx.run(setup)
        after = runner.snapshot(setup.inputs, setup.watch)
        failures += check(ctx, case, setup, result, existed)
        failures += oracle.files(before, after, setup.outputs, _succeeded(setup, result))
        if setup.post is not None:
            failures += setup.post(result)
    finally:
        if not keep:
            _remove(folder)
    return Outcome(case.name, case.repro(), failures, time.perf_counter() - started)


def _succeeded(setup: Setup, result: Result) -> bool:
    return result.crash is None and result.code in ((0, 1) if setup.gate else (0,))


def check(
    ctx: Context, case: Case, setup: Setup, result: Result, existed: set[Path]
) -> list[Failure]:
    found: list[Failure] = []
    if result.crash is not None:
        kind = (
            "hang"
            if result.crash.startswith("hang")
            else ("crash" if result.signal else "traceback")
        )
        found.append((kind, result.crash))
    elif result.code not in case.expect.exits:
        first = (result.stderr.strip().splitlines() or ["(no stderr)"])[0][:160]
        want = "/".join(map(str, sorted(case.expect.exits)))
        found.append(("exit-code", f"exit {result.code}, expected {want}: {first}"))
    if _succeeded(setup, result):
        found += oracle.outputs_present(setup.outputs, setup.report_json)
        if setup.report_json is not None and setup.report_json.is_file():
            try:
                report = oracle.loads_strict(setup.report_json.read_text(encoding="utf-8"))
            except ValueError as exc:
                return [*found, ("absurd-value", f"report JSON: {exc}")]
            found += oracle.sane_report(report)
            bases = [ctx.baseline(case.base), *setup.alt_baselines]
            found += oracle.numbers(report, case.expect.numbers, bases)
        if setup.html is not None and setup.html.is_file():
            found += oracle.html_clean(setup.html)
    elif result.crash is None and result.code is not None:
        found += oracle.error_line(result, case.expect.forbid, setup.argv)
        found += oracle.no_partial(setup.outputs, existed)
    return found


def _remove(folder: Path) -> None:
    # A case may leave folders without permissions (chmod 000) or FIFOs: open them first.
    for p in [folder, *folder.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(folder, ignore_errors=True)
