"""The report's pictures: matplotlib figures rendered to inline SVG (matplotlib imported lazily)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsysreport.compare import Comparison
    from nsysreport.model import Report

# Okabe-Ito colours: distinguishable with the common forms of colour blindness.
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


@contextmanager
def _figure(width: float, height: float) -> Iterator[tuple[Any, Any, io.StringIO]]:
    """A figure whose SVG is deterministic (fixed ids, no date) and keeps text as text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "nsysreport", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(width, height))
        buffer = io.StringIO()
        yield fig, ax, buffer
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(fig)


def _svg(buffer: io.StringIO) -> str:
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def breakdown_chart(report: Report) -> str:
    """Stacked bars, one per GPU: compute, exposed comm, exposed memcpy and idle, % of span."""
    gpus = report.gpus
    labels = [f"rank {g.rank}" for g in gpus]
    with _figure(7.5, 0.45 * len(gpus) + 1.1) as (_, ax, buffer):
        left = [0.0] * len(gpus)
        for part, colour in PART_COLOURS.items():
            widths = [g.shares_pct[part] or 0.0 for g in gpus]
            ax.barh(labels, widths, left=left, color=colour, label=part, height=0.6)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of the GPU's span (%)")
        ax.invert_yaxis()
        ax.legend(ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return _svg(buffer)


def scaling_chart(c: Comparison) -> str:
    """Measured speedup against GPUs, with the ideal (linear) line."""
    gpus = [x.gpus for x in c.configs]
    with _figure(5.0, 3.2) as (_, ax, buffer):
        base = next(x for x in c.configs if x.label == c.baseline)
        ideal_x = sorted(set(gpus))
        ax.plot(ideal_x, [g / base.gpus for g in ideal_x], "--", color="#888888", label="ideal")
        ax.plot(gpus, [x.speedup for x in c.configs], "o-", color="#0072B2", label="measured")
        for x in c.configs:
            ax.annotate(
                x.label,
                (x.gpus, x.speedup),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )
        ax.set_xlabel("GPUs")
        ax.set_ylabel(f"speedup over {c.baseline}")
        ax.set_xticks(ideal_x)
        ax.legend(frameon=False)
    return _svg(buffer)


def loss_chart(c: Comparison) -> str:
    """Per configuration: the ideal step time, then what each part added (or saved) on top."""
    labels = [x.label for x in c.configs]
    with _figure(7.5, 0.5 * len(labels) + 1.2) as (_, ax, buffer):
        for i, x in enumerate(c.configs):
            ideal = x.mean_step_time_ns - x.loss["total_ns"]
            ax.barh(i, ideal / 1e3, color="#DDDDDD", height=0.6, label="ideal" if i == 0 else None)
            left = ideal
            for part, colour in PART_COLOURS.items():
                delta = x.loss[PART_KEYS[part]]
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
