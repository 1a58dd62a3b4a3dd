"""How well the compute itself ran: FLOPs from the operators' recorded shapes (nsysreport.flops,
queries/report/compute_op.sql and compute_step.sql), achieved TFLOP/s against each GPU's dense
peak (nsysreport.peaks), model FLOPs utilisation (MFU) per kernel family, layer, step and over
the span, and where each family sits on the roofline (compute- or memory-bound)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from nsysreport.ceilings import model_of
from nsysreport.flops import ELEMENT_BYTES, OpWork, math_dtype, op_work
from nsysreport.kernel_family import family_of
from nsysreport.peaks import peak
from nsysreport.queries import run_query
from nsysreport.sections.layers import OUTSIDE, LayerReport
from nsysreport.sections.quality import ABOVE_ROOF, DataQuality, QualityItem
from nsysreport.sections.tp_structure import TpStructure
from nsysreport.units import fmt_pct
from nsysreport.user_facts import ModelShape

if TYPE_CHECKING:
    import duckdb

GpuKey = tuple[str, int, int]  # (file, pid, device_id)

SOURCES = {
    "profiler": "shapes recorded by the PyTorch profiler",
    "nvtx": "shapes recorded by emit_nvtx",
}


@dataclass(frozen=True, slots=True)
class ComputeFamily:
    """One kernel family's calls: what they did and how fast, against the peak of their dtype."""

    family: str
    kernel_class: str  # gemm, attention or other
    ops: str  # the operators whose calls it ran, e.g. "aten::addmm, aten::mm"
    dtype: str | None  # the dtype whose peak it is measured against
    calls: int
    gpus: int
    time_ns: int  # summed kernel time of the calls
    flops: float
    tflops: float | None  # achieved: flops / time
    peak_tflops: float | None  # the dense peak (time-weighted over GPUs of different models)
    peak_source: str
    mfu_pct: float | None  # achieved as % of peak
    intensity: float | None  # FLOPs per byte moved at least (flops.OpWork.elements)
    ridge: float | None  # FLOPs per byte where the roofline bends: peak / HBM bandwidth
    bound: str  # compute, memory or unknown
    source: str  # where the FLOPs came from
    note: str  # what the count assumes ('' when nothing)

    @property
    def roof_tflops(self) -> float | None:
        """The roofline at the family's intensity: the peak right of the ridge, intensity x
        HBM bandwidth (peak x intensity / ridge) left of it; the peak alone without a
        bandwidth; None without a peak."""
        if self.peak_tflops is None:
            return None
        if self.intensity is None or not self.ridge:
            return self.peak_tflops
        return self.peak_tflops * min(1.0, self.intensity / self.ridge)

    @property
    def above_roof(self) -> bool:
        """Whether the family ran faster than its roofline allows: FLOPs counted on kernels
        that did not do them, or a peak or bandwidth too low (a data-quality line)."""
        roof = self.roof_tflops
        return roof is not None and self.tflops is not None and self.tflops > roof * (1 + 1e-9)


@dataclass(frozen=True, slots=True)
class ComputeLayer:
    layer: str
    calls: int
    time_ns: int
    flops: float
    tflops: float | None
    mfu_pct: float | None  # against the peak of the dtype with the most FLOPs


@dataclass(frozen=True, slots=True)
class ComputeStep:
    ordinal: int  # the k-th step of each GPU
    gpus: int
    flops: float  # summed over GPUs
    step_time_ns: int  # summed over GPUs
    mfu_pct: float | None  # flops / (step time x peak), over the GPUs


