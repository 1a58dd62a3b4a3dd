"""Each GPU model's dense peak FLOP/s per dtype, beside the data path's link table
(nsysreport.ceilings, which holds the HBM bandwidth the roofline's slope uses), and the
user's --peak-tflops that overrides it.

Dense figures: datasheets quote tensor-core rates "with sparsity" (2:4 structured), twice the
dense rate a matrix product reaches; those are halved here, as the footnotes say. FP32 is the
CUDA-core (non-tensor) rate; TF32 the tensor-core rate an FP32 GEMM gets when TF32 is allowed.
A dtype a model has no tensor-core path for (FP8 before Hopper and Ada, BF16 on Volta) is
absent: its peak is unknown rather than some other unit's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nsysreport.ceilings import model_of
from nsysreport.user_facts import parse_rates

PEAK_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


@dataclass(frozen=True, slots=True)
class Peak:
    tflops: float | None  # None: unknown
    source: str  # where the figure came from, or why it is unknown


# Keyed by nsysreport.ceilings' GPU model labels; TFLOP/s, dense.
# fmt: off
PEAK_TFLOPS: dict[str, tuple[dict[str, float], str]] = {
    "GB200": ({"fp64": 40, "fp32": 80, "tf32": 1250, "bf16": 2500, "fp16": 2500, "fp8": 5000,
               "fp4": 10000},
              "NVIDIA GB200 NVL72 datasheet (72 GPUs: FP4 1,440, FP8 720, BF16 360, TF32 180 PF "
              "sparse; FP32 5,760 TF), per GPU, sparse halved"),
    "B200": ({"fp64": 37, "fp32": 75, "tf32": 1125, "bf16": 2250, "fp16": 2250, "fp8": 4500,
              "fp4": 9000},
             "NVIDIA HGX B200 datasheet (8 GPUs: FP4 144, FP8 72, BF16 36, TF32 18 PF sparse; "
             "FP32 600 TF), per GPU, sparse halved"),
    "H200 NVL": ({"fp64": 30, "fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5,
                  "fp8": 1670.5},
                 "NVIDIA H200 datasheet, H200 NVL column (sparse halved)"),
    "H200 SXM": ({"fp64": 34, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5,
                  "fp8": 1979},
                 "NVIDIA H200 datasheet, H200 SXM column (sparse halved)"),
    "H100 NVL": ({"fp64": 30, "fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5,
                  "fp8": 1670.5},
                 "NVIDIA H100 datasheet, H100 NVL column (sparse halved)"),
    "H100 PCIe": ({"fp64": 26, "fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756,
                   "fp8": 1513},
                  "NVIDIA H100 datasheet, H100 PCIe column (sparse halved)"),
    "H100 SXM5": ({"fp64": 34, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5,
                   "fp8": 1979},
                  "NVIDIA H100 datasheet, H100 SXM column (sparse halved)"),
    "A100 PCIe": ({"fp64": 9.7, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
                  "NVIDIA A100 datasheet (dense figures)"),
    "A100 SXM4": ({"fp64": 9.7, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
                  "NVIDIA A100 datasheet (dense figures)"),
    "V100 PCIe": ({"fp64": 7, "fp32": 14, "fp16": 112},
                  "NVIDIA V100 datasheet, PCIe column (tensor performance: FP16)"),
    "V100 SXM2": ({"fp64": 7.8, "fp32": 15.7, "fp16": 125},
                  "NVIDIA V100 datasheet, SXM2 column (tensor performance: FP16)"),
    "L40S": ({"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733},
             "NVIDIA L40S datasheet (sparse halved)"),
    "L40": ({"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362},
            "NVIDIA L40 datasheet (sparse halved)"),
    "L4": ({"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5},
           "NVIDIA L4 datasheet (sparse halved)"),
    "A10": ({"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125},
            "NVIDIA A10 datasheet (sparse halved)"),
    "Instinct MI300X": ({"fp64": 81.7, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4,
                         "fp16": 1307.4, "fp8": 2614.9},
                        "AMD Instinct MI300X datasheet (dense; FP32 is the matrix rate)"),
}
# fmt: on


def parse_peak_tflops(items: list[str]) -> dict[str, float]:
    """--peak-tflops DTYPE=N values, checked."""
    return parse_rates("--peak-tflops", items, PEAK_DTYPES, "DTYPE=TFLOPS", "bf16=989.5")


def peak(gpu_name: str | None, dtype: str | None, user: Mapping[str, float]) -> Peak:
    """The dense peak for `dtype` on the GPU named `gpu_name`: the user's, else the table's."""
    if dtype is None:
        return Peak(None, "dtype not recorded")
    if dtype in user:
        return Peak(user[dtype], "--peak-tflops")
    if not gpu_name:
        return Peak(None, "GPU model not recorded: give --peak-tflops")
    model = model_of(gpu_name)
    if model is None:
        return Peak(None, f"GPU model {gpu_name!r} not in the table: give --peak-tflops")
    row = PEAK_TFLOPS.get(model.label)
    if row is None or dtype not in row[0]:
        return Peak(None, f"no {dtype.upper()} peak listed for {model.label}: give --peak-tflops")
    return Peak(float(row[0][dtype]), row[1])
