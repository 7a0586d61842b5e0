"""Fused attention at its published figures (data/attention_kernels.csv), worked by hand.

The figures read here: H100 SXM5, head dim 128, 8k tokens, causal (FlashAttention-3 paper Fig. 5
and FlashAttention-2's H100 figure): FlashAttention-2 forward 333 TFLOPS, forward + backward 308;
without the mask, FlashAttention-3 forward 646, backward 559, and with it forward 602.
"""

from __future__ import annotations

import math

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.attention_kernels import attention_tables, measured_tflops
from calculators.timing.operations import attention_rates, attention_seconds
from calculators.workload.training import TrainingSettings

H100 = find_gpu("H100-SXM5-80GB")
LLAMA31_8B = get_preset("llama-3.1-8b")  # 32 heads x head dim 128 = 4,096


def test_the_figures_load_by_family_kernel_pass_and_mask():
    tables = attention_tables()
    assert ("H100", "flash3", "forward", True) in tables
    assert ("A100", "flash2", "forward+backward", True) in tables


def test_llama_8b_layer_attention_at_8k_causal_on_h100():
    """One layer, b 1, s 8,192: 4 x 8,192^2 x 4,096 / 2 = 549,755,813,888 FLOPs forward.
    FlashAttention-2 forward at 333 TFLOPS: 1.650918 ms. Forward + backward (3.5x the FLOPs) at the
    published combined 308 TFLOPS: 3.5 x 549.7558e9 / 308e12 = 6.247225 ms, so the backward is
    4.596307 ms (2.5 x the FLOPs at 2.5 / (3.5 / 308 - 1 / 333) = 299.02 TFLOPS)."""
    forward, backward = attention_seconds(LLAMA31_8B, TrainingSettings(seq_len=8192), attention_rates(H100))
    assert forward == pytest.approx(1.650918e-3, rel=1e-5)
    assert forward + backward == pytest.approx(6.247225e-3, rel=1e-5)
    assert backward == pytest.approx(4.596307e-3, rel=1e-5)


def test_flash3_causal_backward_scales_the_unmasked_backward_by_the_forward():
    """FlashAttention-3's backward was published without the mask (559 at 8k, head dim 128); with
    it, x the forward's 602 / 646: 520.93 TFLOPS."""
    forward, backward = measured_tflops("H100", "flash3", True, 128.0, 8192.0)
    assert forward == 602
    assert backward == pytest.approx(559 * 602 / 646, rel=1e-9)


def test_interpolation_in_log2_of_sequence_and_head_dim():
    """FlashAttention-2 forward with the mask on H100, head dim 128: 298 at 2k, 319 at 4k; at 3,000
    tokens log2(3000 / 2048) = 0.55075 of the way: 298 + 0.55075 x 21 = 309.566. Head dim 96 at 8k
    between 64 (295) and 128 (333): log2(96 / 64) = 0.58496: 295 + 0.58496 x 38 = 317.229. Past
    16k the figure stays at 16k's (335)."""
    assert measured_tflops("H100", "flash2", True, 128.0, 3000.0)[0] == pytest.approx(
        298 + math.log2(3000 / 2048) * 21, rel=1e-9
    )
    assert measured_tflops("H100", "flash2", True, 96.0, 8192.0)[0] == pytest.approx(
        295 + math.log2(1.5) * 38, rel=1e-9
    )
    assert measured_tflops("H100", "flash2", True, 128.0, 65536.0)[0] == 335


def test_other_gpus_scale_the_nearest_measured_family_by_their_peak():
    """H100 PCIe (756 bf16 TFLOPS) takes the H100 SXM5's (989) figures x 756 / 989; A100s the A100
    SXM4's; FlashAttention-3 runs only on Hopper, cuDNN only on Hopper and Blackwell (FlashAttention-2
    elsewhere)."""
    pcie = attention_rates(find_gpu("H100-PCIe-80GB"), "flash2")
    assert (pcie.family, pcie.scale) == ("H100", pytest.approx(756 / 989))
    assert pcie.tflops(True, 128, 8192)[0] == pytest.approx(333 * 756 / 989)
    a100 = attention_rates(find_gpu("A100-SXM4-80GB"), "flash3")
    assert (a100.family, a100.kernel, a100.scale) == ("A100", "flash2", 1.0)
    assert attention_rates(find_gpu("H200-SXM-141GB"), "flash3").kernel == "flash3"
    assert attention_rates(find_gpu("A100-SXM4-80GB"), "cudnn").kernel == "flash2"
    assert attention_rates(find_gpu("B200-SXM-180GB"), "flash3").kernel == "flash2"


def test_a100_takes_its_forward_and_backward_figure_for_both_passes():
    """A100's FlashAttention-2 figures are forward + backward only: 182 TFLOPS at 8k, head dim 128,
    causal, for each pass."""
    assert measured_tflops("A100", "flash2", True, 128.0, 8192.0) == (182, 182)


def test_an_image_models_attention_runs_at_flash_attention_2_without_the_mask():
    """A made-up GPU of 100 bf16 TFLOPS without FP8 takes A100's figures x 100 / 312: FlashAttention-2
    without the mask at head dim 64 and 512 tokens (a ViT's 197 clamp there), 132 TFLOPS forward +
    backward (FlashAttention-2 paper Fig. 4a), 42.308 TFLOPS for each pass."""
    from calculators.hardware.catalogue import GpuSpec
    from calculators.models.vision_library import vision_model
    from calculators.timing import vision_step as vs

    device = GpuSpec(
        name="Made-up-GPU", vendor="test", category="datacenter", memory_gb=80, memory_bandwidth_tbps=1.0,
        fp32_tflops=10, bf16_tflops=100, fp16_tflops=100, launch_year=2024, source="a made-up test device",
        as_of="2026-11-27",
    )  # fmt: skip
    rates = vs.step_rates(
        device, vs.VisionStepInput(model=vision_model("resnet50"), micro_batch=8, precision="amp-bf16")
    )
    assert rates.attention_forward_tflops == pytest.approx(132 * 100 / 312)
    assert rates.attention_backward_tflops == pytest.approx(132 * 100 / 312)


def test_a_figure_without_a_public_source_is_refused():
    from pydantic import ValidationError

    from calculators.timing.attention_kernels import AttentionKernelPoint

    row = dict(gpu_family="H100", kernel="flash2", direction="forward", causal="true", head_dim=128, seq_len=512)
    row |= dict(measured_tflops=191, figure="Fig. 5d", as_of="2024-07-11")
    assert AttentionKernelPoint.model_validate(row | {"source": "https://arxiv.org/abs/2407.08608"}).causal
    with pytest.raises(ValidationError, match="not an https:// URL"):
        AttentionKernelPoint.model_validate(row | {"source": "a benchmark I ran"})
