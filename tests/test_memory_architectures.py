"""Training memory of DeepSeek-V3: multi-head latent attention, shared experts and dense first
layers, each worked out by hand from what huggingface/transformers
src/transformers/models/deepseek_v3/modeling_deepseek_v3.py @00b676f8 saves for backward.

Settings: one sequence of 4096 tokens (T), bf16-mixed (compute c = 2 bytes, residual 2 bytes),
fused attention (SDPA), no checkpointing, full training, one GPU, ZeRO 0.
"""

from __future__ import annotations

import pytest

from calculators.memory.activations.layer import layer_activation_terms
from calculators.memory.activations.mlp import fp32_router_bytes
from calculators.memory.engine import estimate_memory
from calculators.memory.layout import stage_layout, trainable_parameter_count
from calculators.models.geometry import parameter_count
from calculators.units import GIB
from calculators.workload.training import TrainingSettings
from tests.test_architectures import DEEPSEEK_V3, FLAN_T5_SMALL, QWEN3_30B_A3B, T5_SMALL, spec

T = 4096
DENSE_LAYER = 583_483_392  # tests/test_architectures.py: MLA + 3 x 7168 x 18432 + 2 norms
SPARSE_LAYER = 11_507_286_272  # MLA + 257 experts of 3 x 7168 x 2048 + router and biases + 2 norms
VOCAB_MATRIX = 129_280 * 7168  # 926,679,040
# Bytes saved per token (hand-worked in the tests below)
NORM = 4 * 7168 + 2 * 7168 + 4  # fp32 upcast, bf16 normalised copy, fp32 rstd: 43,012
MLA = 14_336 + 9_220 + 3_072 + 3_076 + 1_024 + 163_840  # 194,568
CORE = 2 * 128 * 128 + 4 * 128  # SDPA output (128 heads x v 128) and fp32 log-sum-exp: 33,280
# routing, counted Mixtral's way (router_bookkeeping_bytes; DeepSeek's fp32 gate keeps more):
# fp32 softmax over 256 experts, top-8 int64 indices, the renormalised fp32 weights and their
# sum, and per routed pair two int64 indices and the bf16 gathered weight
ROUTER = 4 * 256 + (8 + 4 + 16 + 2) * 8 + 4  # 1,268
# DeepseekV3TopkRouter's fp32 linear keeps an fp32 copy of the block's input per token, and of
# its bf16 weight per layer (fp32_router_bytes)
FP32_ROUTER_INPUT = 4 * 7168  # 28,672
ROUTER_WEIGHT_CAST = 4 * 256 * 7168  # 7,340,032 per sparse layer
SPARSE_MLP = 14_336 + 8 * 2 * 7168 + 8 * 4 * 2 * 2048 + 8 * (2 + 2) * 7168 + ROUTER + FP32_ROUTER_INPUT  # 519,412
SHARED = 4 * 2 * 2048  # 16,384
DENSE_MLP = 14_336 + 4 * 2 * 18_432  # 161,792
SPARSE_SAVED = 2 * NORM + MLA + CORE + SPARSE_MLP + SHARED  # 849,668
DENSE_SAVED = 2 * NORM + MLA + CORE + DENSE_MLP  # 475,664
HEAD = NORM + 2 * 7168  # final norm and the LM head's bf16 input: 57,348


def settings(**changes) -> TrainingSettings:
    base = dict(micro_batch=1, seq_len=T, precision="bf16-mixed", attention="fused", checkpointing="none")
    return TrainingSettings(**base | changes)


def test_mla_saves_its_latents_and_wider_query_key_than_value():
    """Per token, in bytes: q_a and kv_a read the same normed hidden state, saved once without
    autocast: 2 x 7168 = 14,336. q_a_layernorm over 1536: 4 x 1536 + 2 x 1536 + 4 = 9,220; q_b's
    input 2 x 1536 = 3,072. kv_a_layernorm over 512: 3,076; kv_b's input 2 x 512 = 1,024. The
    core's query and key (torch.cat of nope 128 and rope 64: 128 heads x 192) and kv_b's whole
    output kept alive by the value view (128 x (128 + 128)): 2 x (2 x 24,576 + 32,768) = 163,840.
    Sum 194,568 per token, against 3 x 2 x 24,576 + 14,336 = 161,792 for q/k/v of 192 each read
    as plain multi-head attention. SDPA's output is 128 x 128 (v_head_dim), not 128 x 192."""
    terms = layer_activation_terms(spec(DEEPSEEK_V3), settings())
    assert terms["attention_projections"] == MLA * T == 796_950_528
    assert terms["attention_core"] == CORE * T
    assert terms["norms"] == 2 * NORM * T


