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
    "traceEvents": ("trace event", "trace events"),  # of a PyTorch profiler trace
}
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
