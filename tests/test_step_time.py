"""The per-operation step: GEMM roofline, measured shape curve, attention, optimizer, fp8.

Numbers worked out by hand in the comments (H100 SXM: 989 dense bf16 TFLOPS, 3.35 TB/s).
"""

from __future__ import annotations

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.models.presets import get_preset
from calculators.timing.estimate import estimate_time
from calculators.timing.operations import (
    GemmRates,
    activation_bytes_per_element,
    attention_rates,
    attention_seconds,
    curve_family,
    elementwise_bytes_per_token,
    fp8_cast_bytes,
    gemm_seconds,
    kernels_fused,
    loss_bytes_per_token,
    matmul_fraction,
    norm_bytes_per_element,
    op_selective_recompute_seconds,
    op_selective_recomputed_linears,
    optimizer_bytes_per_parameter,
    rope_bytes_per_element,
    shape_factor,
)
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

H100 = find_gpu("H100-SXM5-80GB")
LLAMA2_7B = get_preset("llama-2-7b")


def test_shape_factor_at_and_between_measured_points():
    # H100 curve (XLA key sm_90). Best measured shape: 16384 rows, n 2048, k 4096: 804.72 TFLOPS.
    # 16384 x 1024 x 1024: 677.65 / 804.72 = 0.84209; 4096 rows: 497.56 / 804.72 = 0.61830.
    assert shape_factor(16384, 1024, 1024) == pytest.approx(0.84209, rel=1e-4)
    assert shape_factor(4096, 1024, 1024) == pytest.approx(0.61830, rel=1e-4)
    # 2^12.5 = 5792.6 rows: halfway (log2) between 4096 (497.56) and 8192 (598.52) -> 548.04 / 804.72
    assert shape_factor(2**12.5, 1024, 1024) == pytest.approx(0.68103, rel=1e-4)
    # (16384, n 2048, k 768): log2 interpolation between k 512 (612.68) and 1024 (690.18), weight
    # log2(1.5) = 0.58496 -> 658.01 / 804.72 = 0.81769.
    assert shape_factor(16384, 2048, 768) == pytest.approx(0.81769, rel=1e-4)
    # beyond the measured range the edge: 16384 x 4096 x 4096, 788.70 / 804.72 = 0.98009
    assert shape_factor(65536, 16384, 8192) == pytest.approx(0.98009, rel=1e-4)


def test_shape_factor_below_4096_rows_is_measured():
    """Rows under 4096 (a micro-batch of 1 x 2048 tokens, a weight gradient's 2048 rows) are
    measured points, not clamped to 4096: 2048 x 2048 x 2048 runs at 641.04 TFLOPS, 1024 rows at
    529.46, against 804.72 at best; under the smallest measured 256 rows the edge applies."""
    assert shape_factor(2048, 2048, 2048) == pytest.approx(641.04 / 804.72, rel=1e-4)
    assert shape_factor(1024, 2048, 2048) == pytest.approx(529.46 / 804.72, rel=1e-4)
    assert shape_factor(64, 2048, 2048) == shape_factor(256, 2048, 2048)


def test_blackwell_gpus_follow_the_b200_curve():
    """B200's curve (XLA key sm_100_B200) peaks at 16384 x 4096 x 4096, 1670.47 TFLOPS, and
    2048 x 2048 x 2048 runs at 985.76: 0.59011 of its best, against H100's 0.79660."""
    assert shape_factor(16384, 4096, 4096, "B200") == pytest.approx(1.0)
    assert shape_factor(2048, 2048, 2048, "B200") == pytest.approx(985.76 / 1670.47, rel=1e-4)
    assert [curve_family(find_gpu(name)) for name in ("B200-SXM-180GB", "B300-SXM-288GB", "H200-SXM-141GB")] == [
        "B200",
        "B200",
        "H100",
    ]
    # a GPU with no curve of its own takes H100's
    assert curve_family(find_gpu("MI300X-192GB")) == "H100"


