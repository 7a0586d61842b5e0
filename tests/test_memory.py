"""Memory formulas checked against numbers worked by hand from their sources."""

import pytest

from calculators.memory.activations.head import logits_bytes
from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.engine import estimate_memory
from calculators.models.geometry import parameter_count
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.units import GIB
from calculators.workload.training import Overheads, TrainingSettings

LLAMA2_7B = ModelSpec(
    name="llama-2-7b", n_layers=32, hidden_size=4096, n_heads=32, n_kv_heads=32, ffn_hidden_size=11008, vocab_size=32000
)
P_7B = 6_738_415_616
NO_OVERHEAD = Overheads(cuda_context_gib=0, cublas_workspace_gib=0, allocator_reserve_fraction=0, nccl_gib=0)

# A GPT-2-style layer as Megatron describes it (Korthikanti et al. 2022, Sec. 4.1).
GPT_LAYER = ModelSpec(
    n_layers=1,
    hidden_size=1024,
    n_heads=16,
    n_kv_heads=16,
    ffn_hidden_size=4096,
    vocab_size=1000,
    activation="gelu",
    norm="layernorm",
    position_embedding="learned",
    fused_qkv=True,
    linear_bias=True,
    dropout=0.1,
)


def settings(**changes) -> TrainingSettings:
    return TrainingSettings(overheads=NO_OVERHEAD, **changes)


def test_llama2_7b_parameter_count_matches_the_published_total():
    assert parameter_count(LLAMA2_7B).total == P_7B


def test_bf16_mixed_adamw_holds_16_bytes_per_parameter_at_the_optimizer_step():
    """ZeRO paper Sec. 3.1: 2 (bf16 weights) + 2 (grads) + 12 (fp32 master, m, v) bytes."""
    estimate = estimate_memory(LLAMA2_7B, settings(precision="bf16-mixed", optimizer_impl="fused"))
    step = estimate.phase_components_gib["optimizer step"]
    assert step["weights"] == pytest.approx(2 * P_7B / GIB)
    assert step["gradients"] == pytest.approx(2 * P_7B / GIB)
    assert step["master_weights"] == pytest.approx(4 * P_7B / GIB)
    assert step["optimizer_states"] == pytest.approx(8 * P_7B / GIB)
    # DeepSpeed turns the gradient partition into fp32 for the step: +4 bytes/param.
    assert step["optimizer_step_temporaries"] == pytest.approx(4 * P_7B / GIB)


def test_bf16_mixed_foreach_adamw_adds_the_sqrt_of_the_fp32_states():
    """torch's foreach AdamW on fp32 masters: _foreach_sqrt(exp_avg_sqs) is another 4 bytes/param
    on top of the fp32 gradient copy: 2 + 2 + 4 + 8 + 4 + 4 = 24 bytes/param (traced)."""
    estimate = estimate_memory(LLAMA2_7B, settings(precision="bf16-mixed", optimizer_impl="foreach"))
    step = estimate.phase_components_gib["optimizer step"]
    assert step["optimizer_step_temporaries"] == pytest.approx(8 * P_7B / GIB)
    assert estimate.phases_gib["optimizer step"] == pytest.approx(24 * P_7B / GIB)


def test_for_loop_adamw_holds_two_temporaries_of_the_largest_parameter():
    """_single_tensor_adam: exp_avg_sq.sqrt() / bias_correction2_sqrt, two tensors the size of the
    largest parameter (Llama-2-7B: embedding 32000 x 4096); mixed adds the fp32 gradient copy."""
    largest = 32000 * 4096
    fp32 = estimate_memory(LLAMA2_7B, settings(precision="fp32", optimizer_impl="for-loop"))
    assert fp32.phase_components_gib["optimizer step"]["optimizer_step_temporaries"] == pytest.approx(
        2 * 4 * largest / GIB
    )
    mixed = estimate_memory(LLAMA2_7B, settings(precision="bf16-mixed", optimizer_impl="for-loop"))
    assert mixed.phase_components_gib["optimizer step"]["optimizer_step_temporaries"] == pytest.approx(
        (4 * P_7B + 2 * 4 * largest) / GIB
    )


def test_fp32_foreach_adamw_step_adds_one_fp32_copy_of_the_parameters():
    """4 (w) + 4 (g) + 8 (m, v) + 4 (foreach sqrt temporary) = 20 bytes/param."""
    estimate = estimate_memory(LLAMA2_7B, settings(precision="fp32", optimizer_impl="foreach"))
    assert estimate.phases_gib["optimizer step"] == pytest.approx(20 * P_7B / GIB)


