"""Serving memory and decode speed, checked against numbers worked by hand."""

import pytest
from pydantic import ValidationError

from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.memory.serving import (
    activation_bytes,
    active_parameters,
    decode_tokens_per_s,
    decode_weight_read_bytes,
    estimate_serving,
    expected_experts_read,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    max_concurrency,
    max_context_len,
    prefill_activation_bytes,
    quantised_weight_bytes,
    sampler_peak_bytes,
    serving_table,
    serving_weight_bytes,
    total_gib,
)
from calculators.models.presets import get_preset
from calculators.units import GIB
from calculators.workload.serving import ServingSettings
from calculators.workload.training import Overheads

LLAMA_8B = get_preset("llama-3.1-8b")
LLAMA_70B = get_preset("llama-3.1-70b")
LLAMA2_7B = get_preset("llama-2-7b")
MIXTRAL = get_preset("mixtral-8x7b")
H100 = find_gpu("H100-SXM5-80GB")
RTX_4090 = find_gpu("RTX-4090-24GB")
P_8B = 8_030_261_248
NO_OVERHEAD = Overheads(cuda_context_gib=0, cublas_workspace_gib=0, allocator_reserve_fraction=0, nccl_gib=0)


# --- KV cache ---------------------------------------------------------------------------


def test_llama_3_1_8b_kv_cache_at_8k_in_fp16_is_one_gib():
    """2 (K, V) x 32 layers x 8 kv-heads x 128 x 2 B = 131,072 B per token;
    x 8192 tokens = 1,073,741,824 B = 1 GiB exactly."""
    assert kv_cache_bytes_per_token(LLAMA_8B, "fp16") == 131_072
    settings = ServingSettings(kv_cache_precision="fp16", context_len=8192)
    assert kv_cache_bytes(LLAMA_8B, settings) == GIB
    assert estimate_serving(LLAMA_8B, settings).kv_cache_per_sequence_gib == 1.0


def test_llama_2_7b_multi_head_kv_cache_at_4k_is_two_gib():
    """MHA, 32 kv-heads: 2 x 32 x 32 x 128 x 2 B = 524,288 B per token; x 4096 = 2 GiB."""
    settings = ServingSettings(kv_cache_precision="fp16", context_len=4096)
    assert kv_cache_bytes(LLAMA2_7B, settings) == 2 * GIB


def test_kv_cache_scales_with_sequences_and_rounds_up_to_16_token_blocks():
    """4 sequences x 1 GiB = 4 GiB. 8193 tokens take 513 blocks of 16 = 8208 slots."""
    assert kv_cache_bytes(LLAMA_8B, ServingSettings(concurrent_sequences=4)) == 4 * GIB
    assert kv_cache_bytes(LLAMA_8B, ServingSettings(context_len=8193)) == 8208 * 131_072


def test_fp8_kv_cache_halves_it():
    """1 B per element instead of 2: 0.5 GiB per 8k Llama-3.1-8B sequence."""
    assert kv_cache_bytes(LLAMA_8B, ServingSettings(kv_cache_precision="fp8")) == GIB // 2


def test_tensor_parallel_2_halves_the_kv_cache_per_gpu():
    """8 kv-heads / 2 = 4 per GPU: 0.5 GiB per sequence on each GPU."""
    assert kv_cache_bytes(LLAMA_8B, ServingSettings(tensor_parallel=2)) == GIB // 2


def test_tensor_parallel_beyond_the_kv_heads_replicates_them():
    """tp 16 > 8 kv-heads: each GPU keeps 1 head (as vLLM), the same as tp 8:
    2 x 32 x 1 x 128 x 2 B x 8192 = 128 MiB, not 64 MiB."""
    tp8 = kv_cache_bytes(LLAMA_8B, ServingSettings(tensor_parallel=8))
    tp16 = kv_cache_bytes(LLAMA_8B, ServingSettings(tensor_parallel=16))
    assert tp16 == tp8 == GIB // 8
    assert estimate_serving(LLAMA_8B, ServingSettings(tensor_parallel=16)).kv_heads_per_gpu == 1


def test_tensor_parallel_that_does_not_divide_the_heads_is_refused():
    with pytest.raises(ValueError, match="does not divide"):
        estimate_serving(LLAMA_8B, ServingSettings(tensor_parallel=3))


# --- Weights ----------------------------------------------------------------------------


