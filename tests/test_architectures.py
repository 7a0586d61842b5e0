"""Today's architectures read from their config.json, with parameter counts worked out by hand.

The configs below carry the architecture fields of the published config.json files (read on
huggingface.co at main); each count is worked out module by module in the test's docstring and
compared with the number the model card or technical report publishes.
"""

from __future__ import annotations

import json

import pytest

from calculators.memory.serving import kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, weight_split_per_rank
from calculators.models.geometry import active_parameters, clip_vision_params, parameter_count
from calculators.models.hf_config import ModelInputError, spec_from_hf_config
from calculators.workload.serving import ServingSettings

QWEN3_30B_A3B = {
    "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "vocab_size": 151936, "tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
    "sliding_window": None, "max_position_embeddings": 40960,
}  # fmt: skip
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
    "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "vocab_size": 129280, "tie_word_embeddings": False, "topk_method": "noaux_tc", "hidden_act": "silu",
    "max_position_embeddings": 163840,
}  # fmt: skip
GPT_OSS_20B = {
    "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
    "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 201088, "tie_word_embeddings": False,
    "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 12, "attention_bias": True,
    "hidden_act": "silu", "max_position_embeddings": 131072,
}  # fmt: skip
GEMMA3_1B = {
    "model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
    "sliding_window": 512, "sliding_window_pattern": 6, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 32768,
}  # fmt: skip
MISTRAL_7B_V01 = {
    "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096,
    "hidden_act": "silu", "tie_word_embeddings": False, "max_position_embeddings": 32768,
}  # fmt: skip
T5_SMALL = {
    "model_type": "t5", "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8,
    "vocab_size": 32128, "relative_attention_num_buckets": 32, "layer_norm_epsilon": 1e-06, "dropout_rate": 0.1,
}  # fmt: skip
FLAN_T5_SMALL = T5_SMALL | {
    "d_ff": 1024, "num_layers": 8, "num_decoder_layers": 8, "num_heads": 6, "feed_forward_proj": "gated-gelu",
    "tie_word_embeddings": False,
}  # fmt: skip
STARCODER = {
    "model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40, "n_inner": 24576,
    "n_positions": 8192, "vocab_size": 49152, "multi_query": True, "activation_function": "gelu_pytorch_tanh",
    "layer_norm_epsilon": 1e-05,
}  # fmt: skip


def spec(config: dict):
    return spec_from_hf_config(json.dumps(config))


def test_qwen3_30b_a3b_counts_its_128_experts_of_768():
    """Qwen3-30B-A3B (huggingface.co/Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated,
    29.9B non-embedding). Per layer: attention q 2048 x 4096 + k, v 2048 x 512 + o 4096 x 2048
    = 18,874,368, q/k norms 2 x 128; 128 experts of 3 x 2048 x 768 = 603,979,776, router
    2048 x 128 = 262,144; two norms 4,096: 623,120,640. x 48 = 29,909,790,720; embedding and
    untied head 2 x 151,936 x 2048 = 622,329,856; final norm 2,048: 30,532,122,624.
    Active: 120 unused experts x 4,718,592 x 48 = 27,179,089,920 fewer: 3,353,032,704."""
    qwen = spec(QWEN3_30B_A3B)
    assert parameter_count(qwen).total == 30_532_122_624
    assert active_parameters(qwen) == 3_353_032_704
    assert round(parameter_count(qwen).total / 1e9, 1) == 30.5
    assert 3.3e9 <= active_parameters(qwen) < 3.4e9  # the card truncates: 3.3B


def test_qwen3_moe_dense_layers_follow_mlp_only_layers_and_sparse_step():
    """Layers 0 and 1 listed in mlp_only_layers keep a dense 6144-wide MLP: each differs from a
    sparse layer by 3 x 2048 x 6144 - 603,979,776 - 262,144 = -566,493,184."""
    dense = spec(QWEN3_30B_A3B | {"mlp_only_layers": [0, 1]})
    assert dense.n_dense_layers == 2
    assert parameter_count(dense).total == 30_532_122_624 - 2 * 566_493_184
    every_other = spec(QWEN3_30B_A3B | {"decoder_sparse_step": 2})
    assert every_other.n_dense_layers == 24  # layers 0, 2, 4, ... ((i + 1) % 2 != 0)


def test_deepseek_v3_mla_shared_expert_and_dense_first_layers():
    """DeepSeek-V3 (huggingface.co/deepseek-ai/DeepSeek-V3 model card: 671B total, 37B activated;
    the 685B on the Hub adds the 14B multi-token-prediction module, not counted here).
    MLA per layer: q_a 7168 x 1536 + norm 1536 + q_b 1536 x 128 x 192 + kv_a 7168 x 576 + norm 512
    + kv_b 512 x 128 x 256 + o 128 x 128 x 7168 = 187,107,328. Dense layer: + 3 x 7168 x 18432
    + 2 norms = 583,483,392 (x 3). MoE layer: + 256 experts and 1 shared of 3 x 7168 x 2048
    (44,040,192 each) + router 7168 x 256 and its 256 correction biases + 2 norms
    = 11,507,286,272 (x 58). Embedding and head 2 x 129,280 x 7168, final norm:
    671,026,419,200. Active: 248 unused experts x 44,040,192 x 58 fewer = 37,552,297,472."""
    ds = spec(DEEPSEEK_V3)
    assert ds.n_dense_layers == 3 and ds.is_mla
    assert parameter_count(ds).total == 671_026_419_200
    assert active_parameters(ds) == 37_552_297_472


