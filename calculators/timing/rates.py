"""A GPU's dense peak for a precision: the matmuls' format (fp32, tf32, half, fp8), its rate in the
catalogue, and that rate at a flat utilisation.
"""

from __future__ import annotations

from calculators.hardware.catalogue import GpuSpec


def compute_format(precision: str, fp32_uses_tf32: bool = False) -> str:
    """Format the matmuls run in: fp8 for fp8, bf16 for amp-bf16 / bf16-mixed / bf16, fp16 for
    amp-fp16 / fp16-mixed, and for fp32 either plain fp32 (PyTorch's default since 1.12:
    torch.backends.cuda.matmul.allow_tf32 = False) or tf32 when allowed."""
    if precision == "fp8":
        return "fp8"
    if "bf16" in precision:
        return "bf16"
    if "fp16" in precision:
        return "fp16"
    return "tf32" if fp32_uses_tf32 else "fp32"


def rate_and_format(gpu: GpuSpec, precision: str, fp32_uses_tf32: bool = False) -> tuple[float, str]:
    """(dense peak TFLOPS, format) that `precision`'s matmuls run at on `gpu`.

    fp32 uses the TF32 rate when `fp32_uses_tf32` and the GPU has one, else the FP32 rate.
    Raises ValueError when the catalogue has no figure for that format on this GPU.
    """
    fmt = compute_format(precision, fp32_uses_tf32)
    rate = gpu.dense_tflops(fmt)
    if rate is None and fmt == "tf32":
        fmt, rate = "fp32", gpu.dense_tflops("fp32")
    if rate is None:
        raise ValueError(f"{gpu.name} has no {fmt} rate in the GPU catalogue; choose another precision for it")
    return rate, fmt


def peak_tflops(gpu: GpuSpec, precision: str, fp32_uses_tf32: bool = False) -> float:
    """Dense peak TFLOPS of `gpu` in the format `precision` computes in (see rate_and_format)."""
    return rate_and_format(gpu, precision, fp32_uses_tf32)[0]


def achieved_tflops(gpu: GpuSpec, precision: str, utilisation: float, fp32_uses_tf32: bool = False) -> float:
    """Sustained TFLOPS per GPU: dense peak for the precision's format x utilisation."""
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return peak_tflops(gpu, precision, fp32_uses_tf32) * utilisation