def test_bf16_weights_of_llama_3_1_8b():
    """8,030,261,248 x 2 B = 16,060,522,496 B = 14.96 GiB."""
    weights = serving_weight_bytes(LLAMA_8B, ServingSettings(weight_precision="bf16"))
    assert weights == P_8B * 2
    assert weights / GIB == pytest.approx(14.9575, abs=1e-4)


def test_int4_group_128_weights_of_llama_3_1_8b():
    """AWQ/GPTQ layout: per weight 4 bits, per group of 128 one fp16 scale and one 4-bit zero:
    0.5 + (2 + 0.5)/128 = 0.51953125 B.
    Quantised: 32 layers x (q 4096^2 + k,v 2 x 4096 x 1024 + o 4096^2 + MLP 3 x 4096 x 14336)
      = 32 x 218,103,808 = 6,979,321,856 weights x 0.51953125 = 3,625,975,808 B.
    Kept in fp16: 8,030,261,248 - 6,979,321,856 = 1,050,939,392 (embedding and LM head
      2 x 128256 x 4096, 65 RMSNorms x 4096) x 2 B = 2,101,878,784 B.
    Total 5,727,854,592 B = 5.33 GiB (the AWQ-INT4 checkpoint on the Hub is 5.73 GB)."""
    settings = ServingSettings(weight_precision="int4", quant_group_size=128)
    assert quantised_weight_bytes(settings) == 0.51953125
    assert serving_weight_bytes(LLAMA_8B, settings) == 5_727_854_592


def test_int4_without_zero_points_stores_the_scale_only():
    """0.5 + 2/128 = 0.515625 B: 6,979,321,856 x 0.515625 + 2,101,878,784 = 5,700,591,616 B."""
    settings = ServingSettings(weight_precision="int4", quant_zero_points=False)
    assert serving_weight_bytes(LLAMA_8B, settings) == 5_700_591_616


def test_fp8_weights_keep_embeddings_and_head_in_16_bits():
    """6,979,321,856 x 1 B + 1,050,939,392 x 2 B = 9,081,200,640 B."""
    assert serving_weight_bytes(LLAMA_8B, ServingSettings(weight_precision="fp8")) == 9_081_200_640


def test_tensor_parallel_2_halves_the_weights():
    """No kv replication at tp 2 (8 kv-heads) and norms are tiny: about half of 14.96 GiB."""
    half = serving_weight_bytes(LLAMA_8B, ServingSettings(tensor_parallel=2))
    assert half == pytest.approx(P_8B, rel=1e-4)


def test_mixtral_uses_two_of_eight_experts_per_token():
    """46,702,792,704 total; 6 unused experts x 32 layers x 3 x 4096 x 14336 = 33,822,867,456;
    active = 12,879,925,248 (Mixtral paper: 13B active)."""
    assert active_parameters(MIXTRAL) == 12_879_925_248
    assert active_parameters(MIXTRAL) < estimate_serving(MIXTRAL, ServingSettings()).parameters
    assert active_parameters(LLAMA_8B) == P_8B


# --- Capacity ---------------------------------------------------------------------------


def test_max_concurrency_of_llama_3_1_8b_on_an_80_gib_gpu():
    """bf16, 8k context, defaults. Weights 14.957527 GiB + CUDA context 0.5 + cuBLAS 0.03 + CUDA
    graphs 0.5 = 15.987527 GiB. Activations: the larger of the prefill chunk 2048 x (2 x 4096 +
    3 x 14336) x 2 B = 0.195313 GiB and the sampler, n x 128256 x 38 B = n x 4,873,728 B, plus
    the chunk's hidden states 2048 x 4096 x 2 B = 16,777,216 B; 10% reserve on the activations.
    n = 63: sampler 307,044,864 + 16,777,216 = 323,822,080 B = 0.301583 GiB x 1.1 = 0.331741;
    total 15.987527 + 63 + 0.331741 = 79.319 <= 80. n = 64: 0.306122 x 1.1 = 0.336734; 80.324 > 80.
    gpu_memory_utilization 0.9 (72 GiB): n = 55 gives 71.279, n = 56 gives 72.284."""
    settings = ServingSettings()
    assert max_concurrency(LLAMA_8B, settings, 80.0) == 63
    assert total_gib(LLAMA_8B, settings.model_copy(update={"concurrent_sequences": 63})) <= 80.0
    assert total_gib(LLAMA_8B, settings.model_copy(update={"concurrent_sequences": 64})) > 80.0
    assert max_concurrency(LLAMA_8B, ServingSettings(gpu_memory_utilization=0.9), 80.0) == 55