def test_deepseek_v3_caches_the_compressed_latent():
    """MLA caches kv_lora_rank + rope dim = 576 elements per layer and token (DeepSeek-V2 paper,
    Table 1): 61 x 576 x 2 B = 70,272 B per token in bf16, against 2 x 61 x 128 x 192 x 2 B
    = 5,996,544 B for the same heads uncompressed."""
    assert kv_cache_bytes_per_token(spec(DEEPSEEK_V3), "bf16") == 70_272
    assert kv_cache_bytes_per_token(spec(DEEPSEEK_V3), "bf16", tp=8) == 70_272  # the latent is not split


def test_gpt_oss_20b_biases_sinks_and_experts():
    """gpt-oss-20b (OpenAI gpt-oss model card, arXiv 2508.10925, Table 1: 20.91B total, 3.61B active
    without the embedding). Per layer: attention 2 x 2880 x 4096 + 2 x 2880 x 512 = 26,542,080,
    biases 4096 + 512 + 512 + 2880, 64 sinks: 26,550,144; 32 experts of gate_up 2880 x 5760 + down
    2880 x 2880 + biases 8,640 = 24,891,840 each; router 2880 x 32 + 32 biases; 2 norms 5,760:
    823,186,976. x 24 + 2 x 201,088 x 2880 + 2880 = 20,914,757,184. Active: 28 unused experts
    x 24 layers fewer = 4,187,440,704, less the 579,133,440 embedding = 3,608,307,264."""
    oss = spec(GPT_OSS_20B)
    assert parameter_count(oss).total == 20_914_757_184
    assert active_parameters(oss) == 4_187_440_704
    assert round((active_parameters(oss) - 201_088 * 2880) / 1e9, 2) == 3.61
    assert oss.sliding_window == 128 and oss.sliding_window_layers == 12


def test_gpt_oss_120b_matches_the_card():
    """gpt-oss-120b: 36 layers of 128 experts (card: 116.83B total, 5.13B active without the
    embedding). Per layer 26,550,144 + 128 x 24,891,840 + 2880 x 128 + 128 + 5,760 = 3,213,080,192;
    x 36 + 1,158,266,880 + 2,880 = 116,829,156,672."""
    oss = spec(GPT_OSS_20B | {"num_hidden_layers": 36, "num_local_experts": 128, "layer_types": None})
    assert parameter_count(oss).total == 116_829_156_672
    assert round((active_parameters(oss) - 201_088 * 2880) / 1e9, 2) == 5.13


def test_gemma3_1b_tied_head_qk_norms_and_five_local_layers_in_six():
    """gemma-3-1b (Gemma 3 technical report, arXiv 2503.19786, Table 1: 1B; safetensors 999,885,952).
    Per layer: q 1152 x 1024 + k, v 1152 x 256 + o = 2,949,120, q/k norms 2 x 256, MLP 3 x 1152 x 6912
    = 23,887,872, four norms 4 x 1152: 26,842,112. x 26 + tied embedding 262,144 x 1152 + final norm
    = 999,885,952. Layers 6, 12, 18, 24 are global; the other 22 slide over 512 tokens."""
    gemma = spec(GEMMA3_1B)
    assert parameter_count(gemma).total == 999_885_952
    assert gemma.sliding_window_layers == 22


def test_sliding_window_caps_the_cache():
    """Mistral 7B v0.1 windows every layer at 4096 tokens (arXiv 2310.06825): a 32,768-token
    sequence caches 4096 tokens x 32 layers x 2 x 8 x 128 x 2 B = 536,870,912 B, not 8x that.
    Gemma 3 1B at 8192 tokens: 4 global layers x 8192 + 22 local x 512 tokens, each 2 x 256 x 2 B."""
    mistral = spec(MISTRAL_7B_V01)
    assert kv_cache_bytes_per_sequence(mistral, "bf16", 1, 32_768) == 536_870_912
    assert kv_cache_bytes_per_sequence(mistral, "bf16", 1, 1000) == 1000 * 131_072
    gemma = spec(GEMMA3_1B)
    assert kv_cache_bytes_per_sequence(gemma, "bf16", 1, 8192) == (4 * 8192 + 22 * 512) * 1024


