"""The promises every case is held to, as checks that return (category, detail) failures."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzing.runner import Result, Snapshot

Failure = tuple[str, str]  # (category, one-line detail)

GPU_KEYS = (
    "span_ns",
    "busy_ns",
    "idle_ns",
    "compute_ns",
    "gemm_ns",
    "attention_ns",
    "comm_ns",
    "comm_sum_ns",
    "exposed_comm_ns",
    "overlapped_comm_ns",
    "memcpy_ns",
    "exposed_memcpy_ns",
    "kernel_count",
    "comm_kernel_count",
    "memcpy_count",
    "graph_ns",
    "graph_opaque_ns",
    "graph_launches",
    "graph_kernel_count",
)
STEP_KEYS = ("name", "index", "step_time_ns", "compute_ns", "exposed_comm_ns", "kernel_count")
LAYER_KEYS = ("layer", "occurrences", "kernel_count", "compute_ns", "comm_ns", "exposed_comm_ns")
COLLECTIVE_KEYS = ("op", "count", "total_ns", "exposed_ns")
# Top-level keys through which a report says that its numbers rest on skipped rows or guesses:
# `data_quality` is the report's notes (README "What is skipped"), kept rows' caveats included.
NOTE_KEYS = ("skipped", "data_quality", "notes", "warnings")
MAX_SANE_NS = 10**15  # 11.6 days: no capture is longer
INJECTED = ('<script>alert("fuzz")', "<img src=x onerror=fuzz")
INTERNAL_SQL = re.compile(r"\b(SELECT|INSERT INTO|ATTACH|CREATE (TEMP )?TABLE|LINE \d+:)")


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row.get("pid"), row.get("device_id"))


def fingerprint(report: Mapping[str, Any], level: str) -> dict[str, Any]:
    """The numbers a mutation may not change: per-GPU metrics (`gpus`), with `steps` also
    steps and layers, with `full` also collectives. Paths and names of files are left out."""
    gpus = sorted(report.get("gpus") or [], key=lambda g: str(_key(g)))
    out: dict[str, Any] = {
        "gpus": [(_key(g), tuple(g.get(k) for k in GPU_KEYS)) for g in gpus],
    }
    if level in ("full", "steps"):
        parts = [("steps", STEP_KEYS), ("layers", LAYER_KEYS), ("collectives", COLLECTIVE_KEYS)]
        for part, keys in parts[: 3 if level == "full" else 2]:
            rows = [(_key(r), tuple(r.get(k) for k in keys)) for r in report.get(part) or []]
            out[part] = sorted(rows, key=repr)
    return out


def first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """'gpus[1] kernel_count 8 -> 16' for the first number that differs."""
    for part in a:
        left, right = a[part], b.get(part, [])
        if len(left) != len(right):
            return f"{part}: {len(left)} rows -> {len(right)}"
        for i, ((k1, v1), (k2, v2)) in enumerate(zip(left, right, strict=True)):
            if k1 != k2:
                return f"{part}[{i}] key {k1} -> {k2}"
            keys = GPU_KEYS if part == "gpus" else None
            for j, (x, y) in enumerate(zip(v1, v2, strict=True)):
                if x != y:
                    name = keys[j] if keys else f"#{j}"
                    return f"{part}[{i}] {name} {x} -> {y}"
    return "equal"


def loads_strict(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (not JSON; a report holding them is broken)."""

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} in the JSON")

    return json.loads(text, parse_constant=refuse)


def error_line(result: Result, forbid: Sequence[str], argv: Sequence[str]) -> list[Failure]:
    """A failure exit must print exactly one line `Error: ...` that names the file or option
    at fault (one of the command's) and no internals."""
    lines = [x for x in result.stderr.split("\n") if x.strip()]
    if len(lines) != 1 or not lines[0].startswith("Error: "):
        shown = " | ".join(lines[:3])[:200] or "(nothing on stderr)"
        return [("error-format", f"{len(lines)} stderr lines, expected one 'Error:': {shown}")]
    line = lines[0]
    if controls := sorted({c for c in line if ord(c) < 32 and c != "\t"}):
        return [("error-format", f"control characters {controls} in the error: {line[:160]!r}")]
    found = [("misleading-message", f"says {f!r}: {line[:200]}") for f in forbid if f in line]
    if INTERNAL_SQL.search(line):
        found.append(("misleading-message", f"quotes internal SQL: {line[:200]}"))
    names = {Path(a).name for a in argv if not a.startswith("-")} | {
        a.split("=")[0] for a in argv if a.startswith("-")
    }
    if not any(n and n in line for n in names - {"report", "gate", "compare"}):
        found.append(("misleading-message", f"names no file or option: {line[:200]}"))
    return found