def test_no_sequence_fits_when_the_weights_alone_do_not():
    """Llama-3.1-70B in bf16: 70,553,706,496 x 2 B = 131.4 GiB > 80 GiB."""
    assert max_concurrency(LLAMA_70B, ServingSettings(), 80.0) == 0
    assert max_context_len(LLAMA_70B, ServingSettings(), 80.0) == 0


def test_max_context_len_of_llama_3_1_8b_on_an_rtx_4090():
    """One sequence: the prefill chunk (0.195313 GiB) is larger than the sampler (128256 x 38 B
    + 16,777,216 B = 0.020163 GiB), so 24 GiB - 16.202371 fixed = 7.797629 GiB for KV at 1/8192
    GiB per token = 63,878.2 token slots -> 63,872 (whole 16-token blocks)."""
    assert max_context_len(LLAMA_8B, ServingSettings(), 24.0) == 63_872


def test_max_context_len_stops_at_the_models_trained_positions():
    assert max_context_len(LLAMA_8B, ServingSettings(), 141.0) == LLAMA_8B.max_position_embeddings


# --- Decode speed -----------------------------------------------------------------------


def test_decode_of_llama_3_1_8b_on_h100_is_memory_bound():
    """bf16, 8k context, one sequence. A step reads the weights except the input embedding
    (a one-row lookup): (8,030,261,248 - 128256 x 4096) x 2 B = 15,009,849,344 B, plus the KV
    cache 1,073,741,824 B = 16,083,591,168 B, at 0.8 x 3.35 TB/s = 2.68e12 B/s: 6.0013 ms,
    166.6 tokens/s. (Counting every weight: 0.8 x 3.35e12 / (16.06e9 + 1.07e9) = 156.4.)
    Compute: 2 x 7,504,658,432 + 4 x 32 x 8192 x 4096 = 19,304,284,160 FLOP at 0.8 x 989 TFLOPS
    = 24.4 us, far below."""
    speed = decode_tokens_per_s(LLAMA_8B, ServingSettings(), H100, concurrency=1)
    assert speed.bytes_read_per_step == 16_083_591_168
    assert speed.flops_per_step == 19_304_284_160
    assert speed.bound == "memory bandwidth"
    assert speed.tokens_per_s_per_sequence == pytest.approx(2.68e12 / 16_083_591_168)
    assert speed.tokens_per_s_per_sequence == pytest.approx(166.6, abs=0.1)
    assert speed.compute_time_s == pytest.approx(19_304_284_160 / (0.8 * 989e12))


def test_decode_at_concurrency_32_shares_the_weight_read():
    """32 sequences: 15,009,849,344 + 32 x 1,073,741,824 = 49,369,587,712 B per step
    -> 18.42 ms: 54.3 tokens/s each, 1737 in all."""
    speed = decode_tokens_per_s(LLAMA_8B, ServingSettings(), H100, concurrency=32)
    assert speed.bytes_read_per_step == 49_369_587_712
    assert speed.tokens_per_s_per_sequence == pytest.approx(54.28, abs=0.01)
    assert speed.tokens_per_s_aggregate == pytest.approx(32 * 54.28, abs=0.5)


def test_decode_turns_compute_bound_with_a_large_batch_of_short_contexts():
    """1024 sequences of 16 tokens: 1024 x 2 x 7.5e9 FLOP = 15.4 TFLOP -> 19.4 ms at 791 TFLOPS,
    while reading 15.0 GB of weights and 1024 x 16 x 131,072 B = 2.1 GB of KV takes 6.4 ms."""
    settings = ServingSettings(context_len=16)
    assert decode_tokens_per_s(LLAMA_8B, settings, H100, concurrency=1024).bound == "compute"


