"""Roofline: which bound, memory bandwidth or compute, limits the workload's matmuls.

Williams, Waterman and Patterson 2009, "Roofline: an insightful visual performance
model" (CACM 52(4)): attainable FLOP/s = min(peak FLOP/s, intensity x bandwidth),
with intensity = FLOPs / bytes moved between DRAM and the chip.
"""

from __future__ import annotations

from pydantic import BaseModel

from calculators.hardware.catalogue import GpuSpec
from calculators.models.spec import ModelSpec
from calculators.timing.rates import compute_format
from calculators.workload.training import TrainingSettings


def matmul_format(precision: str) -> str:
    """The tensor-core format the step's matmuls run in for a precision mode:
    bf16 or fp16 under mixed precision and autocast, and fp32 under fp32 (PyTorch
    keeps TF32 off for matmuls by default: torch.backends.cuda.matmul.allow_tf32)."""
    return compute_format(precision, fp32_uses_tf32=False)


def matmul_element_bytes(precision: str) -> int:
    return 4 if matmul_format(precision) == "fp32" else 2


def gemm_intensity_flops_per_byte(rows: int, inner: int, cols: int, element_bytes: int) -> float:
    """A (rows x inner) @ (inner x cols) GEMM does 2*rows*inner*cols FLOPs and, at
    best, reads both inputs and writes the output once."""
    flops = 2.0 * rows * inner * cols
    moved_bytes = element_bytes * (rows * inner + inner * cols + rows * cols)
    return flops / moved_bytes


def workload_intensity_flops_per_byte(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Intensity of the workload's dominant GEMM, the MLP up-projection on one
    micro-batch: (b*s x hidden) @ (hidden x ffn). Small micro-batches of short
    sequences fall under the ridge point and are bandwidth-bound."""
    tokens = settings.micro_batch * settings.seq_len
    return gemm_intensity_flops_per_byte(
        tokens, spec.hidden_size, spec.ffn_hidden_size, matmul_element_bytes(settings.precision)
    )


class RooflinePoint(BaseModel):
    gpu: str
    peak_tflops: float
    bandwidth_tbps: float
    ridge_flops_per_byte: float
    attainable_tflops: float
    bound: str


def roofline_point(gpu: GpuSpec, matmul_precision: str, intensity_flops_per_byte: float) -> RooflinePoint | None:
    """Where the workload sits on one GPU's roofline; None when the GPU publishes
    no dense rate for the format."""
    peak_tflops = gpu.dense_tflops(matmul_precision)
    if peak_tflops is None:
        return None
    bandwidth_tbps = gpu.memory_bandwidth_tbps
    ridge = peak_tflops / bandwidth_tbps  # TFLOP/s / TB/s = FLOP/byte
    attainable = min(peak_tflops, intensity_flops_per_byte * bandwidth_tbps)
    return RooflinePoint(
        gpu=gpu.name,
        peak_tflops=peak_tflops,
        bandwidth_tbps=bandwidth_tbps,
        ridge_flops_per_byte=ridge,
        attainable_tflops=attainable,
        bound="compute" if intensity_flops_per_byte >= ridge else "memory bandwidth",
    )