def test_mamf_fraction_of_each_measured_part():
    """mamf-finder's MAMF over peak (ml-engineering @744d01e): GH200 828.6 / 989, A100 PCIe
    252.9 / 312, MI355X 1565 / 2516.6 (the catalogue's peak, not the table's 2300), B300 fp8
    3353.3 / 4500; H200 has H100's 794.5 / 989 in bf16 ("H200 is the same") and its own 1453.4 / 1979
    in fp8; MI250X, unmeasured, takes MI300X's 668.4 / 1307.4 (the catalogue's peak, not 1300)."""
    fraction = {name: matmul_fraction(find_gpu(name)) for name in ("GH200-96GB", "A100-PCIe-80GB", "MI355X-288GB")}
    assert fraction == pytest.approx(
        {"GH200-96GB": 0.83782, "A100-PCIe-80GB": 0.81058, "MI355X-288GB": 0.62187}, rel=1e-4
    )
    assert matmul_fraction(find_gpu("B300-SXM-288GB"), "fp8") == pytest.approx(0.74518, rel=1e-4)
    assert matmul_fraction(find_gpu("H200-SXM-141GB")) == pytest.approx(0.80334, rel=1e-4)
    assert matmul_fraction(find_gpu("H200-SXM-141GB"), "fp8") == pytest.approx(0.73441, rel=1e-4)
    assert matmul_fraction(find_gpu("MI250X-128GB")) == pytest.approx(0.51124, rel=1e-4)


def test_gemm_roofline_compute_bound_shape():
    """16384 x 4096 @ 4096 x 4096: 2 x 16384 x 4096^2 = 5.4976e11 FLOPs at 989 x 0.803 x 0.98009
    = 778.36 TFLOPS -> 0.70630 ms; bytes 2 x (16384 x 4096 x 2 + 4096^2) = 302 MB / 3.35 TB/s =
    0.090 ms, so compute-bound."""
    seconds = gemm_seconds(16384, 4096, 4096, 989, 0.803, 3.35, 2)
    assert seconds == pytest.approx(0.70630e-3, rel=1e-4)


def test_gemm_roofline_memory_bound_shape():
    """1 x 4096 @ 4096 x 4096 (one token): 2 x (4096 + 4096^2 + 4096) = 33,570,816 bytes /
    3.35 TB/s = 10.021 us; its 33.6 MFLOPs would take 0.1 us even at the smallest measured
    shape's rate: memory-bound."""
    seconds = gemm_seconds(1, 4096, 4096, 989, 0.803, 3.35, 2)
    assert seconds == pytest.approx(10.0211e-6, rel=1e-4)


def test_flash_attention_forward():
    """b 1, s 4096, heads x head_dim 4096: 4 x 4096^2 x 4096 / 2 (causal) = 1.3744e11 FLOPs at
    FlashAttention-2's published 319 TFLOPS (H100, head dim 128, 4k, causal) -> 0.43085 ms."""
    forward, _ = attention_seconds(LLAMA2_7B, TrainingSettings(seq_len=4096), attention_rates(H100))
    assert forward == pytest.approx(0.43085e-3, rel=1e-4)


def test_flash_attention_1_runs_at_its_own_published_figures():
    """FlashAttention-1 forward + backward on H100 at 4k, head dim 128, causal: 126 TFLOPS, against
    FlashAttention-2's 294 (FlashAttention-2 paper's H100 figure): the whole attention 294 / 126
    = 2.333x as long. Forward of the test above: 1.3744e11 / 126e12 = 1.09078 ms."""
    forward, backward = attention_seconds(LLAMA2_7B, TrainingSettings(seq_len=4096), attention_rates(H100, "flash1"))
    assert forward == pytest.approx(1.09078e-3, rel=1e-4)
    flash2 = sum(attention_seconds(LLAMA2_7B, TrainingSettings(seq_len=4096), attention_rates(H100)))
    assert (forward + backward) / flash2 == pytest.approx(294 / 126)


def test_flash_attention_3_runs_faster_on_hopper_only():
    """FlashAttention-3's forward at 4k, head dim 128, causal on H100: 579 TFLOPS (FlashAttention-3
    paper Fig. 5d), also on H200 (same peak); A100 has no FlashAttention-3 and runs FlashAttention-2."""
    assert attention_rates(H100, "flash3").tflops(True, 128, 4096)[0] == 579
    assert attention_rates(find_gpu("H200-SXM-141GB"), "flash3").tflops(True, 128, 4096)[0] == 579
    assert attention_rates(find_gpu("A100-SXM4-80GB"), "flash3").kernel == "flash2"


