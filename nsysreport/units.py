"""Formatting of nanoseconds, bytes, percentages and counts for people (never for JSON)."""

from __future__ import annotations

from collections.abc import Sequence


def pct(part: float, whole: float) -> float | None:
    """100 * part / whole, or None when the whole is zero."""
    return 100.0 * part / whole if whole else None


def fmt_ns(ns: float | None) -> str:
    """A duration with a unit that keeps three significant digits: 850 ns, 12.3 µs, 4.56 s."""
    if ns is None:
        return "–"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            value = ns / scale
            return f"{value:.3g} {unit}" if abs(value) < 100 else f"{value:.0f} {unit}"
    return f"{ns:.0f} ns"


def fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_gbps(value: float | None) -> str:
    """A bandwidth in GB/s with three significant digits: 0.299 GB/s, 19.7 GB/s, 422 GB/s,
    1,047 GB/s."""
    if value is None:
        return "–"
    return f"{value:,.0f} GB/s" if abs(value) >= 1000 else f"{value:.3g} GB/s"


def fmt_ranks(ranks: Sequence[int]) -> str:
    """`0-3`, `0,4`, `0-4,6,7`: sorted ranks with each run of three or more as first-last."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ",".join(f"{x[0]}-{x[-1]}" if len(x) > 2 else ",".join(map(str, x)) for x in runs)


def fmt_count(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def short_kernel_name(name: str | None) -> str:
    """`ns::kernel` from a demangled C++ name: no return type, template arguments or parameters."""
    if not name:
        return "–"
    text = (
        name.removeprefix("void ").replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    )
    depth, out = 0, list[str]()
    for ch in text:
        if ch in "<(":
            if depth == 0 and ch == "(" and out:
                break  # the parameter list starts: the name is complete
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip()
    if short.rsplit("::", 1)[-1] in ("Kernel", "Kernel2", "device_kernel"):
        # CUTLASS wrappers: the template argument names the real kernel.
        return text.split("(", 1)[0] if "(" in text else text
    return short or name
