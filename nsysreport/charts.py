"""The report's pictures: matplotlib figures rendered to inline SVG (matplotlib imported lazily).

Every function takes model objects and returns SVG markup; none does analysis. Each picture's
size depends on the number of GPUs, streams, layers or steps, never on the number of kernels.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from nsysreport.units import fmt_count, fmt_ns

if TYPE_CHECKING:
    from nsysreport.compare import Comparison
    from nsysreport.sections.compute import ComputeFamily
    from nsysreport.sections.gpu_breakdown import GapStats, GpuReport
    from nsysreport.sections.layers import LayerAcrossGpus
    from nsysreport.sections.steps import StepReport
    from nsysreport.sections.timeline import Piece, Timeline

# Okabe-Ito colours: distinguishable with the common forms of colour blindness. The same part
# has the same colour in every picture: exposed comm vermillion, memcpy orange, idle grey.
PART_COLOURS = {
    "compute": "#0072B2",
    "exposed comm": "#D55E00",
    "exposed memcpy": "#E69F00",
    "idle": "#BBBBBB",
}
PART_KEYS = {
    "compute": "compute_ns",
    "exposed comm": "exposed_comm_ns",
    "exposed memcpy": "exposed_memcpy_ns",
    "idle": "idle_ns",
}
# Time inside CUDA graphs traced as a whole: yellow, the one Okabe-Ito colour left. Pictures and
# tables show this part only for traces that have such graph launches.
GRAPH_PART = "graph opaque"
GRAPH_COLOUR = "#F0E442"
GRAPH_LABEL = "CUDA graph (contents not traced)"
# nsys's own pauses with nothing running: reddish purple, shown only for traces that have them.
OVERHEAD_PART = "profiler overhead"
OVERHEAD_COLOUR = "#CC79A7"
# Activity classes on the timeline: compute in blues and purple, communication green (its
# exposed stretches get the vermillion of "exposed comm" behind them), copies orange.
CLASS_COLOURS = {
    "gemm": "#0072B2",
    "attention": "#CC79A7",
    "other": "#56B4E9",
    "comm": "#009E73",
    "memcpy": "#E69F00",
    "graph": GRAPH_COLOUR,
}
CLASS_LABELS = {
    "gemm": "GEMM",
    "attention": "attention",
    "other": "other compute",
    "comm": "communication",
    "memcpy": "memcpy / memset",
    "graph": GRAPH_LABEL,
}
# One colour per GPU in the step-time picture; past eight GPUs they are drawn grey.
GPU_COLOURS = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
    "#F0E442",
)
# Exposed communication on the timeline: a vermillion hatch over the bars, see-through.
EXPOSED_STYLE: dict[str, Any] = {
    "facecolor": "none",
    "edgecolor": PART_COLOURS["exposed comm"],
    "hatch": "////",
    "lw": 0,  # no outline: many short stretches would draw as solid lines
}
# The critical path as a band along the top of each GPU's rows: black where it runs on the
# GPU, grey where the GPU waited on the host side (launches, CUDA calls, synchronisation, host
# code). Bars, not lines: one compound path per GPU however many pieces (a line per piece made
# a host-bound trace's page 3x larger).
PATH_STYLE: dict[str, Any] = {"facecolor": "#000000"}
PATH_HOST_STYLE: dict[str, Any] = {"facecolor": "#9a9a9a"}
PATH_HEIGHT = 0.14
WIDTH = 7.5  # inches: fits an A4 or Letter page between margins
# Pieces closer than this share of the window (about a pixel) are drawn as one bar, and gaps
# shorter than it are not drawn: a sliver that thin shows nothing, and leaving it out keeps
# the SVG small.
MERGE_FRACTION = 1 / 1000


@contextmanager
def _figure(
    name: str, width: float, height: float, ncols: int = 1
) -> Iterator[tuple[Any, Any, io.StringIO]]:
    """A figure whose SVG is deterministic (fixed ids, no date, bundled font) and keeps text
    as text. `name` salts the ids so that several pictures can share one HTML page."""
    # No pyplot: it would register every figure with its window manager, for nothing here.
    # Lazy: matplotlib costs 0.35 s of start-up (python -X importtime); a warm run, which
    # writes the pages it kept, draws nothing.
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rc: Any = {
        "svg.fonttype": "none",
        "svg.hashsalt": f"nsysreport-{name}",
        "font.family": "DejaVu Sans",  # ships with matplotlib: same layout on every machine
        "font.size": 9,
        "axes.titlesize": 9,
        "legend.fontsize": 8,
    }
    with rc_context(rc):
        fig = Figure(figsize=(width, height))
        FigureCanvasAgg(fig)  # lays the text out (tight_layout) as pyplot's Agg backend would
        ax = fig.subplots(1, ncols)
        buffer = io.StringIO()
        yield fig, ax, buffer
        for axis in fig.axes:
            for side in ("top", "right"):
                axis.spines[side].set_visible(False)
        fig.tight_layout()
        # tight_layout leaves a placeholder layout engine behind, and with any engine savefig
        # first draws the whole figure once more (without output) to lay it out again: the
        # layout is done, so drop the engine and draw once.
        fig.set_layout_engine(None)
        # No metadata block: no date, no creator, nothing that is not the picture.
        metadata = dict.fromkeys(("Date", "Creator", "Format", "Type"))
        fig.savefig(buffer, format="svg", metadata=metadata)


def _svg(buffer: io.StringIO) -> str:
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def _text(label: str) -> str:
    """A label from the trace, shown as written ($ would start matplotlib's math mode)."""
    return label.replace("$", r"\$")


def _time_unit(ns: float) -> tuple[str, float]:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= 2 * scale:
            return unit, scale
    return "ns", 1.0


def _legend_above(ax: Any, ncols: int) -> None:
    ax.legend(ncols=ncols, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)


def part_colours(graphs: bool, overhead: bool = False) -> dict[str, str]:
    """The time breakdown's parts in order with their colours; `graphs`: the trace has CUDA
    graph launches traced as a whole, whose opaque time is then a part of its own; `overhead`:
    the GPUs waited on nsys's own pauses (profiler overhead), likewise."""
    parts = dict(PART_COLOURS)
    idle = parts.pop("idle")
    if graphs:
        parts[GRAPH_PART] = GRAPH_COLOUR
    if overhead:
        parts[OVERHEAD_PART] = OVERHEAD_COLOUR
    return {**parts, "idle": idle}


def has_graphs(gpus: Sequence[GpuReport]) -> bool:
    """Any GPU ran CUDA graph launches traced as a whole (--cuda-graph-trace=graph)."""
    return any(g.graph_launches for g in gpus)


def has_overhead(gpus: Sequence[GpuReport]) -> bool:
    """Any GPU waited on nsys's own pauses (profiler overhead)."""
    return any(g.profiler_overhead_ns for g in gpus)


def breakdown_chart(gpus: Sequence[GpuReport]) -> str:
    """Stacked bars, one per GPU: compute, exposed comm, exposed memcpy, CUDA graph time (when
    traced as a whole) and idle, % of span."""
    labels = [f"rank {g.rank}" for g in gpus]
    colours = part_colours(has_graphs(gpus), has_overhead(gpus))
    with _figure("breakdown", WIDTH, 0.3 * len(gpus) + 1.1) as (_, ax, buffer):
        left = [0.0] * len(gpus)
        for part, colour in colours.items():
            widths = [g.shares_pct[part] or 0.0 for g in gpus]
            ax.barh(labels, widths, left=left, color=colour, label=part, height=0.7)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of the GPU's span (%)")
        ax.invert_yaxis()
        _legend_above(ax, len(colours))
    return _svg(buffer)


def _merge(
    pieces: Sequence[Piece], tolerance: float, scale: float, min_width: float = 0.0
) -> list[tuple[float, float]]:
    """(start, width) bars in units of `scale`, joining pieces that (nearly) touch; each bar at
    least `min_width` wide, so that a short kernel in a long window still shows."""
    bars: list[list[float]] = []
    for start, end in pieces:
        if bars and start - bars[-1][1] <= tolerance:
            bars[-1][1] = max(bars[-1][1], end)
        else:
            bars.append([start, end])
    return [(s / scale, max(e - s, min_width) / scale) for s, e in bars]


def _bars(
    ax: Any, bars: Sequence[tuple[float, float]], y: float, height: float, **style: Any
) -> None:
    """(start, width) bars between y and y + height as one compound path: one SVG element for
    all of them, where broken_barh would write one per bar.

    The caller sets both axis limits, so the patch is added without the data-limit update of
    add_patch, which walks every segment of the path in Python (most of this picture's time).
    """
    import numpy as np
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path

    if not bars:
        return
    x0, w = np.array(bars, dtype=float).T
    x1 = x0 + w
    y0, y1 = np.full_like(x0, y), np.full_like(x0, y + height)
    # Per bar: (x0,y0) (x1,y0) (x1,y1) (x0,y1) back to (x0,y0), as MOVETO, 3 LINETO, CLOSEPOLY.
    vertices = np.stack([x0, y0, x1, y0, x1, y1, x0, y1, x0, y0], axis=1).reshape(-1, 2)
    codes = np.tile(
        np.array(
            [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], Path.code_type
        ),
        len(bars),
    )
    ax.add_artist(PathPatch(Path(vertices, codes), **style))


def timeline_chart(t: Timeline, path: Sequence[tuple[int, int, int, bool]] = ()) -> str:
    """One row per (GPU, stream): activities coloured by class over the window; behind each
    GPU's rows, exposed communication in hatched vermillion and idle gaps in grey; along the
    top of each GPU's rows, the critical path's pieces on it (`path`: rank, start and end from
    the window's start, on the GPU or waiting on the host side): black on the GPU, grey where
    it waited on the host side."""
    from matplotlib.patches import Patch

    lanes = [(g, lane) for g in t.gpus for lane in g.lanes]
    unit, scale = _time_unit(t.duration_ns)
    tolerance = t.duration_ns * MERGE_FRACTION
    row_height = 0.34 if len(lanes) <= 24 else max(0.12, 6.0 / len(lanes))
    with _figure("timeline", WIDTH, row_height * len(lanes) + 1.3) as (_, ax, buffer):
        labels, y = [], 0
        for g in t.gpus:
            top = y
            for lane in g.lanes:
                for cls, pieces in lane.pieces.items():
                    bars = _merge(pieces, tolerance, scale, min_width=tolerance)
                    _bars(ax, bars, y - 0.36, 0.72, facecolor=CLASS_COLOURS[cls], lw=0)
                labels.append(f"rank {g.rank} · stream {lane.stream_id}")
                y += 1
            gaps = _merge([(s, e) for s, e in g.gaps if e - s > tolerance], 0, scale)
            _bars(ax, gaps, top - 0.5, y - top, facecolor=PART_COLOURS["idle"], alpha=0.35, lw=0)
            # In front of the bars: communication there is green, and hatched when exposed.
            exposed = _merge(g.exposed_comm, tolerance, scale)
            _bars(ax, exposed, top - 0.5, y - top, zorder=3, **EXPOSED_STYLE)
            if top:
                ax.axhline(top - 0.5, color="#888888", lw=0.6)
            for on_gpu in (True, False):
                mine = [(a, b) for r, a, b, gpu in path if r == g.rank and gpu == on_gpu]
                style = PATH_STYLE if on_gpu else PATH_HOST_STYLE
                bars = _merge(mine, tolerance, scale, min_width=tolerance)
                _bars(ax, bars, top - 0.5, PATH_HEIGHT, zorder=4, lw=0, **style)
        ax.set_yticks(range(len(labels)), labels, fontsize=8 if len(lanes) <= 24 else 6)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_xlim(0, t.duration_ns / scale)
        ax.set_xlabel(f"time from the window start ({unit})")
        ax.tick_params(axis="y", length=0)
        drawn = {cls for _, lane in lanes for cls in lane.pieces}
        handles: list[Any] = [
            Patch(color=CLASS_COLOURS[c], label=CLASS_LABELS[c])
            for c in CLASS_COLOURS
            if c != "graph" or c in drawn
        ]
        handles.append(Patch(label="exposed comm", **EXPOSED_STYLE))
        handles.append(Patch(color=PART_COLOURS["idle"], alpha=0.35, lw=0, label="idle gap"))
        if path:
            handles.append(Patch(lw=0, label="critical path", **PATH_STYLE))
            handles.append(Patch(lw=0, label="path: host side", **PATH_HOST_STYLE))
        ax.legend(
            handles=handles, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False
        )
    return _svg(buffer)


def layer_chart(layers: Sequence[LayerAcrossGpus], layers_only: bool = False) -> str:
    """Per layer in model order: mean compute and mean exposed comm per GPU, stacked.
    `layers_only`: (outside layers) is left out (the layers hold a tiny share of the time),
    which the axis says, so the scale is the layers' own."""
    names = [_text(x.layer) for x in layers]
    unit, scale = _time_unit(max(x.compute_mean_ns + x.exposed_comm_mean_ns for x in layers))
    height = 0.2 * len(layers) + 1.1 if len(layers) <= 40 else 0.12 * len(layers) + 1.1
    with _figure("layers", WIDTH, height) as (_, ax, buffer):
        compute = [x.compute_mean_ns / scale for x in layers]
        exposed = [x.exposed_comm_mean_ns / scale for x in layers]
        rows = range(len(layers))
        ax.barh(rows, compute, color=PART_COLOURS["compute"], label="compute", height=0.7)
        ax.barh(
            rows,
            exposed,
            left=compute,
            color=PART_COLOURS["exposed comm"],
            label="exposed comm",
            height=0.7,
        )
        ax.set_yticks(rows, names, fontsize=8 if len(layers) <= 40 else 5)
        ax.set_ylim(len(layers) - 0.5, -0.5)
        scope = "; layer ranges only, (outside layers) left out" if layers_only else ""
        ax.set_xlabel(f"time per GPU, mean over GPUs ({unit}){scope}")
        _legend_above(ax, 2)
    return _svg(buffer)


def gap_histogram_chart(gaps: Sequence[GapStats]) -> str:
    """Gaps of all GPUs by length bucket: how many (left) and how much idle time (right)."""
    buckets = list(gaps[0].histogram)
    counts = [sum(g.histogram[b] for g in gaps) for b in buckets]
    total = [sum(g.histogram_ns[b] for g in gaps) for b in buckets]
    unit, scale = _time_unit(max(total))
    with _figure("gaps", WIDTH, 0.3 * len(buckets) + 1.0, ncols=2) as (_, axes, buffer):
        left, right = axes
        rows = range(len(buckets))
        bars = left.barh(rows, counts, color="#777777", height=0.65)
        left.bar_label(bars, [fmt_count(n) for n in counts], padding=3, fontsize=8)
        left.set_title("number of gaps")
        bars = right.barh(rows, [x / scale for x in total], color=PART_COLOURS["idle"], height=0.65)
        right.bar_label(bars, [fmt_ns(x) for x in total], padding=3, fontsize=8)
        right.set_title(f"idle time in them ({unit})")
        for axis in axes:
            axis.set_yticks(rows, [_text(b) for b in buckets])
            axis.set_ylim(len(buckets) - 0.5, -0.5)
            axis.margins(x=0.15)
    return _svg(buffer)


def step_series_chart(steps: Sequence[StepReport]) -> str:
    """Step time against step number, one line per GPU."""
    by_gpu: dict[int, list[StepReport]] = {}
    for s in steps:
        by_gpu.setdefault(s.rank, []).append(s)
    unit, scale = _time_unit(max(s.step_time_ns for s in steps))
    coloured = len(by_gpu) <= len(GPU_COLOURS)
    with _figure("steps", WIDTH, 2.8) as (_, ax, buffer):
        for i, (rank, group) in enumerate(sorted(by_gpu.items())):
            ax.plot(
                [s.ordinal for s in group],
                [s.step_time_ns / scale for s in group],
                "o-" if len(group) <= 50 else "-",
                color=GPU_COLOURS[i] if coloured else "#999999",
                label=f"rank {rank}" if coloured else None,
                lw=1.2 if coloured else 0.6,
                ms=3,
            )
        ordinals = sorted({s.ordinal for s in steps})
        if len(ordinals) <= 20:
            first = {s.ordinal: _text(s.name) for s in reversed(steps)}
            ax.set_xticks(ordinals, [first[o] for o in ordinals], fontsize=8)
        else:
            ax.set_xlabel("step (in trace order)")
        ax.set_ylabel(f"step time ({unit})")
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.margins(y=0.15)
        if coloured:
            ax.legend(ncols=min(len(by_gpu), 8), loc="lower center", bbox_to_anchor=(0.5, 1.0))
            ax.get_legend().set_frame_on(False)
    return _svg(buffer)


def what_if_chart(now_ns: float, spans_ns: dict[str, float]) -> str:
    """The mean span now and under each what-if change, as horizontal bars."""
    labels = ["now", *spans_ns]
    values = [now_ns, *spans_ns.values()]
    unit, scale = _time_unit(max(values))
    colours = ["#555555", PART_COLOURS["compute"], PART_COLOURS["exposed comm"], "#CC79A7"]
    colours.append(PART_COLOURS["idle"])
    with _figure("whatif", WIDTH, 0.3 * len(labels) + 0.9) as (_, ax, buffer):
        bars = ax.barh(labels, [v / scale for v in values], color=colours, height=0.65)
        ax.bar_label(bars, [fmt_ns(v) for v in values], padding=3, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"span, mean over GPUs ({unit})")
        ax.margins(x=0.12)
    return _svg(buffer)


def scaling_chart(c: Comparison) -> str:
    """Measured speedup against GPUs, with the ideal (linear) line."""
    gpus = [x.gpus for x in c.configs]
    with _figure("scaling", 5.0, 3.2) as (_, ax, buffer):
        base = next(x for x in c.configs if x.label == c.baseline)
        ideal_x = sorted(set(gpus))
        ax.plot(ideal_x, [g / base.gpus for g in ideal_x], "--", color="#888888", label="ideal")
        ax.plot(gpus, [x.speedup for x in c.configs], "o-", color="#0072B2", label="measured")
        for x in c.configs:
            ax.annotate(
                _text(x.label),
                (x.gpus, x.speedup),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )
        ax.set_xlabel("GPUs")
        ax.set_ylabel(f"speedup over {_text(c.baseline)}")
        ax.set_xticks(ideal_x)
        ax.legend(frameon=False)
    return _svg(buffer)


def loss_chart(c: Comparison) -> str:
    """Per configuration: the ideal step time, then what each part added (or saved) on top."""
    labels = [_text(x.label) for x in c.configs]
    with _figure("loss", WIDTH, 0.5 * len(labels) + 1.2) as (_, ax, buffer):
        for i, x in enumerate(c.configs):
            ideal = x.ideal_step_time_ns
            ax.barh(i, ideal / 1e3, color="#DDDDDD", height=0.6, label="ideal" if i == 0 else None)
            left = ideal
            keys = {
                **PART_KEYS,
                GRAPH_PART: "graph_opaque_ns",
                OVERHEAD_PART: "profiler_overhead_ns",
            }
            parts = part_colours("graph_opaque_ns" in x.loss, "profiler_overhead_ns" in x.loss)
            for part, colour in parts.items():
                delta = x.loss[keys[part]]
                ax.barh(
                    i,
                    delta / 1e3,
                    left=left / 1e3,
                    color=colour,
                    height=0.6,
                    label=f"extra {part}" if i == 0 else None,
                )
                left += delta
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xlabel("mean step time (µs): ideal, then what each part added")
        ax.legend(ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=7)
    return _svg(buffer)


def roofline_chart(families: Sequence[ComputeFamily]) -> str:
    """One point per kernel family (arithmetic intensity, achieved TFLOP/s), its area by its
    time, under each dtype's roof: the peak, and the HBM slope up to the ridge."""
    drawn = [f for f in families if f.intensity and f.tflops]
    most = max(f.time_ns for f in drawn)
    with _figure("roofline", WIDTH, 3.4) as (_, ax, buffer):
        ax.set_xscale("log")
        ax.set_yscale("log")
        lo = min(f.intensity or 1 for f in drawn) / 4
        hi = max(f.intensity or 1 for f in drawn) * 4
        roofs = {(f.dtype, f.peak_tflops, f.ridge) for f in drawn if f.peak_tflops and f.ridge}
        for dtype, top, ridge in sorted(roofs, key=lambda r: (r[1] or 0, str(r[0]))):
            assert top is not None and ridge is not None
            start = min(lo, ridge / 4)
            ax.plot([start, ridge, max(hi, ridge * 4)], [top * start / ridge, top, top],
                    color="#777777", linewidth=1)  # fmt: skip
            ax.annotate(f"{(dtype or '?').upper()} {top:,.0f}", (max(hi, ridge * 4), top),
                        ha="right", va="bottom", fontsize=7, color="#555555")  # fmt: skip
        for kind, colour in (("gemm", PART_COLOURS["compute"]), ("attention", "#CC79A7"),
                             ("other", "#999999")):  # fmt: skip
            points = [f for f in drawn if f.kernel_class == kind]
            if points:
                ax.scatter([f.intensity for f in points], [f.tflops for f in points],
                           s=[20 + 400 * f.time_ns / most for f in points], color=colour,
                           alpha=0.7, label=kind, edgecolors="black", linewidths=0.4)  # fmt: skip
        ax.set_xlabel("arithmetic intensity (FLOPs per byte, least traffic)")
        ax.set_ylabel("achieved TFLOP/s")
        ax.legend(loc="lower right")
    return _svg(buffer)
