"""Budgets for `gate`: the checks from the command line, a TOML budget file or the
[tool.nsysreport.gate] table of a pyproject.toml, merged into one plan."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsysreport.errors import OptionError
from nsysreport.gate_metrics import metric_of

KINDS = ("max", "min", "max-regression")
BUDGET_KEYS = ("baseline", "min-steps", *KINDS)


@dataclass(frozen=True, slots=True)
class CheckSpec:
    kind: str  # one of KINDS
    metric: str  # as written, with any [selector]
    limit: float


@dataclass(frozen=True, slots=True)
class Budget:
    checks: tuple[CheckSpec, ...] = ()
    baseline: Path | None = None
    min_steps: int | None = None
    # --strict: the most rows the trace's ledger may hold (left out or kept with a caveat).
    strict_max_rows: int | None = None


def plan(
    budget: Path | None,
    folder: Path,
    checks: Iterable[tuple[str, str]],
    baseline: Path | None = None,
    min_steps: int | None = None,
    strict_max_rows: int | None = None,
) -> Budget:
    """What `gate` checks: the budget file (else `folder`/pyproject.toml's table, if any),
    with the command line's `checks` ((kind, "METRIC=VALUE")), baseline, min-steps and
    --strict over it."""
    given = Budget(
        tuple(parse_check(kind, item) for kind, item in checks),
        baseline,
        min_steps,
        strict_max_rows,
    )
    found = load_budget(budget) if budget is not None else find_budget(folder)
    merged = merge(found, given)
    if not merged.checks and merged.min_steps is None and merged.strict_max_rows is None:
        raise OptionError(
            "nothing to check: give --max, --min, --max-regression, --strict or --budget"
        )
    if merged.baseline is None and any(c.kind == "max-regression" for c in merged.checks):
        raise OptionError("--max-regression needs --baseline (or baseline = in the budget)")
    return merged


def parse_check(kind: str, item: str) -> CheckSpec:
    """A check from `--max METRIC=VALUE` (or --min, --max-regression)."""
    name, sep, value = item.rpartition("=")
    if not sep or not name:
        raise OptionError(f"--{kind} {item!r}: expected METRIC=VALUE")
    try:
        metric_of(name)
        limit = float(value)
    except OptionError as exc:
        raise OptionError(f"--{kind} {item!r}: {exc}") from None
    except ValueError:
        raise OptionError(f"--{kind} {item!r}: VALUE must be a number") from None
    if not math.isfinite(limit):
        raise OptionError(f"--{kind} {item!r}: VALUE must be a finite number")
    return CheckSpec(kind, name.strip(), limit)


def load_budget(path: Path) -> Budget:
    """Read a budget file, or the [tool.nsysreport.gate] table of a pyproject.toml."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise OptionError(f"{path}: cannot read the budget ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptionError(f"{path}: not valid TOML ({exc})") from None
    if path.name != "pyproject.toml":
        return budget_from(data, str(path), "the top level", path.parent)
    table = _gate_table(data)
    if table is None:
        raise OptionError(f"{path}: has no [tool.nsysreport.gate] table")
    return budget_from(table, str(path), "[tool.nsysreport.gate]", path.parent)


def find_budget(folder: Path) -> Budget | None:
    """The budget in `folder`/pyproject.toml's [tool.nsysreport.gate], if it has one."""
    path = folder / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptionError(f"{path}: not readable as TOML ({exc})") from None
    table = _gate_table(data)
    if table is None:
        return None
    return budget_from(table, str(path), "[tool.nsysreport.gate]", path.parent)


def _gate_table(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    table: Any = data
    for key in ("tool", "nsysreport", "gate"):
        table = table.get(key) if isinstance(table, Mapping) else None
    return table if isinstance(table, Mapping) else None


def budget_from(table: Mapping[str, Any], source: str, where: str, folder: Path) -> Budget:
    """A budget from its TOML table (or the same as a dict): `source` names it in messages,
    `where` the table; a baseline path is relative to `folder`."""
    checks = []
    baseline = min_steps = None
    for key, value in table.items():
        if key not in BUDGET_KEYS:
            expected = ", ".join(BUDGET_KEYS)
            raise OptionError(f"{source}: unknown key {key!r} in {where}; expected {expected}")
        if key == "baseline":
            if not isinstance(value, str):
                raise OptionError(f"{source}: 'baseline' must be a path string")
            baseline = folder / value  # relative to the budget file, not the shell
        elif key == "min-steps":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise OptionError(f"{source}: 'min-steps' must be a whole number ≥ 0")
            min_steps = value
        else:
            if not isinstance(value, Mapping):
                raise OptionError(f"{source}: [{key}] must be a table of METRIC = VALUE")
            for name, limit in value.items():
                try:
                    metric_of(name)
                except OptionError as exc:
                    raise OptionError(f"{source}: [{key}] {exc}") from None
                if not isinstance(limit, int | float) or isinstance(limit, bool):
                    raise OptionError(f"{source}: [{key}] {name!r} must be a number")
                checks.append(CheckSpec(key, name, float(limit)))
    return Budget(tuple(checks), baseline, min_steps)


def merge(base: Budget | None, override: Budget) -> Budget:
    """`override` (the command line) wins over `base` (a file) check by check; the last of
    two checks of one metric and kind wins."""
    base = base or Budget()
    checks = {(c.kind, c.metric): c for c in (*base.checks, *override.checks)}
    return Budget(
        tuple(checks.values()),
        override.baseline or base.baseline,
        override.min_steps if override.min_steps is not None else base.min_steps,
        override.strict_max_rows if override.strict_max_rows is not None else base.strict_max_rows,
    )
