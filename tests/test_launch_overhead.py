"""The host issuing a step's kernels (calculators.timing.operations.host_issue_seconds) and the
attention kernels by generation, worked by hand."""

from __future__ import annotations

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.estimate import estimate_time
from calculators.timing.operations import attention_rates, host_seconds_per_kernel, kernels_per_micro_batch
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

GPT2 = get_preset("gpt2")  # 124M: 12 layers, fused qkv, LayerNorm, GELU, learned positions
H100 = find_gpu("H100-SXM5-80GB")
TINY = TrainingSettings(micro_batch=1, seq_len=64, grad_accum=16)


def test_kernels_of_one_gpt2_micro_batch():
    """Per layer: forward 4 GEMMs (qkv, o, fc1, fc2) + attention + 5 bandwidth-bound ops (2
    LayerNorms, 2 residual adds, GELU) = 10; backward 8 GEMM gradients + attention + 5 = 14; 12
    layers: 288; the head's 3 GEMMs and the loss, eager 6 kernels (fused 1): 297 (292)."""
    assert kernels_per_micro_batch(GPT2, TINY, fused=False) == 297
    assert kernels_per_micro_batch(GPT2, TINY, fused=True) == 292


def test_host_seconds_per_kernel():
    assert host_seconds_per_kernel("eager", compiled=False) == pytest.approx(6e-6)  # dispatch 2 + launch 4
    assert host_seconds_per_kernel("auto", compiled=True) == pytest.approx(4e-6)
    assert host_seconds_per_kernel("cuda-graphs", compiled=False) == 0


def test_launch_overhead_of_a_124m_models_step():
    """GPT-2 124M, 16 micro-batches of 1 x 64 tokens on an H100: eager PyTorch issues 16 x 297
    kernels x 6 us = 28.512 ms, longer than the GPU's 14.34 ms of work, so the step's compute is
    the host's; under CUDA graphs the GPU's own time stands. (Each attention kernel, forward and
    backward, runs at least one 4 us launch: 16 x 12 x 2 of the GPU's 14.34 ms.)"""
    eager = estimate_time(GPT2, TINY, H100, TimeSettings(dataset_tokens=1e9, launch="eager"))
    graphs = estimate_time(GPT2, TINY, H100, TimeSettings(dataset_tokens=1e9, launch="cuda-graphs"))
    assert eager.compute_s == pytest.approx(16 * 297 * 6e-6)
    assert eager.compute_by_class_s["host launch"] == pytest.approx(eager.compute_s - graphs.compute_s)
    assert "host launch" not in graphs.compute_by_class_s
    assert graphs.compute_s == pytest.approx(14.34e-3, rel=1e-3)
    assert any("the host issues each kernel in 6 us" in line for line in eager.assumptions)


def test_a_large_micro_batch_hides_the_host():
    """nanoGPT's 12 x 1024 tokens per micro-batch: the GPU's work outlasts the 1.8 ms the host needs."""
    big = estimate_time(GPT2, TrainingSettings(micro_batch=12, seq_len=1024), H100, TimeSettings(dataset_tokens=1e9))
    assert "host launch" not in big.compute_by_class_s


def test_cudnn_attention_on_hopper_and_elsewhere():
    """cuDNN's fused attention on H100 at its published forward, 529 TFLOPS at 8k, head dim 128,
    causal (FlashAttention-3 paper Fig. 5d); on A100, which has no cuDNN figure, FlashAttention-2's."""
    assert attention_rates(H100, "cudnn").tflops(True, 128, 8192)[0] == 529
    assert attention_rates(find_gpu("A100-SXM4-80GB"), "cudnn").kernel == "flash2"
