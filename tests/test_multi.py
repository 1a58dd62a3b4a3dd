"""Several files, one report: rank discovery, clock alignment, cross-file stragglers, workers.

The per-rank files are the simulator's TP4 run split by nsysreport.synth.rank_files, each on a clock
shifted by a known amount and with a session start that is off by a known NTP-like error, so
every expected number is known: the offsets exactly, and every per-GPU metric and straggler
figure equal to those of the same run written as one file.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.align import align_files
from nsysreport.analysis import analyse
from nsysreport.cli import app
from nsysreport.ranks import FileRanks, assign_ranks
from nsysreport.synth import GLOBAL_VID, write_trace
from nsysreport.synth.rank_files import BASE_UTC_NS, true_offsets, write_rank_files
from nsysreport.synth.simulate import TensorParallelConfig, tensor_parallel

from conftest import SHARED_TRACES

runner = CliRunner()
SHIFTS = [-3_000_000, 1_234_567, -250_001, 7_777_777]  # each file's clock = true time + shift
ERRORS = [400_000, -2_100_000, 1_300_000, -900_000]  # session start off by this much (NTP)
STRAGGLER = 2


def config() -> TensorParallelConfig:
    return TensorParallelConfig(
        tp=4, steps=3, layers_simulated=2, straggler_rank=STRAGGLER, straggler_slowdown=1.6
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same simulated run as one file and as four per-rank files; both reports' JSON."""
    folder = tmp_path_factory.mktemp("ranks")
    single = write_trace(tensor_parallel(config()), folder / "all.sqlite")
    files = write_rank_files(
        tensor_parallel(config()), folder / "ranks", SHIFTS, ERRORS, hosts=["a", "a", "b", "b"]
    )
    return {
        "files": files,
        "single_path": single,
        "single": report_json(folder / "single.json", str(single)),
        "multi": report_json(folder / "multi.json", *map(str, files), "--jobs", "1"),
    }