def test_attention_kernel_setting_reaches_the_step():
    settings = TrainingSettings(seq_len=4096)
    flash2 = estimate_time(LLAMA2_7B, settings, H100, TimeSettings(dataset_tokens=1e9))
    flash1 = estimate_time(LLAMA2_7B, settings, H100, TimeSettings(dataset_tokens=1e9, attention_kernel="flash1"))
    assert flash1.compute_by_class_s["attention"] == pytest.approx(294 / 126 * flash2.compute_by_class_s["attention"])
    assert flash1.compute_by_class_s["gemm"] == flash2.compute_by_class_s["gemm"]
    assert any("FlashAttention-1 / Triton at its published TFLOPS" in line for line in flash1.assumptions)


def test_adamw_step_bytes_per_parameter():
    # bf16-mixed: gradient 2 + master read/write 8 + bf16 weight write 2 + 2 states x (4 + 4) = 28.
    assert optimizer_bytes_per_parameter(TrainingSettings(precision="bf16-mixed")) == 28
    # pure bf16: gradient 2 + weight read/write 4 + 2 states x (2 + 2) = 14.
    assert optimizer_bytes_per_parameter(TrainingSettings(precision="bf16")) == 14


def test_full_recompute_reruns_the_forward_and_counts_apart():
    plain = estimate_time(LLAMA2_7B, TrainingSettings(seq_len=4096), H100, TimeSettings(dataset_tokens=1e9))
    full = estimate_time(
        LLAMA2_7B, TrainingSettings(seq_len=4096, checkpointing="full"), H100, TimeSettings(dataset_tokens=1e9)
    )
    assert plain.compute_by_class_s["recompute"] == 0
    # the layers' forward GEMMs are a third of their forward + backward (2 of 6 FLOPs per weight)
    assert full.compute_by_class_s["recompute"] > full.compute_by_class_s["gemm"] / 4
    assert full.mfu < plain.mfu and full.hfu > full.mfu


def test_fp8_runs_matmuls_at_the_fp8_rate():
    bf16 = estimate_time(LLAMA2_7B, TrainingSettings(seq_len=4096), H100, TimeSettings(dataset_tokens=1e9))
    fp8 = estimate_time(
        LLAMA2_7B, TrainingSettings(seq_len=4096, precision="fp8"), H100, TimeSettings(dataset_tokens=1e9)
    )
    assert fp8.compute_format == "fp8" and fp8.peak_tflops == 1979
    # twice the rate at fp8's own achievable fraction, 1402.6 / 1979 = 0.70874 against bf16's
    # 794.5 / 989 = 0.80334 (mamf-finder on H100 SXM): 0.5 x 0.80334 / 0.70874 = 0.56674 of the bf16
    # GEMM time (one-byte operands make the few memory-bound GEMMs a little faster still: 2%)
    assert matmul_fraction(H100, "fp8") == pytest.approx(0.70874, rel=1e-4)
    assert matmul_fraction(H100, "bf16") == pytest.approx(794.5 / 989)
    assert fp8.compute_by_class_s["gemm"] == pytest.approx(bf16.compute_by_class_s["gemm"] * 0.56674, rel=0.02)
    # casts add bandwidth-bound time
    assert fp8.compute_by_class_s["elementwise"] > bf16.compute_by_class_s["elementwise"]
    assert fp8.step_s < bf16.step_s


def test_rmsnorm_bytes_eager_and_fused():
    """Eager RMSNorm in bf16 (HF / torchtitan op sequence): upcast 2 + 4, pow 4 + 4, mean 4,
    x * rsqrt 4 + 4, downcast 4 + 2, * weight 2 + 2 = 36 bytes per element; in fp32 the two
    casts go: 28. Fused, and LayerNorm (one aten kernel) in any case: read 2 + write 2 = 4."""
    assert norm_bytes_per_element(LLAMA2_7B, 2, fused=False) == 36
    assert norm_bytes_per_element(LLAMA2_7B, 4, fused=False) == 28
    assert norm_bytes_per_element(LLAMA2_7B, 2, fused=True) == 4
    assert norm_bytes_per_element(get_preset("gpt2"), 2, fused=False) == 4


def test_rope_and_activation_bytes_eager_and_fused():
    # RoPE: 10 element moves eager (cos mul 2, neg 1, cat 2, sin mul 2, add 3), 2 fused; bf16.
    assert rope_bytes_per_element(2, fused=False) == 20
    assert rope_bytes_per_element(2, fused=True) == 4
    # SwiGLU: silu (2) + mul (3) = 5 moves eager, read gate + up and write once = 3 fused; GELU 2.
    assert activation_bytes_per_element(LLAMA2_7B, 2, fused=False) == 10
    assert activation_bytes_per_element(LLAMA2_7B, 2, fused=True) == 6
    assert activation_bytes_per_element(get_preset("gpt2"), 2, fused=False) == 4


