"""The shapes of a transformer: its linears per tensor-parallel rank, router, kv-heads per
rank, embedding and head, and the parameter counts built from them.

Every calculator that needs a layer's shapes (training memory, LoRA/QLoRA, serving, the
time model, the trace's reference transformer) takes them from here, so a fused or
grouped projection is described once.

Sources:
- Attention: Vaswani et al. 2017 (arXiv 1706.03762), with grouped-query attention
  sharing k/v across head groups (Ainslie et al. 2023, arXiv 2305.13245).
- Gated MLPs (SwiGLU/GeGLU): Shazeer 2020, arXiv 2002.05202.
- Mixture of experts: Jiang et al. 2024, *Mixtral of Experts* (arXiv 2401.04088): `n_experts`
  MLPs and an h x n_experts router per layer; Fedus et al. 2021 (arXiv 2101.03961) for the
  experts a token runs through.
- Tensor parallelism: Shoeybi et al. 2019, arXiv 1909.08053 (Sec. 3): q/k/v, gate/up and
  fc1 split their outputs (column-parallel), o, down and fc2 their inputs (row-parallel); the
  vocabulary is split too (Megatron-LM VocabParallelEmbedding). kv-heads are replicated when
  the degree exceeds them (vLLM `QKVParallelLinear`: num_kv_head_replicas = tp // kv_heads).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from pydantic import BaseModel

from calculators.model_spec import ModelSpec

MLP_LINEAR_NAMES = frozenset({"gate", "up", "gate_up", "down", "fc1", "fc2"})


class Linear(NamedTuple):
    """One linear of a layer as one tensor-parallel rank holds it; `copies` is the
    number of experts for MLP linears of a mixture of experts."""

    name: str
    in_features: float
    out_features: float
    copies: int

    @property
    def weight_elements(self) -> float:
        return self.copies * self.in_features * self.out_features

    @property
    def is_mlp(self) -> bool:
        return self.name in MLP_LINEAR_NAMES


def split(value: float, tensor_parallel: int) -> float:
    """One tensor-parallel rank's share of a split dimension (the value itself without TP)."""
    return value / tensor_parallel if tensor_parallel > 1 else value


def kv_heads_per_rank(spec: ModelSpec, tensor_parallel: int = 1) -> int:
    """kv-heads one rank holds: n_kv_heads / t, at least 1 (replicated when t > n_kv_heads,
    as Megatron-LM and vLLM do for grouped-query attention)."""
    return max(1, math.ceil(spec.n_kv_heads / tensor_parallel))


def layer_linears(spec: ModelSpec, tensor_parallel: int = 1) -> list[Linear]:
    """The linears of one layer, split as Megatron-LM splits them over `tensor_parallel` ranks
    (the router is apart: see router_elements)."""
    t = tensor_parallel
    h, experts = spec.hidden_size, spec.n_experts
    q_local = split(spec.q_dim, t)
    kv_local = kv_heads_per_rank(spec, t) * spec.attention_head_dim if t > 1 else spec.kv_dim
    f_local = split(spec.ffn_hidden_size, t)
    if spec.fused_qkv:
        linears = [Linear("qkv", h, q_local + 2 * kv_local, 1)]
    else:
        linears = [Linear("q", h, q_local, 1), Linear("k", h, kv_local, 1), Linear("v", h, kv_local, 1)]
    linears.append(Linear("o", q_local, h, 1))
    if not spec.is_gated_mlp:
        return linears + [Linear("fc1", h, f_local, experts), Linear("fc2", f_local, h, experts)]
    if spec.fused_gate_up:
        linears.append(Linear("gate_up", h, 2 * f_local, experts))
    else:
        linears += [Linear("gate", h, f_local, experts), Linear("up", h, f_local, experts)]
    return linears + [Linear("down", f_local, h, experts)]


def router_elements(spec: ModelSpec) -> int:
    """The h x n_experts router of a mixture of experts (replicated across ranks); none for a
    dense model."""
    return spec.hidden_size * spec.n_experts if spec.n_experts > 1 else 0


def layer_matmul_elements(spec: ModelSpec, tensor_parallel: int = 1) -> float:
    """Matmul weights of one layer on one rank, router included."""
    return sum(linear.weight_elements for linear in layer_linears(spec, tensor_parallel)) + router_elements(spec)


def expert_weights_per_layer(spec: ModelSpec, tensor_parallel: int = 1) -> float:
    """Matmul weights of all experts' MLPs (the whole MLP of a dense model) in one layer on one
    rank, the router excluded."""
    return sum(linear.weight_elements for linear in layer_linears(spec, tensor_parallel) if linear.is_mlp)


def largest_linear(spec: ModelSpec, tensor_parallel: int = 1) -> Linear:
    """The linear with the largest weight (one expert's, for a mixture of experts)."""
    return max(layer_linears(spec, tensor_parallel), key=lambda linear: linear.in_features * linear.out_features)


def factored_matrices(spec: ModelSpec, tensor_parallel: int = 1) -> list[tuple[float, float]]:
    """(rows, columns) of every 2-D weight of one layer on one rank, the router included: what a
    factored optimizer (Adafactor) keeps one row and one column vector for."""
    matrices = [
        (linear.in_features, linear.out_features)
        for linear in layer_linears(spec, tensor_parallel)
        for _ in range(linear.copies)
    ]
    if spec.n_experts > 1:
        matrices.append((spec.hidden_size, spec.n_experts))
    return matrices


