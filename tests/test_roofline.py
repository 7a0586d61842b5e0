"""Roofline figures worked by hand."""

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.roofline import (
    gemm_intensity_flops_per_byte,
    matmul_format,
    roofline_point,
    workload_intensity_flops_per_byte,
)
from calculators.workload.training import TrainingSettings


def test_square_gemm_intensity():
    """4096^3 in bf16: 2*4096^3 FLOPs / (2 B * 3 * 4096^2) = 4096/3 = 1365.3 FLOP/B."""
    assert gemm_intensity_flops_per_byte(4096, 4096, 4096, 2) == pytest.approx(4096 / 3)


def test_h100_ridge_point_and_bounds():
    """H100 SXM: 989 TFLOPS / 3.35 TB/s = 295.2 FLOP/B."""
    h100 = find_gpu("H100-SXM5-80GB")
    low = roofline_point(h100, "bf16", 100.0)
    assert low.ridge_flops_per_byte == pytest.approx(989 / 3.35)
    assert low.attainable_tflops == pytest.approx(335.0) and low.bound == "memory bandwidth"
    high = roofline_point(h100, "bf16", 1000.0)
    assert high.attainable_tflops == pytest.approx(989.0) and high.bound == "compute"


def test_workload_intensity_uses_the_mlp_gemm_of_one_micro_batch():
    """Llama-3.1-8B, b*s = 1*2048, hidden 4096, ffn 14336, bf16:
    2*2048*4096*14336 / (2*(2048*4096 + 4096*14336 + 2048*14336)) = 1246.6 FLOP/B."""
    expected = 2 * 2048 * 4096 * 14336 / (2 * (2048 * 4096 + 4096 * 14336 + 2048 * 14336))
    spec = get_preset("llama-3.1-8b")
    assert workload_intensity_flops_per_byte(spec, TrainingSettings()) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("precision", "fmt"), [("amp-bf16", "bf16"), ("bf16-mixed", "bf16"), ("fp16-mixed", "fp16"), ("fp32", "fp32")]
)
def test_matmul_format(precision, fmt):
    assert matmul_format(precision) == fmt


def test_gpu_without_the_format_has_no_point():
    v100 = find_gpu("V100-SXM2-16GB")  # Volta: no bf16 tensor cores
    assert roofline_point(v100, "bf16", 100.0) is None