def test_shared_expert_runs_on_every_token():
    """Routed: the normed hidden state once (14,336), each of the 8 routed experts gathers its
    tokens' copy (8 x 2 x 7168) and saves gate, silu(gate), up and their product at 2048 wide
    (8 x 4 x 2 x 2048), and its output is weighted by the router (the multiply keeps the expert's
    bf16 output) and added with index_add_ (which keeps the weighted output): 8 x (2 + 2) x 7168;
    the routing itself keeps 4 x 256 + 30 x 8 + 4 = 1,268 (router_bookkeeping_bytes), and the fp32
    router its fp32 copy of the input, 4 x 7168: 519,412 per token, plus the fp32 copy of its
    256 x 7168 weight, 7,340,032 per layer. The shared expert (DeepseekV3MoE.shared_experts, every
    token) saves 4 x 2 x 2048 = 16,384 per token; it reads the same hidden state. Under autocast
    its gate and up each keep their own bf16 cast of the fp32 hidden: + 2 x 2 x 7168 = 45,056."""
    terms = layer_activation_terms(spec(DEEPSEEK_V3), settings())
    assert terms["mlp"] == SPARSE_MLP * T + ROUTER_WEIGHT_CAST
    assert terms["shared_experts"] == SHARED * T
    autocast = layer_activation_terms(spec(DEEPSEEK_V3), settings(precision="amp-bf16"))
    assert autocast["shared_experts"] == (2 * 2 * 7168 + SHARED) * T


def test_dense_first_layers_save_their_wider_mlp():
    """The 3 dense layers run one MLP of 18,432 on every token: the hidden state 14,336 plus
    4 x 2 x 18,432 = 147,456: 161,792 per token, no routed gather and no shared expert."""
    terms = layer_activation_terms(spec(DEEPSEEK_V3), settings(), dense=True)
    assert terms["mlp"] == DENSE_MLP * T
    assert "shared_experts" not in terms


def test_activations_sum_each_kind_of_layer():
    """End of forward: 58 sparse layers x 849,668 + 3 dense x 475,664 + head 57,348
    = 50,765,084 bytes per token, x 4096, + 58 router weight copies of 7,340,032
    = 208,359,505,920 B (194.05 GiB), + the rotary cos and sin tables of the 64 rope channels,
    2 x 4096 x 64 x 2 = 1,048,576 B, kept until the first layer's backward.
    Backward of the first (dense) layer: its saved 475,664 plus the gradients of gate and up
    outputs 2 x 2 x 18,432 = 73,728: 549,392 per token. Backward of the last (sparse) layer:
    everything plus 2 x 2 x 2048 = 8,192 per token (the wider of a routed and the shared expert)."""
    estimate = estimate_memory(spec(DEEPSEEK_V3), settings())
    components = estimate.phase_components_gib
    end_of_forward = (58 * SPARSE_SAVED + 3 * DENSE_SAVED + HEAD) * T + 58 * ROUTER_WEIGHT_CAST
    assert end_of_forward == 208_359_505_920
    rotary_tables = 2 * T * 64 * 2
    end_of_forward += rotary_tables
    assert components["end of forward"]["activations"] * GIB == pytest.approx(end_of_forward, rel=1e-12)
    first = (DENSE_SAVED + 4 * 18_432) * T + rotary_tables
    assert components["backward, first layer"]["activations"] * GIB == pytest.approx(first, rel=1e-12)
    last = end_of_forward + 4 * 2048 * T
    assert components["backward, last layer"]["activations"] * GIB == pytest.approx(last, rel=1e-12)