@dataclass(frozen=True, slots=True)
class Compute:
    """The Compute efficiency section. Only operators with recorded shapes count: kernels of
    other operators do FLOPs no trace records, so every MFU here is a lower bound and
    `covered_pct` says how much of the GEMM and attention time it stands on."""

    dtype: str | None  # the dtype with the most FLOPs: what step and span MFU are against
    peak_tflops: float | None  # its peak on the first GPU
    peak_source: str
    gpu_model: str | None
    calls: int  # calls with FLOPs
    unknown_calls: int  # calls of known operators whose shapes gave no FLOPs
    flops: float
    time_ns: int
    covered_pct: float | None  # their kernel time, % of all GEMM and attention kernel time
    step_mfu_pct: float | None  # median over steps
    span_mfu_pct: float | None  # every FLOP over every GPU's span
    families: tuple[ComputeFamily, ...]
    layers: tuple[ComputeLayer, ...]
    steps: tuple[ComputeStep, ...]
    # shapes: the operators' recorded shapes; model: --model's analytic FLOPs per layer
    flops_source: str = "shapes"

    @property
    def sentence(self) -> str | None:
        return compute_sentence(self)


@cache
def _work(op: str, dims: str, types: str | None, concrete: str | None) -> OpWork | None:
    return op_work(op, dims, types, concrete)


@dataclass(slots=True)
class _Sum:
    calls: int = 0
    time_ns: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    bytes_known: bool = True
    peak_time: float = 0.0  # Σ time x peak (TFLOP/s x ns): the FLOPs the peak would do / 1e3
    peak_known: bool = True

    def add(
        self,
        calls: int,
        time_ns: int,
        flops: float,
        nbytes: float | None,
        peak_tflops: float | None,
    ) -> None:
        self.calls += calls
        self.time_ns += time_ns
        self.flops += flops
        self.bytes += nbytes or 0.0
        self.bytes_known &= nbytes is not None
        self.peak_time += time_ns * (peak_tflops or 0.0)
        self.peak_known &= peak_tflops is not None

    @property
    def tflops(self) -> float | None:
        return self.flops / self.time_ns / 1e3 if self.time_ns else None

    @property
    def mfu_pct(self) -> float | None:
        if not self.peak_known or not self.peak_time:
            return None
        return 100 * self.flops / (self.peak_time * 1e3)

    @property
    def peak_tflops(self) -> float | None:
        return self.peak_time / self.time_ns if self.peak_known and self.time_ns else None


