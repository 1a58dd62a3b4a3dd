"""Build the report model from a loaded trace (frozen dataclasses of plain values) and its JSON."""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsysreport.align import FileClock
from nsysreport.errors import TraceError
from nsysreport.model_json import WRITE_AGAIN, Decoder, check_version
from nsysreport.notebook import report_frames, report_html
from nsysreport.ranks import RankInfo
from nsysreport.sections.capture import Capture
from nsysreport.sections.collectives import (
    CollectiveReport,
    StragglerGpu,
    Stragglers,
    stragglers_of,
)
from nsysreport.sections.communicators import (
    CommGroupSpec,
    CommunicatorLayer,
    CommunicatorReport,
    CommunicatorStep,
    RoleSummary,
    role_summaries,
    with_roles,
)
from nsysreport.sections.compute import Compute
from nsysreport.sections.critical_path import CriticalPath
from nsysreport.sections.data_path import (
    DataPathRow,
    NarrowestStage,
    narrowest,
)
from nsysreport.sections.gpu_breakdown import (
    BREAKDOWN_FIELDS,
    GpuReport,
)
from nsysreport.sections.gpu_metrics import GpuMetric, IgnoredGpuMetric
from nsysreport.sections.kernel_layers import KernelLayerTotal
from nsysreport.sections.kernels import KernelSummary
from nsysreport.sections.launches import LaunchStream, launch_sentence
from nsysreport.sections.layers import (
    OUTSIDE,
    LayerAcrossGpus,
    LayerReport,
    across_gpus,
)
from nsysreport.sections.overview import Overview, build_overview
from nsysreport.sections.quality import (
    NO_NOTES,
    DataQuality,
    QualityItem,
    kept_from_note,
)
from nsysreport.sections.steps import StepReport, StepShare, StepStats, step_shares
from nsysreport.sections.timeline import Timeline
from nsysreport.sections.tp_structure import TpStructure
from nsysreport.sections.verdict import Bottleneck

if TYPE_CHECKING:
    import polars as pl

JSON_SCHEMA_VERSION = 2  # 2: the data-quality `ledger`
OLDER_JSON_SCHEMA_VERSIONS = (1,)  # still read: their notes give the same items


@dataclass(frozen=True, slots=True)
class TraceInfo:
    path: str
    nsys_version: str | None
    schema_version: str | None
    host: str | None
    duration_ns: int | None
    simulated: str | None
    product: str | None  # what wrote the trace (EXPORT_PRODUCT_NAME)

    @property
    def is_kineto(self) -> bool:
        """Written by the PyTorch profiler (a JSON trace), not by nsys."""
        return bool(self.product and "kineto" in self.product.lower())

    @property
    def source(self) -> str:
        """`nsys 2026.2.1.210 (export schema 3.25.0)`, or the profiler that wrote a JSON trace."""
        if self.is_kineto:
            return f"{self.product}, trace schema {self.nsys_version or '?'}"
        version = self.nsys_version or "unknown version"
        return f"nsys {version} (export schema {self.schema_version or '?'})"