def report_json(out: Path, *args: str) -> dict[str, Any]:
    """The JSON of a report on `args`; the HTML goes beside `out`, never beside the traces."""
    html = out.with_suffix(".html")
    result = runner.invoke(
        app, ["report", *args, "--json", str(out), "-o", str(html), "-q", "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_alignment_recovers_each_injected_offset_within_a_microsecond(run: dict[str, Any]) -> None:
    files = run["multi"]["alignment"]["files"]
    assert [f["file"] for f in files] == [f"rank{r}.sqlite" for r in range(4)]
    for f, truth, error in zip(files, true_offsets(SHIFTS), ERRORS, strict=True):
        assert abs(f["offset_ns"] - truth) <= 1_000
        # The session start alone is off by the difference of the two files' NTP errors.
        assert f["coarse_offset_ns"] == truth + error - ERRORS[0]
    assert [f["source"] for f in files] == ["reference"] + ["collectives"] * 3
    assert all(f["residual_max_ns"] == 0 for f in files[1:])  # simulated ends agree exactly


def test_the_straggler_is_named_with_the_wait_it_costs_as_in_one_file(run: dict[str, Any]) -> None:
    single, multi = run["single"]["stragglers"], run["multi"]["stragglers"]
    assert multi["matched"] == single["matched"] > 0
    caused = {g["rank"]: g["caused_wait_ns"] for g in multi["gpus"]}
    assert max(caused, key=lambda r: caused[r]) == STRAGGLER
    for m, s in zip(multi["gpus"], single["gpus"], strict=True):
        assert (m["rank"], m["last_arrivals"], m["wait_ns"], m["caused_wait_ns"]) == (
            s["rank"],
            s["last_arrivals"],
            s["wait_ns"],
            s["caused_wait_ns"],
        )
    assert f"waiting for rank {STRAGGLER}" in run["multi"]["bottleneck"]["summary"]


def test_every_per_gpu_number_equals_the_one_file_report(run: dict[str, Any]) -> None:
    single, multi = run["single"], run["multi"]
    per_file = ("file", "gaps", "host")  # gap start times move with the clock; hosts differ
    for m, s in zip(multi["gpus"], single["gpus"], strict=True):
        assert {k: v for k, v in m.items() if k not in per_file} == {
            k: v for k, v in s.items() if k not in per_file
        }
    for m, s in zip(multi["steps"], single["steps"], strict=True):
        # Times are on rank 0's clock: the true time plus rank 0's shift.
        assert m["start_ns"] == s["start_ns"] + SHIFTS[0]
        assert m["step_time_ns"] == s["step_time_ns"]
        assert m["exposed_comm_ns"] == s["exposed_comm_ns"]
    assert _without_file(multi["layers"]) == _without_file(single["layers"])
    assert _without_file(multi["collectives"]) == _without_file(single["collectives"])
    assert multi["top_kernels"] == single["top_kernels"]
    assert multi["bottleneck"]["share_pct"] == single["bottleneck"]["share_pct"]


def test_the_timeline_shows_and_names_the_median_step_as_in_one_file(run: dict[str, Any]) -> None:
    # The same run, one file and four per-rank files on shifted clocks: one builder, so the
    # same window chosen, named by the step (not by a file, as the merged timeline once was).
    single = analyse(run["single_path"]).timeline
    multi = analyse(run["files"], jobs=1).timeline
    assert single is not None and multi is not None
    assert (multi.basis, multi.step_name) == (single.basis, single.step_name)
    assert single.basis == "median step" and single.step_name.startswith("step ")
    assert [g.rank for g in multi.gpus] == [g.rank for g in single.gpus] == [0, 1, 2, 3]


def _without_file(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "file"} for r in rows]


def test_stragglers_of_instances_cut_into_slices_are_those_of_all_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import polars as pl

    from nsysreport import report_builder

    # Three GPUs (stand-in pids 0-2). AllReduce: 3 instances each, start times below. Broadcast
    # ran 2 times on GPU 0 and 3 on GPU 1: unmatched, though a slice holding only its first
    # ordinals would see equal counts. Barrier ran on GPU 0 alone: nothing to match.
    starts = {0: [0, 100, 200], 1: [10, 105, 200], 2: [30, 100, 200]}
    rows = [("AllReduce", k + 1, g, t) for g, ts in starts.items() for k, t in enumerate(ts)]
    rows += [("Broadcast", k, 0, 300 + k) for k in (1, 2)]
    rows += [("Broadcast", k, 1, 300 + k) for k in (1, 2, 3)]
    rows += [("Barrier", k, 0, 400 + k) for k in (1, 2)]
    # AllReduce 4: GPU 0 began it 4,000 ns before the others arrived, a wait for a late rank
    # (late_start): it matches nothing, on any GPU, in a slice or not.
    rows += [("AllReduce", 4, g, 1000 if g == 0 else 5000) for g in starts]
    collective = pl.DataFrame(
        rows, schema=["op", "ordinal", "pid", "start_ns"], orient="row"
    ).with_columns(
        pl.col("op").cast(pl.Categorical),
        device_id=pl.lit(0, pl.Int64),
        late_start=(pl.col("ordinal") == 4) & (pl.col("pid") == 0),
    )
    ranks = {("f", g, 0): (g, "test") for g in starts}

    def figures(sliced: bool = True) -> list[tuple[int, int, int, int, int, int | None]]:
        with report_builder._reading(collective=collective) as con:
            gpus = {(g, 0): ("f", g, 0) for g in starts}
            tables = report_builder.JobTables(con, gpus, collective if sliced else None)
            found = report_builder._stragglers(tables, ranks)
        assert [(u["op"], u["rank"], u["instances"]) for u in found.unmatched] == [
            ("Broadcast", 0, 2),
            ("Broadcast", 1, 3),
        ]
        return [
            (g.rank, g.matched_instances, g.last_arrivals, g.wait_ns, g.caused_wait_ns,
             g.max_skew_ns)
            for g in found.gpus
        ]  # fmt: skip

    # By hand: instance 1 waits 30, 20, 0 for GPU 2 (skew 30, caused 50); instance 2 waits 5,
    # 0, 5 for GPU 1 (skew 5, caused 10); instance 3 starts together: no last arriver.
    expected = [(0, 3, 0, 35, 0, None), (1, 3, 1, 20, 10, 5), (2, 3, 1, 5, 50, 30)]
    assert figures() == expected  # 19 instances: one slice
    assert figures(sliced=False) == expected  # the query over the whole table at once
    monkeypatch.setattr(report_builder, "SLICE_INSTANCES", 2)  # 10 slices: one ordinal in each
    assert figures() == expected


def test_the_rank_map_names_host_file_and_source(run: dict[str, Any]) -> None:
    ranks = run["multi"]["ranks"]
    assert [(r["rank"], r["file"], r["host"]) for r in ranks] == [
        (0, "rank0.sqlite", "a"),
        (1, "rank1.sqlite", "a"),
        (2, "rank2.sqlite", "b"),
        (3, "rank3.sqlite", "b"),
    ]
    assert {r["source"] for r in ranks} == {"RANK in the capture environment"}


def test_ranks_come_from_the_capture_environment_whatever_the_file_order(
    run: dict[str, Any], tmp_path: Path
) -> None:
    files = list(reversed(run["files"]))
    data = report_json(tmp_path / "r.json", *map(str, files), "--jobs", "1")
    assert [(r["rank"], r["file"]) for r in data["ranks"]] == [
        (r, f"rank{r}.sqlite") for r in range(4)
    ]
    assert data["alignment"]["reference"] == "rank0.sqlite"


def test_no_align_keeps_raw_clocks(run: dict[str, Any], tmp_path: Path) -> None:
    data = report_json(tmp_path / "r.json", *map(str, run["files"]), "--no-align", "--jobs", "1")
    assert {f["offset_ns"] for f in data["alignment"]["files"]} == {0}
    assert data["alignment"]["files"][1]["source"] == "raw clock (--no-align)"
    # On raw clocks the instances no longer line up: the skew is the clock error, not the work.
    caused = {g["rank"]: g["caused_wait_ns"] for g in data["stragglers"]["gpus"]}
    assert caused != {g["rank"]: g["caused_wait_ns"] for g in run["multi"]["stragglers"]["gpus"]}


@pytest.mark.parametrize("variable", ["OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"])
def test_launcher_rank_variables_are_read(tmp_path: Path, variable: str) -> None:
    small = TensorParallelConfig(tp=2, steps=1, layers_simulated=1)
    files = write_rank_files(tensor_parallel(small), tmp_path, [0, 0], rank_env=variable)
    data = report_json(tmp_path / "r.json", str(files[1]), str(files[0]), "--jobs", "1")
    assert [(r["rank"], r["file"], r["source"]) for r in data["ranks"]] == [
        (0, "rank0.sqlite", f"{variable} in the capture environment"),
        (1, "rank1.sqlite", f"{variable} in the capture environment"),
    ]


def test_mpi_ranks_come_before_the_capture_environment(tmp_path: Path) -> None:
    small = TensorParallelConfig(tp=2, steps=1, layers_simulated=1)
    files = write_rank_files(tensor_parallel(small), tmp_path, [0, 0])  # RANK=0, RANK=1
    for path, mpi_rank in zip(files, (1, 0), strict=True):  # MPI says the opposite
        pid = 1000 + (path.name == "rank1.sqlite")  # the simulator's pid for that rank
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE MPI_RANKS (globalTid INTEGER NOT NULL, rank INTEGER NOT NULL)")
            db.execute(
                "INSERT INTO MPI_RANKS VALUES (?, ?)", (GLOBAL_VID | pid << 24 | pid, mpi_rank)
            )
    data = report_json(tmp_path / "r.json", *map(str, files), "--jobs", "1")
    assert [(r["rank"], r["file"], r["source"]) for r in data["ranks"]] == [
        (0, "rank1.sqlite", "MPI_RANKS"),
        (1, "rank0.sqlite", "MPI_RANKS"),
    ]


def test_without_rank_evidence_files_are_ranked_in_the_order_given(tmp_path: Path) -> None:
    small = TensorParallelConfig(tp=2, steps=1, layers_simulated=1)
    files = write_rank_files(tensor_parallel(small), tmp_path, [0, 0], rank_env=None)
    data = report_json(tmp_path / "r.json", str(files[1]), str(files[0]), "--jobs", "1")
    assert [(r["rank"], r["file"], r["source"]) for r in data["ranks"]] == [
        (0, "rank1.sqlite", "file order"),
        (1, "rank0.sqlite", "file order"),
    ]


def test_two_files_claiming_one_rank_fall_back_to_file_order() -> None:
    same = FileRanks(gpus=((10, 0, 0),), mpi=False, env_rank=3, env_source="RANK in env")
    ranks = assign_ranks([("x", same), ("y", same)], [False, False])
    assert ranks == {
        ("x", 10, 0): (0, "file order (files claim the same rank)"),
        ("y", 10, 0): (1, "file order (files claim the same rank)"),
    }


def test_unclaimed_files_take_the_ranks_left_free() -> None:
    claimed = FileRanks(gpus=((10, 0, 0),), mpi=False, env_rank=0, env_source="RANK")
    unclaimed = FileRanks(gpus=((11, 0, 0),), mpi=False, env_rank=None, env_source=None)
    mpi = FileRanks(gpus=((12, 0, 2), (13, 1, 3)), mpi=True, env_rank=None, env_source=None)
    ranks = assign_ranks([("u", unclaimed), ("m", mpi), ("c", claimed)], [False] * 3)
    assert {k: v[0] for k, v in ranks.items()} == {
        ("u", 11, 0): 1,
        ("m", 12, 0): 2,
        ("m", 13, 1): 3,
        ("c", 10, 0): 0,
    }


def test_without_shared_collectives_the_session_start_aligns() -> None:
    import polars as pl

    empty = pl.DataFrame(
        schema={"op": pl.Utf8, "ordinal": pl.Int64, "pid": pl.Int64, "device_id": pl.Int64,
                "end_ns": pl.Int64}
    )  # fmt: skip
    clocks = align_files(["a", "b", "c"], [BASE_UTC_NS, BASE_UTC_NS + 5_000, None], [empty] * 3)
    assert [(c.offset_ns, c.source) for c in clocks] == [
        (0, "reference"),
        (5_000, "session start"),
        (0, "raw clock"),
    ]


def test_collectives_that_do_not_end_together_do_not_move_the_clock() -> None:
    import polars as pl

    def instances(ends: list[int]) -> pl.DataFrame:
        n = len(ends)
        return pl.DataFrame(
            {"op": ["AllReduce"] * n, "ordinal": list(range(1, n + 1)), "pid": [1] * n,
             "device_id": [0] * n, "end_ns": ends}
        )  # fmt: skip

    # Same op and count, but ends a millisecond and more apart: not the same collectives.
    clocks = align_files(
        ["a", "b"], [0, 0], [instances([0, 10_000_000]), instances([2_000_000, 9_000_000])]
    )
    assert (clocks[1].offset_ns, clocks[1].source) == (0, "session start")
    assert clocks[1].residual_p50_ns == 1_500_000  # |-2 ms| and |1 ms|: median 1.5 ms


def test_the_recsys_rank_pair_is_analysed_together(tmp_path: Path) -> None:
    pair = [SHARED_TRACES / f"kineto/recsys128_sampled_rank-{r}.json.gz" for r in (1, 0)]
    assert all(p.is_file() for p in pair), "the tests need ../shared/traces beside the checkout"
    data = report_json(tmp_path / "r.json", *map(str, pair), "--jobs", "1")
    assert [(r["rank"], r["source"]) for r in data["ranks"]] == [
        (0, "distributedInfo.rank"),
        (1, "distributedInfo.rank"),
    ]
    assert data["alignment"]["reference"] == "recsys128_sampled_rank-0.json.gz"
    # Kineto times are already wall-clock µs; the sampled SendRecvs do not end together, so
    # the clocks are left as they are and the miss is reported.
    other = data["alignment"]["files"][1]
    assert (other["offset_ns"], other["source"], other["instances"]) == (0, "raw clock", 10)
    assert other["residual_p50_ns"] > 1_000_000
    assert data["stragglers"]["matched"] == 10
    assert len(data["gpus"]) == 2 and {g["rank"] for g in data["gpus"]} == {0, 1}


def test_jobs_and_a_dask_cluster_give_the_same_json_as_one_process(
    run: dict[str, Any], tmp_path: Path
) -> None:
    distributed = pytest.importorskip("distributed")  # in the test extra: CI always has it
    files = list(map(str, run["files"]))
    pooled = report_json(tmp_path / "jobs2.json", *files, "--jobs", "2")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=":0",
    ) as cluster:  # fmt: skip
        dask = report_json(tmp_path / "dask.json", *files, "--scheduler", cluster.scheduler_address)
    for other in (pooled, dask):
        assert {k: v for k, v in other.items() if k != "tool_version"} == {
            k: v for k, v in run["multi"].items() if k != "tool_version"
        }


