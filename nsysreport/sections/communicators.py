"""Communicators: each GPU's collectives split by the communicator they ran on, with its role
(tensor, data, pipeline or expert parallel) as the user names it or as heuristics assume."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from nsysreport.errors import OptionError
from nsysreport.sections.collectives import COUNTED, bus_factor
from nsysreport.units import fmt_ranks, pct

if TYPE_CHECKING:
    from nsysreport.sections.steps import StepReport

ROLES = {"tp": "tensor-parallel", "dp": "data-parallel", "pp": "pipeline", "ep": "expert-parallel"}
REDUCING = {"AllReduce", "ReduceScatter", "AllGather"}
# A communicator whose kernels are launched inside layer ranges at least this often is the
# one whose collectives sit inside every layer (tensor parallel).
IN_LAYER_SHARE = 0.5
# Process-group descriptions that say the role (`Process Group Description`, pg_config's
# pg_desc: torchtitan's and Megatron's mesh dimension names, say).
DESCRIBED = (
    ("ep", r"(?i)(^|[^a-z])(ep|expert|moe)([^a-z]|$)"),
    ("pp", r"(?i)(^|[^a-z])(pp|pipe(line)?)([^a-z]|$)"),
    ("tp", r"(?i)(^|[^a-z])(tp|tensor|model_parallel|mp)([^a-z]|$)"),
    ("dp", r"(?i)(^|[^a-z])(dp|data|fsdp|ddp|dp_replicate|dp_shard)([^a-z]|$)"),
)


@dataclass(frozen=True, slots=True)
class CommGroupSpec:
    """--comm-group NAME=RANKS|stream:N|REGEX: which communicator the user calls NAME."""

    name: str
    ranks: frozenset[int] | None = None
    stream: int | None = None
    pattern: str | None = None

    @property
    def text(self) -> str:
        if self.ranks is not None:
            what = ",".join(str(r) for r in sorted(self.ranks))
        elif self.stream is not None:
            what = f"stream:{self.stream}"
        else:
            what = str(self.pattern)
        return f"--comm-group {self.name}={what}"


def parse_comm_groups(items: Iterable[str]) -> tuple[CommGroupSpec, ...]:
    """--comm-group values, checked: ranks as `0-3` or `0,4`, a stream as `stream:31`, else a
    regular expression matched against the communicator's name and description."""
    specs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"\w+", name) or not value:
            raise OptionError(
                f"--comm-group {item!r}: expected NAME=RANKS, NAME=stream:N or NAME=REGEX, "
                "e.g. tp=0-3, dp=stream:31, tp='process group 2'"
            )
        if re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", value):
            ranks: set[int] = set()
            for part in value.split(","):
                low, _, high = part.partition("-")
                ranks.update(range(int(low), int(high or low) + 1))
            specs.append(CommGroupSpec(name, ranks=frozenset(ranks)))
        elif m := re.fullmatch(r"stream[:= ]?(\d+)", value):
            specs.append(CommGroupSpec(name, stream=int(m.group(1))))
        else:
            try:
                re.compile(value)
            except re.error as exc:
                raise OptionError(
                    f"--comm-group {item!r}: not a regular expression ({exc})"
                ) from None
            specs.append(CommGroupSpec(name, pattern=value))
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class CommunicatorReport:
    """One communicator on one GPU: its collectives, their time and how much is exposed."""

    file: str
    pid: int
    device_id: int
    rank: int
    communicator: str  # its name, the same on every member GPU
    channel: str  # what it is on this GPU: `process group NAME` or `stream N`
    source: str  # how its members are known: trace metadata, matched instances or stream
    members: tuple[int, ...]  # its ranks as far as known (metadata, or the GPUs matched)
    member_keys: str  # those GPUs as pid:device_id in the file (matched instances)
    description: str | None  # the process group's description, as recorded
    group_size: int | None  # ranks in the communicator (bus bandwidth's n); None: unknown
    group_source: str | None
    role: str | None  # tp, dp, pp, ep or the user's name; None: not told
    role_source: str | None  # --comm-group ..., or the assumption that gave the role
    streams: str
    ops: str
    count: int
    total_ns: int
    comm_ns: int  # union of its kernels
    exposed_ns: int  # of that, time no compute covers
    total_bytes: int | None
    algbw_gbps: float | None  # bytes over the time of the kernels with a size
    busbw_gbps: float | None
    in_layer: int  # kernels launched inside a layer range
    matched_instances: int  # straggler analysis within its members (0: not matched)
    last_arrivals: int
    wait_ns: int
    caused_wait_ns: int

    @property
    def hidden_pct(self) -> float | None:
        return pct(self.comm_ns - self.exposed_ns, self.comm_ns)