@dataclass(frozen=True, slots=True)
class Report:
    tool_version: str
    traces: tuple[TraceInfo, ...]
    gpus: tuple[GpuReport, ...]
    steps: tuple[StepReport, ...]
    step_stats: tuple[StepStats, ...]
    layers: tuple[LayerReport, ...]
    layers_across: tuple[LayerAcrossGpus, ...]
    collectives: tuple[CollectiveReport, ...]
    stragglers: Stragglers
    top_kernels: tuple[KernelSummary, ...]
    bottleneck: Bottleneck
    timeline: Timeline | None = None  # one window of every GPU, for the picture
    ranks: tuple[RankInfo, ...] = ()  # several files: every GPU's rank, host and rank source
    clocks: tuple[FileClock, ...] = ()  # several files: how each file's clock was aligned
    capture: Capture | None = None  # what the capture recorded and what it lacks
    quality: DataQuality = NO_NOTES  # rows skipped and rows kept with a caveat, by file
    data_path: tuple[DataPathRow, ...] = ()  # per GPU and stage: bandwidth against its ceiling
    tp_structure: tuple[TpStructure, ...] = ()  # per GPU and op: calls per layer, bytes
    gpu_metrics: tuple[GpuMetric, ...] = ()  # sampled counters per GPU and family; () if none
    gpu_metrics_ignored: tuple[IgnoredGpuMetric, ...] = ()  # counters sampled but not shown
    communicators: tuple[CommunicatorReport, ...] = ()  # per GPU and communicator, with role
    communicator_steps: tuple[CommunicatorStep, ...] = ()  # per GPU, step and communicator
    communicator_layers: tuple[CommunicatorLayer, ...] = ()  # per GPU, layer and communicator
    critical_path: CriticalPath | None = None  # what set the median step's length
    launches: tuple[LaunchStream, ...] = ()  # per GPU stream: how the host fed it
    compute: Compute | None = None  # FLOPs, MFU and roofline of the ops with recorded shapes
    # Per kernel name and layer over all GPUs: what compare's kernel diff and gate's kernel
    # budgets read.
    kernel_layers: tuple[KernelLayerTotal, ...] = ()

    @property
    def roles(self) -> tuple[RoleSummary, ...]:
        """Per communicator role over all GPUs, the costliest first (hidden share, step cost)."""
        spans = {(g.file, g.pid, g.device_id): g.span_ns for g in self.gpus}
        return role_summaries(self.communicators, self.communicator_steps, self.steps, spans)

    @property
    def path_on_timeline(self) -> bool:
        """The timeline draws the critical path's window, so the path is drawn on it."""
        t, p = self.timeline, self.critical_path
        if t is None or p is None:
            return False
        return (t.start_ns, t.start_ns + t.window_ns) == (p.start_ns, p.end_ns)

    @property
    def launch_summary(self) -> str | None:
        """How the host fed the GPUs, in a sentence (sections.launches)."""
        return launch_sentence(self.launches, self.bottleneck.idle_gaps)

    @property
    def median_step_ns(self) -> float | None:
        """The step time: step_time_ns over every step of every GPU, the median; None without
        steps. What the overview, `gate`'s step_time_ns and `compare` call step time."""
        return statistics.median(s.step_time_ns for s in self.steps) if self.steps else None

    @property
    def median_span_ns(self) -> float | None:
        """span_ns over the GPUs, the median: the step time of a trace without steps."""
        return statistics.median(g.span_ns for g in self.gpus) if self.gpus else None

    def step_shares(self, part: str) -> tuple[StepShare, ...]:
        """`part` of the time breakdown ("exposed comm") as % of step time, per GPU over its
        steps (the median step's share, what `gate` judges; not the whole trace's share)."""
        return step_shares(self.steps, part)

    @property
    def narrowest_stage(self) -> NarrowestStage | None:
        """The data-path stage with the most exposed time over all GPUs (None: none is)."""
        return narrowest(self.data_path, sum(g.span_ns for g in self.gpus), self.gpu_metrics)

    @property
    def overview(self) -> Overview:
        """The key numbers, and the numbers the pictures' captions state."""
        return build_overview(self)

    def _repr_html_(self) -> str:
        """Jupyter shows a report as its verdict, key numbers and per-GPU table."""
        return report_html(self)

    def frames(self) -> dict[str, pl.DataFrame]:
        """Each list section (gpus, steps, layers, collectives, stragglers, top_kernels, ...)
        as a polars DataFrame whose columns are the report JSON's keys."""
        return report_frames(as_json(self), [plain(x) for x in self.layers_across])

    @classmethod
    def from_json(cls, data: Any, source: str | Path) -> Report:
        """The report that `as_json` wrote `data` from (a saved `report --json`), every value
        checked; the timeline, which the JSON leaves out, is None. A file of another
        schema_version, or not a complete report, is one TraceError line naming `source`."""
        data = check_version(data, source, JSON_SCHEMA_VERSION, OLDER_JSON_SCHEMA_VERSIONS)
        if not isinstance(data.get("gpus"), list):
            raise TraceError(
                f"{source}: has no GPUs (its 'gpus' is not a list of GPUs); {WRITE_AGAIN}"
            )
        r = Decoder(source)
        fields = {
            name: r.field(data, "", name, hint)
            for name, hint in (
                ("tool_version", str),
                ("traces", tuple[TraceInfo, ...]),
                ("gpus", tuple[GpuReport, ...]),
                ("steps", tuple[StepReport, ...]),
                ("step_stats", tuple[StepStats, ...]),
                ("layers", tuple[LayerReport, ...]),
                ("collectives", tuple[CollectiveReport, ...]),
                ("bottleneck", Bottleneck),
                ("ranks", tuple[RankInfo, ...]),
                ("capture", Capture | None),
                ("data_path", tuple[DataPathRow, ...]),
                ("tp_structure", tuple[TpStructure, ...]),
            )
        }
        kernels = r.field(data, "", "top_kernels", tuple[dict[str, Any], ...]) or ()
        top_kernels = tuple(
            r.instance(KernelSummary, k, f"top_kernels[{i}]", renames={"kernel_class": "class"})
            for i, k in enumerate(kernels)
        )
        s = r.field(data, "", "stragglers", dict[str, Any]) or {}
        matched = r.field(s, "stragglers", "matched", int)
        unmatched = r.field(s, "stragglers", "unmatched", tuple[dict[str, Any], ...])
        straggler_gpus = r.field(s, "stragglers", "gpus", tuple[StragglerGpu, ...])
        alignment = r.field(data, "", "alignment", dict[str, Any] | None)
        clocks = (
            r.field(alignment, "alignment", "files", tuple[FileClock, ...]) if alignment else ()
        )
        rows = r.field(data, "", "skipped", tuple[dict[str, Any], ...]) or ()
        skipped = tuple(
            r.instance(QualityItem, row, f"skipped[{i}]", fixed={"kind": "skipped"})
            for i, row in enumerate(rows)
        )
        notes = r.field(data, "", "data_quality", tuple[str, ...])
        ledger = (
            _ledger(r.field(data, "", "ledger", tuple[dict[str, Any], ...]) or (), r)
            if data["schema_version"] >= 2
            else None
        )
        # Absent from reports written before the GPU metrics, communicators and launches
        # sections: none.
        gpu_metrics: dict[str, Any] = {
            key: r.field(data, "", key, hint) if key in data else ()
            for key, hint in (
                ("gpu_metrics", tuple[GpuMetric, ...]),
                ("gpu_metrics_ignored", tuple[IgnoredGpuMetric, ...]),
                ("communicators", tuple[CommunicatorReport, ...]),
                ("communicator_steps", tuple[CommunicatorStep, ...]),
                ("communicator_layers", tuple[CommunicatorLayer, ...]),
                ("launches", tuple[LaunchStream, ...]),
            )
        }
        path = (
            r.field(data, "", "critical_path", CriticalPath | None)
            if "critical_path" in data
            else None
        )
        compute = r.field(data, "", "compute", Compute | None) if "compute" in data else None
        # Absent from reports written before the kernel diff: none.
        kernel_layers = (
            tuple(
                r.instance(
                    KernelLayerTotal, k, f"kernel_layers[{i}]", renames={"kernel_class": "class"}
                )
                for i, k in enumerate(
                    r.field(data, "", "kernel_layers", tuple[dict[str, Any], ...]) or ()
                )
            )
            if "kernel_layers" in data
            else ()
        )
        r.done()
        traces, layers = fields["traces"], fields["layers"]
        file = Path(traces[0].path).name if len(traces) == 1 else None
        return cls(
            **fields,
            layers_across=tuple(across_gpus(layers)) if layers else (),
            stragglers=replace(stragglers_of(straggler_gpus, unmatched), matched=matched),
            top_kernels=top_kernels,
            clocks=clocks,
            quality=_quality(skipped, notes, file, r) if ledger is None else ledger,
            **gpu_metrics,
            critical_path=path,
            compute=compute,
            kernel_layers=kernel_layers,
        )


