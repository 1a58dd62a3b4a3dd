"""What a report's numbers rest on besides the trace's own values (data_quality query): the rows
the analysis left out, by source and reason, and the rows it counts with a caveat (kernels
without a name, counted as compute; rows that end before they start, counted with no time).
One place lists them; the report, the JSON and the terminal show it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nsysreport.queries import run_query

if TYPE_CHECKING:
    import duckdb

# What one row of a raw table is, for a sentence ("3 kernels skipped: end before start").
ROW_NOUNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("kernel", "kernels"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("memcpy", "memcpys"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("memset", "memsets"),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": ("CUDA graph launch", "CUDA graph launches"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("CUDA API call", "CUDA API calls"),
    "NVTX_EVENTS": ("NVTX event", "NVTX events"),
    "StringIds": ("name string", "name strings"),
    "META_DATA_EXPORT": ("metadata value", "metadata values"),
    "traceEvents": ("trace event", "trace events"),  # of a PyTorch profiler trace
    "op_call": ("operator call", "operator calls"),  # with recorded shapes (the FLOPs' source)
    "TARGET_INFO_GPU": ("listed GPU", "listed GPUs"),  # a profiler trace's deviceProperties too
}
# The ledger's class of each reason (a stable name for tools; the reason is the sentence for
# people) and what was done with the rows (docs/metrics.md, "Data-quality ledger"). The
# reasons are the loaders' and unusable_row.sql's; one this table does not know is class
# `other`, never an error.
LEDGER_CLASSES = {
    "no start time": "missing_start",
    "no end time": "missing_end",
    "no device id": "missing_device",
    "no process id": "missing_process",
    "no stream id": "missing_stream",
    "negative time": "negative_time",
    "device id out of range": "bad_device",
    "device not in the trace": "unlisted_device",
    "process not in the trace": "unlisted_process",
    "not a process id": "bad_process",
    "time outside the capture": "outside_capture",
    "duplicate row": "duplicate_row",
    "complete event (ph X) with no cat": "missing_category",
    "GPU event that is not a complete event (ph X)": "missing_duration",
    "no name: counted as compute": "missing_name",
    "end before start: counted, with no time": "end_before_start",
    "no correlation id: counted, with no launch": "missing_correlation",
    "a stream that is not a number: the event's tid as its stream": "defaulted_stream",
    "a device that is not a number: the event's pid as its device": "defaulted_device",
    "text that is not JSON: ignored": "unparsed_metadata",
    "payload that does not fit its schema: ignored": "unparsed_metadata",
    "a device the GPU list does not hold: counted, with no GPU properties": "unmatched_device",
    "a wait for a late-starting rank: left out of the times": "late_start",
    "an end before a late-starting rank arrived: left out of the times": "late_start",
    "a duration that cannot be (past the next kernel on its stream): counted once": (
        "impossible_duration"
    ),
}
_UNTYPED = re.compile(r"\S+ is not an integer")  # load_skipped: a value SQLite holds as text
# A kernel family whose achieved FLOP/s are above its roofline (sections/compute.py).
ABOVE_ROOF = "FLOP/s above the roofline of kernel family {}: counted as the shapes give"
_ABOVE_ROOF = re.compile(re.escape(ABOVE_ROOF).replace(re.escape("{}"), ".+"))
# gpu_list_match: a GPU list that numbers the GPUs otherwise than the rows (its ids in the text)
_RENUMBERED = re.compile(r"another id than its activities carry \(.*\): renumbered to theirs")
# What a kept row's caveat says was done with it; a skipped row is left out.
_KEPT_TREATMENT = re.compile(r".*: (?P<treatment>[^:]+)")


# A kept item's note (QualityItem.sentence, after `FILE: ` in a report over several files).
_KEPT_NOTE = re.compile(r"(?P<count>\d[\d,]*) (?P<noun>.+?) with (?P<reason>.+)")
_KEPT_NOTE_OF_FILE = re.compile(r"(?P<file>.+?): " + _KEPT_NOTE.pattern)
_SOURCES = {noun: source for source, nouns in ROW_NOUNS.items() for noun in nouns}


@dataclass(frozen=True, slots=True)
class QualityItem:
    """`count` rows of `source` (a raw table) in `file` that were skipped, or kept with a caveat
    (a guessed class, no time), and why."""

    file: str
    kind: str  # skipped or kept
    source: str
    reason: str
    count: int

    @property
    def ledger_class(self) -> str:
        """The reason's stable name: `missing_stream`, `outside_capture`, `untyped_value`..."""
        if _UNTYPED.fullmatch(self.reason):
            return "untyped_value"
        if _ABOVE_ROOF.fullmatch(self.reason):
            return "above_roof"
        if _RENUMBERED.fullmatch(self.reason):
            return "renumbered_device"
        return LEDGER_CLASSES.get(self.reason, "other")

    @property
    def treatment(self) -> str:
        """What was done with the rows: `skipped`, `counted, with no time`, `counted as
        compute`, `ignored`."""
        if self.kind == "skipped":
            return "skipped"
        match = _KEPT_TREATMENT.fullmatch(self.reason)
        return match["treatment"].strip() if match else "kept"

    def ledger_row(self) -> dict[str, str | int]:
        """The item as the JSON's `ledger` writes it."""
        return {
            "file": self.file,
            "class": self.ledger_class,
            "table": self.source,
            "rows": self.count,
            "treatment": self.treatment,
            "reason": self.reason,
        }

    @property
    def sentence(self) -> str:
        """`3 kernels skipped: no start time`, `2 kernels with no name: counted as compute`."""
        one, many = ROW_NOUNS.get(self.source, (f"row of {self.source}", f"rows of {self.source}"))
        noun = one if self.count == 1 else many
        how = "skipped:" if self.kind == "skipped" else "with"
        return f"{self.count:,} {noun} {how} {self.reason}"