@dataclass(frozen=True, slots=True)
class CommunicatorStep:
    """One communicator's comm time and exposed comm in one step on one GPU."""

    file: str
    pid: int
    device_id: int
    rank: int
    step_ordinal: int
    communicator: str
    role: str | None
    comm_ns: int
    exposed_ns: int


@dataclass(frozen=True, slots=True)
class CommunicatorLayer:
    """The collectives one layer launched on one communicator, on one GPU."""

    file: str
    pid: int
    device_id: int
    rank: int
    layer: str
    communicator: str
    role: str | None
    count: int
    total_ns: int


@dataclass(frozen=True, slots=True)
class RoleSummary:
    """One role over every GPU: how much of its communication is hidden, what it costs."""

    role: str
    communicators: int
    gpus: int
    comm_ns: int
    exposed_ns: int
    hidden_pct: float | None
    step_pct: float | None  # exposed, as % of the GPUs' step time (span without steps)
    role_source: str | None
    ops: str  # its collective ops, comma-separated


def _name(row: Mapping[str, Any], members: Sequence[int], own_rank: int) -> str:
    """The communicator's name for the report: the process group, else its stream and ranks."""
    if row["comm_source"] == "trace metadata":
        return str(row["channel"])
    if row["comm_source"] == "matched instances":
        return f"{row['channel']}, ranks {fmt_ranks(members)}"
    return f"{row['channel']} of rank {own_rank}"


def build_communicators(
    summary: Iterable[dict[str, Any]],
    steps: Iterable[dict[str, Any]],
    layers: Iterable[dict[str, Any]],
    waits: Iterable[dict[str, Any]],
    rank: Mapping[tuple[str, int, int], int],
) -> tuple[list[CommunicatorReport], list[CommunicatorStep], list[CommunicatorLayer]]:
    """Each file's communicators per GPU, their steps and layers (roles not yet assigned), from
    the stacked rows (a `file` column) of communicator_summary, communicator_step,
    communicator_layer and communicator_straggler. A communicator's members are the ranks of
    the GPUs its file matched (`members`: pid:device_id in that file). In the rows' order: the
    report builder sorts them once every file's are in."""
    found = {(r["file"], r["pid"], r["device_id"], r["communicator"]): r for r in waits}
    rows, names = [], {}
    for r in summary:
        file, pid, dev = r["file"], r["pid"], r["device_id"]
        own = rank[(file, pid, dev)]
        if r["comm_source"] == "trace metadata" and r["comm_ranks"]:
            members = tuple(int(x) for x in r["comm_ranks"].split(","))
        else:
            keys = [k.split(":") for k in r["members"].split(",")]
            members = tuple(sorted(rank[(file, int(p), int(d))] for p, d in keys))
        name = _name(r, members, own)
        names[(file, pid, dev, r["channel"])] = name
        w = found.get((file, pid, dev, r["communicator"]), {})
        rows.append(
            CommunicatorReport(
                file=file, pid=pid, device_id=dev, rank=own,
                communicator=name, channel=r["channel"], source=r["comm_source"],
                members=members, member_keys=r["members"], description=r["comm_desc"],
                group_size=r["group_size"], group_source=r["group_source"], role=None,
                role_source=None, streams=r["streams"], ops=r["ops"], count=r["count"],
                total_ns=r["total_ns"], comm_ns=r["comm_ns"], exposed_ns=r["exposed_ns"],
                total_bytes=r["total_bytes"], algbw_gbps=r["algbw_gbps"],
                busbw_gbps=r["busbw_gbps"],
                in_layer=r["in_layer"], matched_instances=w.get("matched_instances", 0),
                last_arrivals=w.get("last_arrivals", 0), wait_ns=w.get("wait_ns", 0),
                caused_wait_ns=w.get("caused_wait_ns", 0),
            )
        )  # fmt: skip

    def gpu(r: Mapping[str, Any]) -> tuple[str, int, int, int]:
        file, pid, dev = r["file"], r["pid"], r["device_id"]
        return file, pid, dev, rank[(file, pid, dev)]

    def named(r: Mapping[str, Any]) -> str:
        return names[(r["file"], r["pid"], r["device_id"], r["channel"])]

    step_rows = [
        CommunicatorStep(*gpu(r), r["step_ordinal"], named(r), None, r["comm_ns"], r["exposed_ns"])
        for r in steps
    ]
    layer_rows = [
        CommunicatorLayer(*gpu(r), r["layer"], named(r), None, r["count"], r["total_ns"])
        for r in layers
    ]
    return rows, step_rows, layer_rows