def _quality(
    skipped: Sequence[QualityItem], notes: Sequence[str], file: str | None, r: Decoder
) -> DataQuality:
    """The items behind a report JSON's notes: `data_quality` has a note for every item in
    order, `skipped` the skipped ones in full; the others are kept items, read from their note.
    `file`: the file of a one-file report, whose notes do not name it."""
    items: list[QualityItem] = []
    pending = list(skipped)
    for i, note in enumerate(notes):
        if pending and note == (
            pending[0].sentence if file is not None else f"{pending[0].file}: {pending[0].sentence}"
        ):
            items.append(pending.pop(0))
            continue
        kept = kept_from_note(note, file)
        if kept is None:
            r.fail(f"data_quality[{i}] is not a note of a skipped or kept row")
        items.append(kept)
    if pending:
        r.fail(f"skipped has {len(pending)} row(s) that no data_quality note states")
    return DataQuality(tuple(items))


def _ledger(rows: Sequence[dict[str, Any]], r: Decoder) -> DataQuality:
    """The items of a report JSON's `ledger` (schema_version 2), each checked against the
    class and treatment its reason gives."""
    items = []
    for i, row in enumerate(rows):
        fields = {"file": str, "class": str, "table": str, "rows": int, "treatment": str}
        values = {k: r.field(row, f"ledger[{i}]", k, hint) for k, hint in fields.items()}
        reason = r.field(row, f"ledger[{i}]", "reason", str)
        if reason is None or None in values.values():
            continue  # noted by the decoder, raised by its done()
        kind = "skipped" if values["treatment"] == "skipped" else "kept"
        item = QualityItem(values["file"], kind, values["table"], reason, values["rows"])
        if (item.ledger_class, item.treatment) != (values["class"], values["treatment"]):
            r.fail(f"ledger[{i}] has a class or treatment that its reason does not give")
        items.append(item)
    return DataQuality(tuple(items))


