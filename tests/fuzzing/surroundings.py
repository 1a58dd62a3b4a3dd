"""Families about everything around the trace: output paths, the files and folders beside
it, gate's report JSONs, the cache, concurrent runs and kill -9."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzzing import oracle, runner
from fuzzing.cases import NEUTRAL, Case, Context, Expect, Setup, expect
from fuzzing.oracle import Failure
from fuzzing.runner import Result

Build = Callable[[Context, Path, random.Random], Setup]
Template = tuple[str, str, Expect, Build]  # name, seed, expectation, builder
REFUSED = expect(1, 2, numbers="any")
GATE_ARGS = ["--max", "exposed_comm_pct=100", "--max", "idle_pct=100", "--min", "compute_pct=0"]


def _std(ctx: Context, folder: Path, seed: str, *extra: str, cache: bool = False) -> Setup:
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


def _blocker(folder: Path) -> Path:
    path = folder / "blocker"
    path.write_text("a regular file where a folder is expected\n")
    return path


# Paths and outputs ---------------------------------------------------------------------------


def _o(spell: Callable[[Path, Path], str | Path], flag: str = "-o", seed: str = "synth") -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = _std(ctx, folder, seed)
        return _swap(s, flag, spell(folder, s.inputs[0]))

    return build


def _symlinked_dir(folder: Path, trace: Path) -> Path:
    (folder / "alias").symlink_to(trace.parent, target_is_directory=True)
    return folder / "alias" / trace.name


def _link(kind: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = _std(ctx, folder, "synth")
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
    s = _std(ctx, folder, "synth")
    deep = folder / "out" / "new" / "deeper" / "r.html"
    s = _swap(s, "-o", deep)
    s.outputs.append(deep)
    s.html = deep
    return s


def _partial(bad: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = _std(ctx, folder, "synth")
        flag, name = ("--json", "r.json") if bad == "json" else ("-o", "r.html")
        return _swap(s, flag, _blocker(folder) / name)

    return build


def _gate_onto_input(option: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        trace = ctx.copy_seed("synth", folder / "in")
        argv = ["gate", str(trace), *GATE_ARGS, "--no-cache", option, str(trace)]
        env = {"XDG_CACHE_HOME": str(folder / "xdg")}
        return Setup(argv, folder, [trace], [trace.parent], [], env=env, gate=True)

    return build


def _default_output(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    s = _std(ctx, folder, "synth")
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
    s = _swap(_std(ctx, folder, "synth"), "--json", "-")
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
    s = _std(ctx, folder, "synth")
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
    ("-o under a regular file", "synth", REFUSED, _o(lambda f, t: _blocker(f) / "r.html")),
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
        s = _std(ctx, folder, "synth")
        extra = Path(f"{s.inputs[0]}{suffix}")
        extra.write_bytes(rng.randbytes(size))
        s.inputs.append(extra)
        return s

    return build


def _wal_valid(ctx: Context, folder: Path, rng: random.Random) -> Setup:
    """A committed but uncheckpointed WAL that deletes half the kernels: the report must read
    the database either with it or without it, never half of each."""
    s = _std(ctx, folder, "synth")
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
    s = _std(ctx, folder, "synth")
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
    s = _std(ctx, folder, "synth", cache=True)
    s.env["XDG_CACHE_HOME"] = str(_blocker(folder))
    return s


def _no_permission(what: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = _std(ctx, folder, "synth")
        target = {"trace": s.inputs[0], "folder": s.inputs[0].parent, "out": folder / "out"}
        target[what].chmod(0o555 if what == "out" else 0)
        s.subprocess, s.no_dac = True, True
        return s

    return build


def _file_limit(size: int, cache: bool) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = _std(ctx, folder, "synth", cache=cache)
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
    s = _std(ctx, folder, "synth")
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
        s = _std(ctx, folder, seed)
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


# Gate on report JSONs ------------------------------------------------------------------------

# What gate reads for the checks in GATE_ARGS when the report has steps (the seed's has).
GATED = ("step_time_ns", "exposed_comm_ns", "idle_ns", "compute_ns")


def _gate_json(change: Callable[[dict[str, Any], random.Random], str | bytes | None]) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        report = json.loads(json.dumps(ctx.baseline("synth")))
        text = change(report, rng)
        data = text if isinstance(text, bytes) else (text or json.dumps(report)).encode()
        (folder / "in").mkdir()
        path = folder / "in" / "r.json"
        path.write_bytes(data)
        return _gate_setup(folder, path)

    return build


def _gate_setup(folder: Path, path: Path) -> Setup:
    out = folder / "out"
    out.mkdir(exist_ok=True)
    verdicts, junit = out / "v.json", out / "j.xml"
    argv = ["gate", str(path), *GATE_ARGS, "--json", str(verdicts), "--junit", str(junit)]
    env = {"XDG_CACHE_HOME": str(folder / "xdg")}

    def post(result: Result) -> list[Failure]:
        if result.code not in (0, 1) or result.crash:
            return []
        try:
            oracle.loads_strict(verdicts.read_text())
            ET.parse(junit)
        except (OSError, ValueError, ET.ParseError) as exc:
            return [("bad-output", f"gate outputs unreadable: {exc}"[:200])]
        return []

    return Setup(
        [*argv, "--no-cache"],
        folder,
        [path],
        [path.parent],
        [verdicts, junit],
        env=env,
        gate=True,
        post=post,
    )


def _set_gated(value: Any) -> Callable[[dict[str, Any], random.Random], str]:
    def change(report: dict[str, Any], rng: random.Random) -> str:
        rng.choice(report["steps"])[rng.choice(GATED)] = value
        return json.dumps(report)

    return change


def _gate_kineto(seed: str) -> Build:
    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        return _gate_setup(folder, ctx.copy_seed(seed, folder / "in"))

    return build


def _drop_key(report: dict[str, Any], rng: random.Random) -> None:
    del rng.choice(report["steps"])[rng.choice(GATED)]


GATE: tuple[Template, ...] = (
    ("the unmutated report JSON", "synth", expect(0), _gate_json(lambda r, g: None)),
    (
        "unknown keys added",
        "synth",
        expect(0),
        _gate_json(
            lambda r, g: json.dumps(
                {**r, "fuzz": 1, "gpus": [{**x, "fuzz": [1]} for x in r["gpus"]]}
            )
        ),
    ),
    ("NaN in a gated metric", "synth", expect(2), _gate_json(_set_gated(math.nan))),
    ("Infinity in a gated metric", "synth", expect(2), _gate_json(_set_gated(math.inf))),
    ("null in a gated metric", "synth", expect(2), _gate_json(_set_gated(None))),
    ("a string in a gated metric", "synth", expect(2), _gate_json(_set_gated("12"))),
    ("a negative gated metric", "synth", expect(2), _gate_json(_set_gated(-5))),
    ('"gpus": []', "synth", expect(2), _gate_json(lambda r, g: json.dumps({**r, "gpus": []}))),
    ("a gated key removed", "synth", expect(2), _gate_json(lambda r, g: _drop_key(r, g))),
    (
        "schema_version 2",
        "synth",
        expect(2),
        _gate_json(lambda r, g: json.dumps({**r, "schema_version": 2})),
    ),
    ("a top-level list", "synth", expect(2), _gate_json(lambda r, g: json.dumps([r]))),
    (
        "gpus entries not objects",
        "synth",
        expect(2),
        _gate_json(lambda r, g: json.dumps({**r, "gpus": [1, 2]})),
    ),
    (
        "the JSON text truncated",
        "synth",
        expect(2),
        _gate_json(lambda r, g: json.dumps(r)[: g.randrange(1, 2000)]),
    ),
    (
        "a number too large for a float (1e999)",
        "synth",
        expect(2),
        _gate_json(lambda r, g: json.dumps(r).replace('"idle_ns": ', '"idle_ns": 1e999', 1)),
    ),
    (
        "invalid UTF-8 in the JSON",
        "synth",
        expect(2),
        _gate_json(lambda r, g: json.dumps(r).encode().replace(b'"gpus"', b'"gpus\xff"', 1)),
    ),
    (
        '"steps": [] (whole-trace metrics)',
        "synth",
        expect(0, 1),
        _gate_json(lambda r, g: json.dumps({**r, "steps": []})),
    ),
    (
        "a plain Kineto trace .json",
        "kineto",
        expect(0, 1, forbid=("schema_version",)),
        _gate_kineto("kineto"),
    ),
    ("a gzipped Kineto trace", "kineto_gz", expect(0, 1), _gate_kineto("kineto_gz")),
)


# Cache ---------------------------------------------------------------------------------------

HOUR = 3600


def _cached(seed: str, before: Callable[[Context, Setup, Path], list[Failure]]) -> Build:
    """A cached run after `before` did something to the trace or the cache folder."""

    def build(ctx: Context, folder: Path, rng: random.Random) -> Setup:
        s = _std(ctx, folder, seed, cache=True)
        s.pre = lambda: before(ctx, s, Path(s.env["XDG_CACHE_HOME"]) / "nsysreport")
        return s

    return build


def _warm(ctx: Context, s: Setup) -> Result:
    result = ctx.run(s)
    for p in s.outputs:
        p.unlink(missing_ok=True)
    return result


Action = Callable[[Context, Setup, Path], None]


def _then(action: Action) -> Callable[[Context, Setup, Path], list[Failure]]:
    def before(ctx: Context, s: Setup, cache: Path) -> list[Failure]:
        first = _warm(ctx, s)
        if first.code != 0:
            return [("harness", f"the first, cold run failed: {first.crash or first.stderr}")]
        action(ctx, s, cache)
        return []

    return before


def _same_size_other_trace(ctx: Context, s: Setup, cache: Path) -> None:
    trace, other = s.inputs[0], ctx.seed_file("synth_b")
    stat = trace.stat()
    assert other.stat().st_size == stat.st_size, "synth_b must have synth's size"
    shutil.copyfile(other, trace)  # cp -p of a file that had the same mtime
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _damage_cache(how: str) -> Action:
    def action(ctx: Context, s: Setup, cache: Path) -> None:
        for f in sorted(cache.iterdir()):
            data = f.read_bytes()
            if how == "truncate":
                f.write_bytes(data[: len(data) // 2])
            elif how == "report" and f.suffix == ".report":
                f.write_bytes(random.Random(len(data)).randbytes(len(data)))
            elif how == "zero":
                f.write_bytes(bytes(len(data)))

    return action


def _stray_tmp(ctx: Context, s: Setup, cache: Path) -> list[Failure]:
    cache.mkdir(parents=True)
    old = time.time() - 2 * HOUR
    for name in (".abc.tmp", ".abc.tmp.wal", ".x.report.tmp"):
        (cache / name).write_bytes(b"left by a run killed with -9")
        os.utime(cache / name, (old, old))
    s.post = lambda result: _old_tmp(cache)
    return []


def _old_tmp(cache: Path) -> list[Failure]:
    """Temporary files older than an hour left in the cache (nothing writes that long)."""
    cutoff = time.time() - HOUR
    old = [p.name for p in cache.glob(".*tmp*") if p.stat().st_mtime < cutoff]
    return (
        [("cache-tmp-left", f"{len(old)} old temporary file(s) never cleaned: {old}")]
        if old
        else []
    )


def _touch(ctx: Context, s: Setup, cache: Path) -> None:
    st = s.inputs[0].stat()
    os.utime(s.inputs[0], ns=(st.st_atime_ns, st.st_mtime_ns + 10**10))


def _replace_with_sample(ctx: Context, s: Setup, cache: Path) -> None:
    shutil.copyfile(ctx.seed_file("sample"), s.inputs[0])


def _cache_dir_is_file(ctx: Context, s: Setup, cache: Path) -> list[Failure]:
    cache.parent.mkdir(parents=True)
    cache.write_text("not a folder\n")
    return []


def _warm_equals_cold(ctx: Context, s: Setup, cache: Path) -> list[Failure]:
    assert s.report_json is not None and s.html is not None
    first = ctx.run(s)
    if first.code != 0:
        return [("harness", f"cold run failed: {first.crash or first.stderr}")]
    cold = (s.report_json.read_bytes(), s.html.read_bytes())
    for p in s.outputs:
        p.unlink()

    def post(result: Result) -> list[Failure]:
        if result.code != 0 or not s.report_json or not s.report_json.is_file() or not s.html:
            return []
        found: list[Failure] = []
        if s.report_json.read_bytes() != cold[0]:
            found.append(("stale-cache", "the warm run's JSON differs from the cold run's"))
        if s.html.read_bytes() != cold[1]:
            found.append(("stale-cache", "the warm run's HTML differs from the cold run's"))
        return found

    s.post = post
    return []


CACHE: tuple[Template, ...] = (
    ("warm run equals the cold one", "synth", NEUTRAL, _cached("synth", _warm_equals_cold)),
    (
        "another trace of the same size and mtime copied over (cp -p)",
        "synth_b",
        NEUTRAL,
        _cached("synth", _then(_same_size_other_trace)),
    ),
    (
        "every cache file cut in half",
        "synth",
        NEUTRAL,
        _cached("synth", _then(_damage_cache("truncate"))),
    ),
    (
        "the report cache file is random bytes",
        "synth",
        NEUTRAL,
        _cached("synth", _then(_damage_cache("report"))),
    ),
    ("every cache file zeroed", "synth", NEUTRAL, _cached("synth", _then(_damage_cache("zero")))),
    ("stray .tmp files from a killed run, 2 h old", "synth", NEUTRAL, _cached("synth", _stray_tmp)),
    (
        "the trace touched (same bytes, new mtime)",
        "synth",
        NEUTRAL,
        _cached("synth", _then(_touch)),
    ),
    (
        "the trace replaced by another",
        "sample",
        NEUTRAL,
        _cached("synth", _then(_replace_with_sample)),
    ),
    ("the cache folder is a regular file", "synth", NEUTRAL, _cached("synth", _cache_dir_is_file)),
)


# Concurrency and kill -9 ---------------------------------------------------------------------


def _concurrent(ctx: Context, folder: Path, rng: random.Random, seed: str) -> Setup:
    n = rng.randint(2, 4)
    s = _std(ctx, folder, seed, cache=True)
    trace = s.inputs[0]
    runs = []
    for i in range(n):
        html, js = folder / "out" / f"r{i}.html", folder / "out" / f"r{i}.json"
        runs.append(["report", str(trace), "-o", str(html), "--json", str(js), "-q"])
    s.outputs = [Path(a[a.index(flag) + 1]) for a in runs for flag in ("-o", "--json")]
    s.report_json, s.html = s.outputs[1], s.outputs[0]
    cache = folder / "xdg" / "nsysreport"

    def main() -> Result:
        started = time.perf_counter()
        env = runner.subprocess_env(s.env)
        procs = [
            subprocess.Popen(
                runner.command(a),
                cwd=folder,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for a in runs
        ]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=180)
            results.append(runner.from_completed(p.returncode, err, out, 0))
        s.post = lambda first: _same_outputs(results, s.outputs, cache)
        worst = next((r for r in results if r.code != 0 or r.crash), results[0])
        worst.seconds = time.perf_counter() - started
        return worst

    s.main = main
    return s


def _same_outputs(results: list[Result], outputs: list[Path], cache: Path) -> list[Failure]:
    found: list[Failure] = []
    texts = [p.read_bytes() if p.is_file() else None for p in outputs]
    if len(set(texts[1::2])) != 1:
        found.append(("concurrency", f"{len(results)} concurrent runs wrote different JSON"))
    if len(set(texts[0::2])) != 1:
        found.append(("concurrency", f"{len(results)} concurrent runs wrote different HTML"))
    if left := oracle.tmp_left(cache):
        found.append(("cache-tmp-left", f"after concurrent runs: {left}"))
    return found


def _killed(ctx: Context, folder: Path, rng: random.Random, seed: str) -> Setup:
    delay = round(rng.uniform(0.3, 3.0), 2)
    s = _std(ctx, folder, seed, cache=True)
    cache = folder / "xdg" / "nsysreport"

    def pre() -> list[Failure]:
        victim = subprocess.Popen(
            runner.command(["report", str(s.inputs[0]), "-o", str(folder / "k.html"), "-q"]),
            cwd=folder,
            env=runner.subprocess_env(s.env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        # Later on: what the killed run left is hours old, and the next run may clean it.
        old = time.time() - 2 * HOUR
        for p in cache.glob(".*tmp*") if cache.is_dir() else []:
            os.utime(p, (old, old))
        (folder / "k.html").unlink(missing_ok=True)
        return []

    s.pre = pre
    s.post = lambda result: _old_tmp(cache)
    return s


def _seeded(make: Callable[[Context, Path, random.Random, str], Setup], seed: str) -> Build:
    return lambda ctx, folder, rng: make(ctx, folder, rng, seed)


CONCURRENCY: tuple[Template, ...] = (
    ("concurrent cold runs on one trace (synth)", "synth", NEUTRAL, _seeded(_concurrent, "synth")),
    (
        "concurrent cold runs on one trace (sample)",
        "sample",
        NEUTRAL,
        _seeded(_concurrent, "sample"),
    ),
    (
        "concurrent cold runs on one trace (kineto)",
        "kineto",
        NEUTRAL,
        _seeded(_concurrent, "kineto"),
    ),
)
KILL: tuple[Template, ...] = (
    (
        "kill -9 during a cold run, then a rerun (synth)",
        "synth",
        NEUTRAL,
        _seeded(_killed, "synth"),
    ),
    (
        "kill -9 during a cold run, then a rerun (sample)",
        "sample",
        NEUTRAL,
        _seeded(_killed, "sample"),
    ),
)
TEMPLATES = {
    "paths": PATHS,
    "env": ENV,
    "gate": GATE,
    "cache": CACHE,
    "concurrency": CONCURRENCY,
    "kill": KILL,
}


def plan_template(family: str) -> Callable[[Context, int, int, random.Random], Case]:
    templates = TEMPLATES[family]

    def plan(ctx: Context, seed: int, index: int, rng: random.Random) -> Case:
        name, base, want, build = templates[index % len(templates)]
        brng = random.Random(rng.random())
        return Case(family, index, seed, base, name, want, lambda c, f: build(c, f, brng))

    return plan