@pytest.mark.parametrize(
    ("zero", "weights", "grads", "states"),
    [
        (1, 2.0, 2.0, 8.0 / 8),
        (2, 2.0, 2.0 / 8, 8.0 / 8),
        (3, 2.0 / 8, 2.0 / 8, 8.0 / 8),
    ],
)
def test_zero_stages_shard_states_then_gradients_then_weights(zero, weights, grads, states):
    """ZeRO paper Fig. 1 with N_d = 8, plus one unsharded layer in flight for stages 2-3."""
    per_layer = parameter_count(LLAMA2_7B).per_layer
    s = settings(precision="bf16-mixed", zero=zero, gpus=8, optimizer_impl="fused")
    step = estimate_memory(LLAMA2_7B, s).phase_components_gib["optimizer step"]
    expected_weights = weights * P_7B + (2 * 2 * per_layer if zero == 3 else 0)
    expected_grads = grads * P_7B + (2 * per_layer if zero >= 2 else 0)
    assert step["weights"] == pytest.approx(expected_weights / GIB)
    assert step["gradients"] == pytest.approx(expected_grads / GIB)
    assert step["optimizer_states"] == pytest.approx(states * P_7B / GIB)
    assert step["master_weights"] == pytest.approx(4 * P_7B / 8 / GIB)


def test_ddp_without_zero_keeps_a_second_copy_of_the_gradients_in_buckets():
    step = estimate_memory(LLAMA2_7B, settings(precision="bf16-mixed", gpus=2)).phase_components_gib["optimizer step"]
    assert step["gradients"] == pytest.approx(2 * 2 * P_7B / GIB)


def test_gpt_layer_activations_match_korthikanti_34sbh_plus_5as2b():
    """Korthikanti et al. eq. (1): s*b*h*(34 + 5*a*s/h) bytes at 16 bits with dropout,
    plus the fp32 mean and rstd each LayerNorm keeps (2 norms x 8 bytes per token)."""
    b, s, h, a = 2, 512, 1024, 16
    terms = layer_activation_terms(
        GPT_LAYER, settings(micro_batch=b, seq_len=s, precision="bf16-mixed", attention="eager")
    )
    assert sum(terms.values()) == s * b * h * (34 + 5 * a * s / h) + 2 * 8 * s * b


def test_bert_fp32_layer_saves_66sbh_plus_9as2b():
    """fp32 doubles every 2-byte tensor of Korthikanti's count; masks stay 1 byte:
    66 sbh (34 -> 2*32 + 2 masks) and 9 as^2b (4 softmax + 1 mask + 4 dropout output)."""
    bert_layer = GPT_LAYER.model_copy(update={"fused_qkv": False})
    b, s, h, a = 4, 512, 1024, 16
    terms = layer_activation_terms(bert_layer, settings(micro_batch=b, seq_len=s, precision="fp32", attention="eager"))
    assert sum(terms.values()) == 66 * s * b * h + 9 * a * s * s * b + 2 * 8 * s * b


def test_fused_attention_saves_no_score_matrix():
    """Flash attention (Dao et al. 2022) keeps its output and an fp32 log-sum-exp per head and token."""
    b, s, h, a = 2, 512, 1024, 16
    terms = layer_activation_terms(GPT_LAYER, settings(micro_batch=b, seq_len=s, precision="bf16-mixed"))
    assert terms["attention_core"] == 2 * b * s * h + 4 * b * s * a


def test_autocast_saves_one_half_copy_of_the_input_per_linear():
    """Under autocast q, k and v projections each cast the fp32 norm output: 3 x 2 bytes."""
    separate_qkv = GPT_LAYER.model_copy(update={"fused_qkv": False, "dropout": 0.0})
    b, s, h = 1, 128, 1024
    amp = layer_activation_terms(separate_qkv, settings(micro_batch=b, seq_len=s, precision="amp-bf16"))
    pure = layer_activation_terms(separate_qkv, settings(micro_batch=b, seq_len=s, precision="bf16-mixed"))
    # q, k, v as attention reads them; o's input is SDPA's own saved output (fused attention)
    projections_other_than_inputs = 3 * 2 * b * s * h
    assert amp["attention_projections"] - projections_other_than_inputs == 3 * 2 * b * s * h
    assert pure["attention_projections"] - projections_other_than_inputs == 2 * b * s * h


def test_logits_and_fp32_cross_entropy_bytes():
    """GPT-2 vocabulary 50257, 1 x 1024 tokens, bf16 logits (2 bytes) + fp32 log-probs (4 bytes);
    the loss gradient adds two fp32 tensors of b*s*V*4 bytes."""
    gpt2 = GPT_LAYER.model_copy(update={"vocab_size": 50257})
    forward, backward = logits_bytes(gpt2, settings(micro_batch=1, seq_len=1024, precision="bf16-mixed"))
    elements = 1024 * 50257
    assert forward == 6 * elements
    assert backward == 12 * elements


def test_eight_bit_adamw_states_are_two_bytes_plus_block_scales():
    """bitsandbytes: 2 states x 1 byte + one fp32 absmax per 2048 values per state."""
    step = estimate_memory(LLAMA2_7B, settings(precision="fp32", optimizer="adamw-8bit")).phase_components_gib
    assert step["optimizer step"]["optimizer_states"] == pytest.approx(2 * (1 + 4 / 2048) * P_7B / GIB)