def with_comm_groups(report: Report, specs: Sequence[CommGroupSpec]) -> Report:
    """The report with its communicators' roles named again by `specs` (--comm-group for
    `gate` and `compare`, which may read a saved JSON); the verdict's sentence stays."""
    if not specs:
        return report
    comms, steps, layers = with_roles(
        report.communicators,
        report.communicator_steps,
        report.communicator_layers,
        specs,
        has_layers(report.layers),
    )
    return replace(
        report, communicators=comms, communicator_steps=steps, communicator_layers=layers
    )


def has_layers(layers: Sequence[LayerReport]) -> bool:
    """Whether any kernel ran inside a layer range (what the role heuristics need)."""
    return any(x.layer != OUTSIDE for x in layers)


def as_json(report: Report) -> dict[str, Any]:
    """The JSON contract of docs/metrics.md (schema_version 1), plus a few extra keys."""
    return {key: make(report) for key, _, make in JSON_SECTIONS}


def _gpus_json(report: Report) -> list[dict[str, Any]]:
    gpus = []
    for g in report.gpus:
        row = plain(g)
        row.update({f"{part.replace(' ', '_')}_pct": v for part, v in g.shares_pct.items()})
        gpus.append(row)
    return gpus


def _step_stats_json(report: Report) -> list[dict[str, Any]]:
    medians = {part: _median_shares(report, part) for part in BREAKDOWN_FIELDS}
    step_stats = []
    for x in report.step_stats:
        row = plain(x)
        # The median step's share of each part (gate judges it), beside `shares_pct`, the
        # share of all its steps' time together.
        key = (x.file, x.pid, x.device_id)
        row["median_step_shares_pct"] = {part: medians[part].get(key) for part in medians}
        step_stats.append(row)
    return step_stats


def _kernels_json(report: Report) -> list[dict[str, Any]]:
    kernels = []
    for k in report.top_kernels:
        row = plain(k)
        row["class"] = row.pop("kernel_class")
        kernels.append(row)
    return kernels


def _kernel_layers_json(report: Report) -> list[dict[str, Any]]:
    rows = []
    for k in report.kernel_layers:
        row = plain(k)
        row = {"class": row.pop("kernel_class"), **row}
        rows.append(row)
    return rows


def _stragglers_json(report: Report) -> dict[str, Any]:
    s = report.stragglers
    return {"matched": s.matched, "unmatched": list(s.unmatched), "gpus": plain(s.gpus)}


def _skipped_json(report: Report) -> list[dict[str, Any]]:
    # Rows left out ({"file", "source", "reason", "count"}).
    return [{k: v for k, v in plain(i).items() if k != "kind"} for i in report.quality.skipped]


def _rows(field: str) -> Callable[[Report], Any]:
    """A section that is one field's rows, plain."""
    return lambda report: plain(getattr(report, field))


