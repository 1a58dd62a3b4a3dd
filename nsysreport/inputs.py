"""Which trace files the command line names: files, directories of per-rank files, globs."""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nsysreport.errors import OptionError, TraceError
from nsysreport.parquet_dir import is_parquet_dir


def expand_inputs(args: Sequence[str]) -> list[Path]:
    """The trace files named by `args`: files, directories (their traces) and quoted globs.

    Directories and globs list their files in natural order (rank2 before rank10), which is the
    rank order of last resort.
    """
    paths: list[Path] = []
    for arg in args:
        try:
            paths += _expand(arg)
        except OSError as exc:  # PermissionError: a folder on the way that may not be searched
            raise TraceError(
                f"{arg}: cannot read it ({exc.strerror}); check the permissions of it and its "
                "folders"
            ) from None
    resolved = [p.resolve() for p in paths]
    twice = next((p for i, p in enumerate(paths) if resolved[i] in resolved[:i]), None)
    if twice is not None:
        raise OptionError(f"{twice}: given twice; each rank's file once")
    return paths


def _expand(arg: str) -> list[Path]:
    """The traces of one argument: a file, a directory's traces or a glob's matches."""
    path = Path(arg)
    if is_parquet_dir(path):
        return [path]  # one trace: nsys export --type parquetdir
    if path.is_dir():
        # Per-rank traces: files, and folders that are Parquet exports. Reports (.nsys-rep) are
        # left out: they usually sit beside their own exports, and would count a rank twice.
        found = [
            p
            for p in path.iterdir()
            if (p.is_file() and _is_trace_name(p.name)) or is_parquet_dir(p)
        ]
        if not found:
            raise TraceError(
                f"{path}: is a directory with no .sqlite, .json(.gz) or Parquet-export traces"
            )
        return sorted(found, key=_natural)
    if not path.exists() and glob.has_magic(arg):
        matches = [Path(m) for m in glob.glob(arg) if Path(m).is_file() or is_parquet_dir(Path(m))]
        if not matches:
            raise TraceError(f"{arg}: no file matches")
        return sorted(matches, key=_natural)
    return [path]


def _is_trace_name(name: str) -> bool:
    return name.endswith((".sqlite", ".json", ".json.gz")) and not name.endswith(".report.json")


def _natural(path: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]
