"""PyTorch profiler (Kineto) JSON traces load into the raw tables and report like nsys exports."""

from __future__ import annotations

import gzip
import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nsysreport.cli import app
from nsysreport.errors import TraceError
from nsysreport.load import open_trace
from nsysreport.queries import run_query

from conftest import SHARED_TRACES

KINETO = SHARED_TRACES / "kineto"
KINETO_FILES = (
    "a100_ddp_rank0_nccl_data",
    "v100_ddp_rank1",
    "mi300_rccl_rank0",
    "recsys128_sampled_rank-0",
    "recsys128_sampled_rank-1",
)

# PROVENANCE.md's reference numbers (µs): comm sum, compute union, exposed comm, busy, span.
# Its busy is the union of kernels, memcpys and memsets, as gpu_breakdown's busy_ns is.
REFERENCE = {
    "a100_ddp_rank0_nccl_data": (46876.492, 115655.843, 39559.466, 157500.078, 660551.006),
    "v100_ddp_rank1": (357343, 620516, 357343, 1000613, 1732965),
}


def kineto(name: str) -> Path:
    path = KINETO / f"{name}.json.gz"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the tests need ../shared/traces beside the checkout")
    return path


def _ns(us: Decimal | int) -> int:
    return int((Decimal(us) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def independent_breakdown(path: Path) -> dict[str, int]:
    """gpu_breakdown's numbers from the JSON with exact decimals, sharing no code with it."""
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]

    def spans(cats: tuple[str, ...], nccl: bool | None = None) -> list[tuple[int, int]]:
        return [
            (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
            for e in events
            if e.get("cat") in cats and (nccl is None or ("nccl" in e["name"].lower()) == nccl)
        ]

    comm, compute = spans(("kernel",), True), spans(("kernel",), False)
    everything = spans(("kernel", "gpu_memcpy", "gpu_memset"))
    return {
        "comm_sum_ns": sum(e - s for s, e in comm if e > s),
        "compute_ns": _union(compute),
        "exposed_comm_ns": _union(comm + compute) - _union(compute),
        "busy_ns": _union(everything),
        "span_ns": max(e for _, e in everything) - min(s for s, _ in everything),
        "kernel_busy_ns": _union(comm + compute),
    }


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_breakdown_matches_the_reference_numbers(name: str) -> None:
    path = kineto(name)
    (row,) = run_query(open_trace(path), "gpu_breakdown").to_dicts()
    exact = independent_breakdown(path)
    keys = ("comm_sum_ns", "compute_ns", "exposed_comm_ns", "busy_ns", "span_ns")
    assert {k: row[k] for k in keys} == {k: exact[k] for k in keys}
    # PROVENANCE computed in floating point: a few ns of drift on a100's ns-precision floats.
    for key, reference_us in zip(keys, REFERENCE[name], strict=True):
        assert row[key] == pytest.approx(reference_us * 1000, abs=100), key
    assert row["kernel_count"] + 0 == (2700 if name.startswith("a100") else 19370)


def test_the_list_covers_every_shared_kineto_trace() -> None:
    on_disk = {p.name.removesuffix(".json.gz") for p in KINETO.glob("*.json*")}
    assert on_disk == set(KINETO_FILES)


@pytest.mark.parametrize("name", KINETO_FILES)
def test_every_kineto_trace_writes_a_full_report(name: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "report",
            str(kineto(name)),
            "-o",
            str(tmp_path / "r.html"),
            "--json",
            str(tmp_path / "m.json"),
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert len(metrics["gpus"]) == 1
    assert (tmp_path / "r.html").stat().st_size > 0


def test_the_rocm_trace_loads() -> None:
    con = open_trace(kineto("mi300_rccl_rank0"))
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert (row["device_id"], row["kernel_count"], row["comm_kernel_count"]) == (2, 2995, 17)
    assert con.sql("SELECT gpu_name FROM gpu").fetchall() == [("AMD Instinct MI300X",)]
    # Kernels join their hipLaunchKernel call; the trace itself has no API event with the
    # correlation id of 757 of its kernels (checked with Python's json), so those stay unlaunched.
    unlaunched = con.sql(
        "SELECT count(*) FROM kernel AS k ANTI JOIN launch AS l "
        "ON l.global_pid = k.global_pid AND l.correlation_id = k.correlation_id"
    ).fetchone()
    assert unlaunched == (757,)


def test_profiler_steps_become_steps() -> None:
    con = open_trace(kineto("v100_ddp_rank1"))
    steps = con.sql("SELECT name FROM step_window ORDER BY step_ordinal").fetchall()
    assert len(steps) == 5
    assert all(name.startswith("ProfilerStep#") for (name,) in steps)
    assert con.sql("SELECT rank, gpu_name FROM gpu").fetchall() == [(1, "Tesla V100-SXM2-32GB")]


@pytest.mark.parametrize(("rank", "kernels"), [(0, 1154), (1, 1104)])
def test_each_recsys_rank_loads(rank: int, kernels: int) -> None:
    con = open_trace(kineto(f"recsys128_sampled_rank-{rank}"))
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert (row["device_id"], row["kernel_count"]) == (rank, kernels)
    assert con.sql("SELECT rank FROM gpu").fetchall() == [(rank,)]
    assert con.sql("SELECT count(*) FROM step_window").fetchone() == (2,)


def test_nccl_collective_metadata_gives_message_bytes() -> None:
    con = open_trace(kineto("a100_ddp_rank0_nccl_data"))
    rows = con.sql("SELECT op, message_bytes FROM collective ORDER BY start_ns").fetchall()
    assert len(rows) == 21
    assert {op for op, _ in rows} == {"AllReduce", "Broadcast"}
    assert all(size is not None for _, size in rows)
    assert ("AllReduce", 6637568 * 4) in rows  # In msg nelems x Float


def _write(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path


def _kernel(ts: Any, dur: Any, name: str = "gemm_kernel", **args: Any) -> dict[str, Any]:
    args = {"device": 0, "stream": 7, "correlation": 11, **args}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def test_microsecond_floats_become_exact_nanoseconds(tmp_path: Path) -> None:
    # Written as literal text: json.dumps would keep these digits too, but be explicit.
    text = (
        '{"schemaVersion": 1, "distributedInfo": {"rank": 3}, "traceEvents": ['
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42, "tid": 43,'
        ' "ts": 1234567.5, "dur": 0.2, "args": {"correlation": 11}},'
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1234567.891,'
        ' "dur": 0.001, "args": {"device": 0, "stream": 7, "correlation": 11}},'
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 4458676983543.183,'
        ' "dur": 41.407, "args": {"device": 0, "stream": 7, "correlation": 12}},'
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1669783687464181,'
        ' "dur": 3, "args": {"device": 0, "stream": 7, "correlation": 13}},'
        '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0,'
        ' "tid": 7, "ts": 10.0004, "dur": 0.0006, "args": {"device": 0, "stream": 7,'
        ' "correlation": 14, "bytes": 64}}'
        "]}"
    )
    path = tmp_path / "tiny.json"
    path.write_text(text)
    con = open_trace(path)
    kernels = con.sql('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start')
    assert kernels.fetchall() == [
        (1234567891, 1234567892),
        (4458676983543183, 4458676983584590),
        (1669783687464181000, 1669783687464184000),
    ]
    # The raw rows: the analysis leaves the ones far from the host's calls out of the capture.
    memcpy = con.sql('SELECT start, "end", bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY')
    assert memcpy.fetchall() == [(10000, 10001, 64, 1)]  # 1: host to device
    launched = con.sql(
        "SELECT l.pid, l.tid, l.start_ns, l.end_ns FROM kernel AS k JOIN launch AS l "
        "ON l.global_pid = k.global_pid AND l.correlation_id = k.correlation_id"
    ).fetchall()
    assert launched == [(42, 43, 1234567500, 1234567700)]
    assert con.sql("SELECT pid, rank FROM gpu").fetchall() == [(42, 3)]


def test_the_cache_reads_kineto_traces_too(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", [_kernel(1.5, 2)])
    for _ in range(2):  # build, then reuse
        con = open_trace(path, cache=True)
        assert con.sql("SELECT start_ns, end_ns FROM kernel").fetchall() == [(1500, 3500)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x1f\x8b\x08\x00 gzip", "is not a readable PyTorch profiler trace"),
        (b'{"traceEvents": [', "is not a readable PyTorch profiler trace"),
        (b'{"foo": 1}', "is not a PyTorch profiler (Kineto) trace"),
        (b"[1, 2]", "is not a readable PyTorch profiler trace"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1,'
            b' "ts": 1, "dur": 1}]}',
            "contains no GPU activity",
        ),
    ],
)
def test_bad_json_is_one_line_trace_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / ("t.json.gz" if content.startswith(b"\x1f\x8b") else "t.json")
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        open_trace(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_a_multi_member_gzip_is_read_whole(tmp_path: Path) -> None:
    """gzip's size footer is the last member's: a 54 MB document split in two members must not
    be sized by its 27 MB tail (DuckDB refuses documents past maximum_object_size)."""
    data = gzip.decompress(kineto("v100_ddp_rank1").read_bytes())
    split = tmp_path / "v100_two_members.json.gz"
    split.write_bytes(gzip.compress(data[: len(data) // 2]) + gzip.compress(data[len(data) // 2 :]))
    count = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    whole = open_trace(kineto("v100_ddp_rank1")).execute(count).fetchone()
    assert open_trace(split).execute(count).fetchone() == whole


@pytest.mark.parametrize("cut", [1, 4, 8])  # of the 8-byte trailer (CRC-32, then size)
def test_a_gzip_cut_in_its_trailer_is_refused_though_its_data_is_whole(
    tmp_path: Path, cut: int
) -> None:
    whole = gzip.compress(_write(tmp_path / "t.json", [_kernel(1, 2)]).read_bytes(), mtime=0)
    path = tmp_path / "t.json.gz"
    path.write_bytes(whole[:-cut])  # a copy that stopped short: nothing checks its CRC
    with pytest.raises(TraceError) as err:
        open_trace(path)
    assert str(err.value).startswith(f"{path}: is not a readable PyTorch profiler trace (gzip: ")


def test_kernels_without_ts_or_dur_are_counted_as_skipped_not_dropped(tmp_path: Path) -> None:
    # Kernels [1000, 3000) and [5000, 6000) ns are usable; one lacks ts, one lacks dur.
    events = [_kernel(1, 2), _kernel(5, 1), _kernel(None, 2), _kernel(8, None)]
    events = [{k: v for k, v in e.items() if v is not None} for e in events]  # keys left out
    con = open_trace(_write(tmp_path / "t.json", events))
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert row["kernel_count"] == 2 and row["busy_ns"] == 3000 and row["span_ns"] == 5000
    assert con.sql("SELECT * FROM skipped_row").fetchall() == [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "no end time", 1),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "no start time", 1),
    ]


def test_a_kernel_without_a_name_keeps_its_time_under_a_placeholder(tmp_path: Path) -> None:
    unnamed = _kernel(4, 1)
    del unnamed["name"]
    con = open_trace(_write(tmp_path / "t.json", [_kernel(1, 2), unnamed]))
    rows = con.sql("SELECT name, class, unnamed, duration_ns FROM kernel ORDER BY start_ns")
    assert rows.fetchall() == [
        ("gemm_kernel", "gemm", False, 2000),
        ("<unnamed kernel>", "other", True, 1000),
    ]
    notes = run_query(con, "data_quality").to_dicts()
    assert notes == [
        {
            "kind": "kept",
            "source": "CUPTI_ACTIVITY_KIND_KERNEL",
            "reason": "no name: counted as compute",
            "count": 1,
        }
    ]


@pytest.mark.parametrize("name", [-1, True, [1], {"a": 1}])
def test_a_name_that_is_not_a_string_is_no_name(tmp_path: Path, name: Any) -> None:
    odd = {**_kernel(4, 1), "name": name}  # read as text, "-1" would be a kernel named -1
    con = open_trace(_write(tmp_path / "t.json", [_kernel(1, 2), odd]))
    rows = con.sql("SELECT name, class, unnamed FROM kernel ORDER BY start_ns").fetchall()
    assert rows == [("gemm_kernel", "gemm", False), ("<unnamed kernel>", "other", True)]


def test_gpu_events_without_a_category_or_not_complete_are_counted_as_skipped(
    tmp_path: Path,
) -> None:
    # The kernel [1000, 3000) ns is usable; [5000, 6000) has no cat, [8000, 9000) no ph.
    no_cat, no_ph = _kernel(5, 1), _kernel(8, 1)
    del no_cat["cat"], no_ph["ph"]
    con = open_trace(_write(tmp_path / "t.json", [_kernel(1, 2), no_cat, no_ph]))
    (row,) = run_query(con, "gpu_breakdown").to_dicts()
    assert row["kernel_count"] == 1 and row["busy_ns"] == 2000
    assert con.sql("SELECT * FROM skipped_row").fetchall() == [
        ("traceEvents", "GPU event that is not a complete event (ph X)", 1),
        ("traceEvents", "complete event (ph X) with no cat", 1),
    ]


def test_a_name_that_is_not_utf8_loads_with_a_replacement_character(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [_kernel(1, 2, name="gemm_@")]}).encode()
    path = tmp_path / "t.json"
    path.write_bytes(text.replace(b"@", b"\xff\xfe"))
    con = open_trace(path)
    assert con.sql("SELECT name, class FROM kernel").fetchall() == [("gemm_\ufffd\ufffd", "gemm")]


def test_every_id_is_the_event_s_place_in_trace_events(tmp_path: Path) -> None:
    # As an nsys file's rowids: ids that break ties never change between loads. An NCCL range
    # made from a kernel's metadata is no event: it is numbered after them all.
    def runtime(ts: int, correlation: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0,
                "tid": 7, "ts": ts, "dur": 1, "args": {"correlation": correlation}}  # fmt: skip

    nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    meta = {"Collective name": "allreduce", "In msg nelems": 8, "dtype": "BFloat16"}
    layer = {"ph": "X", "cat": "user_annotation", "name": "model.layers.0", "pid": 0, "tid": 7,
             "ts": 0, "dur": 50}  # fmt: skip
    events = [
        layer,
        runtime(2, 11),
        _kernel(10, 5, correlation=11),
        runtime(20, 12),
        _kernel(30, 5, nccl, correlation=12, **meta),
    ]
    con = open_trace(_write(tmp_path / "t.json", events))
    kernels = con.sql("SELECT kernel_id, start_ns FROM kernel ORDER BY kernel_id").fetchall()
    assert kernels == [(3, 10_000), (5, 30_000)]
    launches = con.sql("SELECT launch_id, start_ns FROM launch ORDER BY launch_id").fetchall()
    assert launches == [(2, 2_000), (4, 20_000)]
    ranges = con.sql("SELECT range_id, name FROM nvtx_range ORDER BY range_id").fetchall()
    assert ranges == [(1, "model.layers.0"), (6, "ncclAllReduce")]