# The JSON's top-level keys in order: each with the Report fields its value is made from (what
# it reads, also through the Report's properties; tests/test_model_json.py proves it against
# reports whose other fields cannot be read) and what makes it. A report made again with other
# display options (cache.cached_report's refresh) keeps the other fields' objects, so the text
# of every key none of whose fields changed is the kept report's (outputs.json_sections).
JSON_SECTIONS: tuple[tuple[str, tuple[str, ...], Callable[[Report], Any]], ...] = (
    ("schema_version", (), lambda report: JSON_SCHEMA_VERSION),
    ("tool_version", ("tool_version",), _rows("tool_version")),
    ("traces", ("traces",), _rows("traces")),
    ("gpus", ("gpus",), _gpus_json),
    ("steps", ("steps",), _rows("steps")),
    ("step_stats", ("step_stats", "steps"), _step_stats_json),
    ("layers", ("layers",), _rows("layers")),
    ("collectives", ("collectives", "communicators"), lambda report: _collective_rows(report)),
    ("stragglers", ("stragglers",), _stragglers_json),
    ("bottleneck", ("bottleneck",), _rows("bottleneck")),
    ("top_kernels", ("top_kernels",), _kernels_json),
    ("ranks", ("ranks",), _rows("ranks")),
    ("alignment", ("clocks",), lambda report: _alignment(report.clocks)),
    ("capture", ("capture",), _rows("capture")),
    ("skipped", ("quality",), _skipped_json),
    # Every note on guesses.
    (
        "data_quality",
        ("quality", "traces"),
        lambda report: list(report.quality.notes(with_file=len(report.traces) > 1)),
    ),
    # The same items as one structure: class, table, rows, treatment (docs/metrics.md).
    ("ledger", ("quality",), lambda report: [i.ledger_row() for i in report.quality.items]),
    ("data_path", ("data_path",), _rows("data_path")),
    (
        "data_path_verdict",
        ("data_path", "gpus", "gpu_metrics"),
        lambda report: plain(report.narrowest_stage),
    ),
    ("tp_structure", ("tp_structure",), _rows("tp_structure")),
    ("gpu_metrics", ("gpu_metrics",), _rows("gpu_metrics")),
    ("gpu_metrics_ignored", ("gpu_metrics_ignored",), _rows("gpu_metrics_ignored")),
    ("communicators", ("communicators",), _rows("communicators")),
    ("communicator_steps", ("communicator_steps",), _rows("communicator_steps")),
    ("communicator_layers", ("communicator_layers",), _rows("communicator_layers")),
    (
        "communicator_roles",
        ("communicators", "communicator_steps", "steps", "gpus"),
        lambda report: plain(report.roles),
    ),
    ("critical_path", ("critical_path",), _rows("critical_path")),
    ("launches", ("launches",), _rows("launches")),
    ("compute", ("compute",), _rows("compute")),
    ("kernel_layers", ("kernel_layers",), lambda report: _kernel_layers_json(report)),
)


def _collective_rows(report: Report) -> list[dict[str, Any]]:
    """The collective rows, each with the communicator that ran its op on its GPU (None when
    several did: the `communicators` rows split them)."""
    carriers: dict[tuple[str, int, int, str], set[str]] = {}
    for c in report.communicators:
        for op in c.ops.split(","):
            carriers.setdefault((c.file, c.pid, c.device_id, op), set()).add(c.communicator)
    rows = []
    for x in report.collectives:
        row = plain(x)
        names = carriers.get((x.file, x.pid, x.device_id, x.op), set())
        row["communicator"] = next(iter(names)) if len(names) == 1 else None
        rows.append(row)
    return rows


def _median_shares(report: Report, part: str) -> dict[tuple[str, int, int], float]:
    return {(s.file, s.pid, s.device_id): s.median_pct for s in report.step_shares(part)}


def plain(value: Any) -> Any:
    """dataclasses.asdict for the model's frozen values, without its deep copies (the model
    holds only numbers, strings and containers of them): 5x faster on 25k step rows."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    names = _field_names(value.__class__)
    if names is None:
        return value
    return {name: plain(getattr(value, name)) for name in names}


@functools.cache
def _field_names(cls: Any) -> tuple[str, ...] | None:
    """A dataclass's field names (cached per class), None for anything else."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _alignment(clocks: tuple[FileClock, ...]) -> dict[str, Any] | None:
    """How the files' clocks were put on one time line; None for a single file."""
    if not clocks:
        return None
    return {
        "reference": clocks[0].file,
        "files": [plain(c) for c in clocks],
    }
