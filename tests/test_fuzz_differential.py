"""The seeded slice of the differential fuzz run (tests/fuzzing/differential.py): for every
known-effect mutation, its first two cases of run seed 0. A neutral mutation must move no
number; a harmful one must give its reference's numbers and add exactly its ledger rows, or
end in a clean error where that is right. The long run: benchmarks/fuzz_differential.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from fuzzing.differential import KINETO_MUTATIONS, SQLITE_MUTATIONS, plan, run_case

SEED = 0
WORKDIR = Path(tempfile.mkdtemp(prefix="nsysreport-differential-"))


def _slice(per_mutation: int = 1) -> list[int]:
    wanted = dict.fromkeys({**SQLITE_MUTATIONS, **KINETO_MUTATIONS}, per_mutation)
    chosen = []
    for index in range(5000):
        mutation = plan(SEED, index)[1]
        if wanted.get(mutation):
            wanted[mutation] -= 1
            chosen.append(index)
    assert not any(wanted.values()), f"no case of {wanted} among 5000"
    return chosen


@pytest.mark.parametrize("index", _slice(), ids=lambda i: f"{SEED}:{i}-{plan(SEED, i)[1]}")
def test_a_known_effect_mutation_has_exactly_its_effect(index: int) -> None:
    result = run_case(WORKDIR, SEED, index)
    repro = f"python benchmarks/fuzz_differential.py --seed {SEED} --case {index}"
    assert not result.failures, "\n".join([repro, result.what, *result.failures])
