"""JSON text exactly as json.dumps(value, indent=2) writes it, made a block at a time and
about twice as fast.

With an indent the standard library encodes in pure Python, one generator per container and
value (5M kernels: 1.0 s for the report's 29 MB). Here containers are walked by one recursive
function that appends the same pieces (the standard library's own string escaping, float and
int spellings), and the two outer levels by a generator that hands back a block whenever
enough pieces have gathered, so a large report is never held whole as millions of pieces
(64 rank files: +270 MB for 38 MB of text, bench_ranks.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring_ascii as _string
from typing import Any

INDENT = "  "
WALKED_LEVELS = 2  # containers this shallow yield blocks between their items


def indented_blocks(value: Any, pieces: int) -> Iterator[str]:
    """`value`'s JSON text (indent 2, then a newline), in blocks of about `pieces` pieces."""
    out: list[str] = []
    yield from _walk(value, 0, out, pieces)
    out.append("\n")
    yield "".join(out)


def object_blocks(items: Iterable[tuple[Any, Iterable[str]]]) -> Iterator[str]:
    """An object's JSON text (indent 2, then a newline) from its keys and the text of each
    value as value_blocks makes it (or kept from it): indented_blocks(dict(...)) unchanged."""
    first = True
    for key, text in items:
        yield ("{" if first else ",") + "\n" + INDENT + _key(key) + ": "
        yield from text
        first = False
    yield "{}\n" if first else "\n}\n"


def value_blocks(value: Any, pieces: int) -> Iterator[str]:
    """The JSON text of `value` as the value of a key of the outer object (object_blocks), in
    blocks of about `pieces` pieces."""
    out: list[str] = []
    yield from _walk(value, 1, out, pieces)
    yield "".join(out)


def _walk(o: Any, level: int, out: list[str], pieces: int) -> Iterator[str]:
    if level >= WALKED_LEVELS or not isinstance(o, dict | list | tuple) or not o:
        _encode(o, level, out)
        return
    inner = "\n" + INDENT * (level + 1)
    is_dict = isinstance(o, dict)
    out.append(("{" if is_dict else "[") + inner)
    items = o.items() if isinstance(o, dict) else ((None, v) for v in o)
    for i, (key, item) in enumerate(items):
        if i:
            out.append("," + inner)
        if is_dict:
            out.append(_key(key) + ": ")
        yield from _walk(item, level + 1, out, pieces)
        if len(out) >= pieces:
            yield "".join(out)
            out.clear()
    out.append("\n" + INDENT * level + ("}" if is_dict else "]"))


def _encode(o: Any, level: int, out: list[str]) -> None:
    if isinstance(o, str):
        out.append(_string(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, int):
        out.append(int.__repr__(o))
    elif isinstance(o, float):
        out.append(_float(o))
    elif isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        inner = "\n" + INDENT * (level + 1)
        out.append("{" + inner)
        for i, (k, v) in enumerate(o.items()):
            if i:
                out.append("," + inner)
            out.append(_key(k) + ": ")
            _encode(v, level + 1, out)
        out.append("\n" + INDENT * level + "}")
    elif isinstance(o, list | tuple):
        if not o:
            out.append("[]")
            return
        inner = "\n" + INDENT * (level + 1)
        out.append("[" + inner)
        for i, v in enumerate(o):
            if i:
                out.append("," + inner)
            _encode(v, level + 1, out)
        out.append("\n" + INDENT * level + "]")
    else:
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _float(o: float) -> str:
    """As json: NaN and the infinities by name (allow_nan), else the shortest repr."""
    if o != o:
        return "NaN"
    if o in (float("inf"), float("-inf")):
        return "Infinity" if o > 0 else "-Infinity"
    return float.__repr__(o)


def _key(k: Any) -> str:
    """A dict key as json writes it: keys that are not strings become strings."""
    if isinstance(k, str):
        return _string(k)
    if isinstance(k, float):
        return _string(_float(k))
    if k is True or k is False or k is None:
        return '"' + {True: "true", False: "false", None: "null"}[k] + '"'
    if isinstance(k, int):
        return _string(int.__repr__(k))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