def sane_report(report: Any) -> list[Failure]:
    """No impossible numbers in a report that exited 0."""
    if not isinstance(report, dict):
        return [("bad-json", "report JSON is not an object")]
    found: list[Failure] = []
    gpus = report.get("gpus") or []
    if not gpus:
        found.append(("absurd-value", "exit 0 with no GPU in the report"))
    for g in gpus:
        ints = {k: g.get(k) for k in GPU_KEYS if isinstance(g.get(k), int)}
        bad = {k: v for k, v in ints.items() if v < 0 or (k.endswith("_ns") and v > MAX_SANE_NS)}
        if bad:
            found.append(("absurd-value", f"gpu {_key(g)}: {bad}"))
            continue
        parts = ("compute_ns", "exposed_comm_ns", "exposed_memcpy_ns", "idle_ns")
        total = sum(ints.get(k, 0) for k in parts) + (ints.get("graph_opaque_ns") or 0)
        if "span_ns" in ints and total != ints["span_ns"]:
            found.append(
                (
                    "wrong-numbers",
                    f"gpu {_key(g)}: breakdown sums to {total}, span {ints['span_ns']}",
                )
            )
        for k, v in g.items():
            if k.endswith("_pct") and isinstance(v, float | int) and not -1e-6 <= v <= 100 + 1e-6:
                found.append(("absurd-value", f"gpu {_key(g)}: {k} = {v}"))
    return found


def noted(report: Mapping[str, Any]) -> bool:
    return any(report.get(k) for k in NOTE_KEYS)


def numbers(
    report: Mapping[str, Any], level: str, baselines: Iterable[Mapping[str, Any]]
) -> list[Failure]:
    """`level` full: equal to a baseline's, no excuses (a neutral mutation). `gpus`: the
    per-GPU numbers equal a baseline's, or the report says rows were skipped or guessed."""
    if level == "any":
        return []
    got = fingerprint(report, "full" if level == "full" else "gpus")
    diffs = []
    for base in baselines:
        want = fingerprint(base, "full" if level == "full" else "gpus")
        if got == want:
            return []
        diffs.append(first_difference(want, got))
    if level == "gpus" and noted(report):
        return []
    category = "wrong-numbers" if level == "full" else "silent-wrong-numbers"
    return [(category, f"{diffs[0]}" + ("" if level == "full" else " (no skipped/notes entry)"))]


def html_clean(path: Path) -> list[Failure]:
    data = path.read_bytes()
    found: list[Failure] = []
    if b"\x00" in data:
        found.append(("html-nul", f"{path.name} holds a raw NUL byte"))
    text = data.decode("utf-8", errors="replace")
    found += [
        ("html-injection", f"{path.name} holds {s!r} unescaped") for s in INJECTED if s in text
    ]
    return found


def files(before: Snapshot, after: Snapshot, outputs: Sequence[Path], ok: bool) -> list[Failure]:
    """Inputs unchanged; watched folders gain only requested outputs (and only on success)."""
    found: list[Failure] = []
    for path, state in before.files.items():
        now = after.files.get(path)
        if now is None:
            found.append(("input-changed", f"{path.name} is gone"))
        elif now.sha256 != state.sha256:
            found.append(("input-changed", f"{path.name}: bytes changed (data loss)"))
        elif now.mtime_ns != state.mtime_ns:
            found.append(("input-changed", f"{path.name}: mtime changed"))
    allowed = {os.path.normpath(os.path.abspath(p)) for p in outputs} if ok else set()
    for folder, names in before.listings.items():
        new = after.listings.get(folder, frozenset()) - names
        beside = sorted(
            n for n in new if os.path.normpath(os.path.abspath(folder / n)) not in allowed
        )
        if beside:
            found.append(("beside-input", f"new in {folder.name}/: {beside}"))
    return found


def outputs_present(outputs: Sequence[Path], json_path: Path | None) -> list[Failure]:
    missing = [p.name for p in outputs if not p.is_file() or p.stat().st_size == 0]
    if missing:
        return [("missing-output", f"exit 0 but no {missing}")]
    return []


def no_partial(outputs: Sequence[Path], existed: set[Path]) -> list[Failure]:
    left = [p.name for p in outputs if p.exists() and p not in existed]
    return [("partial-output", f"failed but left {left}")] if left else []


def tmp_left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp*")) if folder.is_dir() else []
