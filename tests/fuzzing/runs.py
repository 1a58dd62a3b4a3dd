"""Fuzz families about runs: gate on damaged report JSONs, the cache (same size and mtime,
damaged or stray files), concurrent cold runs and kill -9 during one."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzzing import oracle, runner
from fuzzing.cases import NEUTRAL, Case, Context, Setup, expect
from fuzzing.oracle import Failure
from fuzzing.places import ENV, GATE_ARGS, PATHS, Build, Template, std
from fuzzing.runner import Result

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
        "schema_version 3",
        "synth",
        expect(2),
        _gate_json(lambda r, g: json.dumps({**r, "schema_version": 3})),
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
        s = std(ctx, folder, seed, cache=True)
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
    s = std(ctx, folder, seed, cache=True)
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
    s = std(ctx, folder, seed, cache=True)
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
