"""Put several files' clocks on one time line: coarse from the session start, refined from the
collectives themselves.

Each nsys file has its own clock. `TARGET_INFO_SESSION_START_TIME` ties it to UTC, but through
NTP, with errors of milliseconds: as large as the skew between ranks we want to measure. A
collective, though, ends at (nearly) the same instant on every rank: whoever arrives last, all
leave together. So the k-th instance of an op ends together in every file, and the median over
matched instances of (reference end - this file's end) is the file's offset, robust to the odd
instance that does not end together. The reference is the file that holds rank 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # polars is imported in the functions that use it: 0.1 s of start-up (python -X
    # importtime) that a report of one file never needs.
    import polars as pl

# Collectives refine a clock only when they end together once aligned: the median instance
# within this much of the offset. NCCL's ranks leave a collective within microseconds; events
# that only share an op name and a position (a sampled trace, ranks in different groups) miss
# by milliseconds, and the session start is then the better estimate.
AGREES_NS = 100_000


@dataclass(frozen=True, slots=True)
class FileClock:
    """How one file's times map onto the report's time line: aligned = file time + offset_ns."""

    file: str
    offset_ns: int
    coarse_offset_ns: int | None  # from the session start; None when a file does not say
    source: str  # reference | collectives | session start | raw clock
    instances: int  # collective instances the refinement used
    residual_p50_ns: int | None  # |end difference - offset| over those instances: median
    residual_max_ns: int | None  # ... and largest


def session_epoch(utc_epoch_ns: int | None, system_clock_ns: int | None) -> int | None:
    """UTC of the file's time 0: utcEpochNs + (t - anchor) with t = 0 (docs/export-format.md).

    The anchor is systemClockNs (nsys 2026+: the session clock when utcEpochNs was read), else
    0, the convention community tools use for older exports.
    """
    if utc_epoch_ns is None:
        return None
    return utc_epoch_ns - (system_clock_ns or 0)


def align_files(
    files: Sequence[str],
    epochs: Sequence[int | None],
    instances: Sequence[pl.DataFrame],
    refine: bool = True,
) -> tuple[FileClock, ...]:
    """Each file's clock offset against files[0], the reference.

    `instances` holds, per file, its collective instances: op, ordinal, pid, device_id, end_ns.
    Without `refine` (--no-align) every file keeps its raw clock.
    """
    ref_epoch = epochs[0]
    clocks = [
        FileClock(files[0], 0, 0 if ref_epoch is not None else None, "reference", 0, None, None)
    ]
    matched = _matched_ops(instances) if refine else None
    # One file's instance ends at a time: every file's at once would hold all of them.
    ref_ends = _file_ends(instances[0], matched) if matched is not None else None
    for i in range(1, len(files)):
        epoch = epochs[i]
        coarse = None if ref_epoch is None or epoch is None else epoch - ref_epoch
        if not refine:
            clocks.append(FileClock(files[i], 0, coarse, "raw clock (--no-align)", 0, None, None))
            continue
        diffs = None
        if matched is not None and ref_ends is not None:
            diffs = _end_differences(ref_ends, _file_ends(instances[i], matched))
        if diffs is not None:
            offset = round(float(diffs.median()))  # type: ignore[arg-type]
            p50, worst = _residual(diffs, offset)
            if p50 <= AGREES_NS:
                clocks.append(
                    FileClock(files[i], offset, coarse, "collectives", len(diffs), p50, worst)
                )
                continue
        # Not refined; the residual still says how far the collectives miss on this clock.
        fallback = coarse if coarse is not None else 0
        source = "session start" if coarse is not None else "raw clock"
        p50_, worst_ = _residual(diffs, fallback) if diffs is not None else (None, None)
        used = 0 if diffs is None else len(diffs)
        clocks.append(FileClock(files[i], fallback, coarse, source, used, p50_, worst_))
    return tuple(clocks)


def _matched_ops(instances: Sequence[pl.DataFrame]) -> pl.DataFrame | None:
    """The ops that match across every GPU of every file: ops that all GPUs running them ran
    equally often (a frame of one column, op); None when no file has an instance."""
    import polars as pl

    if not instances or all(df.is_empty() for df in instances):
        return None
    counts = pl.concat([df.group_by("pid", "device_id", "op").agg(n=pl.len()) for df in instances])
    return (
        counts.group_by("op")
        .agg(gpus=pl.len(), lo=pl.col("n").min(), hi=pl.col("n").max())
        .filter((pl.col("gpus") > 1) & (pl.col("lo") == pl.col("hi")))
        .select("op")
    )


def _file_ends(instances: pl.DataFrame, matched: pl.DataFrame) -> pl.DataFrame:
    """op, ordinal, end_ns (median over the file's GPUs) of one file's matched instances."""
    import polars as pl

    return (
        instances.join(matched, on="op")
        .group_by("op", "ordinal")
        .agg(end_ns=pl.col("end_ns").median())
    )


def _end_differences(ref: pl.DataFrame, mine: pl.DataFrame) -> pl.Series | None:
    """Reference end minus this file's end, per instance both files ran; None when none."""
    import polars as pl

    joined = mine.join(ref.select("op", "ordinal", ref_end=pl.col("end_ns")), on=("op", "ordinal"))
    if joined.is_empty():
        return None
    return joined.select(d=pl.col("ref_end") - pl.col("end_ns"))["d"]


def _residual(diffs: pl.Series, offset: int) -> tuple[int, int]:
    """Median and largest |difference - offset|: how far instances miss once aligned."""
    residual = (diffs - offset).abs()
    return round(float(residual.median())), round(float(residual.max()))  # type: ignore[arg-type]
