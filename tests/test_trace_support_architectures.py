"""The trace refuses, with one line naming the feature, architectures its reference models cannot build."""

from __future__ import annotations

import pytest

from calculators.models.spec import ArchitectureSpec, ModelSpec
from measure.trace.result import UnsupportedConfiguration
from measure.trace.support import check_spec
from tests.test_architectures import DEEPSEEK_V3, GEMMA3_1B, GPT_OSS_20B, QWEN3_30B_A3B, spec

LLAMA_LIKE = dict(n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=4, ffn_hidden_size=128, vocab_size=100)


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"cross_attention_layers": 1}, "an encoder-decoder other than T5"),
        ({"position_embedding": "relative"}, "relative position biases outside T5"),
        ({"norms_per_layer": 4, "parallel_residual": True}, "sandwich norms with a parallel residual"),
        ({"norms_per_layer": 3}, "3 norms per layer"),
    ],
)
def test_unbuildable_feature_is_refused_in_one_line(extra, reason):
    with pytest.raises(UnsupportedConfiguration) as refused:
        check_spec(ArchitectureSpec(**LLAMA_LIKE | extra))
    message = str(refused.value)
    assert reason in message and "\n" not in message


def test_plain_llama_and_mixtral_are_still_traced():
    check_spec(ModelSpec(**LLAMA_LIKE))
    check_spec(ModelSpec(**LLAMA_LIKE | {"n_experts": 4, "experts_per_token": 2}))


def test_rotary_layernorm_parallel_blocks_and_lone_biases_are_traced():
    """GPT-NeoX/Pythia (LayerNorm, partial rotary, parallel residual), Phi-2 and Falcon-7B (one norm
    for both branches), and Phi-3.5-MoE's biases on the attention output and LM head alone."""
    rotary_layernorm = LLAMA_LIKE | {"norm": "layernorm", "rotary_fraction": 0.25}
    check_spec(ModelSpec(**rotary_layernorm | {"parallel_residual": True}))
    check_spec(ModelSpec(**rotary_layernorm | {"parallel_residual": True, "norms_per_layer": 1}))
    check_spec(ArchitectureSpec(**rotary_layernorm | {"out_bias": True, "lm_head_bias": True}))


def test_qk_norm_and_deepseek_models_are_traced():
    """Qwen3 (a MoE without shared experts), Gemma 3 and OLMo 2's q/k norms, and DeepSeek-V3, are built."""
    for config in (QWEN3_30B_A3B, GEMMA3_1B, DEEPSEEK_V3):  # DeepSeek: MLA, shared experts, dense first layers
        check_spec(spec(config))
    check_spec(ModelSpec(**LLAMA_LIKE | {"qk_norm": "full"}))


def test_published_gpt_oss_is_traced_with_eager_attention():
    """gpt-oss-20b's sinks, clamped SwiGLU experts and router bias are built (tests/test_trace_gpt_oss.py)."""
    check_spec(spec(GPT_OSS_20B))