def test_weights_count_dense_layers_at_their_own_size():
    """One GPU holds exactly the 671,026,419,200 parameters (3 dense layers of 583,483,392, not
    61 sparse ones of 11,507,286,272, which would be 32.8B more): bf16 weights 2 bytes each."""
    ds = spec(DEEPSEEK_V3)
    params = parameter_count(ds)
    layout = stage_layout(ds, params, settings(), "only")
    assert layout.trainable == params.total == 671_026_419_200
    assert layout.weight_bytes == 2 * 671_026_419_200
    assert estimate_memory(ds, settings()).components_gib["weights"] * GIB == pytest.approx(2 * params.total)


def test_pipeline_stages_hold_the_dense_layers_first():
    """Two stages of ceil(61 / 2) = 31 layers. First: 3 dense + 28 sparse + the embedding
    = 1,750,450,176 + 322,204,015,616 + 926,679,040 = 324,881,144,832. Last: 31 sparse + final
    norm 7168 + LM head = 356,725,874,432 + 7,168 + 926,679,040 = 357,652,560,640."""
    ds = spec(DEEPSEEK_V3)
    params = parameter_count(ds)
    pp = settings(pipeline_parallel=2, gpus=1)
    assert stage_layout(ds, params, pp, "first").trainable == 3 * DENSE_LAYER + 28 * SPARSE_LAYER + VOCAB_MATRIX
    assert stage_layout(ds, params, pp, "first").trainable == 324_881_144_832
    assert stage_layout(ds, params, pp, "last").trainable == 357_652_560_640


def test_frozen_layers_start_with_the_dense_ones():
    """Freezing 4 layers freezes the 3 dense ones, 1 sparse one and the embedding:
    671,026,419,200 - 1,750,450,176 - 11,507,286,272 - 926,679,040 = 656,842,003,712."""
    ds = spec(DEEPSEEK_V3)
    assert trainable_parameter_count(ds, parameter_count(ds), settings(frozen_layers=4)) == 656_842_003_712


def test_models_without_dense_layers_or_shared_experts_are_unchanged():
    """Qwen3-30B-A3B has neither: no shared-expert term, every layer sparse, weights the total."""
    qwen = spec(QWEN3_30B_A3B)
    assert "shared_experts" not in layer_activation_terms(qwen, settings())
    layout = stage_layout(qwen, parameter_count(qwen), settings(), "only")
    assert layout.trainable == parameter_count(qwen).total


@pytest.mark.parametrize(("config", "total"), [(T5_SMALL, 60_506_624), (FLAN_T5_SMALL, 76_961_152)])
def test_encoder_decoder_weights_include_cross_attention(config, total):
    """One GPU holds every T5 parameter: the decoder layers' cross-attention blocks and norms
    (t5-small: 6 x (4 x 512 x 512 + 512) = 6,294,528), the relative position biases and the
    encoder's final norm, besides the layers' self-attention and MLPs (hand-worked in
    tests/test_architectures.py)."""
    t5 = spec(config)
    layout = stage_layout(t5, parameter_count(t5), settings(seq_len=512), "only")
    assert layout.trainable == parameter_count(t5).total == total


def test_the_fp32_router_keeps_fp32_copies_in_half_precision_only():
    """DeepSeek's router runs F.linear on fp32 copies of its input and weight: in bf16 full training
    4 x 7168 per token and 4 x 256 x 7168 per layer; under LoRA (frozen router) the weight copy
    only; under autocast none (the linear runs in bf16), nor for a router that is not fp32."""
    deepseek = spec(DEEPSEEK_V3)
    assert fp32_router_bytes(deepseek, settings(), 10, frozen_router=False) == 10 * 28_672 + 7_340_032
    assert fp32_router_bytes(deepseek, settings(), 10, frozen_router=True) == 7_340_032
    assert fp32_router_bytes(deepseek, settings(precision="amp-bf16"), 10, frozen_router=False) == 0
    mixtral = deepseek.model_copy(update={"family": "mixtral"})
    assert fp32_router_bytes(mixtral, settings(), 10, frozen_router=False) == 0