def test_layer_elementwise_bytes_per_token_llama2_7b():
    """Llama-2-7B (h 4096, f 11008, q = kv = 4096, 2 RMSNorms), bf16, one rank.
    Eager: norms 2 x 4096 x 36 = 294,912; residual adds 2 x 3 x 4096 x 2 = 49,152; SwiGLU
    11,008 x 10 = 110,080; RoPE (4096 + 4096) x 20 = 163,840; total 617,984 bytes.
    Fused: 32,768 + 49,152 + 66,048 + 32,768 = 180,736 bytes."""
    settings = TrainingSettings(micro_batch=1, seq_len=1)
    assert elementwise_bytes_per_token(LLAMA2_7B, settings, fused=False) == 617_984
    assert elementwise_bytes_per_token(LLAMA2_7B, settings, fused=True) == 180_736


def test_loss_bytes_per_token_eager_fused_and_fp32():
    """Vocabulary 32,000. Eager bf16: upcast 2 + 4, log_softmax 4 + 4, NLL gradient 4, its
    backward 4 + 4 + 4, downcast 4 + 2 = 36 bytes per entry: 1,152,000. Fused: read 2, write 2:
    128,000. fp32 logits need no casts: 24 x 32,000 = 768,000. Liger's fused linear loss is fused."""
    assert loss_bytes_per_token(LLAMA2_7B, TrainingSettings(), fused=False) == 1_152_000
    assert loss_bytes_per_token(LLAMA2_7B, TrainingSettings(), fused=True) == 128_000
    assert loss_bytes_per_token(LLAMA2_7B, TrainingSettings(precision="fp32"), fused=False) == 768_000
    assert loss_bytes_per_token(LLAMA2_7B, TrainingSettings(loss="fused-linear"), fused=False) == 128_000


def test_fp8_cast_bytes_of_one_llama2_layer_and_token():
    """One token through a Llama-2-7B layer: inputs 3 x 4096 (q, k, v) + 4096 (o) + 2 x 4096
    (gate, up) + 11008 (down) = 35,584; weights 4 x 4096^2 + 3 x 4096 x 11008 = 202,375,168;
    output gradients 4 x 4096 + 2 x 11008 + 4096 = 42,496. Each: amax read 2 + cast 2 + 1 +
    transpose 1 + 1 = 7 bytes: 7 x 202,453,248 = 1,417,172,736."""
    assert fp8_cast_bytes(LLAMA2_7B, TrainingSettings(micro_batch=1, seq_len=1)) == 1_417_172_736


def test_op_selective_recomputes_every_second_matmul():
    """Llama-2-7B's linears in forward order q, k, v, o, gate, up, down: k, o and up are
    recomputed. On 16,384 tokens: 2 x 16384 x 4096 x (4096 + 4096 + 11008) = 2.5770e12 FLOPs at
    989 x 0.803 x 0.98075 (the curve's edge) = 778.88 TFLOPS: 3.3086 ms per layer."""
    names = [linear.name for linear in op_selective_recomputed_linears(LLAMA2_7B)]
    assert names == ["k", "o", "up"]
    rates = GemmRates(peak_tflops=989, fraction=0.803, bandwidth_tbps=3.35, element_bytes=2)
    settings = TrainingSettings(micro_batch=1, seq_len=16384)
    assert op_selective_recompute_seconds(LLAMA2_7B, settings, rates) == pytest.approx(3.3108e-3, rel=1e-4)
    step = estimate_time(
        LLAMA2_7B, settings.model_copy(update={"checkpointing": "op-selective"}), H100, TimeSettings(dataset_tokens=1e9)
    )
    assert step.compute_by_class_s["recompute"] > 0


