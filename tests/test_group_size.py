"""Collective group sizes: from the trace when it records them, unknown (never 1) when it cannot.

Bus bandwidth's n is the number of ranks in the communicator. Each scenario below has one
all-reduce of 1,000,000 bytes (250,000 floats) taking 100 µs: algorithm bandwidth 10 GB/s, so
its bus bandwidth is 10 x 2(n-1)/n: 10 for n = 2, 15 for n = 4, 17.5 for n = 8.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.load import open_trace
from nsysreport.queries import run_query
from nsysreport.sections.collectives import CollectiveReport, regroup
from nsysreport.synth import Kernel, NvtxRange, Scenario, write_trace

from conftest import SHARED_TRACES

ALGBW_GBPS = 10.0  # 1,000,000 bytes in 100,000 ns
KINETO_ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
NSYS_ALLREDUCE = (
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
HOST_PID = 4242


def kineto_allreduce(path: Path, distributed: dict[str, Any] | None, **group: Any) -> Path:
    """A PyTorch profiler trace of one rank: one all-reduce kernel of 250,000 floats at
    [1000, 1100) µs, launched at 990 µs, with `group` added to its collective args."""
    args = {
        "device": 0,
        "stream": 20,
        "correlation": 77,
        "Collective name": "allreduce",
        "In msg nelems": 250_000,
        "Out msg nelems": 250_000,
        "dtype": "Float",
        **group,
    }
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST_PID,
         "tid": HOST_PID, "ts": 990, "dur": 5, "args": {"correlation": 77}},
        {"ph": "X", "cat": "kernel", "name": KINETO_ALLREDUCE, "pid": 0, "tid": 20,
         "ts": 1000, "dur": 100, "args": args},
    ]  # fmt: skip
    top: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if distributed is not None:
        top["distributedInfo"] = distributed
    path.write_text(json.dumps(top))
    return path


def summary(path: Path) -> dict[str, Any]:
    con = open_trace(path)
    (row,) = run_query(con, "collective_summary").to_dicts()
    return row


DEFAULT_PG = {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl"}


@pytest.mark.parametrize(("ranks", "busbw"), [(2, 10.0), (8, 17.5)])
def test_rank_0_of_a_job_reads_the_group_size_its_kernel_records(
    tmp_path: Path, ranks: int, busbw: float
) -> None:
    world = {"backend": "nccl", "rank": 0, "world_size": ranks}
    trace = kineto_allreduce(
        tmp_path / "r0.json",
        world,
        **{"Group size": ranks, "Process Group Name": "0",
           "Process Group Ranks": str(list(range(ranks)))},
    )  # fmt: skip
    row = summary(trace)
    assert (row["group_gpus"], row["group_source"]) == (ranks, "torch_group_size")
    assert row["algbw_gbps"] == pytest.approx(ALGBW_GBPS)
    # algbw x 2(n-1)/n exactly: 10 x 1 for 2 ranks, 10 x 1.75 for 8 (one GPU in the file).
    assert row["busbw_gbps"] == pytest.approx(ALGBW_GBPS * 2 * (ranks - 1) / ranks)
    assert row["busbw_gbps"] == pytest.approx(busbw)


def test_the_kernels_process_group_is_its_comm_group(tmp_path: Path) -> None:
    trace = kineto_allreduce(
        tmp_path / "r0.json", None, **{"Group size": 4, "Process Group Name": "3"}
    )
    con = open_trace(trace)
    got = con.sql("SELECT group_size, group_source, comm_group FROM collective").fetchall()
    assert got == [(4, "torch_group_size", "3")]


def test_a_ranks_list_gives_the_size_when_the_group_size_is_missing(tmp_path: Path) -> None:
    trace = kineto_allreduce(tmp_path / "r.json", None, **{"Process Group Ranks": "[0, 2, 4, 6]"})
    row = summary(trace)
    assert (row["group_gpus"], row["group_source"]) == (4, "torch_pg_ranks")
    assert row["busbw_gbps"] == pytest.approx(15.0)


def test_the_named_process_group_in_pg_config_gives_the_size(tmp_path: Path) -> None:
    world = {
        "rank": 1,
        "world_size": 8,
        "pg_config": [
            {**DEFAULT_PG, "pg_size": 8, "ranks": list(range(8))},
            {"pg_name": "5", "pg_size": 4, "ranks": [1, 3, 5, 7]},
        ],
    }
    row = summary(kineto_allreduce(tmp_path / "r.json", world, **{"Process Group Name": "5"}))
    assert (row["group_gpus"], row["group_source"]) == (4, "torch_pg_config")
    assert row["busbw_gbps"] == pytest.approx(15.0)


@pytest.mark.parametrize(
    "world",
    [
        {"rank": 0, "world_size": 2},  # PyTorch before pg_config: only the default group
        {"rank": 0, "world_size": 2, "pg_config": [{**DEFAULT_PG, "pg_size": 2, "ranks": [0, 1]}]},
    ],
)
def test_a_job_of_one_process_group_gives_its_world_size(
    tmp_path: Path, world: dict[str, Any]
) -> None:
    row = summary(kineto_allreduce(tmp_path / "r.json", world))
    assert (row["group_gpus"], row["group_source"]) == (2, "world_size")
    assert row["busbw_gbps"] == pytest.approx(10.0)


@pytest.mark.parametrize(
    "world",
    [
        {"rank": 3},  # rank 3 of a job whose size the trace does not say: at least 4 ranks
        # A job larger than the file, of two process groups, the kernel not saying which.
        {
            "rank": 0,
            "world_size": 8,
            "pg_config": [
                {**DEFAULT_PG, "pg_size": 8, "ranks": list(range(8))},
                {"pg_name": "1", "pg_size": 2, "ranks": [0, 1]},
            ],
        },
    ],
)
def test_a_partial_capture_without_a_group_size_has_an_unknown_bus_bandwidth(
    tmp_path: Path, world: dict[str, Any]
) -> None:
    row = summary(kineto_allreduce(tmp_path / "r.json", world))
    assert row["algbw_gbps"] == pytest.approx(ALGBW_GBPS)
    assert row["group_gpus"] is None and row["group_source"] is None
    assert row["busbw_gbps"] is None  # never 0.0, which n = 1 would give


def test_a_one_gpu_trace_with_no_world_at_all_does_not_count_itself_a_group(
    tmp_path: Path,
) -> None:
    row = summary(kineto_allreduce(tmp_path / "r.json", None))
    assert (row["group_gpus"], row["group_source"], row["busbw_gbps"]) == (None, None, None)


def test_unknown_bus_bandwidth_is_null_in_the_json_and_unknown_in_the_html(
    tmp_path: Path,
) -> None:
    trace = kineto_allreduce(tmp_path / "r.json", {"rank": 5})
    result = CliRunner().invoke(
        app,
        ["report", str(trace), "-o", str(tmp_path / "r.html"), "--json",
         str(tmp_path / "m.json"), "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (c,) = json.loads((tmp_path / "m.json").read_text())["collectives"]
    assert (c["group_gpus"], c["group_source"], c["busbw_gbps"]) == (None, None, None)
    assert c["algbw_gbps"] == pytest.approx(ALGBW_GBPS)
    assert "group size unknown" in (tmp_path / "r.html").read_text()


# nsys exports: the captured environment tells the job's size or a rank of it.


def nsys_allreduce(
    path: Path,
    gpus: int = 1,
    env: dict[str, str] | None = None,
    mpi_ranks: dict[int, int] | None = None,
) -> Path:
    """`gpus` processes, one GPU each, each running the all-reduce at [1000, 101000) ns inside
    an NCCL range whose payload is 1,000,000 bytes."""
    kernels = [
        Kernel(1_000, 101_000, NSYS_ALLREDUCE, pid=10 + g, device=g, launch=(500, 510))
        for g in range(gpus)
    ]
    nvtx = [
        NvtxRange(400, 600, "ncclAllReduce", pid=10 + g, registered=True, domain="NCCL",
                  payload=1_000_000)
        for g in range(gpus)
    ]  # fmt: skip
    scenario = Scenario(
        kernels=kernels, nvtx=nvtx, capture_env=env or {}, mpi_ranks=mpi_ranks or {}
    )
    return write_trace(scenario, path)


def nsys_rows(path: Path) -> list[dict[str, Any]]:
    return run_query(open_trace(path), "collective_summary").to_dicts()


def test_gpus_of_a_whole_job_in_one_export_are_its_group(tmp_path: Path) -> None:
    rows = nsys_rows(nsys_allreduce(tmp_path / "t.sqlite", gpus=4))
    assert {(r["group_gpus"], r["group_source"]) for r in rows} == {(4, "gpus_in_trace")}
    assert all(r["busbw_gbps"] == pytest.approx(15.0) for r in rows)


def test_a_launchers_world_size_gives_one_ranks_export_its_group(tmp_path: Path) -> None:
    (row,) = nsys_rows(nsys_allreduce(tmp_path / "t.sqlite", env={"WORLD_SIZE": "4"}))
    assert (row["group_gpus"], row["group_source"]) == (4, "world_size")
    assert row["busbw_gbps"] == pytest.approx(15.0)


@pytest.mark.parametrize(
    "env",
    [{"SLURM_NTASKS": "4", "WORLD_SIZE": "4"}, {"WORLD_SIZE": "4", "SLURM_NTASKS": "4"}],
)
def test_of_launcher_sizes_that_agree_the_first_the_list_names_says_where_it_came_from(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # torchrun under SLURM records both: whichever the file lists first, WORLD_SIZE names it.
    con = open_trace(nsys_allreduce(tmp_path / "t.sqlite", env=env))
    assert con.execute("SELECT world_size, world_source FROM comm_world").fetchall() == [
        (4, "WORLD_SIZE in the capture environment")
    ]


@pytest.mark.parametrize("env", [{"RANK": "3"}, {"OMPI_COMM_WORLD_RANK": "1"}, {}])
def test_one_gpu_of_a_larger_or_unknown_job_has_no_group_size(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # Rank 3 (or 1) of a job: at least 4 (or 2) ranks, one GPU here. No evidence at all: one
    # GPU is no group of one.
    (row,) = nsys_rows(nsys_allreduce(tmp_path / "t.sqlite", env=env))
    assert row["algbw_gbps"] == pytest.approx(ALGBW_GBPS)
    assert (row["group_gpus"], row["group_source"], row["busbw_gbps"]) == (None, None, None)


def test_rank_evidence_within_the_gpus_of_the_trace_keeps_the_count(tmp_path: Path) -> None:
    rows = nsys_rows(nsys_allreduce(tmp_path / "t.sqlite", gpus=2, env={"RANK": "1"}))
    assert {(r["group_gpus"], r["group_source"]) for r in rows} == {(2, "gpus_in_trace")}


@pytest.mark.parametrize(
    ("gpus", "mpi_ranks", "expected"),
    [
        (1, {10: 5}, (None, None)),  # MPI rank 5 of at least 6, one GPU here
        (2, {10: 0, 11: 1}, (2, "gpus_in_trace")),  # both ranks of the job
        (2, {10: 2, 11: 3}, (None, None)),  # ranks 2 and 3 of at least 4
    ],
)
def test_mpi_ranks_tell_whether_the_export_holds_the_whole_job(
    tmp_path: Path, gpus: int, mpi_ranks: dict[int, int], expected: tuple[Any, Any]
) -> None:
    rows = nsys_rows(nsys_allreduce(tmp_path / "t.sqlite", gpus=gpus, mpi_ranks=mpi_ranks))
    assert {(r["group_gpus"], r["group_source"]) for r in rows} == {expected}


# Several files: the group is counted over all of them only where a file could not read it.


def collective(file: str, rank: int, group: int | None, source: str | None) -> CollectiveReport:
    return CollectiveReport(
        file=file, pid=1, device_id=0, rank=rank, op="AllReduce", count=1, total_ns=100_000,
        mean_ns=100_000.0, p50_ns=100_000, p99_ns=100_000, max_ns=100_000, exposed_ns=100_000,
        group_gpus=group, group_source=source, total_bytes=1_000_000, algbw_gbps=ALGBW_GBPS,
        busbw_gbps=None if group is None else ALGBW_GBPS * 2 * (group - 1) / group,
    )  # fmt: skip


def test_files_that_could_not_count_their_group_are_counted_together() -> None:
    rows = [collective(f"r{i}", i, None, None) for i in range(4)]
    got = regroup(rows, gpus=4, ranks_seen=4)
    assert {(c.group_gpus, c.group_source) for c in got} == {(4, "gpus_in_trace")}
    assert all(c.busbw_gbps == pytest.approx(15.0) for c in got)


def test_a_size_a_file_read_from_its_trace_stands_across_files() -> None:
    rows = [collective(f"r{i}", i, 8, "torch_group_size") for i in range(2)]
    got = regroup(rows, gpus=2, ranks_seen=2)
    assert [(c.group_gpus, c.busbw_gbps) for c in got] == [(8, rows[0].busbw_gbps)] * 2
    assert rows[0].busbw_gbps == pytest.approx(17.5)


def test_files_still_short_of_the_ranks_they_name_leave_the_group_unknown() -> None:
    rows = [collective("r0", 0, None, None), collective("r5", 5, None, None)]
    got = regroup(rows, gpus=2, ranks_seen=6)
    assert {(c.group_gpus, c.group_source, c.busbw_gbps) for c in got} == {(None, None, None)}


def report_json(tmp_path: Path, files: list[Path]) -> list[dict[str, Any]]:
    result = CliRunner().invoke(
        app, ["report", *map(str, files), "-o", str(tmp_path / "r.html"), "--json",
              str(tmp_path / "m.json"), "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads((tmp_path / "m.json").read_text())["collectives"]
    return rows


def test_four_rank_files_regroup_as_the_one_export_of_all_four_does(tmp_path: Path) -> None:
    # Each file alone: rank r of at least r + 1 ranks, one GPU, so no group size. Together the
    # four hold ranks 0-3: the group is counted as collective_summary counts one 4-GPU export.
    files = [nsys_allreduce(tmp_path / f"rank{r}.sqlite", env={"RANK": str(r)}) for r in range(4)]
    assert all(nsys_rows(f)[0]["group_gpus"] is None for f in files)
    merged = report_json(tmp_path, files)
    one_file = nsys_rows(nsys_allreduce(tmp_path / "all.sqlite", gpus=4))
    assert [(c["rank"], c["group_gpus"], c["group_source"]) for c in merged] == [
        (r, 4, "gpus_in_trace") for r in range(4)
    ]
    assert [c["busbw_gbps"] for c in merged] == pytest.approx([r["busbw_gbps"] for r in one_file])
    assert merged[0]["busbw_gbps"] == pytest.approx(15.0)


def test_rank_files_of_a_pytorch_job_keep_the_group_size_each_records(tmp_path: Path) -> None:
    files = [
        kineto_allreduce(
            tmp_path / f"rank{r}.json", {"rank": r, "world_size": 8}, **{"Group size": 8}
        )
        for r in range(2)
    ]
    merged = report_json(tmp_path, files)
    assert [(c["rank"], c["group_gpus"], c["group_source"]) for c in merged] == [
        (0, 8, "torch_group_size"),
        (1, 8, "torch_group_size"),
    ]
    assert all(c["busbw_gbps"] == pytest.approx(17.5) for c in merged)


# The real PyTorch profiler traces: what each one records (docs/export-format.md).

KINETO = SHARED_TRACES / "kineto"


def kineto_kernels(name: str) -> list[dict[str, Any]]:
    """The NCCL kernel events of a real trace, read with Python's json (independent of DuckDB)."""
    path = KINETO / f"{name}.json.gz"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the tests need ../shared/traces beside the checkout")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    return [
        e for e in events if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower()
    ]