@dataclass(frozen=True, slots=True)
class DataQuality:
    items: tuple[QualityItem, ...] = ()

    @property
    def skipped(self) -> tuple[QualityItem, ...]:
        return tuple(i for i in self.items if i.kind == "skipped")

    def notes(self, with_file: bool = False) -> tuple[str, ...]:
        """One sentence per item; `with_file` names the file (a report over several files)."""
        return tuple(f"{i.file}: {i.sentence}" if with_file else i.sentence for i in self.items)

    @property
    def dropped_rows(self) -> int:
        """Rows left out of the numbers (skipped); kept rows with a caveat are not counted."""
        return sum(i.count for i in self.items if i.kind == "skipped")

    @property
    def changed_rows(self) -> int:
        """Rows left out or kept with a caveat: every row the numbers do not take as written."""
        return sum(i.count for i in self.items)


NO_NOTES = DataQuality()


def build_quality(con: duckdb.DuckDBPyConnection, file: str) -> DataQuality:
    return DataQuality(
        tuple(QualityItem(file=file, **r) for r in run_query(con, "data_quality").to_dicts())
    )


def merge_quality(parts: Iterable[tuple[str, DataQuality]]) -> DataQuality:
    """Several files' notes, each with its file's name: counts are never added across files."""
    return DataQuality(tuple(replace(i, file=name) for name, q in parts for i in q.items))


def kept_from_note(note: str, file: str | None) -> QualityItem | None:
    """The kept item (kind "kept") whose note is `note`, or None when `note` is not one: the
    report JSON lists kept items only as notes. `file`: the file of a one-file report, whose
    notes do not name it; None for a report over several files."""
    match = (_KEPT_NOTE if file is not None else _KEPT_NOTE_OF_FILE).fullmatch(note)
    if match is None:
        return None
    noun = match["noun"]
    source = _SOURCES.get(noun) or noun.removeprefix("rows of ").removeprefix("row of ")
    item = QualityItem(
        file=file if file is not None else match["file"],
        kind="kept",
        source=source,
        reason=match["reason"],
        count=int(match["count"].replace(",", "")),
    )
    # Only a note that the item writes again, to the letter, is that item.
    written = item.sentence if file is not None else f"{item.file}: {item.sentence}"
    return item if written == note else None
