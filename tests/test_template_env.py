"""The templates' environment: compiled templates are kept between runs, and a run without a
place to keep them still renders."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from nsysreport.template_env import environment


def test_a_second_run_loads_the_compiled_templates_instead_of_compiling_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # jinja2 keeps them in the temp dir
    first = environment()
    source = first.get_template("report.html.j2")
    kept = [p for p in tmp_path.rglob("*.cache")]
    assert kept, "the first run keeps the compiled templates"

    second = environment()

    def compile_again(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compiled again")

    monkeypatch.setattr(second, "compile", compile_again)
    loaded = second.get_template("report.html.j2")  # and every template it includes, lazily
    assert loaded is not source
    assert loaded.name == source.name


def test_without_a_temp_folder_to_keep_them_templates_compile_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_folder))
    env = environment()
    assert env.bytecode_cache is None
    assert env.get_template("report.html.j2").name == "report.html.j2"
