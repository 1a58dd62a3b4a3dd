"""Rows in any order (#35): nsys 2025.6 and later need not export rows in time order, so no
number may depend on the order of a table's rows in the file.

The sample trace's GPU, runtime and NVTX tables are rewritten in a shuffled order (same rows,
other rowids); every number of the report stays what it was.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

from nsysreport.analysis import analyse
from nsysreport.model import as_json

SAMPLE = Path(__file__).parents[1] / "sample_traces" / "llama70b_decode_tp4_nvlink.sqlite"
TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
)


def shuffled_copy(source: Path, target: Path, seed: int) -> Path:
    shutil.copyfile(source, target)
    rng = random.Random(seed)
    with sqlite3.connect(target) as con:
        for table in TABLES:
            rows = con.execute(f"SELECT * FROM {table}").fetchall()
            if not rows:
                continue
            rng.shuffle(rows)
            con.execute(f"DELETE FROM {table}")
            marks = ", ".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    return target


def numbers(path: Path) -> str:
    data = as_json(analyse(path))
    for trace in data["traces"]:
        trace.pop("path")
    return json.dumps(data, sort_keys=True).replace(path.name, "TRACE")


def test_a_shuffled_export_gives_the_same_report(tmp_path: Path) -> None:
    expected = numbers(SAMPLE)
    for seed in (1, 2):
        assert numbers(shuffled_copy(SAMPLE, tmp_path / f"shuffled{seed}.sqlite", seed)) == expected
