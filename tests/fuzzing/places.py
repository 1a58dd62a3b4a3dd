"""Fuzz families about where the trace and the outputs live: output paths onto the input by
any spelling, folders, missing or bad parents; and what lies beside the trace (-wal, -journal,
-shm, a FIFO, permissions, a full disk, a lock, the other loader)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fuzzing import oracle
from fuzzing.cases import NEUTRAL, Context, Expect, Setup, expect
from fuzzing.oracle import Failure
from fuzzing.runner import Result

Build = Callable[[Context, Path, random.Random], Setup]
Template = tuple[str, str, Expect, Build]  # name, seed, expectation, builder
REFUSED = expect(1, 2, numbers="any")
GATE_ARGS = ["--max", "exposed_comm_pct=100", "--max", "idle_pct=100", "--min", "compute_pct=0"]


def std(ctx: Context, folder: Path, seed: str, *extra: str, cache: bool = False) -> Setup:
    return ctx.report_setup(ctx.copy_seed(seed, folder / "in"), folder, *extra, cache=cache)


def _swap(setup: Setup, flag: str, value: str | Path) -> Setup:
    """Point option `flag` at `value`; that option's own output is no longer expected."""
    i = setup.argv.index(flag)
    old = Path(setup.argv[i + 1])
    setup.argv[i + 1] = str(value)
    setup.outputs = [p for p in setup.outputs if p != old]
    if flag == "--json":
        setup.report_json = None
    if flag == "-o":
        setup.html = None
    return setup


def blocker(folder: Path) -> Path:
    path = folder / "blocker"
    path.write_text("a regular file where a folder is expected\n")
    return path


# Paths and outputs ---------------------------------------------------------------------------


def _o(spell: Callable[[Path, Path], str | Path], flag: str = "-o", seed: str = "synth") -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, seed)
        return _swap(s, flag, spell(folder, s.inputs[0]))

    return build


def _symlinked_dir(folder: Path, trace: Path) -> Path:
    (folder / "alias").symlink_to(trace.parent, target_is_directory=True)
    return folder / "alias" / trace.name


def _link(kind: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, "synth")
        link = folder / "out" / "link.html"
        if kind == "symlink":
            link.symlink_to(s.inputs[0])
        else:
            os.link(s.inputs[0], link)
        s = _swap(s, "-o", link)
        s.outputs.append(link)
        s.html = link
        return s

    return build