def test_adafactor_keeps_row_and_column_vectors_per_matrix():
    """One layer h=4, f=8, vocab 10, no biases, RMSNorm: matrices q,k,v,o (4x4), gate/up (4x8), down
    (8x4 counted as 4x8): rows+cols = 4*8 + 3*12 = 68; norms 2*4 = 8; embedding 10+4 = 14; untied head
    10x4 = 40 kept as is, final norm 4: 68 + 8 + 14 + 40 + 4 = 134 fp32 values."""
    tiny = ModelSpec(n_layers=1, hidden_size=4, n_heads=1, n_kv_heads=1, ffn_hidden_size=8, vocab_size=10)
    step = estimate_memory(tiny, settings(precision="fp32", optimizer="adafactor")).phase_components_gib
    assert step["optimizer step"]["optimizer_states"] == pytest.approx(134 * 4 / GIB)


def test_full_checkpointing_keeps_only_each_layer_input():
    s = settings(micro_batch=4, seq_len=2048, precision="bf16-mixed")
    none = estimate_memory(LLAMA2_7B, s)
    full = estimate_memory(LLAMA2_7B, s.model_copy(update={"checkpointing": "full"}))
    forward = full.phase_components_gib["end of forward"]["activations"] * GIB
    assert forward < none.phase_components_gib["end of forward"]["activations"] * GIB
    layer_inputs = 32 * 2 * 4 * 2048 * 4096
    # final RMSNorm (fp32 copy + bf16 output, fp32 rstd) and the LM head's input
    final_norm_and_head = 4 * 2048 * 4096 * (4 + 2 + 2) + 4 * 4 * 2048
    # the rotary cos and sin tables every layer rotates with, batch 1: 2 x 2048 x 128 x 2 bytes
    rotary_tables = 2 * 2048 * 128 * 2
    assert forward == pytest.approx(layer_inputs + final_norm_and_head + rotary_tables)


def test_peak_is_the_largest_phase_not_the_sum():
    estimate = estimate_memory(LLAMA2_7B, settings(micro_batch=1, seq_len=4096))
    assert estimate.allocated_gib == pytest.approx(max(estimate.phases_gib.values()))
    assert estimate.allocated_gib < sum(estimate.phases_gib.values())


def test_overheads_add_reserve_context_and_nccl():
    o = Overheads(cuda_context_gib=0.5, cublas_workspace_gib=0.03, allocator_reserve_fraction=0.1, nccl_gib=1.5)
    estimate = estimate_memory(LLAMA2_7B, TrainingSettings(gpus=2, zero=3, overheads=o))
    assert estimate.reserved_gib == pytest.approx(estimate.allocated_gib * 1.1)
    assert estimate.peak_gib == pytest.approx(estimate.reserved_gib + 0.5 + 0.03 + 1.5)


def test_fused_attention_output_is_saved_once_and_eager_adds_the_o_projection_input():
    """Flash/SDPA output in (b, s, h, d) layout is o_proj's input: one b*s*h*2-byte tensor.
    Eager attention's o input is a separate contiguous copy: one more."""
    b, s, h = 1, 128, 1024
    fused = layer_activation_terms(GPT_LAYER, settings(micro_batch=b, seq_len=s, attention="fused"))
    eager = layer_activation_terms(GPT_LAYER, settings(micro_batch=b, seq_len=s, attention="eager"))
    assert eager["attention_projections"] - fused["attention_projections"] == 2 * b * s * h


def test_full_checkpointing_under_autocast_keeps_only_the_head_and_one_layer_of_weight_casts():
    """Checkpointed layers save nothing, so their bf16 weight casts die with autocast's cache:
    2 bytes x (LM head matmul + one layer's matmuls) remain, as the trace measures."""
    params = parameter_count(LLAMA2_7B)
    estimate = estimate_memory(LLAMA2_7B, settings(precision="amp-bf16", checkpointing="full"))
    end_of_forward = estimate.phase_components_gib["end of forward"]["autocast_weight_copies"]
    assert end_of_forward == pytest.approx(2 * (params.matmul_head + params.matmul_per_layer) / GIB)


def test_with_every_layer_frozen_zero2_holds_no_more_gradient_than_zero0():
    """Mixtral, 4 GPUs, all 32 layers frozen: only the head trains. ZeRO-2 shards its
    gradient and holds at most the head's whole gradient before the reduce-scatter; it used to
    add a whole (frozen) layer's: 2.76 GiB against 0.49 GiB for ZeRO-0."""
    spec = get_preset("mixtral-8x7b")
    by_stage = {zero: estimate_memory(spec, TrainingSettings(gpus=4, frozen_layers=32, zero=zero)) for zero in (0, 2)}
    head_gradient_gib = (32000 * 4096 + 4096) * 2 / 2**30  # bf16 untied LM head and the final norm
    assert max(by_stage[2].phases_gib.values()) <= max(by_stage[0].phases_gib.values())
    for phase in by_stage[2].phase_components_gib.values():
        assert phase["gradients"] <= head_gradient_gib * (1 + 1 / 4) + 1e-9
