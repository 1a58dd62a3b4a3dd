"""Pickles of the report model: each frozen dataclass as a call of its class on its values."""

from __future__ import annotations

import dataclasses
import functools
import io
import pickle
from typing import Any


class _ModelPickler(pickle.Pickler):
    """Pickles each dataclass as a call of its class on its fields' values: unpickling runs the
    generated __init__ instead of a slots dataclass's __setstate__, which sets one field at a
    time in a Python loop (5M kernels, 50k rows: the model read in 0.66 s instead of 1.21 s,
    written in 0.53 s instead of 0.76 s)."""

    def reducer_override(self, obj: Any) -> Any:
        cls: Any = type(obj)
        names = _init_fields(cls)
        if names is None:
            return NotImplemented
        return cls, tuple(getattr(obj, name) for name in names)


@functools.cache
def _init_fields(cls: Any) -> tuple[str, ...] | None:
    """A dataclass's fields, when calling it on them positionally rebuilds it; else None."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return None
    fields = dataclasses.fields(cls)
    if any(not f.init or f.kw_only for f in fields):
        return None
    return tuple(f.name for f in fields)


def pickled_model(model: Any) -> bytes:
    """The pickle of a report model or any part of it (read back by pickle.loads): what the
    report cache keeps, and what a picture's digest and the picture worker are given."""
    out = io.BytesIO()
    _ModelPickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(model)
    return out.getvalue()