def test_starcoder_is_multi_query():
    """GPTBigCode with multi_query (bigcode/starcoder, 15.5B on its card): one kv-head, so c_attn is
    6144 x (6144 + 2 x 128). Per layer 6144 x 6400 + 6400 + 6144^2 + 6144 + 2 x 6144 x 24576
    + 24576 + 6144 + 2 x 2 x 6144 = 379,128,064; x 40 + tied 49,152 x 6144 + 8192 x 6144
    + final norm 12,288 = 15,517,456,384."""
    star = spec(STARCODER)
    assert star.n_kv_heads == 1
    assert parameter_count(star).total == 15_517_456_384
    assert kv_cache_bytes_per_token(star, "bf16") == 2 * 40 * 1 * 128 * 2


def test_moe_serving_reads_dense_layers_whole():
    """DeepSeek-V3's three dense layers and shared experts count in full on every rank; the
    routed experts are what expert_fraction scales."""
    ds = spec(DEEPSEEK_V3)
    full = weight_split_per_rank(ds).linear
    none_routed = weight_split_per_rank(ds, expert_fraction=0.0).linear
    assert full - none_routed == 58 * 256 * 44_040_192


def test_unknown_model_type_names_missing_fields():
    with pytest.raises(ModelInputError, match=r"model_type 'rwkv'.*lacks hidden_size, num_attention_heads"):
        spec({"model_type": "rwkv", "num_hidden_layers": 4})


def test_serving_estimate_reports_active_parameters():
    from calculators.memory.serving import estimate_serving

    estimate = estimate_serving(spec(QWEN3_30B_A3B), ServingSettings(context_len=4096))
    assert estimate.parameters == 30_532_122_624
    assert estimate.active_parameters == 3_353_032_704


def tiny(model_type: str, **fields) -> dict:
    """A small config: 2 layers, hidden 64, 4 heads of 16, MLP 128, vocabulary 1000."""
    base = {"model_type": model_type, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 1000}  # fmt: skip
    return base | fields


def test_gpt_neox_partial_rotary_parallel_residual_and_biases():
    """Pythia-70M (EleutherAI/pythia-70m card: 18,915,328 non-embedding): per layer two LayerNorms
    2 x 2 x 512, fused qkv 512 x 1536 + 1536, dense 512 x 512 + 512, MLP 512 x 2048 + 2048 and
    2048 x 512 + 512 = 3,152,384; x 6 + final LayerNorm 1024 = 18,915,328; untied in and out
    embeddings 2 x 50,304 x 512."""
    pythia = spec({"model_type": "gpt_neox", "num_hidden_layers": 6, "hidden_size": 512, "num_attention_heads": 8,
                   "intermediate_size": 2048, "vocab_size": 50304, "rotary_pct": 0.25,
                   "use_parallel_residual": True, "tie_word_embeddings": False, "hidden_act": "gelu",
                   "layer_norm_eps": 1e-5})  # fmt: skip
    assert pythia.rotary_fraction == 0.25 and pythia.parallel_residual
    assert parameter_count(pythia).total == 18_915_328 + 2 * 50_304 * 512


def test_gpt_neox_norms_are_layer_norms_without_layer_norm_eps():
    """GPTNeoXLayer's norms are nn.LayerNorm (transformers modeling_gpt_neox.py) even when a config
    leaves layer_norm_eps out."""
    assert spec(tiny("gpt_neox")).norm == "layernorm"


def test_phi_1_5_one_shared_norm_biases_and_half_rotary():
    """microsoft/phi-1_5 (PhiForCausalLM, 1.42B on the card): per layer one input LayerNorm
    2 x 2048 = 4,096, q/k/v/dense with biases 4 x (2048^2 + 2048) = 16,785,408, fc1 2048 x 8192 +
    8192 = 16,785,408, fc2 8192 x 2048 + 2048 = 16,779,264: 50,354,176 x 24 = 1,208,500,224;
    embedding 51,200 x 2048 = 104,857,600; final LayerNorm 4,096; lm_head with a bias
    2048 x 51,200 + 51,200 = 104,908,800. Total 1,418,270,720 (the safetensors count)."""
    phi = spec({"model_type": "phi", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
                "num_hidden_layers": 24, "partial_rotary_factor": 0.5, "hidden_act": "gelu_new",
                "layer_norm_eps": 1e-5, "tie_word_embeddings": False, "vocab_size": 51200})  # fmt: skip
    assert (phi.norms_per_layer, phi.parallel_residual, phi.rotary_fraction) == (1, True, 0.5)
    assert parameter_count(phi).total == 1_418_270_720


def test_gemma2_softcaps_and_every_other_layer_sliding():
    gemma2 = spec(tiny("gemma2", num_hidden_layers=5, head_dim=16, sliding_window=4096,
                       attn_logit_softcapping=50.0, final_logit_softcapping=30.0))  # fmt: skip
    assert (gemma2.attention_softcap, gemma2.logit_softcap) == (50.0, 30.0)
    assert gemma2.sliding_window_layers == 3  # layers 0, 2, 4
    assert gemma2.tied_embeddings and gemma2.norms_per_layer == 4


