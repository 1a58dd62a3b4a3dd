"""Split a multi-rank synthetic scenario into one export per rank, each on its own clock.

Large jobs are captured one nsys file per rank, and every file counts time on its own host's
clock. `split_ranks` makes such a set from a scenario holding all ranks (as
`simulate.tensor_parallel` does): rank r is the r-th process by pid among the scenario's GPUs,
and file r holds only that process's rows, every time moved by `clock_shift_ns[r]`:

    file r's clock = true time + clock_shift_ns[r]

Its TARGET_INFO_SESSION_START_TIME puts time 0 of that clock at the UTC epoch
BASE_UTC_NS - clock_shift_ns[r] + session_error_ns[r]: right but for `session_error_ns[r]`,
as NTP leaves real hosts a few hundred µs to a few ms apart. Ground truth for file f against
reference file 0:

    true offset (add to file f's times to put them on file 0's clock)
        = clock_shift_ns[0] - clock_shift_ns[f]
    coarse estimate from the session start rows
        = true offset + (session_error_ns[f] - session_error_ns[0])

`python -m nsysreport.synth.rank_files OUT_DIR` writes such a set for a simulated TP8 decode
run with a straggler, on two hosts, and prints the ground truth.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from nsysreport.synth import ApiCall, Kernel, Memcpy, Memset, NvtxRange, Scenario, write_trace
from nsysreport.synth.simulate import TensorParallelConfig, simulated_or_exit

BASE_UTC_NS = 1_768_435_200_000_000_000  # 2026-01-15T00:00:00Z, the true time 0 of every rank

_Launched = TypeVar("_Launched", Kernel, Memcpy, Memset)


def split_ranks(
    scenario: Scenario,
    clock_shift_ns: Sequence[int],
    session_error_ns: Sequence[int] = (),
    hosts: Sequence[str] | None = None,
    rank_env: str | None = "RANK",
) -> list[Scenario]:
    """One scenario per rank (by sorted GPU pid), on clocks shifted by `clock_shift_ns`.

    `session_error_ns` (default all 0) misplaces each file's session start; `hosts` names each
    file's host (default the scenario's); `rank_env` (e.g. RANK, OMPI_COMM_WORLD_RANK,
    SLURM_PROCID) is the captured environment variable that holds the rank, None for none.
    """
    pids = sorted({g.pid for g in scenario.gpus if g.pid is not None})
    errors = list(session_error_ns) or [0] * len(pids)
    for name, values in (("clock_shift_ns", clock_shift_ns), ("session_error_ns", errors)):
        if len(values) != len(pids):
            raise ValueError(f"{name} has {len(values)} values for {len(pids)} ranks (GPU pids)")
    if hosts is not None and len(hosts) != len(pids):
        raise ValueError(f"hosts has {len(hosts)} names for {len(pids)} ranks (GPU pids)")
    # The scenario's iterables may be generators: read each once, then filter per rank.
    kernels, memcpys = list(scenario.kernels), list(scenario.memcpys)
    memsets, api_calls = list(scenario.memsets), list(scenario.api_calls)
    nvtx = list(scenario.nvtx)
    out = []
    for rank, (pid, shift) in enumerate(zip(pids, clock_shift_ns, strict=True)):
        env = dict(scenario.capture_env)
        if rank_env is not None:
            env[rank_env] = str(rank)
        out.append(
            replace(
                scenario,
                kernels=[_shift_op(k, shift) for k in kernels if k.pid == pid],
                memcpys=[_shift_op(m, shift) for m in memcpys if m.pid == pid],
                memsets=[_shift_op(m, shift) for m in memsets if m.pid == pid],
                api_calls=[_shift_call(a, shift) for a in api_calls if a.pid == pid],
                nvtx=[_shift_range(r, shift) for r in nvtx if r.pid == pid],
                gpus=[g for g in scenario.gpus if g.pid == pid],
                host=scenario.host if hosts is None else hosts[rank],
                capture_env=env,
                utc_at_zero_ns=BASE_UTC_NS - shift + errors[rank],
            )
        )
    return out


def write_rank_files(
    scenario: Scenario,
    folder: Path,
    clock_shift_ns: Sequence[int],
    session_error_ns: Sequence[int] = (),
    hosts: Sequence[str] | None = None,
    rank_env: str | None = "RANK",
    version: str = "2026.2",
    stem: str = "rank",
) -> list[Path]:
    """Write `split_ranks(...)` as `folder/{stem}{rank}.sqlite` nsys `version` exports."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = split_ranks(scenario, clock_shift_ns, session_error_ns, hosts, rank_env)
    return [write_trace(s, folder / f"{stem}{r}.sqlite", version) for r, s in enumerate(parts)]