def _missing_parent(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    s = std(ctx, folder, "synth")
    deep = folder / "out" / "new" / "deeper" / "r.html"
    s = _swap(s, "-o", deep)
    s.outputs.append(deep)
    s.html = deep
    return s


def _partial(bad: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, "synth")
        flag, name = ("--json", "r.json") if bad == "json" else ("-o", "r.html")
        return _swap(s, flag, blocker(folder) / name)

    return build


def _gate_onto_input(option: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        trace = ctx.copy_seed("synth", folder / "in")
        argv = ["gate", str(trace), *GATE_ARGS, "--no-cache", option, str(trace)]
        env = {"XDG_CACHE_HOME": str(folder / "xdg")}
        return Setup(argv, folder, [trace], [trace.parent], [], env=env, gate=True)

    return build


def _default_output(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    s = std(ctx, folder, "synth")
    i = s.argv.index("-o")
    del s.argv[i : i + 2]
    page = s.inputs[0].with_name("t.report.html")
    s.outputs = [page, *(p for p in s.outputs if p.suffix == ".json")]
    s.html = page
    return s


def _odd_name(name: str, dirname: str = "in") -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        trace = ctx.copy_seed("synth", folder / dirname, name)
        return ctx.report_setup(trace, folder)

    return build


def _json_stdout(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    s = _swap(std(ctx, folder, "synth"), "--json", "-")
    s.argv.remove("-q")

    def post(result: Result) -> list[Failure]:
        if result.code != 0:
            return []
        try:
            report = oracle.loads_strict(result.stdout)
        except ValueError as exc:
            return [("bad-json", f"--json - printed no clean JSON ({exc})"[:200])]
        return oracle.numbers(report, "full", [ctx.baseline("synth")])

    s.post = post
    return s


def _via_symlink(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    trace = ctx.copy_seed("synth", folder / "in")
    link = trace.with_name("link.sqlite")
    link.symlink_to(trace.name)
    s = _swap(ctx.report_setup(link, folder), "-o", trace)
    s.inputs = [trace, link]
    return s


def _same_output_twice(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    s = std(ctx, folder, "synth")
    return _swap(s, "--json", folder / "out" / "r.html")


def _compare_onto_input(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    a = ctx.copy_seed("synth", folder / "in", "a.sqlite")
    b = ctx.copy_seed("synth_b", folder / "in", "b.sqlite")
    argv = ["compare", f"a={a}", f"b={b}", "-o", str(a), "-q", "--no-cache"]
    env = {"XDG_CACHE_HOME": str(folder / "xdg")}
    return Setup(argv, folder, [a, b], [a.parent], [], env=env)


PATHS: tuple[Template, ...] = (
    ("-o is the input", "synth", REFUSED, _o(lambda f, t: t)),
    ("-o ./in/t.sqlite (the input, relative)", "synth", REFUSED, _o(lambda f, t: "./in/t.sqlite")),
    ("-o out/../in/t.sqlite", "synth", REFUSED, _o(lambda f, t: "out/../in/t.sqlite")),
    ("-o the input through a symlinked folder", "synth", REFUSED, _o(_symlinked_dir)),
    ("--json is the input", "synth", REFUSED, _o(lambda f, t: t, "--json")),
    (
        "--json out/../in/t.sqlite",
        "synth",
        REFUSED,
        _o(lambda f, t: "out/../in/t.sqlite", "--json"),
    ),
    ("-o is the Kineto input", "kineto", REFUSED, _o(lambda f, t: t, seed="kineto")),
    ("-o is a symlink to the input", "synth", expect(0, 1, 2, numbers="full"), _link("symlink")),
    ("-o is a hard link of the input", "synth", expect(0, 1, 2, numbers="full"), _link("hard")),
    ("-o is a folder", "synth", REFUSED, _o(lambda f, t: f / "out")),
    ("--json is a folder", "synth", REFUSED, _o(lambda f, t: f / "out", "--json")),
    ("-o in missing folders", "synth", expect(0, 1, 2, numbers="full"), _missing_parent),
    ("-o under a regular file", "synth", REFUSED, _o(lambda f, t: blocker(f) / "r.html")),
    ("good -o, --json under a regular file", "synth", REFUSED, _partial("json")),
    ("-o under a regular file, good --json", "synth", REFUSED, _partial("html")),
    ("gate --junit is the input", "synth", expect(2), _gate_onto_input("--junit")),
    ("gate --markdown is the input", "synth", expect(2), _gate_onto_input("--markdown")),
    ("gate --json is the input", "synth", expect(2), _gate_onto_input("--json")),
    ("default output beside the input", "synth", NEUTRAL, _default_output),
    ("a name with spaces and non-ASCII", "synth", NEUTRAL, _odd_name("my trace ü €.sqlite")),
    ("a folder name with a newline", "synth", NEUTRAL, _odd_name("t.sqlite", "in\nx")),
    ("--json - (stdout)", "synth", NEUTRAL, _json_stdout),
    ("input via a symlink, -o its target", "synth", REFUSED, _via_symlink),
    ("-o and --json the same file", "synth", REFUSED, _same_output_twice),
    ("compare -o is an input", "synth", REFUSED, _compare_onto_input),
)


# Environment ---------------------------------------------------------------------------------


def _beside(suffix: str, size: int) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, "synth")
        extra = Path(f"{s.inputs[0]}{suffix}")
        extra.write_bytes(rng.randbytes(size))
        s.inputs.append(extra)
        return s

    return build


def _wal_valid(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    """A committed but uncheckpointed WAL that deletes half the kernels: the report must read
    the database either with it or without it, never half of each."""
    s = std(ctx, folder, "synth")
    trace = s.inputs[0]
    work = folder / "wal"
    work.mkdir()
    db = shutil.copyfile(trace, work / "t.sqlite")
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 2 = 0")
    shutil.copyfile(db, trace)
    shutil.copyfile(f"{db}-wal", f"{trace}-wal")
    con.close()  # checkpoints: `db` now holds what the WAL says
    s.inputs.append(Path(f"{trace}-wal"))
    alt = ctx.report_setup(db, work)
    if ctx.run(alt).code == 0 and alt.report_json is not None:
        s.alt_baselines.append(json.loads(alt.report_json.read_text()))
    return s


def _journal_hot(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    """A hot rollback journal (a writer died mid-transaction): the file holds half-written
    pages; the right content is the seed's (after rollback)."""
    s = std(ctx, folder, "synth")
    trace = s.inputs[0]
    work = folder / "hot"
    work.mkdir()
    db = shutil.copyfile(trace, work / "t.sqlite")
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA cache_size = 1")  # spill dirty pages into the file before commit
    con.execute("BEGIN")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("UPDATE StringIds SET value = 'x'")
    shutil.copyfile(db, trace)
    shutil.copyfile(f"{db}-journal", f"{trace}-journal")
    con.execute("ROLLBACK")
    con.close()
    s.inputs.append(Path(f"{trace}-journal"))
    return s


def _fifo(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    (folder / "in").mkdir()
    trace = folder / "in" / "t.sqlite"
    os.mkfifo(trace)
    s = ctx.report_setup(trace, folder)
    s.subprocess, s.timeout = True, 30
    return s


def _cache_under_file(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    s = std(ctx, folder, "synth", cache=True)
    s.env["XDG_CACHE_HOME"] = str(blocker(folder))
    return s


def _no_permission(what: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, "synth")
        target = {"trace": s.inputs[0], "folder": s.inputs[0].parent, "out": folder / "out"}
        target[what].chmod(0o555 if what == "out" else 0)
        s.subprocess, s.no_dac = True, True
        return s

    return build


def _file_limit(size: int, cache: bool) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, "synth", cache=cache)
        s.subprocess, s.fsize = True, size
        return s

    return build


def _input_symlink(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    trace = ctx.copy_seed("synth", folder / "in")
    link = trace.with_name("link.sqlite")
    link.symlink_to(trace.name)
    s = ctx.report_setup(link, folder)
    s.inputs = [trace, link]
    return s


def _dangling(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    (folder / "in").mkdir()
    link = folder / "in" / "t.sqlite"
    link.symlink_to("gone.sqlite")
    return ctx.report_setup(link, folder)


def _folder_input(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    trace = ctx.copy_seed("synth", folder / "in")
    s = ctx.report_setup(trace.parent, folder)
    s.inputs = [trace]
    return s


def _locked(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    """Another process holds an exclusive lock on the trace (a writer still at work)."""
    s = std(ctx, folder, "synth")
    code = (
        "import sqlite3, sys, time\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(s.inputs[0])], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    holder.stdout.readline()

    def post(result: Result) -> list[Failure]:
        holder.kill()
        holder.wait()
        return []

    s.post = post
    return s


def _loader(name: str, seed: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = std(ctx, folder, seed)
        s.env["NSYSREPORT_LOADER"] = name
        return s

    return build


ENV: tuple[Template, ...] = (
    ("random bytes as t.sqlite-wal", "synth", expect(0, 1, numbers="full"), _beside("-wal", 8192)),
    ("a valid uncheckpointed WAL", "synth", expect(0, 1, numbers="full"), _wal_valid),
    (
        "random bytes as t.sqlite-journal",
        "synth",
        expect(0, 1, numbers="full"),
        _beside("-journal", 4096),
    ),
    ("a hot rollback journal", "synth", expect(0, 1, numbers="full"), _journal_hot),
    ("random bytes as t.sqlite-shm", "synth", expect(0, 1, numbers="full"), _beside("-shm", 32768)),
    ("a FIFO as the trace", "synth", expect(1, numbers="any", forbid=("is empty",)), _fifo),
    ("XDG_CACHE_HOME is a regular file", "synth", NEUTRAL, _cache_under_file),
    ("an unreadable trace", "synth", expect(1, numbers="any"), _no_permission("trace")),
    ("an unreadable folder", "synth", expect(1, numbers="any"), _no_permission("folder")),
    ("a read-only output folder", "synth", REFUSED, _no_permission("out")),
    (
        "no room for the cache (file size limit 512 KiB)",
        "synth",
        NEUTRAL,
        _file_limit(512 << 10, True),
    ),
    (
        "no room for the report (file size limit 16 KiB)",
        "synth",
        REFUSED,
        _file_limit(16 << 10, False),
    ),
    ("the trace through a symlink", "synth", NEUTRAL, _input_symlink),
    ("a dangling symlink as the trace", "synth", expect(1, numbers="any"), _dangling),
    ("a folder holding the one trace", "synth", expect(0, 1, numbers="full"), _folder_input),
    ("a trace another process has locked", "synth", expect(0, 1, numbers="full"), _locked),
    ("the ADBC loader (synth)", "synth", NEUTRAL, _loader("adbc", "synth")),
    ("the ADBC loader (real rtx3080)", "rtx3080", NEUTRAL, _loader("adbc", "rtx3080")),
    ("the ADBC loader (sample)", "sample", NEUTRAL, _loader("adbc", "sample")),
)