def test_olmo2_normalises_all_of_q_and_k():
    """OLMo 2 (allenai/OLMo-2-1124-7B; transformers Olmo2Attention q_norm over heads x head_dim):
    per layer attention 4 x 64 x 64 = 16,384, q_norm 64 + k_norm 64, MLP 3 x 64 x 128 = 24,576,
    two norms 128: 41,216; x 2 + untied 2 x 1000 x 64 + final 64 = 210,496."""
    olmo2 = spec(tiny("olmo2", num_key_value_heads=4, tie_word_embeddings=False))
    assert olmo2.qk_norm == "full"
    assert parameter_count(olmo2).total == 210_496


def test_olmo1_layer_norm_has_no_parameters():
    """OLMo 1 (arXiv 2402.00838, Sec. 2.1: non-parametric layer norm): 2 x (16,384 + 24,576)
    + 2 x 1000 x 64 = 209,920."""
    olmo = spec(tiny("olmo", tie_word_embeddings=False))
    assert parameter_count(olmo).total == 209_920


def test_starcoder2_biases_layernorm_and_window():
    """Starcoder2 (bigcode/starcoder2-3b config: use_bias, LayerNorm, GELU MLP c_fc/c_proj, GQA,
    sliding_window): q 64 x 64 + k, v 64 x 32 + o 64 x 64 = 12,288 + biases 64 + 32 + 32 + 64;
    MLP 2 x 64 x 128 + 128 + 64; two LayerNorms 4 x 64: 29,312 per layer; x 2 + tied 64,000
    + final 128 = 122,752."""
    star2 = spec(tiny("starcoder2", num_key_value_heads=2, use_bias=True, norm_epsilon=1e-5,
                      hidden_act="gelu_pytorch_tanh", sliding_window=4096))  # fmt: skip
    assert star2.n_kv_heads == 2 and star2.norm == "layernorm" and star2.activation == "gelu"
    assert star2.sliding_window_layers == 2
    assert parameter_count(star2).total == 122_752


def test_falcon_multi_query_with_one_norm_per_parallel_block():
    """Falcon-7B style (tiiuae/falcon-7b config: multi_query, parallel_attn, no bias): fused qkv
    64 x (64 + 2 x 16), dense 64 x 64, MLP 2 x 64 x 256 (4h), one LayerNorm 128: 43,136 per
    layer; x 2 + tied 64,000 + final 128 = 150,400."""
    falcon = spec(tiny("falcon", multi_query=True, parallel_attn=True, bias=False, intermediate_size=None))
    assert falcon.n_kv_heads == 1 and falcon.parallel_residual
    assert parameter_count(falcon).total == 150_400


