"""The ceiling of each data-path link of a GPU (HBM, NVLink, PCIe, network) and where it came
from: the user's --link-peak, the export, a simulated trace's configuration, a table of GPU
models; else unknown."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A GPU model's peak rates, GB/s per direction (datasheets state both directions summed
    for NVLink and PCIe: halved here, as NCCL's bus bandwidth is per direction)."""

    pattern: str  # case-insensitive, searched in the GPU's name
    label: str
    hbm_gbps: float
    pcie_gbps: float
    pcie: str  # generation and width, e.g. "PCIe Gen5 x16"
    nvlink_gbps: float | None  # None: the GPUs talk over PCIe (bridges between pairs ignored)
    nvlink: str | None
    source: str


# First match wins: the specific names come before the general ones. Sources are the vendors'
# datasheets; PCIe x16 per direction is 16 (Gen3), 32 (Gen4), 64 GB/s (Gen5), as they round it.
# fmt: off
GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel(r"GB200", "GB200", 8000, 450, "NVLink-C2C to Grace", 900, "NVLink 5, 18 links",
             "NVIDIA GB200 NVL72 datasheet: 1.8 TB/s NVLink, 900 GB/s NVLink-C2C"),
    GpuModel(r"B200", "B200", 8000, 64, "PCIe Gen5 x16", 900, "NVLink 5, 18 links",
             "NVIDIA HGX B200 datasheet: 8 TB/s HBM3e, 1.8 TB/s NVLink"),
    GpuModel(r"H200 NVL", "H200 NVL", 4800, 64, "PCIe Gen5 x16", None, None,
             "NVIDIA H200 datasheet: 4.8 TB/s HBM3e, PCIe Gen5 128 GB/s"),
    GpuModel(r"H200", "H200 SXM", 4800, 64, "PCIe Gen5 x16", 450, "NVLink 4, 18 links",
             "NVIDIA H200 datasheet: 4.8 TB/s HBM3e, 900 GB/s NVLink, PCIe Gen5 128 GB/s"),
    GpuModel(r"H100 NVL", "H100 NVL", 3900, 64, "PCIe Gen5 x16", None, None,
             "NVIDIA H100 datasheet: 3.9 TB/s HBM3, PCIe Gen5 128 GB/s"),
    GpuModel(r"H100 PCIe", "H100 PCIe", 2000, 64, "PCIe Gen5 x16", None, None,
             "NVIDIA H100 datasheet: 2 TB/s HBM2e, PCIe Gen5 128 GB/s"),
    GpuModel(r"H100|H800", "H100 SXM5", 3350, 64, "PCIe Gen5 x16", 450, "NVLink 4, 18 links",
             "NVIDIA H100 datasheet: 3.35 TB/s HBM3, 900 GB/s NVLink, PCIe Gen5 128 GB/s"),
    GpuModel(r"A100.*PCIe", "A100 PCIe", 1935, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA A100 datasheet: 1.9 TB/s HBM2e (80GB), PCIe Gen4 64 GB/s"),
    GpuModel(r"A100|A800", "A100 SXM4", 2039, 32, "PCIe Gen4 x16", 300, "NVLink 3, 12 links",
             "NVIDIA A100 datasheet: 2 TB/s HBM2e (80GB), 600 GB/s NVLink, PCIe Gen4 64 GB/s"),
    GpuModel(r"V100.*PCIe", "V100 PCIe", 900, 16, "PCIe Gen3 x16", None, None,
             "NVIDIA V100 datasheet: 900 GB/s HBM2, PCIe Gen3 32 GB/s"),
    GpuModel(r"V100", "V100 SXM2", 900, 16, "PCIe Gen3 x16", 150, "NVLink 2, 6 links",
             "NVIDIA V100 datasheet: 900 GB/s HBM2, 300 GB/s NVLink, PCIe Gen3 32 GB/s"),
    GpuModel(r"L40S", "L40S", 864, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA L40S datasheet: 864 GB/s GDDR6, PCIe Gen4 x16 64 GB/s"),
    GpuModel(r"L40\b", "L40", 864, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA L40 datasheet: 864 GB/s GDDR6, PCIe Gen4 x16 64 GB/s"),
    GpuModel(r"\bL4\b", "L4", 300, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA L4 datasheet: 300 GB/s GDDR6, PCIe Gen4 x16 64 GB/s"),
    GpuModel(r"A10G?\b", "A10", 600, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA A10 datasheet: 600 GB/s GDDR6, PCIe Gen4 64 GB/s"),
    GpuModel(r"RTX 5090", "GeForce RTX 5090", 1792, 64, "PCIe Gen5 x16", None, None,
             "NVIDIA GeForce RTX 5090 specifications: 1792 GB/s GDDR7, PCIe Gen5"),
    GpuModel(r"RTX 4090", "GeForce RTX 4090", 1008, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA GeForce RTX 4090 specifications: 1008 GB/s GDDR6X, PCIe Gen4"),
    GpuModel(r"RTX 3090", "GeForce RTX 3090", 936, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA GeForce RTX 3090 specifications: 936 GB/s GDDR6X, PCIe Gen4"),
    GpuModel(r"RTX 3080", "GeForce RTX 3080", 760, 32, "PCIe Gen4 x16", None, None,
             "NVIDIA GeForce RTX 3080 specifications: 760 GB/s GDDR6X, PCIe Gen4"),
    GpuModel(r"MI300X|MI325X", "Instinct MI300X", 5300, 64, "PCIe Gen5 x16", 448,
             "Infinity Fabric, 7 links",
             "AMD Instinct MI300X datasheet: 5.3 TB/s HBM3, 896 GB/s Infinity Fabric peer-to-peer, "
             "PCIe Gen5 128 GB/s"),
)
# fmt: on


@dataclass(frozen=True, slots=True)
class Ceiling:
    link: str  # hbm, nvlink, pcie or network
    peak_gbps: float | None  # None: unknown
    source: str  # where the figure came from, or why it is unknown


@dataclass(frozen=True, slots=True)
class GpuHardware:
    """What the trace says of one GPU's data path (queries/report/gpu_hardware.sql)."""

    gpu_name: str | None
    memory_bandwidth_bps: int | None
    sim_link: str | None
    sim_link_bps: float | None
    sim_copy_bps: float | None

    @property
    def model(self) -> GpuModel | None:
        return model_of(self.gpu_name)


def model_of(gpu_name: str | None) -> GpuModel | None:
    """The table's entry for a GPU name (`NVIDIA H100 80GB HBM3`), None for a model not in it."""
    if not gpu_name:
        return None
    return next((m for m in GPU_MODELS if re.search(m.pattern, gpu_name, re.IGNORECASE)), None)


def hbm(hw: GpuHardware, user: Mapping[str, float]) -> Ceiling:
    """The HBM peak: the user's, the export's memoryBandwidth, else the GPU model's."""
    if "hbm" in user:
        return Ceiling("hbm", user["hbm"], "--link-peak hbm")
    if hw.memory_bandwidth_bps:
        return Ceiling(
            "hbm", hw.memory_bandwidth_bps / 1e9, "export: TARGET_INFO_GPU.memoryBandwidth"
        )
    model = hw.model
    if model is not None:
        return Ceiling("hbm", model.hbm_gbps, f"GPU model table: {model.label} ({model.source})")
    return Ceiling("hbm", None, _unknown(hw, "hbm"))


def host_copies(hw: GpuHardware, user: Mapping[str, float]) -> Ceiling:
    """The PCIe path host<->device copies take."""
    if "pcie" in user:
        return Ceiling("pcie", user["pcie"], "--link-peak pcie")
    if hw.sim_copy_bps:
        return Ceiling("pcie", hw.sim_copy_bps / 1e9, "simulated host copy rate")
    model = hw.model
    if model is not None:
        return Ceiling(
            "pcie",
            model.pcie_gbps,
            f"GPU model table: {model.label}, {model.pcie} ({model.source})",
        )
    return Ceiling("pcie", None, _unknown(hw, "pcie"))


# The most GPUs one NVLink (or PCIe) domain joins, by model: an HGX board holds 8; a GB200
# NVL72 rack joins 72 over NVLink. A group larger than that spans hosts: it rides the network.
DOMAIN_GPUS = {"GB200": 72}
HOST_GPUS = 8


def spans_hosts(hw: GpuHardware, group_gpus: int | None) -> bool:
    """A collective group too large for one host (or NVLink domain) of this GPU model."""
    model = hw.model
    largest = DOMAIN_GPUS.get(model.label, HOST_GPUS) if model is not None else HOST_GPUS
    return group_gpus is not None and group_gpus > largest


def gpu_to_gpu(hw: GpuHardware, user: Mapping[str, float], between_hosts: bool) -> Ceiling:
    """The link between this GPU and the others of a collective or a peer copy: the network
    between hosts, else NVLink when the GPU has it (or the user gives its peak), else PCIe."""
    if between_hosts:
        if "network" in user:
            return Ceiling("network", user["network"], "--link-peak network")
        return Ceiling(
            "network",
            None,
            "unknown: the group spans hosts (several hosts, or more GPUs than one holds) and "
            "no export records the network's rate (give --link-peak network=GBPS)",
        )
    if hw.sim_link in ("nvlink", "pcie") and hw.sim_link_bps and hw.sim_link not in user:
        return Ceiling(hw.sim_link, hw.sim_link_bps / 1e9, "simulated link bus bandwidth")
    model = hw.model
    has_nvlink = (
        "nvlink" in user
        or hw.sim_link == "nvlink"
        or (model is not None and model.nvlink_gbps is not None and hw.sim_link is None)
    )
    link = "nvlink" if has_nvlink else "pcie"
    if link in user:
        return Ceiling(link, user[link], f"--link-peak {link}")
    if model is not None:
        if link == "nvlink" and model.nvlink_gbps is not None:
            return Ceiling(
                "nvlink",
                model.nvlink_gbps,
                f"GPU model table: {model.label}, {model.nvlink} ({model.source})",
            )
        return Ceiling(
            "pcie",
            model.pcie_gbps,
            f"GPU model table: {model.label}, {model.pcie} ({model.source})",
        )
    return Ceiling(link, None, _unknown(hw, link))


def _unknown(hw: GpuHardware, link: str) -> str:
    what = f"GPU model {hw.gpu_name!r} is not in the table" if hw.gpu_name else "no GPU model"
    return f"unknown: {what} (give --link-peak {link}=GBPS)"
