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


# --model's dtypes as the peaks table names them (nsysreport.peaks); int8 has no FLOP peak.
PEAK_DTYPE = {"fp32": "fp32", "float32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16",
              "float16": "fp16", "fp8": "fp8"}  # fmt: skip
MODEL_KEYS = ("hidden", "dtype", "tokens", "heads", "kv_heads", "ffn", "gated", "seq")


@dataclass(frozen=True, slots=True)
class ModelShape:
    """--model hidden=H,dtype=D,tokens=T[,heads=,kv_heads=,ffn=,gated=,seq=]: the shape of a
    transformer layer and the tokens one forward pass of it processes."""

    hidden: int
    dtype: str
    tokens: int
    heads: int | None = None
    kv_heads: int | None = None  # grouped-query attention: fewer K/V heads
    ffn: int | None = None  # the MLP's inner width; None: 4 x hidden
    gated: bool = False  # a gated MLP (SwiGLU, GeGLU): three matrices, not two
    seq: int = 0  # the mean context each token attends to; 0: attention scores not counted

    @property
    def message_bytes(self) -> int:
        """One all-reduce's buffer: tokens x hidden x sizeof(dtype)."""
        return self.tokens * self.hidden * DTYPE_BYTES[self.dtype]

    @property
    def layer_flops(self) -> float:
        """One forward pass of one layer over `tokens` tokens, the whole layer (not one GPU's
        tensor-parallel share): the Q, K, V and O projections 2·T·h·(2h + 2h_kv), the MLP
        2·T·h·ffn per matrix (2 matrices, 3 gated), and with `seq` the attention scores and
        their weighted sum 4·T·seq·h (docs/metrics.md "Compute efficiency")."""
        t, h = self.tokens, self.hidden
        kv = h * self.kv_heads // self.heads if self.heads and self.kv_heads else h
        ffn = self.ffn or 4 * h
        projections = 2.0 * t * h * (2 * h + 2 * kv)
        mlp = 2.0 * t * h * ffn * (3 if self.gated else 2)
        return projections + mlp + 4.0 * t * self.seq * h

    @property
    def peak_dtype(self) -> str | None:
        return PEAK_DTYPE.get(self.dtype)


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
    dtype = fields.pop("dtype", "bf16").lower()
    fields.setdefault("tokens", "1")
    numbers = {key: value for key, value in fields.items() if key in MODEL_KEYS}
    if (
        set(fields) - set(MODEL_KEYS)
        or "hidden" not in fields
        or not all(v.isdigit() for v in numbers.values())
    ):
        raise OptionError(
            f"--model {text!r}: expected hidden=H[,dtype=D][,tokens=T][,heads=N,kv_heads=N]"
            "[,ffn=F][,gated=1][,seq=S], whole numbers, e.g. hidden=8192,dtype=bf16,tokens=1"
        )
    n = {key: int(value) for key, value in numbers.items()}
    heads, kv = n.get("heads"), n.get("kv_heads")
    if dtype not in DTYPE_BYTES or n["hidden"] == 0 or n["tokens"] == 0:
        raise OptionError(
            f"--model {text!r}: dtype must be one of {', '.join(DTYPE_BYTES)}; hidden and "
            "tokens above 0"
        )
    if (kv is not None and not heads) or (heads and kv is not None and (kv == 0 or heads % kv)):
        raise OptionError(
            f"--model {text!r}: kv_heads needs heads, and must divide it (grouped-query attention)"
        )
    return ModelShape(
        n["hidden"], dtype, n["tokens"], heads, kv, n.get("ffn") or None, bool(n.get("gated")),
        n.get("seq", 0),
    )  # fmt: skip


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
    return parse_rates("--link-peak", items, LINKS, "LINK=GBPS", "nvlink=450")


def parse_rates(
    option: str, items: list[str], keys: tuple[str, ...], form: str, example: str
) -> dict[str, float]:
    """KEY=N values of a repeatable option (KEY one of `keys`, any letter case; N > 0),
    checked: --link-peak's and --peak-tflops'."""
    rates = {}
    name, unit = form.split("=")
    for item in items:
        key, sep, value = item.partition("=")
        try:
            rate = float(value) if sep else -1.0
        except ValueError:
            rate = -1.0
        if key.lower() not in keys or not rate > 0:
            raise OptionError(
                f"{option} {item!r}: expected {form} with {name} one of {', '.join(keys)} and "
                f"{unit} > 0, e.g. {example}"
            )
        rates[key.lower()] = rate
    return rates