def groups_of(name: str) -> Counter[tuple[int | None, str | None, str | None]]:
    con = open_trace(KINETO / f"{name}.json.gz")
    rows = con.sql("SELECT group_size, group_source, comm_group FROM collective").fetchall()
    return Counter(rows)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Every NCCL kernel carries Group size 2 of process group "0" (rank 0 of 2, NCCL 2.17).
        ("a100_ddp_rank0_nccl_data", {(2, "torch_group_size", "0"): 21}),
        # 12 kernels carry Group size 8 of group "0"; 5 carry no collective args, and the
        # trace's pg_config lists one group of 8 ranks: the job's world size.
        ("mi300_rccl_rank0", {(8, "torch_group_size", "0"): 12, (8, "world_size", None): 5}),
        # No collective args, distributedInfo has world_size 2 and no pg_config.
        ("v100_ddp_rank1", {(2, "world_size", None): 2020}),
        # No collective args, distributedInfo has world_size 128 and no pg_config.
        ("recsys128_sampled_rank-0", {(128, "world_size", None): 10}),
        ("recsys128_sampled_rank-1", {(128, "world_size", None): 10}),
    ],
)
def test_each_real_trace_gives_its_nccl_kernels_the_group_size_it_records(
    name: str, expected: dict[tuple[int, str, str | None], int]
) -> None:
    kernels = kineto_kernels(name)
    recorded = Counter(
        (e["args"]["Group size"], e["args"].get("Process Group Name"))
        for e in kernels
        if "Group size" in e["args"]
    )
    from_args = {k: v for k, v in expected.items() if k[1] == "torch_group_size"}
    assert recorded == Counter({(size, group): n for (size, _, group), n in from_args.items()})
    assert groups_of(name) == Counter(expected)
    assert sum(expected.values()) == len(kernels)