def test_a_directory_or_a_quoted_glob_names_the_files(run: dict[str, Any], tmp_path: Path) -> None:
    folder = run["files"][0].parent
    by_dir = report_json(tmp_path / "d.json", str(folder), "--jobs", "1")
    by_glob = report_json(tmp_path / "g.json", str(folder / "rank*.sqlite"), "--jobs", "1")
    assert by_dir["ranks"] == by_glob["ranks"] == run["multi"]["ranks"]


def test_the_multi_file_report_lands_beside_the_first_file(tmp_path: Path) -> None:
    small = TensorParallelConfig(tp=2, steps=1, layers_simulated=1)
    files = write_rank_files(tensor_parallel(small), tmp_path, [0, 0])
    result = runner.invoke(app, ["report", *map(str, files), "--jobs", "1", "-q"])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "rank-2files.report.html").read_text()
    assert "Ranks and clocks" in html and "RANK in the capture environment" in html


def test_bad_inputs_among_several_get_one_line(run: dict[str, Any], tmp_path: Path) -> None:
    good = str(run["files"][0])
    cases = {
        (good, str(tmp_path / "missing.sqlite")): "missing.sqlite: no such file",
        (good, good): "given twice",
        (str(tmp_path / "none*.sqlite"),): "none*.sqlite: no file matches",
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    cases[(str(empty),)] = "is a directory with no .sqlite, .json(.gz) or Parquet-export traces"
    for args, message in cases.items():
        result = runner.invoke(app, ["report", *args, "--jobs", "1"])
        assert result.exit_code in (1, 2), result.output
        assert message in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_a_scheduler_that_is_not_there_is_a_clear_error(run: dict[str, Any]) -> None:
    files = list(map(str, run["files"][:2]))
    result = runner.invoke(app, ["report", *files, "--scheduler", "tcp://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "--scheduler tcp://127.0.0.1:9: cannot connect" in result.output


def test_copies_of_the_same_trace_are_told_apart_by_path(tmp_path: Path) -> None:
    small = TensorParallelConfig(tp=2, steps=1, layers_simulated=1)
    files = write_rank_files(tensor_parallel(small), tmp_path / "src", [0, 0])
    for r, f in enumerate(files):
        (tmp_path / f"n{r}").mkdir()
        shutil.copy(f, tmp_path / f"n{r}" / "trace.sqlite")
    args = [str(tmp_path / f"n{r}" / "trace.sqlite") for r in range(2)]
    data = report_json(tmp_path / "r.json", *args, "--jobs", "1")
    assert [r["file"] for r in data["ranks"]] == args


def test_compare_and_gate_take_a_directory_of_per_rank_files_as_one_config(
    tmp_path: Path,
) -> None:
    """Each configuration captured one file per rank compares as its one-file capture does."""
    singles, folders = [], []
    for tp in (2, 4):
        run_config = TensorParallelConfig(tp=tp, steps=2, layers_simulated=2)
        singles.append(str(write_trace(tensor_parallel(run_config), tmp_path / f"tp{tp}.sqlite")))
        folder = tmp_path / f"tp{tp}"
        shifts = [r * 1_000_003 for r in range(tp)]  # every rank's clock elsewhere
        write_rank_files(tensor_parallel(run_config), folder, shifts)
        folders.append(str(folder))
    results = []
    for inputs in (singles, folders):
        out = tmp_path / f"cmp{len(results)}.json"
        args = ["compare", *inputs, "--json", str(out), "-o", str(out.with_suffix(".html")), "-q"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        results.append(json.loads(out.read_text()))
    one, per_rank = results
    assert [c["label"] for c in per_rank["configs"]] == ["tp2", "tp4"]
    for a, b in zip(one["configs"], per_rank["configs"], strict=True):
        assert (a["gpus"], a["step_time_ns"], a["speedup"]) == (
            b["gpus"],
            b["step_time_ns"],
            b["speedup"],
        )
    gate = runner.invoke(app, ["gate", folders[1], "--max", "exposed_comm_pct=100"])
    assert gate.exit_code == 0, gate.output
    assert "tp4" in gate.output


def test_the_critical_path_across_files_is_the_one_file_s(run: dict[str, Any]) -> None:
    """Each file walks its part in its worker and the parts are strung together at the
    collectives on the aligned clock: the same path as the walk of the one file with every GPU
    (the straggler rank 2 holds all of it), but the what-ifs, which need every file's nodes."""
    single, multi = run["single"]["critical_path"], run["multi"]["critical_path"]
    for key in ("length_ns", "causes", "items", "waits", "summary", "drill_down", "end_rank"):
        assert multi[key] == single[key], key
    assert [(r["rank"], r["on_path_ns"], r["slack_ns"]) for r in multi["ranks"]] == [
        (r["rank"], r["on_path_ns"], r["slack_ns"]) for r in single["ranks"]
    ]
    assert [r["file"] for r in multi["ranks"]] == [f"rank{r}.sqlite" for r in range(4)]
    assert multi["drill_down"].startswith(f"Rank {STRAGGLER} arrived ")
    assert single["what_if"] and multi["what_if"] == []
