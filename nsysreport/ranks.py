"""Which rank each GPU of a multi-file job is, and on which host (docs/export-format.md, "Ranks").

A rank comes from, in order: the file's MPI_RANKS (per process; a PyTorch profiler trace's
distributedInfo.rank lands there too), a rank variable in the environment nsys recorded when it
launched the process (META_DATA_CAPTURE), else the order of the files as given. When two files
claim the same rank, claims cannot be trusted, and every GPU is numbered in file order instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb

# Launchers' rank variables, most specific first: torchrun, Open MPI, Slurm, MPICH/PMI, PMIx,
# MVAPICH. LOCAL_RANK is left out on purpose: it repeats on every node.
RANK_VARIABLES = (
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "PMI_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_RANK",
)
_ENV_ROW = re.compile(r'^(\w+)="?(\d+)"?$')
# MPI's ranks are C ints: a larger number names no rank (comm_world.sql reads them alike), and
# Python refuses to read one of over 4300 digits.
MAX_RANK = 2**31 - 2


@dataclass(frozen=True, slots=True)
class FileRanks:
    """What one file says about its GPUs' ranks; `gpus` is [(pid, device_id, local_rank)]."""

    gpus: tuple[tuple[int, int, int], ...]
    mpi: bool  # local_rank values are MPI ranks (or distributedInfo ranks)
    env_rank: int | None  # the rank variable nsys saw when it launched the process
    env_source: str | None  # e.g. "RANK in the capture environment"


@dataclass(frozen=True, slots=True)
class RankInfo:
    """One GPU of the job, with the rank the report gives it and where that came from."""

    rank: int
    file: str
    pid: int
    device_id: int
    host: str | None
    gpu_name: str | None
    source: str


def read_file_ranks(con: duckdb.DuckDBPyConnection) -> FileRanks:
    """The rank evidence in one loaded trace (its `gpu` view and the capture metadata)."""
    gpus = tuple(
        (int(pid), int(dev), int(rank))
        for pid, dev, rank in run_query(con, "gpu_rank").select("pid", "device_id", "rank").rows()
    )
    mpi = run_query(con, "mpi_rank_count").height > 0
    env: dict[str, int] = dict(
        (m.group(1), number)
        for value in run_query(con, "capture_environment")["value"]
        if value is not None
        and (m := _ENV_ROW.match(value))
        and (number := _rank_number(m.group(2))) is not None
    )
    name = next((v for v in RANK_VARIABLES if v in env), None)
    source = None if name is None else f"{name} in the capture environment"
    return FileRanks(
        gpus=gpus,
        mpi=mpi,
        env_rank=None if name is None else env[name],
        env_source=source,
    )


def _rank_number(digits: str) -> int | None:
    """The rank a variable's digits give, None for a number no rank can be."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_RANK)):
        return None
    number = int(significant)
    return number if number <= MAX_RANK else None


def assign_ranks(
    files: Sequence[tuple[str, FileRanks]], kineto: Sequence[bool]
) -> dict[tuple[str, int, int], tuple[int, str]]:
    """(file, pid, device_id) -> (rank, where it came from), over every GPU of every file."""
    claims: list[tuple[str, int, int, int | None, str]] = []
    for (file, found), is_kineto in zip(files, kineto, strict=True):
        single = len(found.gpus) == 1
        for pid, dev, local in found.gpus:
            if found.mpi:
                source = "distributedInfo.rank" if is_kineto else "MPI_RANKS"
                claims.append((file, pid, dev, local, source))
            elif found.env_rank is not None and single:
                claims.append((file, pid, dev, found.env_rank, found.env_source or "environment"))
            else:
                # Several GPUs under one launcher rank, or no evidence: no claim of its own.
                claims.append((file, pid, dev, None, "file order"))
    claimed = [c[3] for c in claims if c[3] is not None]
    if len(set(claimed)) < len(claimed):
        # Two GPUs say they are the same rank (copies of a file, or per-node ranks): trust none.
        why = "file order (files claim the same rank)"
        claims = [(f, p, d, None, why) for f, p, d, _, _ in claims]
    taken = {c[3] for c in claims if c[3] is not None}
    free = (r for r in range(len(claims) + len(taken)) if r not in taken)
    out: dict[tuple[str, int, int], tuple[int, str]] = {}
    for file, pid, dev, rank, source in claims:  # in file order, then (pid, device) order
        out[(file, pid, dev)] = (next(free) if rank is None else rank, source)
    return out