def build_compute(
    op_rows: Iterable[dict[str, Any]],
    step_rows: Iterable[dict[str, Any]],
    gpu_names: Mapping[GpuKey, str | None],
    step_times: Mapping[tuple[GpuKey, int], int],
    spans: Mapping[GpuKey, int],
    matrix_ns: int,
    user_peaks: Mapping[str, float],
    user_hbm_gbps: float | None,
) -> Compute | None:
    """The section from compute_op's and compute_step's rows (each with its `file`); None when
    no kernel ran inside an operator with recorded shapes. `step_times`: each GPU's step time
    by step ordinal; `matrix_ns`: all GEMM and attention kernel time (summed durations)."""
    families: dict[str, _Sum] = defaultdict(_Sum)
    family_info: dict[str, dict[str, Any]] = {}
    layers: dict[str, _Sum] = defaultdict(_Sum)
    by_dtype: dict[str | None, float] = defaultdict(float)
    unknown_calls = 0
    rows = []
    for r in op_rows:
        key = (r["file"], r["pid"], r["device_id"])
        work = _work(r["op"], r["dims"], r["types"], r["concrete"])
        if work is None:
            unknown_calls += r["calls"]
            continue
        dtype, named = math_dtype(work.dtype, r["kernel"])
        rows.append((r, key, work, dtype, named))
        by_dtype[dtype] += work.flops * r["calls"]
    if not rows:
        return None
    main = max(by_dtype, key=lambda d: (d is not None, by_dtype[d]))
    for r, key, work, dtype, named in rows:
        gpu = gpu_names.get(key)
        row_peak = peak(gpu, dtype, user_peaks).tflops
        size = ELEMENT_BYTES.get(dtype) if dtype else None
        nbytes = work.elements * size * r["calls"] if size else None
        family = family_of(r["kernel"])
        families[family].add(r["calls"], r["time_ns"], work.flops * r["calls"], nbytes, row_peak)
        info = family_info.setdefault(
            family,
            {
                "class": r["class"],
                "ops": set(),
                "dtypes": set(),
                "gpus": set(),
                "sources": set(),
                "notes": set(),
                "gpu": gpu,
                "named": False,
            },
        )
        info["ops"].add(r["op"])
        info["dtypes"].add(dtype)
        info["gpus"].add(key)
        info["sources"].add(SOURCES.get(r["source"], r["source"]))
        info["named"] |= named
        if work.note:
            info["notes"].add(work.note)
        layer = r["layer"] or OUTSIDE
        layers[layer].add(
            r["calls"],
            r["time_ns"],
            work.flops * r["calls"],
            None,
            peak(gpu, main, user_peaks).tflops,
        )
    out_families = tuple(
        sorted(
            (
                _family(name, s, family_info[name], user_peaks, user_hbm_gbps)
                for name, s in families.items()
            ),
            key=lambda f: (-f.time_ns, f.family),
        )
    )
    steps = _steps(step_rows, gpu_names, step_times, main, user_peaks)
    total = _Sum()
    for s in families.values():
        total.calls += s.calls
        total.time_ns += s.time_ns
        total.flops += s.flops
    first_gpu = next(iter(gpu_names.values()), None)
    p = peak(first_gpu, main, user_peaks)
    span_peak = [
        (spans[k], peak(gpu_names.get(k), main, user_peaks).tflops) for k in spans if spans[k]
    ]
    span_mfu = (
        100 * total.flops / sum(ns * t * 1e3 for ns, t in span_peak if t)
        if span_peak and all(t for _, t in span_peak)
        else None
    )
    step_mfus = [s.mfu_pct for s in steps if s.mfu_pct is not None]
    model = model_of(first_gpu)
    return Compute(
        dtype=main,
        peak_tflops=p.tflops,
        peak_source=p.source,
        gpu_model=model.label if model else first_gpu,
        calls=total.calls,
        unknown_calls=unknown_calls,
        flops=total.flops,
        time_ns=total.time_ns,
        covered_pct=min(100.0, 100 * _matrix_time(families, family_info) / matrix_ns)
        if matrix_ns
        else None,
        step_mfu_pct=statistics.median(step_mfus) if step_mfus else None,
        span_mfu_pct=span_mfu,
        families=out_families,
        layers=tuple(
            sorted(
                (
                    ComputeLayer(name, s.calls, s.time_ns, s.flops, s.tflops, s.mfu_pct)
                    for name, s in layers.items()
                ),
                key=lambda x: (x.layer == OUTSIDE, -x.time_ns, x.layer),
            )
        ),
        steps=steps,
    )


def roof_quality(compute: Compute | None, op_rows: Iterable[dict[str, Any]]) -> DataQuality:
    """A data-quality line for each file and kernel family above its roofline: its calls
    (compute_op's rows, each with its `file`), kept as their shapes give."""
    over = {f.family for f in compute.families if f.above_roof} if compute else set()
    if not over:
        return DataQuality()
    calls: dict[tuple[str, str], int] = defaultdict(int)
    for r in op_rows:
        family = family_of(r["kernel"])
        if family in over and _work(r["op"], r["dims"], r["types"], r["concrete"]) is not None:
            calls[(r["file"], family)] += r["calls"]
    return DataQuality(
        tuple(
            QualityItem(file, "kept", "op_call", ABOVE_ROOF.format(family), count)
            for (file, family), count in sorted(calls.items())
        )
    )


def _matrix_time(families: Mapping[str, _Sum], info: Mapping[str, dict[str, Any]]) -> int:
    """The kernel time of the calls whose main kernel is a GEMM or attention kernel."""
    return sum(
        s.time_ns for name, s in families.items() if info[name]["class"] in ("gemm", "attention")
    )