def _matches(spec: CommGroupSpec, rows: Sequence[CommunicatorReport]) -> bool:
    if spec.ranks is not None:
        return any(set(r.members) == spec.ranks for r in rows)
    if spec.stream is not None:
        return any(str(spec.stream) in r.streams.split(",") for r in rows)
    texts = [rows[0].communicator, rows[0].channel, rows[0].description or ""]
    return any(re.search(str(spec.pattern), t) for t in texts)


def assign_roles(
    rows: Sequence[CommunicatorReport], specs: Sequence[CommGroupSpec], has_layers: bool
) -> list[CommunicatorReport]:
    """Each communicator's role: the first --comm-group that names it; else the process
    group's description when it says; else the heuristics below, which say what they assume.

    All-to-alls move tokens between experts (ep); send/receives pass activations between
    pipeline stages (pp); an all-reduce, reduce-scatter or all-gather communicator whose
    kernels are mostly launched inside layer ranges sits inside every layer (tp); one that is
    not, in a trace with layer ranges, runs outside them: gradients (dp). Without layer ranges
    a reducing communicator's role is not told.
    """
    by_comm: dict[str, list[CommunicatorReport]] = {}
    for r in rows:
        by_comm.setdefault(r.communicator, []).append(r)
    roles: dict[str, tuple[str | None, str | None]] = {}
    for name, members in by_comm.items():
        roles[name] = _role(members, specs, has_layers)
    return [
        replace(r, role=roles[r.communicator][0], role_source=roles[r.communicator][1])
        for r in rows
    ]


def _role(
    rows: Sequence[CommunicatorReport], specs: Sequence[CommGroupSpec], has_layers: bool
) -> tuple[str | None, str | None]:
    for spec in specs:
        if _matches(spec, rows):
            return spec.name, spec.text
    desc = rows[0].description
    for role, pattern in DESCRIBED:
        if desc and re.search(pattern, desc):
            return role, f"process group description {desc!r}"
    ops = {op for r in rows for op in r.ops.split(",")}
    first = rows[0].ops.split(",")[0]  # the op with the most time
    if first == "AllToAll":
        return "ep", "assumed: all-to-alls move tokens between experts"
    if first == "SendRecv" and "AllToAll" not in ops:
        return "pp", "assumed: send/receives pass activations between pipeline stages"
    if first in REDUCING:
        kernels = sum(r.count for r in rows)
        inside = sum(r.in_layer for r in rows)
        if kernels and inside / kernels >= IN_LAYER_SHARE:
            return "tp", (
                f"assumed: {100 * inside / kernels:.0f}% of its collectives are launched "
                "inside layer ranges (tensor parallel)"
            )
        if has_layers:
            return "dp", (
                "assumed: its collectives run outside the layer ranges, as gradient "
                "all-reduces do (data parallel)"
            )
    return None, None


def with_roles(
    rows: Sequence[CommunicatorReport],
    steps: Sequence[CommunicatorStep],
    layers: Sequence[CommunicatorLayer],
    specs: Sequence[CommGroupSpec],
    has_layers: bool,
) -> tuple[
    tuple[CommunicatorReport, ...], tuple[CommunicatorStep, ...], tuple[CommunicatorLayer, ...]
]:
    """The rows with their roles, and the steps' and layers' rows with their communicator's."""
    named = assign_roles(rows, specs, has_layers)
    role = {(r.file, r.pid, r.device_id, r.communicator): r.role for r in named}
    return (
        tuple(named),
        tuple(
            replace(s, role=role.get((s.file, s.pid, s.device_id, s.communicator))) for s in steps
        ),
        tuple(
            replace(x, role=role.get((x.file, x.pid, x.device_id, x.communicator))) for x in layers
        ),
    )