def test_megatron_lm_unfused_vocab_parallel_loss():
    """Megatron-LM's default cross-entropy, one pass per step: .float() 2 + 4, max 4, subtract
    4 + 4, exp 4 + 4, sum 4, divide 4 + 4, backward multiply 4 + 4, cast back 4 + 2 = 52 B per
    logit in bf16 (32000 x 52 = 1,664,000 B per Llama-2 token); fp32 logits skip both casts: 40.
    Explicit fused or eager kernels override `kernels`; Liger's fused linear loss wins over both."""
    bf16, fp32 = TrainingSettings(), TrainingSettings(precision="fp32")
    assert loss_bytes_per_token(LLAMA2_7B, bf16, loss_kernel="vocab-parallel") == 1_664_000
    assert loss_bytes_per_token(LLAMA2_7B, fp32, loss_kernel="vocab-parallel") == 32_000 * 40
    assert loss_bytes_per_token(LLAMA2_7B, bf16, fused=True, loss_kernel="eager") == 1_152_000
    assert loss_bytes_per_token(LLAMA2_7B, bf16, fused=False, loss_kernel="fused") == 128_000
    liger = TrainingSettings(loss="fused-linear")
    assert loss_bytes_per_token(LLAMA2_7B, liger, loss_kernel="vocab-parallel") == 128_000


def test_loss_kernel_reaches_the_step_breakdown():
    """Llama-2-7B's shapes with the vocabulary of Megatron's weak-scaling table (131072; the loss
    depends on the vocabulary alone), 4 micro-batches of 4096 tokens on
    H100 (3.35 TB/s): the unfused loss takes 4 x 4096 x 131072 x 52 / 3.35e12 = 33.33 ms a step,
    the fused one 4 x 4096 x 131072 x 4 / 3.35e12 = 2.56 ms."""
    spec = LLAMA2_7B.model_copy(update={"vocab_size": 131072})
    settings = TrainingSettings(micro_batch=1, seq_len=4096, grad_accum=4)
    unfused = estimate_time(
        spec, settings, H100, TimeSettings(dataset_tokens=1e9, kernels="fused", loss_kernel="vocab-parallel")
    )
    fused = estimate_time(spec, settings, H100, TimeSettings(dataset_tokens=1e9, kernels="fused"))
    assert unfused.compute_by_class_s["loss"] == pytest.approx(4 * 4096 * 131072 * 52 / 3.35e12)
    assert fused.compute_by_class_s["loss"] == pytest.approx(4 * 4096 * 131072 * 4 / 3.35e12)
    assert any("Megatron-LM's unfused vocab-parallel cross-entropy" in line for line in unfused.assumptions)


def test_megatron_framework_runs_its_default_unfused_loss():
    """--framework megatron without a loss kernel takes Megatron-LM's default, the unfused
    vocab-parallel loss (52 B per logit in bf16), while its norms and activation stay fused."""
    megatron = TrainingSettings(framework="megatron")
    assert kernels_fused(megatron, compiled=False)
    assert loss_bytes_per_token(LLAMA2_7B, megatron, fused=True) == 32_000 * 52
    assert loss_bytes_per_token(LLAMA2_7B, megatron, fused=True, loss_kernel="fused") == 32_000 * 4


def test_kernels_follow_the_stack_unless_given():
    plain = TrainingSettings()
    assert not kernels_fused(plain, compiled=False)
    assert kernels_fused(plain, compiled=True)
    assert kernels_fused(TrainingSettings(liger=True), compiled=False)
    assert kernels_fused(TrainingSettings(framework="megatron"), compiled=False)
    assert not kernels_fused(plain, compiled=True, kernels="eager")
    assert kernels_fused(plain, compiled=False, kernels="fused")


def test_compile_speedup_predicted_near_torchtitans_measurement():
    """torchtitan Table 1 (benchmarks/llama3_h100_202412_torchtitan.md @31a17bf): Llama 3.1 8B on
    8 H100s, FSDP, batch 2 x 8192, per-op selective checkpointing: 5,762 tokens/s eager, 6,667
    with torch.compile, 1.157x. The model's compile is only the fusion of norms, RoPE, SwiGLU
    and the loss (no fitted factor); it predicts the speedup within 5%."""
    from calculators.validation.throughput import load_rows, row_gpu, row_inputs

    row = next(row for row in load_rows() if row["id"] == "TT-H100-8B-FSDP8")
    spec, settings, time_settings, _ = row_inputs(row)
    gpu, _ = row_gpu(row)
    eager = estimate_time(spec, settings, gpu, time_settings)
    compiled = estimate_time(spec, settings, gpu, time_settings.model_copy(update={"compile": True}))
    speedup = compiled.tokens_per_s_per_gpu / eager.tokens_per_s_per_gpu
    assert speedup == pytest.approx(6667 / 5762, rel=0.05)


