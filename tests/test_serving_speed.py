"""The serving step model (calculators/timing/serving.py), on hand-worked numbers.

Llama-2-7B (32 layers, hidden 4096, 32 heads of 128, MLP 11008, vocab 32000, untied head):
6,738,415,616 parameters, of which 131,072,000 in the input embedding; 6,607,077,376 matmul
weights with the LM head. H100 SXM: 3.35 TB/s, 989 TFLOPS bf16, mamf-finder 794.5 TFLOPS achieved.
"""

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.library import resolve_model
from calculators.timing.serving import (
    ServingRequest,
    decode_step,
    estimate_serving_speed,
    fitting_concurrency,
    prefill,
    tp_allreduce_seconds,
    weight_kernel,
)
from calculators.workload.serving import ServingSettings

BANDWIDTH = 3.35e12 * 0.8  # datasheet x ServingSettings.memory_bandwidth_efficiency
ACHIEVED_BF16 = 794.5e12  # 989 x mamf-finder's 794.5 / 989
CURVE_BEST = 804.72  # XLA table H100 best shape, TFLOPS
GAPS_S = 32 * 12 * 1e-6  # layers x kernels per layer x a quarter of a 4 us launch
DECODE_WEIGHT_BYTES = (6_738_415_616 - 131_072_000) * 2  # every weight but the input embedding, bf16
MATMUL_WEIGHTS = 6_607_077_376
KV_BYTES_PER_TOKEN = 2 * 32 * 32 * 128 * 2  # K and V, layers, heads, head_dim, bf16 = 524,288


@pytest.fixture(scope="module")
def llama7b():
    return resolve_model("llama-2-7b")


@pytest.fixture(scope="module")
def h100():
    return find_gpu("H100-SXM5-80GB")


def test_decode_step_at_batch_one_reads_the_weights_once(llama7b, h100):
    """Batch 1 at 1,024 tokens of context: 13,214,687,232 B of weights and 1,024 x 524,288 B of KV
    at 2.68 TB/s, plus the graph gaps; FLOPs are far below."""
    step = decode_step(llama7b, ServingSettings(), h100, 1, 1024)
    assert step.weights_read_s == pytest.approx(DECODE_WEIGHT_BYTES / BANDWIDTH)  # 4.931 ms
    assert step.kv_read_s == pytest.approx(1024 * KV_BYTES_PER_TOKEN / BANDWIDTH)  # 0.200 ms
    assert step.step_s == pytest.approx(4.9309e-3 + 2.0033e-4 + GAPS_S, rel=1e-4)  # 5.515 ms
    assert step.bound == "bandwidth"


def test_decode_step_at_batch_1024_is_compute_bound(llama7b, h100):
    """1,024 rows: every linear clamps to the curve's (1024, 4096, 4096) point, 751.92 of 804.72 TFLOPS,
    so 2 x 1024 x 6,607,077,376 FLOPs at 794.5 x 751.92 / 804.72 TFLOPS = 18.23 ms, against 4.93 ms of
    weight reading."""
    step = decode_step(llama7b, ServingSettings(), h100, 1024, 16)
    rate = ACHIEVED_BF16 * 751.92 / CURVE_BEST
    assert step.linear_compute_s == pytest.approx(2 * 1024 * MATMUL_WEIGHTS / rate, rel=1e-6)  # 18.23 ms
    assert step.linear_compute_s == pytest.approx(18.227e-3, rel=1e-3)
    assert step.bound == "compute"


def test_prefill_of_2048_tokens(llama7b, h100):
    """One chunk of 2,048 rows: linears at the (2048, 4096, 4096) point, 752.32 TFLOPS of 804.72:
    2 x 2048 x 6,476,005,376 layer weights = 26.53 TFLOP in 35.71 ms; causal attention
    4 x 32 layers x 2048^2 / 2 x 4096 = 1.100 TFLOP at FlashAttention-3's published causal forward at
    2k tokens, head dim 128, 521 TFLOPS (FlashAttention-3 paper Fig. 5d) = 2.11 ms; the LM head on
    the last token at the (256, 4096, 4096) point, 418.45 TFLOPS of 804.72:
    2 x 4096 x 32000 FLOPs; gaps 0.384 ms. Weights (13.48 GB, 5.03 ms) hide behind the GEMMs."""
    result = prefill(llama7b, ServingSettings(), h100, 2048)
    layer_weights = MATMUL_WEIGHTS - 131_072_000
    linear = 2 * 2048 * layer_weights / (ACHIEVED_BF16 * 752.32 / CURVE_BEST)
    attention = 4 * 32 * 2048**2 / 2 * 4096 / 521e12
    head = 2 * 4096 * 32000 / (ACHIEVED_BF16 * 418.45 / CURVE_BEST)
    assert result.chunks == 1
    assert linear == pytest.approx(35.71e-3, rel=1e-3)
    assert result.alone_s == pytest.approx(linear + attention + head + GAPS_S, rel=1e-6)
    assert result.flops_s == pytest.approx(linear + attention, rel=1e-6)