def _family(
    name: str,
    s: _Sum,
    info: Mapping[str, Any],
    user_peaks: Mapping[str, float],
    user_hbm_gbps: float | None,
) -> ComputeFamily:
    dtypes = info["dtypes"]
    dtype = next(iter(dtypes)) if len(dtypes) == 1 else None
    p = peak(info["gpu"], dtype, user_peaks)
    if len(dtypes) > 1:
        peak_source = "several dtypes: " + ", ".join(sorted(str(d) for d in dtypes))
    else:
        peak_source = p.source
    intensity = s.flops / s.bytes if s.bytes_known and s.bytes else None
    model = model_of(info["gpu"])
    hbm = user_hbm_gbps or (model.hbm_gbps if model else None)
    peak_tflops = s.peak_tflops
    ridge = peak_tflops * 1e12 / (hbm * 1e9) if peak_tflops and hbm else None
    bound = (
        "unknown"
        if intensity is None or ridge is None
        else ("compute" if intensity >= ridge else "memory")
    )
    source = "; ".join(sorted(info["sources"]))
    if info["named"]:
        source += "; dtype from the kernel name"
    return ComputeFamily(
        family=name,
        kernel_class=info["class"],
        ops=", ".join(sorted(info["ops"])),
        dtype=dtype,
        calls=s.calls,
        gpus=len(info["gpus"]),
        time_ns=s.time_ns,
        flops=s.flops,
        tflops=s.tflops,
        peak_tflops=peak_tflops,
        peak_source=peak_source,
        mfu_pct=s.mfu_pct,
        intensity=intensity,
        ridge=ridge,
        bound=bound,
        source=source,
        note="; ".join(sorted(info["notes"])),
    )


def _steps(
    rows: Iterable[dict[str, Any]],
    gpu_names: Mapping[GpuKey, str | None],
    step_times: Mapping[tuple[GpuKey, int], int],
    dtype: str | None,
    user_peaks: Mapping[str, float],
) -> tuple[ComputeStep, ...]:
    """Per step ordinal: every GPU's FLOPs in its k-th step over its step time at peak."""
    flops: dict[tuple[GpuKey, int], float] = defaultdict(float)
    for r in rows:
        work = _work(r["op"], r["dims"], r["types"], r["concrete"])
        if work is not None:
            flops[((r["file"], r["pid"], r["device_id"]), r["step_ordinal"])] += (
                work.flops * r["calls"]
            )
    per_step: dict[int, list[tuple[float, int, float | None]]] = defaultdict(list)
    for (key, ordinal), time_ns in step_times.items():
        p = peak(gpu_names.get(key), dtype, user_peaks).tflops
        per_step[ordinal].append((flops.get((key, ordinal), 0.0), time_ns, p))
    out = []
    for ordinal, gpus in sorted(per_step.items()):
        total = sum(f for f, _, _ in gpus)
        time_ns = sum(t for _, t, _ in gpus)
        at_peak = sum(t * p * 1e3 for _, t, p in gpus if p)
        known = all(p for _, _, p in gpus) and at_peak > 0
        out.append(
            ComputeStep(
                ordinal, len(gpus), total, time_ns, 100 * total / at_peak if known else None
            )
        )
    return tuple(out)


def build_model_compute(
    model: ModelShape,
    layers: Iterable[LayerReport],
    tp: Iterable[TpStructure],
    gpu_names: Mapping[GpuKey, str | None],
    spans: Mapping[GpuKey, int],
    user_peaks: Mapping[str, float],
) -> Compute | None:
    """The section from --model when no operator recorded its shapes: each occurrence of a
    layer range is one forward pass of the model's layer over its tokens (ModelShape.
    layer_flops), of which a GPU does 1/TP, TP the group size of the collectives inside its
    layers (tp_structure; 1 without). None without layer ranges."""
    group: dict[GpuKey, int] = {}
    for t in tp:
        if t.in_layers and t.group_gpus:
            key = (t.file, t.pid, t.device_id)
            group[key] = max(group.get(key, 1), t.group_gpus)
    dtype = model.peak_dtype
    sums: dict[str, _Sum] = defaultdict(_Sum)
    for x in layers:
        if x.layer == OUTSIDE or not x.occurrences or not x.gpu_time_ns:
            continue
        key = (x.file, x.pid, x.device_id)
        flops = x.occurrences * model.layer_flops / group.get(key, 1)
        layer_peak = peak(gpu_names.get(key), dtype, user_peaks).tflops
        sums[x.layer].add(x.occurrences, x.gpu_time_ns, flops, None, layer_peak)
    if not sums:
        return None
    total = sum(s.flops for s in sums.values())
    at_peak = [(ns, peak(gpu_names.get(k), dtype, user_peaks).tflops) for k, ns in spans.items()]
    known = at_peak and all(t for _, t in at_peak)
    first_gpu = next(iter(gpu_names.values()), None)
    p = peak(first_gpu, dtype, user_peaks)
    model_row = model_of(first_gpu)
    return Compute(
        dtype=dtype,
        peak_tflops=p.tflops,
        peak_source=p.source if dtype else f"no FLOP peak for --model dtype {model.dtype}",
        gpu_model=model_row.label if model_row else first_gpu,
        calls=sum(s.calls for s in sums.values()),
        unknown_calls=0,
        flops=total,
        time_ns=sum(s.time_ns for s in sums.values()),
        covered_pct=None,
        step_mfu_pct=None,
        span_mfu_pct=100 * total / sum(ns * (t or 0) * 1e3 for ns, t in at_peak) if known else None,
        families=(),
        layers=tuple(
            sorted(
                (
                    ComputeLayer(name, s.calls, s.time_ns, s.flops, s.tflops, s.mfu_pct)
                    for name, s in sums.items()
                ),
                key=lambda x: (-x.time_ns, x.layer),
            )
        ),
        steps=(),
        flops_source="model",
    )


