"""The report JSON read back: which .json file is a saved report, its schema_version, and its
values checked and rebuilt as the model's frozen dataclasses (Report.from_json assembles them)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, NoReturn

from nsysreport import __version__
from nsysreport.errors import TraceError

INCOMPLETE = "not a complete `nsysreport report --json` file"
WRITE_AGAIN = "write it again with: nsysreport report TRACE --json FILE"
# A PyTorch profiler trace names these at its top level; a report JSON never has them as keys
# (a quote inside a report's strings is escaped, so the pattern cannot match there).
KINETO_KEY = re.compile(rb'"(traceEvents|schemaVersion|deviceProperties)"\s*:')
REPORT_START = re.compile(rb'\s*\{\s*"schema_version"\s*:')
# Numbers named `*_ns` are durations and `*_pct` shares of a whole (0-100), which no report
# holds outside that range; but for these: times on a clock, clock offsets, and a ratio of
# two different times that may pass 100.
# fit_alpha_ns: the data path's fitted per-call cost, negative when the line fits no cost
SIGNED = frozenset({"start_ns", "end_ns", "offset_ns", "coarse_offset_ns", "fit_alpha_ns"})
# A share of a whole that can pass 100: a straggler's waiting against the others' exposed comm;
# a stage's bandwidth against a ceiling it beat (a ceiling too low, or durations too short);
# FLOP/s against a peak they beat (a peak too low, shapes that overcount: the ledger's above_roof).
UNBOUNDED_PCT = frozenset(
    {
        "share_of_exposed_comm_pct",
        "utilisation_pct",
        "sampled_link_pct",
        "mfu_pct",
        "step_mfu_pct",
        "span_mfu_pct",
    }
)
INT64 = 1 << 63  # every whole number of a report fits DuckDB's BIGINT


def saved_json(path: Path) -> Any | None:
    """The parsed JSON of a saved report (`report --json`), or None when `path` is a trace to
    analyse: a .json is a saved report unless it is a PyTorch profiler (Kineto) trace, which
    only its content tells apart. NaN and Infinity, which json.loads accepts, are refused."""
    if path.is_dir() or not path.name.lower().endswith(".json"):
        return None
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
        if not REPORT_START.match(head) and KINETO_KEY.search(head):
            return None
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    try:
        data = json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and "traceEvents" in data and "schema_version" not in data:
        return None  # a Kineto trace whose keys come late
    return data


def _not_a_number(word: str) -> float:
    # No report writes these, and no limit or ratio means anything with them.
    raise ValueError(f"{word} is not a number JSON allows; write the report again")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range of a float; write the report again")
    return value


def check_version(
    data: Any, source: str | Path, expected: int, older: tuple[int, ...] = ()
) -> dict[str, Any]:
    """`data` as a report object of JSON schema_version `expected` (or one of the `older` ones
    still read), else one TraceError line that names `source`, the version found and the one
    expected."""
    if not isinstance(data, dict) or "schema_version" not in data:
        what = "an object without schema_version" if isinstance(data, dict) else "no object"
        raise TraceError(
            f"{source}: is not an nsysreport report ({what}, not a report of JSON "
            f"schema_version {expected}); write one with: nsysreport report TRACE --json FILE"
        )
    found = data["schema_version"]
    if type(found) is not int or (found != expected and found not in older):
        newer = type(found) is int and found > expected
        raise TraceError(
            f"{source}: is a report of JSON schema_version {json.dumps(found)}, but nsysreport "
            f"{__version__} reads schema_version {expected}; "
            + ("upgrade nsysreport, or " if newer else "")
            + WRITE_AGAIN
        )
    return data


class Decoder:
    """Rebuilds frozen dataclasses from JSON values by their type hints, checking every value.

    A problem does not stop the walk: a wrong value anywhere is reported before a missing key
    (a hand-edited number is the likelier mistake than a report from an older version), and
    `done` raises the first of them as one line naming `source`.
    """

    def __init__(self, source: str | Path) -> None:
        self.source = source
        self.wrong: str | None = None
        self.missing: str | None = None

    def field(self, obj: dict[str, Any], where: str, key: str, hint: Any) -> Any:
        """`obj[key]` as a value of type `hint`; None (and a problem noted) when it is not one."""
        if key not in obj:
            self._problem(f"{INCOMPLETE} ({_at(where, key)} is missing)", missing=True)
            return None
        return self.value(obj[key], hint, where, key)

    def value(self, value: Any, hint: Any, where: str, key: str) -> Any:
        """`value` as a value of type `hint`, found at `where` under `key`."""
        kind, inner = _kind(hint)
        return self._read(kind, inner, _rule(key), value, where, key)

    def instance(
        self,
        cls: Any,
        obj: Any,
        where: str,
        renames: dict[str, str] | None = None,
        fixed: dict[str, Any] | None = None,
    ) -> Any:
        """An instance of the dataclass `cls` from the JSON object `obj`: each field from the key
        of its name (or `renames[name]`), or from `fixed`; None when one cannot be read."""
        if not isinstance(obj, dict):
            return self._wrong(where, "", "not an object")
        values = dict(fixed or {})
        complete = True
        for name, kind, inner, rule in _plan(cls):
            if name in values:
                continue
            key = renames.get(name, name) if renames else name
            if key not in obj:
                self._problem(f"{INCOMPLETE} ({_at(where, key)} is missing)", missing=True)
                complete = False
                continue
            value = obj[key]
            # The common case inline (a number in range, a string): 0.6 s less for 25k steps.
            if kind == "number" and (type(value) is int or type(value) is float):
                if (
                    math.isfinite(value) if type(value) is float else -INT64 <= value < INT64
                ) and not (rule and (value < 0 or (rule == PCT and value > 100))):
                    values[name] = value
                    continue
            elif kind == "str" and type(value) is str:
                values[name] = value
                continue
            values[name] = self._read(kind, inner, rule, value, where, key)
        return cls(**values) if complete else None

    def _read(self, kind: str, inner: Any, rule: int, value: Any, where: str, key: str) -> Any:
        """`value` as a value of `kind` (see _kind) and within `rule` (see _rule)."""
        if kind == "number":
            if type(value) is not int and type(value) is not float:
                # bool is an int to Python, never a number in a report
                return self._wrong(where, key, "not a number")
            if type(value) is float and not math.isfinite(value):
                return self._wrong(where, key, "not a finite number")
            if type(value) is int and not -INT64 <= value < INT64:
                return self._impossible(where, key, value)
            if rule and (value < 0 or (rule == PCT and value > 100)):
                return self._impossible(where, key, value)
            return value
        if kind == "optional":
            if value is None:
                return None
            kind, inner = _kind(inner)
            return self._read(kind, inner, rule, value, where, key)
        if kind == "str":
            return value if isinstance(value, str) else self._wrong(where, key, "not a string")
        if kind == "bool":
            return value if isinstance(value, bool) else self._wrong(where, key, "not true/false")
        if kind == "any":
            return value
        if kind == "dataclass":
            return self.instance(inner, value, _at(where, key, sep="."))
        at = _at(where, key, sep=".")
        item_kind, item_inner = _kind(inner)
        if kind == "tuple":
            if not isinstance(value, list):
                return self._wrong(where, key, "not a list")
            if item_kind == "dataclass":
                return tuple(
                    self.instance(item_inner, v, f"{at}[{i}]") for i, v in enumerate(value)
                )
            return tuple(
                self._read(item_kind, item_inner, 0, v, f"{at}[{i}]", "")
                for i, v in enumerate(value)
            )
        if not isinstance(value, dict):  # kind == "dict"
            return self._wrong(where, key, "not an object")
        return {k: self._read(item_kind, item_inner, 0, v, at, k) for k, v in value.items()}

    def done(self) -> None:
        """Raise the first wrong value, else the first missing key, as one TraceError."""
        problem = self.wrong or self.missing
        if problem is not None:
            raise TraceError(f"{self.source}: {problem}; {WRITE_AGAIN}")

    def fail(self, problem: str) -> NoReturn:
        """Raise `problem` about the file now (one the caller found)."""
        raise TraceError(f"{self.source}: {INCOMPLETE} ({problem}); {WRITE_AGAIN}")

    def _wrong(self, where: str, key: str, what: str) -> None:
        self._problem(f"{INCOMPLETE} ({_at(where, key)} is {what})")
        return None

    def _impossible(self, where: str, key: str, value: float) -> None:
        shown = f"{value:g}" if type(value) is float or -INT64 <= value < INT64 else "huge"
        self._problem(f"{_at(where, key)} is {shown}, which no report holds")
        return None

    def _problem(self, problem: str, missing: bool = False) -> None:
        if missing:
            self.missing = self.missing or problem
        else:
            self.wrong = self.wrong or problem


def _at(where: str, key: str, sep: str = " ") -> str:
    """`steps[1] compute_ns` (a field) or `gpus[0].gaps` (a part to look inside)."""
    if not key:
        return where or "the report"
    return f"{where}{sep}{key}" if where else key


NONNEGATIVE, PCT = 1, 2  # what _rule asks of a number


def _rule(key: str) -> int:
    """The range a number named `key` must lie in: a duration (`*_ns`) is never negative, a
    share (`*_pct`) within 0-100; 0 for any other (and the SIGNED and UNBOUNDED_PCT ones)."""
    if key.endswith("_ns") and key not in SIGNED:
        return NONNEGATIVE
    if key.endswith("_pct") and key not in UNBOUNDED_PCT:
        return PCT
    return 0


@functools.cache
def _plan(cls: Any) -> tuple[tuple[str, str, Any, int], ...]:
    """How to read each field of a dataclass: (name, kind, inner hint, range rule), from the
    resolved type hints (the modules postpone their annotations)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, *_kind(hints[f.name]), _rule(f.name)) for f in dataclasses.fields(cls))


@functools.cache
def _kind(hint: Any) -> tuple[str, Any]:
    """What a type hint asks of a JSON value: (kind, inner hint)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
        return "optional", next(a for a in args if a is not type(None))
    if hint in (int, float):
        return "number", None
    if hint is str:
        return "str", None
    if hint is bool:
        return "bool", None
    if hint is Any:
        return "any", None
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return "tuple", args[0]
    if origin is dict:
        return "dict", args[1]
    if dataclasses.is_dataclass(hint):
        return "dataclass", hint
    raise TypeError(f"no JSON reading for {hint!r}")  # a model type this module does not know