def injected_clocks(ranks: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """Distinct, irregular clock shifts (some negative) and ±0.2–3 ms session errors per rank."""
    rng = random.Random(seed)
    # The regular part keeps shifts distinct; the random part keeps them from being a pattern.
    shifts = [(r - 3) * 1_234_567 + rng.randrange(-400_000, 400_000) for r in range(ranks)]
    errors = [rng.choice((-1, 1)) * rng.randrange(200_000, 3_000_000) for _ in range(ranks)]
    return shifts, errors


def true_offsets(clock_shift_ns: Sequence[int]) -> list[int]:
    """Per file, what to add to its times to put them on file 0's clock."""
    return [clock_shift_ns[0] - s for s in clock_shift_ns]


def _shift_op(op: _Launched, shift: int) -> _Launched:
    launch = None if op.launch is None else (op.launch[0] + shift, op.launch[1] + shift)
    return replace(op, start=op.start + shift, end=op.end + shift, launch=launch)


def _shift_call(a: ApiCall, shift: int) -> ApiCall:
    return replace(a, start=a.start + shift, end=a.end + shift)


def _shift_range(r: NvtxRange, shift: int) -> NvtxRange:
    return replace(r, start=r.start + shift, end=None if r.end is None else r.end + shift)


PROG = "python -m nsysreport.synth.rank_files"
# The developer command line (not the user CLI). \b keeps each docstring paragraph as written.
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
_HELP = "\n\n".join(f"\b\n{paragraph}" for paragraph in (__doc__ or "").strip().split("\n\n"))


@app.command(help=_HELP)
def write_simulated_ranks(
    out_dir: Annotated[Path, typer.Argument(help="Folder for rank0.sqlite, rank1.sqlite, ...")],
    tp: Annotated[int, typer.Option(min=1, help="Ranks (tensor-parallel degree).")] = 8,
    straggler_rank: Annotated[int, typer.Option(help="The slow rank, -1 for none.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the jitter and the injected clocks.")] = 0,
) -> None:
    """Write per-rank files of a simulated TP decode run and print their ground-truth offsets."""
    straggler = None if straggler_rank < 0 else straggler_rank
    config = TensorParallelConfig(
        tp=tp, steps=4, layers_simulated=8, straggler_rank=straggler, straggler_slowdown=1.5,
        seed=seed,
    )  # fmt: skip
    shifts, errors = injected_clocks(tp, seed)
    per_node = -(-tp // 2)  # two hosts: the first half of the ranks on node0
    hosts = [f"node{r // per_node}" for r in range(tp)]
    paths = write_rank_files(simulated_or_exit(config), out_dir, shifts, errors, hosts)
    typer.echo("file  host  clock_shift_ns  session_error_ns  true_offset_ns  coarse_offset_ns")
    for r, (path, offset) in enumerate(zip(paths, true_offsets(shifts), strict=True)):
        coarse = offset + errors[r] - errors[0]
        typer.echo(f"{path}  {hosts[r]}  {shifts[r]}  {errors[r]}  {offset}  {coarse}")


if __name__ == "__main__":
    app(prog_name=PROG)