def test_moe_decode_reads_only_the_routed_experts():
    """One sequence reads 2 of 8 experts; a batch of 64 reads nearly all of them
    (8 x (1 - 0.75^64) = 7.99999)."""
    assert expected_experts_read(MIXTRAL, 1) == pytest.approx(2)
    assert expected_experts_read(MIXTRAL, 64) == pytest.approx(8, abs=1e-6)
    one = decode_weight_read_bytes(MIXTRAL, ServingSettings(), 1)
    # (12,879,925,248 active - 32000 x 4096 input embedding) x 2 B = 25,497,706,496 B
    assert one == pytest.approx(25_497_706_496)
    assert one < decode_weight_read_bytes(MIXTRAL, ServingSettings(), 64)


# --- Table and validation ---------------------------------------------------------------


def test_serving_table_has_one_row_per_gpu_with_the_fits_and_the_gpus_needed():
    catalogue = load_gpu_catalogue()
    rows = serving_table(LLAMA_8B, ServingSettings(), catalogue)
    assert [row.gpu for row in rows] == [gpu.name for gpu in catalogue]
    rtx = next(row for row in rows if row.gpu == RTX_4090.name)
    assert rtx.fits and rtx.max_concurrency == 7 and rtx.gpus_needed == 1
    # 24 GiB: (24 - 16.202371) / 1.001051 = 7.79 -> 7 sequences of 8k
    t4 = next(row for row in rows if row.gpu == "T4-16GB")
    assert not t4.fits and t4.max_concurrency == 0 and t4.gpus_needed == 2
    assert t4.decode_tokens_per_s_per_sequence is None


def test_llama_70b_needs_two_h100_in_bf16_and_one_in_int4():
    """bf16: 131.4 GiB of weights -> 65.7 GiB per GPU at tp 2. int4 g128: 37.0 GiB fits one."""
    bf16 = serving_table(LLAMA_70B, ServingSettings(), [H100])[0]
    assert not bf16.weights_fit and bf16.gpus_needed == 2
    int4 = serving_table(LLAMA_70B, ServingSettings(weight_precision="int4"), [H100])[0]
    assert int4.fits and int4.gpus_needed == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"context_len": -1},
        {"context_len": 0},
        {"concurrent_sequences": 0},
        {"quant_group_size": 0},
        {"tensor_parallel": 0},
        {"gpu_memory_utilization": 1.5},
        {"gpu_memory_utilization": 0},
        {"weight_precision": "int3"},
        {"kv_cache_precision": "int4"},
        {"max_batched_tokens": 0},
    ],
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValidationError):
        ServingSettings(**bad)


def test_no_overhead_leaves_weights_kv_and_activations():
    """With the overheads set to zero the total is the three tensors' sum."""
    settings = ServingSettings(overheads=NO_OVERHEAD, cuda_graphs_gib=0)
    estimate = estimate_serving(LLAMA_8B, settings)
    assert estimate.overhead_gib == 0
    assert estimate.total_gib == pytest.approx(estimate.weights_gib + estimate.kv_cache_gib + estimate.activations_gib)


def test_a_tied_lm_head_is_read_every_step():
    """GPT-2 ties its LM head to the embedding table, so decode reads the table:
    all 124,439,808 weights x 2 B = 248,879,616 B (the 1024 x 768 position table, a lookup,
    is counted too: 1.6 MB, a stated simplification)."""
    assert decode_weight_read_bytes(get_preset("gpt2"), ServingSettings(), 1) == 248_879_616


def test_vllm_profile_run_peaks_while_the_sampler_sorts():
    """vLLM's profile run (max_num_seqs 256, max_num_batched_tokens 8192, top-k/top-p on): 256 x
    128,256 = 32,833,536 logits x (2 bf16 + 4 fp32 + 4 + 8 sorted values and indices + 8 reverse
    indices + 4 + 8 cub buffers = 38 B) = 1,247,674,368 B, plus the batch's hidden states
    8192 x 4096 x 2 B = 67,108,864 B: 1,314,783,232 B = 1.2245 GiB, above the prefill workspace
    8192 x (2 x 4096 + 3 x 14336) x 2 B = 838,860,800 B."""
    settings = ServingSettings(context_len=8192, concurrent_sequences=256, max_batched_tokens=8192)
    assert sampler_peak_bytes(LLAMA_8B, settings) == 1_247_674_368
    assert prefill_activation_bytes(LLAMA_8B, settings) == 838_860_800
    assert activation_bytes(LLAMA_8B, settings) == 1_314_783_232
    one = settings.model_copy(update={"concurrent_sequences": 1})
    assert activation_bytes(LLAMA_8B, one) == 838_860_800  # one row: the prefill is the larger