def test_tensor_parallel_all_reduce_per_token(llama7b, h100):
    """TP 2 on NVLink 900 GB/s (450 per direction x 0.88): per layer 2 all-reduces of 4096 x 2 B,
    each 9.4 us + 2(2-1)/2 x 8,192 B / 396 GB/s = 9.42 us: 64 x 9.4207 us = 0.603 ms per token."""
    one = 9.4e-6 + 8192 / 396e9
    assert tp_allreduce_seconds(llama7b, 1, 2, h100) == pytest.approx(64 * one)
    assert tp_allreduce_seconds(llama7b, 1, 2, h100) == pytest.approx(6.0292e-4, rel=1e-4)
    assert tp_allreduce_seconds(llama7b, 1, 1, h100) == 0.0


def test_concurrency_where_the_kv_cache_runs_out(llama7b, h100):
    """4,096 tokens per sequence = 2 GiB of bf16 KV. On 80 GiB: weights 13,476,831,232 B = 12.5515 GiB,
    prefill workspace 2048 x (2 x 4096 + 3 x 11008) x 2 B = 0.15723 GiB, CUDA context 0.5 + cuBLAS 0.03
    + graphs 0.5 GiB + 10% reserve on the workspace: 13.7545 GiB; (80 - 13.7545) / 2 = 33.1 -> 33."""
    request = ServingRequest(input_len=2048, output_len=2048, concurrency=1)
    assert fitting_concurrency(llama7b, ServingSettings(), h100, request) == 33
    with pytest.raises(ValueError, match="concurrency 34 does not fit .* at most 33 sequences"):
        estimate_serving_speed(llama7b, ServingSettings(), h100, request.model_copy(update={"concurrency": 34}))


def test_continuous_batching_adds_the_prompts_to_each_output_token(llama7b, h100):
    """TPOT = decode step + concurrency x prefill FLOPs / output tokens; throughput = concurrency / TPOT."""
    request = ServingRequest(input_len=512, output_len=256, concurrency=8)
    speed = estimate_serving_speed(llama7b, ServingSettings(), h100, request)
    prompt = prefill(llama7b, ServingSettings(), h100, 512)
    assert speed.tpot_s == pytest.approx(speed.decode_step_s + 8 * prompt.flops_s / 256)
    assert speed.output_tokens_per_s_per_gpu == pytest.approx(8 / speed.tpot_s)
    assert speed.output_tokens_per_s_per_sequence == pytest.approx(1 / speed.tpot_s)
    assert speed.ttft_s == pytest.approx(prompt.alone_s + speed.decode_step_s)


def test_concurrency_zero_takes_the_throughput_optimum_that_fits(llama7b, h100):
    speed = estimate_serving_speed(llama7b, ServingSettings(), h100, ServingRequest(input_len=2048, output_len=2048))
    assert 1 <= speed.concurrency <= 33
    fullest = estimate_serving_speed(
        llama7b, ServingSettings(), h100, ServingRequest(input_len=2048, output_len=2048, concurrency=33)
    )
    assert speed.output_tokens_per_s >= 0.99 * fullest.output_tokens_per_s


def test_lengths_beyond_the_positions_are_refused(llama7b, h100):
    with pytest.raises(ValueError, match="beyond the 4,096 positions"):
        estimate_serving_speed(llama7b, ServingSettings(), h100, ServingRequest(input_len=4000, output_len=200))


def test_which_gpu_runs_which_weights():
    """FP4 tensor cores on Blackwell; Marlin weight-only FP4/FP8 on Ampere; FP8 W8A8 on Hopper; AWQ/GPTQ
    int4 from Volta; nothing quantised on a TPU (docs.vllm.ai quantization supported hardware)."""
    assert weight_kernel(find_gpu("B200-SXM-180GB"), "fp4") == "fp4"
    assert weight_kernel(find_gpu("H100-SXM5-80GB"), "fp4") == "weight-only"
    assert weight_kernel(find_gpu("H100-SXM5-80GB"), "fp8") == "fp8"
    assert weight_kernel(find_gpu("A100-SXM4-80GB"), "fp8") == "weight-only"
    assert weight_kernel(find_gpu("V100-SXM2-32GB"), "int4") == "weight-only"
    with pytest.raises(ValueError, match="runs no fp4 serving kernel"):
        weight_kernel(find_gpu("V100-SXM2-32GB"), "fp4")
    with pytest.raises(ValueError, match="runs no int4 serving kernel"):
        weight_kernel(find_gpu("TPU-v5e"), "int4")


def test_fp4_weights_take_half_a_byte_and_a_scale_per_block():
    """NVFP4: 0.5 + 1/16 B; MXFP4: 0.5 + 1/32 B per linear weight."""
    from calculators.memory.serving import quantised_weight_bytes

    assert quantised_weight_bytes(ServingSettings(weight_precision="fp4")) == 0.5625
    assert quantised_weight_bytes(ServingSettings(weight_precision="fp4", fp4_format="mxfp4")) == 0.53125