def compute_sentence(c: Compute) -> str | None:
    """MFU and the weakest big family in a sentence, for the verdict and the terminal."""
    if c.flops_source == "model":
        if c.span_mfu_pct is None:
            return (
                "Model FLOPs from --model are known per layer, but not the peak to measure "
                f"them against ({c.peak_source})."
            )
        busiest = c.layers[0]
        return (
            f"MFU {fmt_pct(c.span_mfu_pct)} over the span from --model's FLOPs per layer "
            f"(each layer range one forward pass), against the {(c.dtype or '?').upper()} peak "
            f"of {c.peak_tflops or 0:,.1f} TFLOP/s; the layers run at "
            f"{fmt_pct(_layers_mfu(c.layers))} of it while they run (busiest: "
            f"{busiest.layer}, {fmt_pct(busiest.mfu_pct)})."
        )
    mfu = c.step_mfu_pct if c.step_mfu_pct is not None else c.span_mfu_pct
    dtype = (c.dtype or "?").upper()
    if mfu is None:
        text = (
            f"Model FLOPs are known for {_covered(c)} of the GEMM and attention time, but not "
            f"the peak to measure them against ({c.peak_source})"
        )
    else:
        over = "the steps (median)" if c.step_mfu_pct is not None else "the span"
        text = f"MFU {fmt_pct(mfu)} over {over}, against the {dtype} peak"
        if c.peak_tflops:
            text += f" of {c.peak_tflops:,.1f} TFLOP/s"
        text += f" (FLOPs from recorded shapes, {_covered(c)} of the GEMM and attention time)"
    worst = [f for f in c.families if f.mfu_pct is not None and f.kernel_class != "other"]
    if worst:
        big = max(worst, key=lambda f: f.time_ns)
        noun = "attention" if big.kernel_class == "attention" else "GEMM"
        text += (
            f"; the busiest {noun} family runs at {fmt_pct(big.mfu_pct)} of "
            f"{(big.dtype or '?').upper()} peak"
        )
        if big.bound != "unknown":
            text += f" ({big.bound}-bound on the roofline)"
    return text + "."


def _layers_mfu(layers: Iterable[ComputeLayer]) -> float | None:
    """The layers' MFU together: their FLOPs over their time at peak."""
    rows = [x for x in layers if x.mfu_pct]
    at_peak = sum(x.flops * 100 / x.mfu_pct for x in rows if x.mfu_pct)
    return 100 * sum(x.flops for x in rows) / at_peak if at_peak else None


def _covered(c: Compute) -> str:
    return fmt_pct(c.covered_pct) if c.covered_pct is not None else "an unknown share"


def matrix_kernel_ns(con: duckdb.DuckDBPyConnection) -> int:
    """All GEMM and attention kernel time (queries/report/matrix_kernel_time.sql)."""
    row = run_query(con, "matrix_kernel_time").rows()
    return int(row[0][0]) if row else 0