def test_qwen2_moe_shared_expert_has_a_gate():
    """Qwen1.5-MoE style: 4 experts of 32 + a shared expert of 64 with its 64 x 1 gate; router
    64 x 4. MoE per layer 4 x 3 x 64 x 32 + 3 x 64 x 64 + 64 + 256 = 37,184."""
    moe = spec(tiny("qwen2_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    shared_expert_intermediate_size=64, num_key_value_heads=4))  # fmt: skip
    attention = 4 * 64 * 64 + 3 * 64  # q/k/v biases
    assert parameter_count(moe).per_layer == attention + 37_184 + 2 * 64
    assert moe.shared_expert_gate and moe.n_dense_layers == 0


def test_gemma3_vlm_image_tokens():
    config = {"model_type": "gemma3", "mm_tokens_per_image": 256, "text_config": tiny("gemma3_text", head_dim=16),
              "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                                "num_hidden_layers": 1, "patch_size": 14, "image_size": 28}}  # fmt: skip
    vlm = spec(config)
    assert vlm.image_tokens == 256
    # SigLIP: conv 3 x 14 x 14 x 32 + 32, 4 positions x 32, layer 4 x (32^2 + 32) + 2 x 32 x 64 + 64 + 32
    # + 4 x 32, final norm 64; projector 32 x 64 + 32.
    tower = 3 * 14 * 14 * 32 + 32 + 4 * 32 + 4 * (32 * 32 + 32) + 2 * 32 * 64 + 64 + 32 + 4 * 32 + 64
    assert vlm.extra_params == tower + 32 * 64 + 32


def test_t5_small_encoder_decoder_with_relative_position_biases():
    """t5-small (google-t5/t5-small config.json; published 60,506,624: keras-team/keras-hub
    keras_hub/src/models/t5/t5_presets.py @71453d08, t5_small_multi). Shared embedding, tied head
    32,128 x 512 = 16,449,536. Encoder layer: q/k/v/o 4 x 512 x 512 = 1,048,576, ReLU MLP
    2 x 512 x 2048 = 2,097,152, two weight-only norms 1,024: 3,146,752 (x 6 = 18,880,512).
    Decoder layer: self- and cross-attention 2 x 1,048,576, MLP 2,097,152, three norms 1,536:
    4,195,840 (x 6 = 25,175,040). Relative biases 32 buckets x 8 heads in each stack 512, final
    norms 2 x 512: 16,449,536 + 18,880,512 + 25,175,040 + 512 + 1,024 = 60,506,624."""
    t5 = spec(T5_SMALL)
    assert (t5.n_layers, t5.cross_attention_layers, t5.activation, t5.norm) == (12, 6, "relu", "rmsnorm")
    assert t5.position_embedding == "relative" and t5.tied_embeddings
    assert parameter_count(t5).total == 60_506_624


def test_flan_t5_small_gated_gelu_and_untied_head():
    """flan-t5-small (published 76,961,152: keras-hub t5_presets.py @71453d08, flan_small_multi).
    6 heads of 64 (inner 384 against d_model 512), gated-GELU MLP of 1024, 8 + 8 layers, untied
    head. Encoder layer: 4 x 512 x 384 = 786,432 + 3 x 512 x 1024 = 1,572,864 + 1,024 = 2,360,320
    (x 8 = 18,882,560). Decoder layer: 2 x 786,432 + 1,572,864 + 1,536 = 3,147,264 (x 8 =
    25,178,112). Embedding and head 2 x 16,449,536 = 32,899,072; biases 2 x 32 x 6 = 384; norms
    1,024: 76,961,152."""
    flan = spec(FLAN_T5_SMALL)
    assert flan.head_dim == 64 and flan.activation == "geglu" and not flan.tied_embeddings
    assert parameter_count(flan).total == 76_961_152


ROBERTA_BASE = {
    "model_type": "roberta", "vocab_size": 50265, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 514, "type_vocab_size": 1,
    "hidden_act": "gelu", "layer_norm_eps": 1e-05,
}  # fmt: skip
ROBERTA_LARGE = ROBERTA_BASE | {
    "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "encoder", "published"),
    [(ROBERTA_BASE, 124_645_632, 124_052_736), (ROBERTA_LARGE, 355_359_744, 354_307_072)],
)
def test_roberta_encoder_against_the_keras_hub_count(config, encoder, published):
    """FacebookAI/roberta-base and -large config.json (514 learned positions, one token type).
    Published: keras-team/keras-hub keras_hub/src/models/roberta/roberta_presets.py @71453d08
    (roberta_base_en 124,052,736, roberta_large_en 354,307,072), whose backbone
    (roberta_backbone.py) keeps 512 positions, no token-type row and no pooler.
    Base, as transformers' RobertaModel: embeddings (50,265 + 514 + 1) x 768 + LayerNorm 1,536
    = 39,000,576; 12 layers of 4 x (768 x 768 + 768) + 2 x 768 x 3072 + 3072 + 768 + 2 x 1,536
    = 7,087,872 (85,054,464); pooler 590,592: 124,645,632. Less the pooler, 2 position rows and
    the token-type row (3 x 768): 124,052,736. Large likewise: 355,359,744 - (1024 x 1024 + 1024)
    - 3 x 1024 = 354,307,072."""
    roberta = spec(config)
    h = roberta.hidden_size
    assert parameter_count(roberta).total - (h * roberta.num_labels + roberta.num_labels) == encoder
    assert encoder - (h * h + h) - 3 * h == published


LLAVA_15_7B = {
    "model_type": "llava", "image_token_index": 32000, "projector_hidden_act": "gelu", "vision_feature_layer": -2,
    "vision_feature_select_strategy": "default",
    "text_config": {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064, "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
    },
    "vision_config": {
        "model_type": "clip_vision_model", "hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
        "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14, "projection_dim": 768,
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("vision", "text", "projection", "patch", "image", "published"),
    [
        ((1024, 4096, 24), (768, 3072, 12), 768, 14, 336, 427_944_770),
        ((1024, 4096, 24), (768, 3072, 12), 768, 14, 224, 427_616_770),
        ((768, 3072, 12), (512, 2048, 12), 512, 16, 224, 149_620_934),
    ],
    ids=["vit-l-14-336", "vit-l-14", "vit-b-16"],
)
def test_clip_vision_tower_against_the_whole_clip_count(vision, text, projection, patch, image, published):
    """Published: keras-team/keras-hub keras_hub/src/models/clip/clip_presets.py @71453d08
    (clip_vit_large_patch14_336 427,944,770; clip_vit_large_patch14 427,616,770;
    clip_vit_base_patch16 149,620,934), the whole CLIP: vision tower, text tower, the two
    projections, the logit scale, and the position-id table of the vision embedding stored as a
    variable ((image / patch)^2 + 1 entries, a buffer in transformers). ViT-L/14-336: patch conv
    3 x 14 x 14 x 1024 = 602,112, class 1024, positions 577 x 1024 = 590,848, pre-norm 2,048;
    24 layers of 4 x (1024^2 + 1024) + 2 x 1024 x 4096 + 4096 + 1024 + 4 x 1024 = 12,596,224;
    post-norm 2,048: 303,507,456. Text: 49,408 x 768 + 77 x 768 + 12 x 7,087,872 + 1,536
    = 123,060,480. Projections 1024 x 768 + 768 x 768, logit scale 1, position ids 577:
    427,944,770."""
    (vh, vf, vl), (th, tf, tl) = vision, text
    tower = clip_vision_params(vh, vf, vl, patch, image)
    text_tower = 49_408 * th + 77 * th + tl * (4 * (th * th + th) + 2 * th * tf + tf + th + 4 * th) + 2 * th
    position_ids = (image // patch) ** 2 + 1
    assert tower + text_tower + vh * projection + th * projection + 1 + position_ids == published
    if image == 336:
        assert tower == 303_507_456


def test_llava_counts_language_model_clip_tower_and_projector():
    """llava-hf/llava-1.5-7b-hf config.json: Llama 2 7B with 64 more tokens (32,064) plus the
    CLIP ViT-L/14-336 tower (303,507,456, checked above against the published CLIP count) and
    the two-layer projector 1024 x 4096 + 4096 + 4096 x 4096 + 4096 = 20,979,712. Language model:
    Llama-2-7b's published 6,738,415,616 (library row meta-llama/Llama-2-7b-hf) + 2 x 64 x 4096
    = 6,738,939,904. Total 7,063,427,072 (card: 7B). One image: (336 / 14)^2 = 576 tokens, the
    class token dropped (vision_feature_select_strategy "default")."""
    llava = spec(LLAVA_15_7B)
    assert llava.extra_params == 303_507_456 + 20_979_712
    assert parameter_count(llava).total - llava.extra_params == 6_738_415_616 + 2 * 64 * 4096
    assert parameter_count(llava).total == 7_063_427_072
    assert llava.image_tokens == 576
    assert active_parameters(llava) == 6_738_939_904  # a text token does not run the tower


MODERNBERT_BASE = {
    "model_type": "modernbert", "vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152,
    "num_hidden_layers": 22, "num_attention_heads": 12, "max_position_embeddings": 8192, "hidden_activation": "gelu",
    "norm_eps": 1e-05, "norm_bias": False, "attention_bias": False, "mlp_bias": False,
    "global_attn_every_n_layers": 3, "local_attention": 128,
}  # fmt: skip
MODERNBERT_LARGE = MODERNBERT_BASE | {
    "hidden_size": 1024, "intermediate_size": 2624, "num_hidden_layers": 28, "num_attention_heads": 16,
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "encoder", "published_millions"),
    [(MODERNBERT_BASE, 149_014_272, 149), (MODERNBERT_LARGE, 394_781_696, 395)],
)
def test_modernbert_fused_geglu_bias_free_norms(config, encoder, published_millions):
    """answerdotai/ModernBERT-base and -large config.json. Published: Warner et al. 2024
    (arXiv 2412.13663, Sec. 2.2): 149 and 395 million parameters. Base: embedding 50,368 x 768
    = 38,682,624; per layer fused Wqkv 768 x 2304 = 1,769,472, Wo 768 x 768 = 589,824, fused
    GeGLU Wi 768 x 2304 = 1,769,472, Wo 1152 x 768 = 884,736 (no biases): 5,013,504 (x 22 =
    110,297,088); weight-only LayerNorms: embeddings 1, layers 2 x 22 - 1 (layer 0 has none),
    final 1: 45 x 768 = 34,560. 149,014,272 (149.0M). Large: 51,576,832 + 28 x 12,255,232
    + 57 x 1024 = 394,781,696 (394.8M, the paper's 395M). 14 of 22 layers attend locally
    (global every third, from layer 0) within 128 tokens."""
    modernbert = spec(config)
    h = modernbert.hidden_size
    assert parameter_count(modernbert).total - (h * modernbert.num_labels + modernbert.num_labels) == encoder
    assert round(encoder / 1e6) == published_millions
    assert modernbert.fused_qkv and modernbert.fused_gate_up and not modernbert.norm_bias
    layers = modernbert.n_layers
    assert modernbert.sliding_window == 128 and modernbert.sliding_window_layers == layers - (layers + 2) // 3


PHI_35_MOE = {
    "model_type": "phimoe", "hidden_size": 4096, "intermediate_size": 6400, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 16, "num_experts_per_tok": 2,
    "vocab_size": 32064, "attention_bias": True, "lm_head_bias": True, "hidden_act": "silu",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
}  # fmt: skip


def test_phi35_moe_attention_and_head_biases_and_layer_norms():
    """microsoft/Phi-3.5-MoE-instruct config.json. Published: the model card, "16x3.8B parameters
    with 6.6B active parameters when using 2 experts"; Abdin et al., Phi-3 technical report
    (arXiv 2404.14219), 42B total. Per layer: q and o 4096 x 4096, k and v 4096 x 1024 =
    41,943,040 + biases 4096 + 1024 + 1024 + 4096 = 41,953,280; 16 experts of 3 x 4096 x 6400
    (78,643,200 each) = 1,258,291,200; router 4096 x 16 = 65,536; two LayerNorms with biases
    16,384: 1,300,326,400 (x 32 = 41,610,444,800). Embedding and untied head 2 x 32,064 x 4096
    = 262,668,288, head bias 32,064, final LayerNorm 8,192: 41,873,153,344 (42B). Active:
    14 unused experts x 78,643,200 x 32 = 35,232,153,600 fewer: 6,640,999,744 (6.6B)."""
    phi = spec(PHI_35_MOE)
    assert phi.norm == "layernorm" and phi.qkv_bias and phi.out_bias and not phi.linear_bias
    assert parameter_count(phi).total == 41_873_153_344
    assert active_parameters(phi) == 6_640_999_744
    assert round(parameter_count(phi).total / 1e9) == 42 and round(active_parameters(phi) / 1e9, 1) == 6.6


QWEN25_VL_VISION = {
    "depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
    "in_chans": 3, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2, "temporal_patch_size": 2,
}  # fmt: skip
QWEN25_VL_7B = {
    "model_type": "qwen2_5_vl", "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
    "max_position_embeddings": 128000, "max_window_layers": 28, "num_attention_heads": 28, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "sliding_window": 32768, "tie_word_embeddings": False, "use_sliding_window": False,
    "vocab_size": 152064, "vision_config": QWEN25_VL_VISION | {"model_type": "qwen2_5_vl", "out_hidden_size": 3584},
}  # fmt: skip
QWEN25_VL_3B = QWEN25_VL_7B | {
    "hidden_size": 2048, "intermediate_size": 11008, "max_window_layers": 70, "num_attention_heads": 16,
    "num_hidden_layers": 36, "num_key_value_heads": 2, "tie_word_embeddings": True, "vocab_size": 151936,
    "vision_config": QWEN25_VL_VISION | {"out_hidden_size": 2048},
}  # fmt: skip
QWEN25_VL_72B = QWEN25_VL_7B | {
    "hidden_size": 8192, "intermediate_size": 29568, "max_window_layers": 80, "num_attention_heads": 64,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "vision_config": QWEN25_VL_VISION | {"out_hidden_size": 8192},
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "text", "vision", "published"),
    [
        (QWEN25_VL_7B, 7_615_616_512, 676_550_144, 8_292_166_656),
        (QWEN25_VL_3B, 3_085_938_688, 668_684_288, 3_754_622_976),
    ],
    ids=["7B", "3B"],
)
def test_qwen25_vl_counts_language_model_vision_transformer_and_merger(config, text, vision, published):
    """Qwen/Qwen2.5-VL-7B-Instruct and -3B-Instruct config.json (flat: the text fields at the top,
    vision_config beside them). Published: the safetensors totals of the checkpoints (huggingface.co
    API), 8,292,166,656 and 3,754,622,976, with the vision tower alone counted at 676,550,144 for the
    7B by code that loads it. Language model: Qwen2.5-7B, 7,615,616,512 (q/k/v biases, untied
    152,064 x 3584), and Qwen2.5-3B, 3,085,938,688 (tied), the library rows Qwen/Qwen2.5-7B and -3B.
    Vision (transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py): Conv3d patch embedding
    3 x 2 x 14 x 14 x 1280 = 1,505,280, no bias; per block two RMSNorms 2,560, qkv 1280 x 3840 + 3840
    = 4,919,040, proj 1280^2 + 1280 = 1,639,680, gate and up 2 x (1280 x 3420 + 3420) = 8,762,040,
    down 3420 x 1280 + 1280 = 4,378,880: 19,702,200 (x 32 = 630,470,400). Merger: RMSNorm 1280,
    5120 x 5120 + 5120 = 26,219,520 (4 patches of 1280 merged), 5120 x 3584 + 3584 = 18,353,664
    (7B: 44,574,464) or 5120 x 2048 + 2048 = 10,487,808 (3B: 36,708,608). Vision 676,550,144 and
    668,684,288; totals 8,292,166,656 and 3,754,622,976."""
    vlm = spec(config)
    assert vlm.qkv_bias and not vlm.linear_bias and vlm.sliding_window is None
    assert vlm.extra_params == vision
    assert parameter_count(vlm).total - vlm.extra_params == text
    assert parameter_count(vlm).total == published
    assert active_parameters(vlm) == text  # a text token does not run the vision transformer
    assert vlm.image_tokens == 0  # dynamic resolution: no fixed count per image


def test_qwen25_vl_72b_and_the_nested_text_config_form():
    """Qwen/Qwen2.5-VL-72B-Instruct: Qwen2.5-72B (72,706,203,648, library row Qwen/Qwen2.5-72B) and the
    same vision transformer with a merger to 8192: 5120 x 8192 + 8192 = 41,951,232 for the last
    linear, vision 1,505,280 + 630,470,400 + 1,280 + 26,219,520 + 41,951,232 = 700,147,712; total
    73,406,351,360 (the card's 72B names the language model; no exact published count was found).
    Configs saved by newer transformers nest the text fields in text_config (model_type
    qwen2_5_vl_text) and may keep tie_word_embeddings at the top, which then applies."""
    big = spec(QWEN25_VL_72B)
    assert big.extra_params == 700_147_712
    assert parameter_count(big).total == 72_706_203_648 + 700_147_712 == 73_406_351_360
    text = {k: v for k, v in QWEN25_VL_3B.items() if k not in ("vision_config", "tie_word_embeddings")}
    nested = {"model_type": "qwen2_5_vl", "tie_word_embeddings": True, "vision_config": QWEN25_VL_3B["vision_config"],
              "text_config": text | {"model_type": "qwen2_5_vl_text"}}  # fmt: skip
    assert parameter_count(spec(nested)).total == parameter_count(spec(QWEN25_VL_3B)).total == 3_754_622_976


MLLAMA_VISION = {
    "model_type": "mllama_vision_model", "attention_heads": 16, "hidden_act": "gelu", "hidden_size": 1280,
    "image_size": 560, "intermediate_size": 5120, "max_num_tiles": 4, "num_channels": 3, "num_global_layers": 8,
    "num_hidden_layers": 32, "patch_size": 14, "intermediate_layers_indices": [3, 7, 15, 23, 30],
    "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
    "vision_output_dim": 7680,
}  # fmt: skip
LLAMA_32_11B_VISION = {
    "model_type": "mllama", "image_token_index": 128256,
    "text_config": {
        "model_type": "mllama_text_model", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38], "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    },
    "vision_config": MLLAMA_VISION,
}  # fmt: skip
LLAMA_32_90B_VISION = LLAMA_32_11B_VISION | {
    "text_config": LLAMA_32_11B_VISION["text_config"] | {
        "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 100, "num_attention_heads": 64,
        "cross_attention_layers": list(range(3, 100, 5)),
    },
}  # fmt: skip


def test_llama32_11b_vision_counts_tower_projector_and_cross_attention_layers():
    """meta-llama/Llama-3.2-11B-Vision config.json. Published: the safetensors total, 10,670,220,835
    (odd: the 35 scalar gates). transformers models/mllama/modeling_mllama.py. Vision encoder (tiles
    of 560 px, 40^2 + 1 = 1601 positions, 4 tiles, 8 aspect ratios + padding row): patch conv
    3 x 14 x 14 x 1280 = 752,640, class embedding 1,280; gated positional embedding 1 + 1601 x 1280
    + 9 x 4 x 1601 x 1280 = 75,823,361; pre- and post-tile embeddings 2 x (9 x 4 x 1280 + 1) = 92,162;
    LayerNorms before and after 5,120; per layer q/k/v/o 4 x 1280^2 = 6,553,600, MLP 2 x 1280 x 5120
    + 5120 + 1280 = 13,113,600, two LayerNorms 5,120: 19,672,320, x 32 local = 629,514,240, + 8 global
    with two gates each 157,378,576: 863,567,379. Projector 7680 x 4096 + 4096 = 31,461,376.
    Language model: 40 Llama 3.1 8B layers of 218,112,000 = 8,724,480,000 (the 8 cross-attention
    layers have the same q/k/v/o, MLP and norms) + their q/k norms and gates 8 x (2 x 128 + 2) = 2,064;
    embedding (128,256 + 8) x 4096 = 525,369,344, head 128,256 x 4096 = 525,336,576, norm 4,096:
    9,775,192,080. Total 10,670,220,835."""
    vlm = spec(LLAMA_32_11B_VISION)
    assert vlm.n_layers == 40 and vlm.vocab_size == 128_256 and not vlm.tied_embeddings
    assert vlm.extra_params == 863_567_379 + 31_461_376 + 8 * 4096 + 2_064
    assert parameter_count(vlm).total - vlm.extra_params == 8_030_261_248 + 8 * 218_112_000
    assert parameter_count(vlm).total == 10_670_220_835
    assert vlm.image_tokens == 0  # images enter through cross-attention, not as context tokens
    assert "8 of its layers read the images by cross-attention" in vlm.source
    tower = vlm.vision  # 32 local + 8 global layers over 4 tiles of 40^2 + 1 = 1601 patches, padded to 1608
    assert (tower.n_layers, tower.tokens_per_image, tower.cross_attention_tokens_per_image) == (40, 6432, 6404)
    assert (tower.cross_attention_layers, tower.parameters) == (8, 863_567_379)


def test_llama32_90b_vision_is_llama31_70b_with_20_cross_attention_layers():
    """meta-llama/Llama-3.2-90B-Vision: 100 layers, 20 of them cross-attention ([3, 8, ..., 98]).
    Llama-3.1-70B (70,553,706,496, library row) + 20 layers of 855,654,400 + 2 x 128 + 2 = 17,113,093,160
    + 8 x 8192 image-token rows; the same vision encoder 863,567,379; projector 7680 x 8192 + 8192
    = 62,922,752. Total 88,593,355,323 (the card's "90B (88.8)" is rounded and no exact published count
    was found)."""
    vlm = spec(LLAMA_32_90B_VISION)
    assert parameter_count(vlm).total == 70_553_706_496 + 17_113_093_160 + 8 * 8192 + 863_567_379 + 62_922_752
    assert parameter_count(vlm).total == 88_593_355_323


def test_mllama_refuses_cross_attention_layers_outside_the_model():
    bad = LLAMA_32_11B_VISION | {"text_config": LLAMA_32_11B_VISION["text_config"] | {"cross_attention_layers": [40]}}
    with pytest.raises(ModelInputError, match="text_config.cross_attention_layers: expected a list of layer"):
        spec(bad)
