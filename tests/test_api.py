"""The Python API of nsysreport/__init__.py: the README's example runs as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import nsysreport
from nsysreport.gate_metrics import METRICS

from conftest import REPO


def readme_example() -> str:
    """The code block of the README's "Python API" section."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Python API", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the Python API section has no python block"
    return match.group(1)


def test_the_readme_example_runs_on_the_sample_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) == 7  # import + six
    (tmp_path / "sample_traces").symlink_to(REPO / "sample_traces")
    monkeypatch.chdir(tmp_path)  # the PDF goes here, not into the repository
    exec(compile(code, "README.md", "exec"), {})
    speedup, passed = capsys.readouterr().out.split()
    tp4, tp8 = (
        nsysreport.analyse(REPO / "sample_traces" / f"llama70b_decode_tp{n}_pcie.sqlite")
        for n in (4, 8)
    )
    # compare's speedup is the baseline's median step time over this one's
    assert tp4.median_step_ns is not None and tp8.median_step_ns is not None
    assert float(speedup) == tp4.median_step_ns / tp8.median_step_ns < 1
    exposed = METRICS["exposed_comm_pct"].compute(tp8, None).value
    assert passed == "True" and exposed is not None and 67.7 <= exposed < 67.8
    assert (tmp_path / "tp8.pdf").read_bytes().startswith(b"%PDF")
    assert json.loads((tmp_path / "tp8.perfetto.json").read_text())["traceEvents"]


def test_the_api_names_come_from_the_modules_that_define_them() -> None:
    from nsysreport.analysis import analyse
    from nsysreport.model import Report

    assert nsysreport.analyse is analyse and nsysreport.Report is Report
    assert sorted(nsysreport.__all__) == sorted(["__version__", *nsysreport._API])
    for name in nsysreport._API:
        assert getattr(nsysreport, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = nsysreport.nope  # type: ignore[attr-defined]