def role_summaries(
    rows: Sequence[CommunicatorReport],
    steps: Sequence[CommunicatorStep],
    gpu_steps: Sequence[StepReport],
    spans: Mapping[tuple[str, int, int], int],
) -> tuple[RoleSummary, ...]:
    """Per role over all GPUs, the costliest first: hidden share of its communication and its
    exposed time as % of step time (the steps' exposed over their time on the GPUs it runs on;
    without steps, whole-trace exposed over the GPUs' spans)."""
    out = []
    for role in sorted({r.role for r in rows if r.role is not None}):
        mine = [r for r in rows if r.role == role]
        gpus = {(r.file, r.pid, r.device_id) for r in mine}
        comm = sum(r.comm_ns for r in mine)
        exposed = sum(r.exposed_ns for r in mine)
        in_steps = [s for s in steps if s.role == role]
        step_time = sum(s.step_time_ns for s in gpu_steps if (s.file, s.pid, s.device_id) in gpus)
        if gpu_steps and step_time:
            share = pct(sum(s.exposed_ns for s in in_steps), step_time)
        else:
            share = pct(exposed, sum(spans.get(g, 0) for g in gpus))
        out.append(
            RoleSummary(
                role, len({r.communicator for r in mine}), len(gpus), comm, exposed,
                pct(comm - exposed, comm), share, mine[0].role_source,
                ",".join(sorted({op for r in mine for op in r.ops.split(",")})),
            )
        )  # fmt: skip
    return tuple(sorted(out, key=lambda s: (-(s.step_pct or 0.0), s.role)))


def role_name(role: str) -> str:
    return ROLES.get(role, role)


def role_sentence(summaries: Sequence[RoleSummary]) -> str:
    """` By communicator: the tensor-parallel all-reduces are 100% exposed and cost 15.1% of the
    step; the data-parallel all-reduces are 84% hidden (1.3% of the step).` Empty with fewer
    than two roles: one adds nothing to the verdict on communication as a whole."""
    if len(summaries) < 2:
        return ""
    parts = []
    for i, s in enumerate(summaries):
        hidden = s.hidden_pct or 0.0
        state = f"{100 - hidden:.0f}% exposed" if hidden < 50 else f"{hidden:.0f}% hidden"
        what = _COLLECTIVES.get(s.ops, "collectives")
        cost = "an unknown share" if s.step_pct is None else f"{s.step_pct:.1f}%"
        if i == 0:
            parts.append(f"the {role_name(s.role)} {what} are {state} and cost {cost} of the step")
        else:
            parts.append(f"the {role_name(s.role)} {what} are {state} ({cost} of the step)")
    return " By communicator: " + "; ".join(parts) + "."


_COLLECTIVES = {
    "AllReduce": "all-reduces",
    "AllGather": "all-gathers",
    "ReduceScatter": "reduce-scatters",
    "AllToAll": "all-to-alls",
    "SendRecv": "send/receives",
    "Broadcast": "broadcasts",
}


def matched_across(
    rows: Sequence[CommunicatorReport],
    steps: Sequence[CommunicatorStep],
    layers: Sequence[CommunicatorLayer],
    matches: Mapping[tuple[str, int, int, str], tuple[tuple[str, int, int], ...]],
    ranks: Mapping[tuple[str, int, int], tuple[int, str]],
    gpus: int,
) -> tuple[list[CommunicatorReport], list[CommunicatorStep], list[CommunicatorLayer]]:
    """Several files' rows, with each stream-only communicator joined to the other files'
    channels whose instances end with its own (`matches`: per file, GPU and channel, the
    matched GPUs, its own included). Its members are then those GPUs' ranks; its group size,
    where the files could not tell it and hold the whole job (no rank named at or past the
    `gpus` GPUs), their count, and the bus bandwidth of a one-op communicator with it."""
    whole_job = max((r for r, _ in ranks.values()), default=-1) + 1 <= gpus
    names: dict[tuple[str, int, int, str], str] = {}
    out = []
    for r in rows:
        found = matches.get((r.file, r.pid, r.device_id, r.channel), ())
        if r.source != "stream" or len(found) < 2:
            out.append(r)
            continue
        members = tuple(sorted(ranks[g][0] for g in found))
        name = f"{r.channel}, ranks {fmt_ranks(members)}"
        names[(r.file, r.pid, r.device_id, r.communicator)] = name
        size, source, busbw = r.group_size, r.group_source, r.busbw_gbps
        if whole_job and source in (None, COUNTED):
            size, source = len(found), "matched instances"
            factor = bus_factor(r.ops, size) if "," not in r.ops else None
            if r.algbw_gbps is not None and factor is not None:
                busbw = r.algbw_gbps * factor
        out.append(
            replace(r, communicator=name, source="matched instances", members=members,
                    group_size=size, group_source=source, busbw_gbps=busbw)
        )  # fmt: skip

    def renamed(x: Any) -> Any:
        name = names.get((x.file, x.pid, x.device_id, x.communicator))
        return x if name is None else replace(x, communicator=name)

    return out, [renamed(s) for s in steps], [renamed(x) for x in layers]
