"""The quick slice of the fuzz suite: every path, environment, gate, cache, concurrency and
kill -9 scenario once, and a fixed sample of mutated traces (structure, values, bytes, Kineto).

Each case is one test, named by its family, index and mutation; a failure prints the one-line
repro for benchmarks/fuzz.py (the long run, with other seeds for a held-out run).
NSYSREPORT_FUZZ_JOBS sets the worker processes (default: 2, or 1 on one core).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path

import fuzzing
import pytest
from fuzzing.pool import CaseId, prepare, run_all

SEED = 0
WORKSPACE = Path(tempfile.mkdtemp(prefix="nsysreport-fuzz-"))
WORKSPACE.chmod(0o755)  # cases run without root's permission override must reach it
atexit.register(shutil.rmtree, WORKSPACE, True)


def _cases() -> list[pytest.ParameterSet]:
    ctx = fuzzing.Context(WORKSPACE)
    params = []
    for family, count in fuzzing.ci_slice().items():
        for index in range(count):
            case = fuzzing.plan(ctx, SEED, family, index)
            slug = re.sub(r"[^A-Za-z0-9_.:=+-]+", "-", f"{case.base} {case.what}")[:70]
            params.append(pytest.param((SEED, family, index), id=f"{family}-{index}-{slug}"))
    return params


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest) -> dict[str, fuzzing.Outcome]:
    """Run the selected cases once, in worker processes, before their tests look."""
    jobs: list[CaseId] = [
        item.callspec.params["job"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_the_case_keeps_every_promise"
    ]
    prepare(WORKSPACE)
    workers = int(os.environ.get("NSYSREPORT_FUZZ_JOBS") or min(2, os.cpu_count() or 1))
    return {o.case: o for o in run_all(WORKSPACE, jobs, timeout=240, workers=workers)}


@pytest.mark.parametrize("job", _cases())
def test_the_case_keeps_every_promise(job: CaseId, outcomes: dict[str, fuzzing.Outcome]) -> None:
    _, family, index = job
    outcome = outcomes[f"{family}:{index}"]
    if outcome.failures:  # pytest.fail: the message alone, without the outcomes' repr
        lines = [f"  {category}: {detail}" for category, detail in outcome.failures]
        pytest.fail("\n".join([outcome.repro, *lines]), pytrace=False)


def test_planning_is_deterministic() -> None:
    """The same (seed, family, index) is the same case; another seed is another case."""
    ctx = fuzzing.Context(WORKSPACE)
    for family in fuzzing.FAMILIES:
        again = [fuzzing.plan(ctx, SEED, family, i).repro() for i in range(3)]
        assert again == [fuzzing.plan(ctx, SEED, family, i).repro() for i in range(3)]
    other = [fuzzing.plan(ctx, SEED + 1, "values", i).what for i in range(5)]
    assert other != [fuzzing.plan(ctx, SEED, "values", i).what for i in range(5)]
