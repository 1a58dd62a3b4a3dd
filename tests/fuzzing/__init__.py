"""nsysreport's fuzz suite: deterministic mutations of small traces and their surroundings,
each case held to the tool's promises (see README "Fuzzing").

A case is (family, index) under a run seed: `plan` rebuilds it exactly, so every failure is
reproducible from one line (`python benchmarks/fuzz.py --seed S --case FAMILY:INDEX`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from fuzzing.cases import Case, Context, Outcome, execute
from fuzzing.inputs import plan_bytes, plan_kineto, plan_structure, plan_values
from fuzzing.runs import TEMPLATES, plan_template

__all__ = ["FAMILIES", "Case", "Context", "Outcome", "ci_slice", "execute", "plan", "spread"]

Planner = Callable[[Context, int, int, random.Random], Case]
FAMILIES: dict[str, Planner] = {
    "structure": plan_structure,
    "values": plan_values,
    "bytes": plan_bytes,
    "kineto": plan_kineto,
    **{family: plan_template(family) for family in TEMPLATES},
}
# Share of a long run's cases per family (the subprocess families are slow and few).
WEIGHTS = {
    "structure": 20,
    "values": 30,
    "bytes": 10,
    "kineto": 16,
    "paths": 8,
    "env": 6,
    "gate": 6,
    "cache": 2,
    "concurrency": 1,
    "kill": 1,
}


def plan(ctx: Context, seed: int, family: str, index: int) -> Case:
    """Case `index` of `family` under run seed `seed`: the same arguments, the same case."""
    rng = random.Random(f"nsysreport-fuzz/{seed}/{family}/{index}")
    return FAMILIES[family](ctx, seed, index, rng)


def spread(cases: int) -> dict[str, int]:
    """How many of `cases` each family gets: by WEIGHTS, every template family at least once
    round its templates when there is room, every family at least one case."""
    total = sum(WEIGHTS.values())
    counts = {f: max(1, round(cases * w / total)) for f, w in WEIGHTS.items()}
    for family, templates in TEMPLATES.items():
        if cases >= 300:
            counts[family] = max(counts[family], len(templates))
    return counts


def ci_slice() -> dict[str, int]:
    """The quick slice CI runs (tests/test_fuzz.py): every template once, a sample of the rest
    (the long run, benchmarks/fuzz.py, is the thorough one; the sample is sized to keep CI
    inside its 20 minutes on 2 cores)."""
    return {
        "structure": 4,
        "values": 6,
        "bytes": 2,
        "kineto": 4,
        **{f: len(t) for f, t in TEMPLATES.items()},
        "concurrency": 1,
        "kill": 1,
    }