# --- Parameter counts --------------------------------------------------------------------


class ParameterCount(BaseModel):
    """Parameters by place in the model; `matmul` counts weights used in matmuls."""

    embedding: int
    per_layer: int
    layers: int
    head: int
    total: int
    matmul_per_layer: int
    matmul_head: int
    matmul_total: int
    largest_tensor: int


def norm_parameters(spec: ModelSpec) -> int:
    """LayerNorm has a weight and a bias per channel; RMSNorm only a weight."""
    return 2 * spec.hidden_size if spec.norm == "layernorm" else spec.hidden_size


def attention_params(spec: ModelSpec) -> tuple[int, int]:
    """(all, matmul-weight) parameters of one attention block: q h x (heads*d), k and v
    h x (kv_heads*d) each, o (heads*d) x h, plus biases where the model has them."""
    h = spec.hidden_size
    weights = sum(int(linear.weight_elements) for linear in layer_linears(spec) if not linear.is_mlp)
    biases = 0
    if spec.linear_bias:
        biases = spec.q_dim + 2 * spec.kv_dim + h
    elif spec.qkv_bias:
        biases = spec.q_dim + 2 * spec.kv_dim
    return weights + biases, weights


def mlp_params(spec: ModelSpec) -> tuple[int, int]:
    """(all, matmul-weight) parameters of the MLP, all experts and the router included.
    GELU MLP: h x f and f x h; gated MLP: gate and up h x f, down f x h."""
    n_mats = 3 if spec.is_gated_mlp else 2
    biases_per_expert = (spec.ffn_hidden_size * (n_mats - 1) + spec.hidden_size) if spec.linear_bias else 0
    weights = int(expert_weights_per_layer(spec)) + router_elements(spec)
    return weights + biases_per_expert * spec.n_experts, weights


def vocab_matrix_elements(spec: ModelSpec) -> int:
    """The vocab x hidden word-embedding matrix (also the LM head's, when tied)."""
    return spec.vocab_size * spec.hidden_size


def lm_head_params(spec: ModelSpec) -> int:
    """An untied LM head has its own vocab x hidden matrix; a tied one reuses the embedding."""
    return vocab_matrix_elements(spec) if spec.head == "lm" and not spec.tied_embeddings else 0


def parameter_count(spec: ModelSpec) -> ParameterCount:
    """Count parameters module by module, as Hugging Face models build them."""
    h = spec.hidden_size
    attn_all, attn_matmul = attention_params(spec)
    mlp_all, mlp_matmul = mlp_params(spec)
    per_layer = attn_all + mlp_all + spec.norms_per_layer * norm_parameters(spec)

    embedding = vocab_matrix_elements(spec)
    if spec.position_embedding == "learned":
        embedding += spec.max_position_embeddings * h
    embedding += spec.token_type_vocab * h
    if spec.embedding_norm:
        embedding += norm_parameters(spec)

    head = norm_parameters(spec) if spec.final_norm else 0
    matmul_head = 0
    if spec.head == "lm":
        # A tied LM head reuses the embedding matrix: no new parameters, but it
        # is still a matmul weight (and gets an autocast copy).
        matmul_head = vocab_matrix_elements(spec)
        head += lm_head_params(spec)
    else:
        if spec.has_pooler:
            head += h * h + h
            matmul_head += h * h
        head += h * spec.num_labels + spec.num_labels
        matmul_head += h * spec.num_labels

    layers = spec.n_layers * per_layer
    largest = max(vocab_matrix_elements(spec), h * spec.ffn_hidden_size * (2 if spec.fused_gate_up else 1))
    return ParameterCount(
        embedding=embedding,
        per_layer=per_layer,
        layers=layers,
        head=head,
        total=embedding + layers + head,
        matmul_per_layer=attn_matmul + mlp_matmul,
        matmul_head=matmul_head,
        largest_tensor=largest,
        matmul_total=spec.n_layers * (attn_matmul + mlp_matmul) + matmul_head,
    )


def unused_expert_parameters(spec: ModelSpec, matmul_only: bool) -> int:
    """Parameters of the experts a token does not run through, over all layers: a mixture of
    experts runs `experts_per_token` of `n_experts` MLPs per token (Fedus et al. 2021)."""
    if spec.n_experts == 1:
        return 0
    mlp_all, mlp_matmul = mlp_params(spec)
    per_expert = ((mlp_matmul if matmul_only else mlp_all) - router_elements(spec)) // spec.n_experts
    return spec.n_layers * (spec.n_experts - spec.experts_per_token) * per_expert


def active_matmul_parameters(spec: ModelSpec) -> int:
    """Matmul weights one token multiplies by: every layer's attention and MLP weights plus the
    LM head (Kaplan et al. 2020, arXiv 2001.08361, count the head in N for compute); the
    embedding lookup is no matmul. Only the routed experts (and the router) run per token."""
    return parameter_count(spec).matmul_total - unused_expert_parameters(spec, matmul_only=True)


def active_parameters(spec: ModelSpec) -> int:
    """Parameters one token uses: all of a dense model; a MoE only its routed experts
    (Mixtral 8x7B: 46.7B total, 12.9B active, arXiv 2401.04088)."""
    return parameter_count(spec).total - unused_expert_parameters(spec, matmul_only=False)
