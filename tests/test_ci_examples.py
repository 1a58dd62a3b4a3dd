"""The CI workflow examples (examples/ci/): their commands, run as the CI would run them.

The YAML is parsed; the shell of each step that calls nsysreport runs in bash in a temporary
folder with the job's variables (the trace and the baseline laid where they say), `nsysreport`
on PATH as this checkout's. Steps that use an action (checkout, artifacts, JUnit publishing)
or install the package are not run: the files they would publish or keep must then exist.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO

EXAMPLES = REPO / "examples" / "ci"
SAMPLE = REPO / "sample_traces" / "llama70b_decode_tp8_nvlink_straggler.sqlite"
INSTALL = "python -m pip install"


def github() -> dict[str, Any]:
    workflow: dict[str, Any] = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    return workflow


def gitlab() -> dict[str, Any]:
    pipeline: dict[str, Any] = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    return pipeline


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A checkout's folder with `nsysreport` on PATH (this checkout's code) and the trace of
    the job variables at nsys-trace/trace.sqlite, as the download step leaves it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "nsysreport"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nsysreport "$@"\n')
    wrapper.chmod(0o755)
    work = tmp_path / "work"
    (work / "nsys-trace").mkdir(parents=True)
    shutil.copy(SAMPLE, work / "nsys-trace" / "trace.sqlite")
    return work


def run_shell(script: str, work: Path, env: dict[str, str]) -> int:
    full = {
        **os.environ,
        **env,
        "PATH": f"{work.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": str(work.parent / "cache"),
    }
    # GitHub runs `run:` as bash -e -o pipefail; GitLab's shell stops at the first failure too.
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=work, env=full)
    return done.returncode


def run_github_job(work: Path, overrides: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """Run the gate job's shell steps as Actions would: after a failure only `if: always()`
    steps run. Returns the gate step's exit status and the job."""
    job = github()["jobs"]["gate"]
    env = {**job["env"], **overrides, "GITHUB_STEP_SUMMARY": str(work / "summary.md")}
    failed, gate_status = False, -1
    for step in job["steps"]:
        if "run" not in step or step["run"].startswith(INSTALL):
            continue
        if failed and step.get("if") != "always()":
            continue
        status = run_shell(step["run"], work, env)
        if step.get("id") == "gate":
            gate_status = status
        failed = failed or status != 0
    return gate_status, job


def kept_files(job: dict[str, Any]) -> list[str]:
    """The files the job's actions publish (JUnit) or keep (artifacts)."""
    files = []
    for step in job["steps"]:
        uses, given = step.get("uses", ""), step.get("with", {})
        if uses.startswith("actions/upload-artifact"):
            files += given["path"].split()
        elif uses.startswith("mikepenz/action-junit-report"):
            files.append(given["report_paths"])
    return files


def test_the_github_workflow_passes_a_trace_within_budget_and_keeps_every_file(
    workdir: Path,
) -> None:
    status, job = run_github_job(workdir, {"MAX_EXPOSED_COMM_PCT": "60"})
    assert status == 0
    files = kept_files(job)
    assert "nsysreport-baseline.json" in files and "nsysreport-gate.xml" in files
    assert all((workdir / f).is_file() for f in files)
    summary = (workdir / "summary.md").read_text()
    assert summary == (workdir / "nsysreport-gate.md").read_text()
    assert "exposed_comm_pct" in summary
    # The kept JSON is a baseline the next run's gate reads.
    baseline = json.loads((workdir / "nsysreport-baseline.json").read_text())
    assert baseline["schema_version"] == 2 and len(baseline["gpus"]) == 8


def test_the_github_workflow_fails_over_budget_yet_summarises_and_keeps_the_files(
    workdir: Path,
) -> None:
    # The sample's worst GPU exposes a third of its median step: over a 10% budget.
    status, job = run_github_job(workdir, {"MAX_EXPOSED_COMM_PCT": "10"})
    assert status == 1
    assert all((workdir / f).is_file() for f in kept_files(job))
    assert "exposed_comm_pct" in (workdir / "summary.md").read_text()
    gate = json.loads((workdir / "nsysreport-gate.json").read_text())
    assert gate["passed"] is False


def test_the_github_workflow_compares_with_the_committed_baseline(workdir: Path) -> None:
    status, _ = run_github_job(workdir, {"MAX_EXPOSED_COMM_PCT": "60"})
    assert status == 0
    (workdir / "perf").mkdir()
    shutil.move(workdir / "nsysreport-baseline.json", workdir / "perf" / "baseline.json")
    status, _ = run_github_job(workdir, {"MAX_EXPOSED_COMM_PCT": "60"})
    assert status == 0  # the same trace: no regression
    gate = json.loads((workdir / "nsysreport-gate.json").read_text())
    assert "step_time_ns" in json.dumps(gate)


def test_the_github_workflow_exits_2_when_the_trace_is_missing(workdir: Path) -> None:
    (workdir / "nsys-trace" / "trace.sqlite").unlink()
    status, _ = run_github_job(workdir, {})
    assert status == 2


def gitlab_job() -> dict[str, Any]:
    job: dict[str, Any] = gitlab()["nsysreport-gate"]
    return job


@pytest.mark.parametrize(("limit", "expected"), [("60", 0), ("10", 1)])
def test_the_gitlab_job_runs_the_same_gate_and_keeps_its_artifacts(
    workdir: Path, limit: str, expected: int
) -> None:
    job = gitlab_job()
    assert all(line.startswith(INSTALL) for line in job["before_script"])
    env = {**job["variables"], "MAX_EXPOSED_COMM_PCT": limit}
    script_status = run_shell("\n".join(job["script"]), workdir, env)
    assert script_status == expected
    for line in job["after_script"]:  # GitLab runs these whatever the script's status
        assert run_shell(line, workdir, env) == 0
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always"
    assert artifacts["reports"]["junit"] == "nsysreport-gate.xml"
    assert all((workdir / f).is_file() for f in artifacts["paths"])
