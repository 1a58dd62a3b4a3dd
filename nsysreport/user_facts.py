"""What the user tells the analysis that no trace records: the data path's link peaks
(--link-peak), the model's shape (--model), the communicators' roles (--comm-group) and the
GPUs' compute peaks (--peak-tflops)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nsysreport.errors import OptionError
from nsysreport.sections.communicators import CommGroupSpec

LINKS = ("hbm", "nvlink", "pcie", "network")

DTYPE_BYTES = {"fp32": 4, "float32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "float16": 2,
               "fp8": 1, "int8": 1}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ModelShape:
    """--model hidden=H,dtype=D,tokens=T: the shape of a transformer's activations."""

    hidden: int
    dtype: str
    tokens: int

    @property
    def message_bytes(self) -> int:
        """One all-reduce's buffer: tokens x hidden x sizeof(dtype)."""
        return self.tokens * self.hidden * DTYPE_BYTES[self.dtype]


def parse_model_shape(text: str | None) -> ModelShape | None:
    """--model's value, checked."""
    if text is None:
        return None
    fields: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            fields = {}
            break
        fields[key] = value
    dtype = fields.get("dtype", "bf16").lower()
    hidden, tokens = fields.get("hidden", ""), fields.get("tokens", "1")
    if set(fields) - {"hidden", "dtype", "tokens"} or not hidden.isdigit() or not tokens.isdigit():
        raise OptionError(
            f"--model {text!r}: expected hidden=H[,dtype=D][,tokens=T], e.g. "
            "hidden=8192,dtype=bf16,tokens=1"
        )
    if dtype not in DTYPE_BYTES or int(hidden) == 0 or int(tokens) == 0:
        raise OptionError(
            f"--model {text!r}: dtype must be one of {', '.join(DTYPE_BYTES)}; hidden and "
            "tokens above 0"
        )
    return ModelShape(int(hidden), dtype, int(tokens))


@dataclass(frozen=True, slots=True)
class Facts:
    """The user's facts; part of the report cache's key, not of the table cache's (no table
    depends on them)."""

    link_peaks: dict[str, float] = field(default_factory=dict)  # link -> GB/s per direction
    model: ModelShape | None = None
    comm_groups: tuple[CommGroupSpec, ...] = ()  # --comm-group NAME=RANKS|stream:N|REGEX
    peak_tflops: dict[str, float] = field(default_factory=dict)  # dtype -> dense TFLOP/s


def parse_link_peaks(items: list[str]) -> dict[str, float]:
    """--link-peak LINK=GBPS values (LINK one of LINKS), checked."""
    peaks = {}
    for item in items:
        link, sep, value = item.partition("=")
        try:
            gbps = float(value) if sep else -1.0
        except ValueError:
            gbps = -1.0
        if link not in LINKS or not gbps > 0:
            raise OptionError(
                f"--link-peak {item!r}: expected LINK=GBPS with LINK one of "
                f"{', '.join(LINKS)} and GBPS > 0, e.g. nvlink=450"
            )
        peaks[link] = gbps
    return peaks