def test_a_measured_matmul_fraction_replaces_mamf_finder():
    # Llama-2-7B at 4096 tokens: every GEMM is compute-bound, so half the fraction (397.25 / 989
    # against H100's 794.5 / 989) doubles the GEMM time.
    plain = estimate_time(LLAMA2_7B, TrainingSettings(seq_len=4096), H100, TimeSettings(dataset_tokens=1e9))
    measured = TimeSettings(dataset_tokens=1e9, matmul_fraction=397.25 / 989)
    half = estimate_time(LLAMA2_7B, TrainingSettings(seq_len=4096), H100, measured)
    assert half.compute_by_class_s["gemm"] == pytest.approx(2 * plain.compute_by_class_s["gemm"])


def test_a_frozen_prefix_has_no_backward():
    """Half the layers frozen: their forward stays, their backward (and recomputation) goes, so
    the layers' GEMM time drops by half of the backward, which is two thirds of a trained layer's
    forward + backward: (1 - 1/2 x 2/3) = 2/3 of the layers' GEMM time remains."""
    base = TrainingSettings(seq_len=4096)
    plain = estimate_time(LLAMA2_7B, base, H100, TimeSettings(dataset_tokens=1e9))
    frozen = estimate_time(
        LLAMA2_7B, base.model_copy(update={"frozen_layers": 16}), H100, TimeSettings(dataset_tokens=1e9)
    )
    # saved: a third of the GEMM time; the head (131e6 of 6.6e9 matmul weights, 2%) keeps its
    # backward, hence the 5% tolerance
    saved = plain.compute_by_class_s["gemm"] - frozen.compute_by_class_s["gemm"]
    assert saved == pytest.approx(plain.compute_by_class_s["gemm"] / 3, rel=0.05)


def test_op_selective_recompute_flops_per_token():
    """Llama-2-7B: k 4096^2 + o 4096^2 + up 4096 x 11008 = 78,643,200 weights rerun per layer, x 2
    FLOPs x 32 layers = 5,033,164,800 FLOPs per token, counted in HFU, not in MFU."""
    from calculators.timing.flops import recompute_flops_per_token

    settings = TrainingSettings(checkpointing="op-selective")
    assert recompute_flops_per_token(LLAMA2_7B, settings) == 5_033_164_800


def test_t5_decoder_layers_time_their_cross_attention_blocks():
    """flan-t5-base: 12 encoder and 12 decoder layers, h 768 = 12 heads x 64. Each decoder layer
    has a cross-attention block (q/k/v/o, 768 x 768 each) that the layer's own linears leave out:
    the step's GEMMs gain 12 x those four linears' forward and backward, and its attention gains 12
    cores over the whole encoder square without the mask: 4 x 8 x 512^2 x 768 = 6,442,450,944 FLOPs
    forward, 3.5x that forward and backward at FlashAttention-2's published 215 TFLOPS (H100, head
    dim 64, 512 tokens, no mask): 12 x 3.5 x 6.44245e9 / 215e12 = 1.258525 ms."""
    from calculators.models.geometry import attention_linears
    from calculators.models.library import library_spec
    from calculators.timing.operations import layer_gemm_seconds

    t5 = library_spec("google/flan-t5-base")
    settings = TrainingSettings(seq_len=512, micro_batch=8, precision="bf16-mixed")
    time_settings = TimeSettings(dataset_tokens=1e9)
    with_blocks = estimate_time(t5, settings, H100, time_settings).compute_by_class_s
    no_cross = t5.model_copy(update={"cross_attention_layers": 0})
    without = estimate_time(no_cross, settings, H100, time_settings).compute_by_class_s
    assert [(linear.in_features, linear.out_features) for linear in attention_linears(t5)] == [(768, 768)] * 4
    rates = GemmRates(peak_tflops=989.0, fraction=794.5 / 989 * 0.825, bandwidth_tbps=3.35, element_bytes=2)
    fwd, bwd = layer_gemm_seconds(t5, settings, rates, True, linears=attention_linears(t5))
    assert with_blocks["gemm"] - without["gemm"] == pytest.approx(12 * (fwd + bwd))
    assert with_blocks["attention"] - without["attention"] == pytest.approx(1.258525e-3, rel=1e-5)
