"""The linears of a transformer layer, LoRA adapters on them, and QLoRA's 4-bit base.

Sources:
- LoRA: Hu et al. 2021, arXiv 2106.09685. An adapter on a frozen linear W (in x out)
  is A (r x in) and B (out x r): r * (in + out) trainable parameters (Sec. 4.1).
- QLoRA: Dettmers et al. 2023, arXiv 2305.14314. The base's linear weights are stored in
  4-bit NormalFloat with double quantisation (Sec. 3).
- Tensor parallelism: Shoeybi et al. 2019, arXiv 1909.08053 (Sec. 3): q/k/v, gate/up and
  fc1 split their outputs (column-parallel), o, down and fc2 their inputs (row-parallel).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from calculators.model_spec import ModelSpec

# NF4 with double quantisation (QLoRA Sec. 3): 4 bits per weight, one 8-bit quantised
# absmax per block of 64 weights, and one fp32 constant per 256 of those absmax values.
NF4_BITS_PER_WEIGHT = 4 + 8 / 64 + 32 / (64 * 256)

# Module names each target choice adapts ("qkv" and "gate_up" are fused projections,
# adapted when any of their parts is: PEFT targets the fused module, e.g. GPT-2 c_attn).
_MLP_NAMES = frozenset({"gate", "up", "gate_up", "down", "fc1", "fc2"})
LORA_TARGET_MODULES: dict[str, frozenset[str]] = {
    "qv": frozenset({"q", "v", "qkv"}),
    "attention": frozenset({"q", "k", "v", "qkv", "o"}),
    "qvo-mlp": frozenset({"q", "v", "qkv", "o"}) | _MLP_NAMES,
    "all-linear": frozenset({"q", "k", "v", "qkv", "o"}) | _MLP_NAMES,
}
ALL_LINEARS = LORA_TARGET_MODULES["all-linear"]
COLUMN_PARALLEL = frozenset({"q", "k", "v", "qkv", "gate", "up", "gate_up", "fc1"})


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


def kv_heads_per_rank(spec: ModelSpec, tensor_parallel: int) -> int:
    """kv-heads one rank holds: n_kv_heads / t, at least 1 (replicated when t > n_kv_heads,
    as Megatron-LM and vLLM do for grouped-query attention)."""
    return max(1, math.ceil(spec.n_kv_heads / tensor_parallel))


def layer_linears(spec: ModelSpec, tensor_parallel: int = 1) -> list[Linear]:
    """The linears of one layer, split as Megatron-LM splits them over `tensor_parallel` ranks."""
    t = tensor_parallel
    h, f, experts = spec.hidden_size, spec.ffn_hidden_size, spec.n_experts
    q_local = spec.q_dim / t if t > 1 else spec.q_dim
    kv_local = kv_heads_per_rank(spec, t) * spec.attention_head_dim if t > 1 else spec.kv_dim
    f_local = f / t if t > 1 else f
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
    """The h x n_experts router of a mixture of experts (replicated across ranks)."""
    return spec.hidden_size * spec.n_experts if spec.n_experts > 1 else 0


def layer_matmul_elements(spec: ModelSpec, tensor_parallel: int = 1) -> float:
    """Matmul weights of one layer on one rank (equals ParameterCount.matmul_per_layer at t = 1)."""
    return sum(linear.weight_elements for linear in layer_linears(spec, tensor_parallel)) + router_elements(spec)


def adapted_linears(spec: ModelSpec, targets: str, tensor_parallel: int = 1) -> list[Linear]:
    """The linears of a layer that get a LoRA adapter."""
    names = LORA_TARGET_MODULES[targets]
    return [linear for linear in layer_linears(spec, tensor_parallel) if linear.name in names]


def lora_parameters_per_layer(spec: ModelSpec, rank: int, targets: str, tensor_parallel: int = 1) -> float:
    """Trainable parameters of one layer's adapters: r * (in + out) per adapted linear and
    expert (Hu et al. 2021, Sec. 4.1). Under tensor parallelism A and B follow their base
    linear's split, so each rank holds r * (in + out) of its local shape."""
    linears = adapted_linears(spec, targets, tensor_parallel)
    return sum(linear.copies * rank * (linear.in_features + linear.out_features) for linear in linears)


def lora_matrix_shapes(spec: ModelSpec, rank: int, targets: str, tensor_parallel: int = 1) -> list[tuple[float, float]]:
    """(rows, columns) of every adapter matrix of one layer: A is r x in, B is out x r."""
    shapes: list[tuple[float, float]] = []
    for linear in adapted_linears(spec, targets, tensor_parallel):
        shapes += [(rank, linear.in_features), (linear.out_features, rank)] * linear.copies
    return shapes


def largest_linear(spec: ModelSpec, tensor_parallel: int = 1) -> Linear:
    """The linear with the largest weight (one expert's, for a mixture of experts)."""
    return max(layer_linears(spec, tensor_parallel), key=lambda linear: linear.in_features * linear.out_features)


def nf4_bytes(elements: float) -> float:
    """Bytes of `elements` weights in NF4 with double quantisation (QLoRA Sec. 3):
    4 + 8/64 + 32/(64*256) = 4.127 bits per weight."""
    return elements * NF4_BITS_PER_WEIGHT / 8


def qlora_dequantised_weight_bytes(spec: ModelSpec, compute_bytes: int, tokens: int, tensor_parallel: int = 1) -> float:
    """Transient of a QLoRA matmul: bitsandbytes/torchao dequantise one NF4 linear weight to
    the bf16 compute dtype (2 bytes each), multiply, and free it; the largest such weight and
    its output are alive together (QLoRA Sec. 3, 'dequantise the storage data type to the
    computation data type to perform the forward and backward pass')."""
    linear = largest_linear(spec, tensor_parallel)
    return 2 * linear.in_features * linear.out_features + compute_bytes * tokens * linear.out_features
