"""Shared fixtures: where the real traces live, and loading synthetic scenarios."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from nsysreport.load import open_trace

REPO = Path(__file__).resolve().parents[1]
# Real exports captured by others; CI lays shared/ beside the checkout. Never copied in here.
SHARED_TRACES = REPO.parent / "shared" / "traces"
NSYS_TRACES = SHARED_TRACES / "nsys"


@pytest.fixture(autouse=True)
def isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own cache folder: nothing is read from or left in ~/.cache."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder / "nsysreport"


@pytest.fixture(autouse=True)
def shared_traces_untouched() -> Iterator[None]:
    """No test writes beside the real traces (a report's default path is beside its input;
    CI runs as root, so the read-only mode of shared/ would not stop it)."""
    before = sorted(SHARED_TRACES.rglob("*"))
    yield
    assert sorted(SHARED_TRACES.rglob("*")) == before, "a test wrote into ../shared/traces"


def real_trace(name: str) -> Path:
    path = NSYS_TRACES / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: the tests need ../shared/traces beside the checkout")
    return path


@pytest.fixture
def write_and_open(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a synth scenario to a temporary export and open it: scenario -> DuckDB connection."""
    from nsysreport.synth import Scenario, write_trace

    def make(scenario: Scenario, version: str = "2026.2") -> duckdb.DuckDBPyConnection:
        path = write_trace(scenario, tmp_path / f"trace-{version}.sqlite", version=version)
        return open_trace(path)

    return make


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="Rewrite the golden files in tests/golden/ from the current output.",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    """True under `pytest --update-goldens`: golden tests write their file instead of comparing."""
    return bool(request.config.getoption("--update-goldens"))
