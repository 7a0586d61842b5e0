"""The one geometry module: linears per tensor-parallel rank, router, kv-heads per rank, and
the Adafactor factored state built from them. Numbers worked out by hand from the configs."""

from __future__ import annotations

import pytest

from calculators.memory.layout import adafactor_layer_elements
from calculators.models.geometry import (
    active_parameters,
    expert_weights_per_layer,
    factored_matrices,
    kv_heads_per_rank,
    layer_linears,
    layer_matmul_elements,
    parameter_count,
    router_elements,
)
from calculators.models.presets import get_preset

GPT2 = get_preset("gpt2")
LLAMA_8B = get_preset("llama-3.1-8b")
MIXTRAL = get_preset("mixtral-8x7b")
PHI3 = get_preset("phi-3-mini-4k")


def test_llama_linears_split_over_eight_ranks():
    """Llama-3.1-8B, TP 8: q 4096 -> 512 per rank, k/v one kv-head of 128, o 512 -> 4096,
    gate/up 14336/8 = 1792 columns, down 1792 rows."""
    shapes = {linear.name: (linear.in_features, linear.out_features) for linear in layer_linears(LLAMA_8B, 8)}
    assert shapes == {
        "q": (4096, 512),
        "k": (4096, 128),
        "v": (4096, 128),
        "o": (512, 4096),
        "gate": (4096, 1792),
        "up": (4096, 1792),
        "down": (1792, 4096),
    }


def test_kv_heads_are_replicated_past_their_count():
    """8 kv-heads: 2 per rank at TP 4, 1 at TP 8, still 1 (replicated) at TP 16."""
    assert [kv_heads_per_rank(LLAMA_8B, t) for t in (1, 4, 8, 16)] == [8, 2, 1, 1]


def test_fused_projections_are_one_linear_each():
    """GPT-2's c_attn is one 768 x 2304 matrix; Phi-3's gate_up_proj one 3072 x 16384."""
    assert [linear.name for linear in layer_linears(GPT2)] == ["qkv", "o", "fc1", "fc2"]
    assert layer_linears(GPT2)[0][1:3] == (768, 2304)
    gate_up = next(linear for linear in layer_linears(PHI3) if linear.name == "gate_up")
    assert (gate_up.in_features, gate_up.out_features) == (3072, 16384)


def test_mixtral_router_and_experts():
    """Mixtral: router 4096 x 8 = 32,768; eight experts of 3 x 4096 x 14336 each."""
    assert router_elements(MIXTRAL) == 32_768
    assert router_elements(LLAMA_8B) == 0
    assert expert_weights_per_layer(MIXTRAL) == 8 * 3 * 4096 * 14336
    attention = 4096 * 4096 * 2 + 2 * 4096 * 1024
    assert layer_matmul_elements(MIXTRAL) == attention + 8 * 3 * 4096 * 14336 + 32_768


def test_mixtral_active_parameters_match_the_paper():
    """Mixtral of Experts (arXiv 2401.04088): 46.7B total, 12.9B active; exactly 46,702,792,704
    total (model card) minus 32 layers x 6 unused experts x 176,160,768 = 12,879,925,248."""
    assert parameter_count(MIXTRAL).total == 46_702_792_704
    assert active_parameters(MIXTRAL) == 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336


def test_adafactor_factors_a_fused_qkv_as_one_matrix():
    """GPT-2 layer under Adafactor: row + column vectors of c_attn (768 + 2304), c_proj
    (768 + 768), c_fc (768 + 3072), mlp c_proj (3072 + 768) = 12,288, plus the full second
    moment of the vectors: biases 2304 + 768 + 3072 + 768 = 6,912 and two LayerNorms
    2 x 2 x 768 = 3,072. Total 22,272 (counting q, k, v apart would give 23,808)."""
    assert factored_matrices(GPT2) == [(768, 2304), (768, 768), (768, 3072), (3072, 768)]
    assert adafactor_layer_elements(GPT2, parameter_count(GPT2)) == 22_272


def test_adafactor_factors_the_router():
    """The MoE router is a 2-D weight: Adafactor keeps 4096 + 8 for it, not 32,768."""
    assert factored_matrices(MIXTRAL)[-1] == (4096, 8)
    assert len(factored_matrices(MIXTRAL)) == 4 + 3 * 8 + 1


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_split_linears_add_up_to_the_whole_layer(t):
    """Column- and row-parallel shards of a model whose kv-heads divide by t add up to the
    unsplit layer (nothing replicated)."""
    assert layer_matmul_elements(LLAMA_8B, t) * t == pytest.approx(layer_matmul_elements(LLAMA_8B))
