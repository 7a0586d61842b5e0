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
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict

from calculators.models.spec import ModelSpec, extension

T = TypeVar("T")

ROUTED_MLP_NAMES = frozenset({"gate", "up", "gate_up", "down", "fc1", "fc2"})
MLP_LINEAR_NAMES = ROUTED_MLP_NAMES | {"shared_" + name for name in ROUTED_MLP_NAMES}


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


def attention_linears(spec: ModelSpec, tensor_parallel: int = 1) -> list[Linear]:
    """The attention linears of one layer on one rank.

    Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1; deepseek-ai/DeepSeek-V3
    modeling_deepseek.py): q through a low-rank q_a (h x q_lora_rank) and q_b, k and v from one
    compressed latent, kv_a (h x (kv_lora_rank + rope dim)) then kv_b (kv_lora_rank x heads x
    (nope + v head dims)), and o from heads x v head dim."""
    t, h = tensor_parallel, spec.hidden_size
    q_local = split(spec.q_dim, t)
    if spec.is_mla:
        nope = spec.attention_head_dim - spec.qk_rope_head_dim
        if spec.q_lora_rank:
            linears = [Linear("q_a", h, spec.q_lora_rank, 1), Linear("q_b", spec.q_lora_rank, q_local, 1)]
        else:
            linears = [Linear("q", h, q_local, 1)]
        kv_up = split(spec.n_heads * (nope + spec.value_head_dim), t)
        return linears + [
            Linear("kv_a", h, spec.kv_lora_rank + spec.qk_rope_head_dim, 1),
            Linear("kv_b", spec.kv_lora_rank, kv_up, 1),
            Linear("o", split(spec.n_heads * spec.value_head_dim, t), h, 1),
        ]
    kv_local = kv_heads_per_rank(spec, t) * spec.attention_head_dim if t > 1 else spec.kv_dim
    if spec.fused_qkv:
        linears = [Linear("qkv", h, q_local + 2 * kv_local, 1)]
    else:
        linears = [Linear("q", h, q_local, 1), Linear("k", h, kv_local, 1), Linear("v", h, kv_local, 1)]
    return linears + [Linear("o", q_local, h, 1)]


def mlp_linears(spec: ModelSpec, width: float, copies: int, prefix: str = "") -> list[Linear]:
    """An MLP of `width` (already split over ranks), `copies` times (the experts): fc1 and fc2,
    or gate, up (fused or not) and down for a gated MLP (Shazeer 2020)."""
    h = spec.hidden_size
    if not spec.is_gated_mlp:
        return [Linear(prefix + "fc1", h, width, copies), Linear(prefix + "fc2", width, h, copies)]
    if spec.fused_gate_up:
        linears = [Linear(prefix + "gate_up", h, 2 * width, copies)]
    else:
        linears = [Linear(prefix + "gate", h, width, copies), Linear(prefix + "up", h, width, copies)]
    return linears + [Linear(prefix + "down", width, h, copies)]


def layer_ffn_width(spec: ModelSpec, dense: bool = False) -> int:
    """The MLP width of one layer: a mixture of experts' dense layers (`dense`, DeepSeek-V3's
    first_k_dense_replace) run dense_ffn_hidden_size where given; every other MLP, and each
    routed expert, ffn_hidden_size."""
    return spec.dense_ffn_hidden_size if dense and spec.dense_ffn_hidden_size else spec.ffn_hidden_size


def layer_linears(spec: ModelSpec, tensor_parallel: int = 1, dense: bool = False) -> list[Linear]:
    """The linears of one layer, split as Megatron-LM splits them over `tensor_parallel` ranks
    (the router is apart: see router_elements). For a mixture of experts this is a sparse layer
    (routed experts of ffn_hidden_size each, plus the shared experts that every token runs, as
    Qwen2-MoE and DeepSeek-V2 add them); `dense=True` gives one of its dense layers instead.
    Remembered per model (remembered): the memory engine asks for them in every estimate of a
    search over settings; each caller gets its own list."""
    return list(remembered(_layer_linears, spec, tensor_parallel, dense))


def _layer_linears(spec: ModelSpec, tensor_parallel: int, dense: bool) -> list[Linear]:
    t = tensor_parallel
    linears = attention_linears(spec, t)
    if dense or spec.n_experts == 1:
        return linears + mlp_linears(spec, split(layer_ffn_width(spec, dense), t), 1)
    linears += mlp_linears(spec, split(spec.ffn_hidden_size, t), spec.n_experts)
    if spec.shared_expert_ffn_size:
        linears += mlp_linears(spec, split(spec.shared_expert_ffn_size, t), 1, prefix="shared_")
    return linears


def router_elements(spec: ModelSpec) -> int:
    """The h x n_experts router of a mixture of experts (replicated across ranks), and the h x 1
    gate of Qwen2-MoE's shared expert; none for a dense model."""
    if spec.n_experts == 1:
        return 0
    return spec.hidden_size * spec.n_experts + (spec.hidden_size if spec.shared_expert_gate else 0)


def layer_matmul_elements(spec: ModelSpec, tensor_parallel: int = 1, dense: bool = False) -> float:
    """Matmul weights of one (sparse, for a MoE) layer on one rank, router included; `dense=True`
    gives one of a MoE's dense layers (no router)."""
    linears = layer_linears(spec, tensor_parallel, dense=dense)
    return sum(linear.weight_elements for linear in linears) + (0 if dense else router_elements(spec))


def expert_weights_per_layer(spec: ModelSpec, tensor_parallel: int = 1) -> float:
    """Matmul weights of all experts' MLPs (the whole MLP of a dense model) in one layer on one
    rank, the router excluded."""
    return sum(linear.weight_elements for linear in layer_linears(spec, tensor_parallel) if linear.is_mlp)


def largest_linear(spec: ModelSpec, tensor_parallel: int = 1) -> Linear:
    """The linear with the largest weight (one expert's, for a mixture of experts)."""
    return max(layer_linears(spec, tensor_parallel), key=lambda linear: linear.in_features * linear.out_features)


def factored_matrices(spec: ModelSpec, tensor_parallel: int = 1, dense: bool = False) -> list[tuple[float, float]]:
    """(rows, columns) of every 2-D weight of one layer on one rank, the router included: what a
    factored optimizer (Adafactor) keeps one row and one column vector for; `dense=True` gives
    one of a MoE's dense layers."""
    matrices = [
        (linear.in_features, linear.out_features)
        for linear in layer_linears(spec, tensor_parallel, dense=dense)
        for _ in range(linear.copies)
    ]
    if spec.n_experts > 1 and not dense:
        matrices.append((spec.hidden_size, spec.n_experts))
    return matrices


# --- Parameter counts --------------------------------------------------------------------


class ParameterCount(BaseModel):
    """Parameters by place in the model; `matmul` counts weights used in matmuls. Frozen: one
    count is shared by every caller that asks for the same model's (parameter_count)."""

    model_config = ConfigDict(frozen=True)

    embedding: int
    per_layer: int
    layers: int
    head: int
    total: int
    matmul_per_layer: int
    matmul_head: int
    matmul_total: int
    largest_tensor: int


def norm_parameters(spec: ModelSpec, width: int | None = None) -> int:
    """LayerNorm has a weight and a bias per channel (unless built without bias, as ModernBERT's);
    RMSNorm only a weight."""
    width = spec.hidden_size if width is None else width
    return 2 * width if spec.norm == "layernorm" and extension(spec, "norm_bias") else width


def _linear_biases(linears: list[Linear]) -> int:
    return sum(linear.copies * int(linear.out_features) for linear in linears)


def attention_params(spec: ModelSpec) -> tuple[int, int]:
    """(all, matmul-weight) parameters of one attention block: q h x (heads*d), k and v
    h x (kv_heads*d) each, o (heads*d) x h, plus what some models add: biases (GPT-2, gpt-oss;
    q/k/v only for Qwen2), per-head q/k norms (Qwen3, Gemma 3; OLMo 2 normalises all of q and k),
    MLA's two latent norms, and gpt-oss's one attention-sink logit per head
    (openai/gpt-oss-20b config.json; transformers models/gpt_oss/modeling_gpt_oss.py `sinks`)."""
    linears = attention_linears(spec)
    weights = sum(int(linear.weight_elements) for linear in linears)
    extra = 0
    if spec.linear_bias:
        extra += _linear_biases(linears)
    else:
        if spec.qkv_bias:
            extra += _linear_biases([linear for linear in linears if linear.name != "o"])
        if extension(spec, "out_bias"):  # Phi-3.5-MoE: o has a bias as q/k/v do, the experts none
            extra += _linear_biases([linear for linear in linears if linear.name == "o"])
    if spec.qk_norm == "head":
        extra += 2 * norm_parameters(spec, spec.attention_head_dim)
    elif spec.qk_norm == "full":
        extra += norm_parameters(spec, spec.q_dim) + norm_parameters(spec, spec.kv_dim)
    if spec.is_mla:
        extra += norm_parameters(spec, spec.kv_lora_rank) + norm_parameters(spec, spec.q_lora_rank or 0)
    if spec.attention_sinks:
        extra += spec.n_heads
    return weights + extra, weights


def _mlp_params(spec: ModelSpec, dense: bool) -> tuple[int, int]:
    """(all, matmul-weight) parameters of the MLP of a sparse layer (of the only kind of layer for a
    dense model): all routed experts, shared experts and the router included; with `dense`, of a
    mixture of experts' dense layer. GELU MLP: h x f and f x h; gated MLP: gate and up h x f, down f x h."""
    linears = [linear for linear in layer_linears(spec, dense=dense) if linear.is_mlp]
    weights = sum(int(linear.weight_elements) for linear in linears)
    biases = _linear_biases(linears) if spec.linear_bias else 0
    if dense or spec.n_experts == 1:
        return weights + biases, weights
    router = router_elements(spec)
    return weights + biases + router + (spec.n_experts if spec.router_bias else 0), weights + router


def routed_expert_params(spec: ModelSpec) -> int:
    """Parameters of one routed expert: its MLP's weights and biases."""
    linears = [linear for linear in layer_linears(spec) if linear.name in ROUTED_MLP_NAMES]
    weights = sum(int(linear.in_features * linear.out_features) for linear in linears)
    biases = sum(int(linear.out_features) for linear in linears) if spec.linear_bias else 0
    return weights + biases


def vocab_matrix_elements(spec: ModelSpec) -> int:
    """The vocab x hidden word-embedding matrix (also the LM head's, when tied)."""
    return spec.vocab_size * spec.hidden_size


def lm_head_params(spec: ModelSpec) -> int:
    """An untied LM head has its own vocab x hidden matrix; a tied one reuses the embedding."""
    return vocab_matrix_elements(spec) if spec.head == "lm" and not spec.tied_embeddings else 0


def layer_params(spec: ModelSpec, dense: bool = False) -> tuple[int, int]:
    """(all, matmul-weight) parameters of one layer: attention, MLP and the layer's norms."""
    attn_all, attn_matmul = attention_params(spec)
    mlp_all, mlp_matmul = _mlp_params(spec, dense)
    return attn_all + mlp_all + spec.norms_per_layer * norm_parameters(spec), attn_matmul + mlp_matmul


def cross_attention_params(spec: ModelSpec) -> tuple[int, int]:
    """(all, matmul-weight) parameters of one decoder layer's cross-attention block and its norm:
    q from the decoder, k and v from the encoder output, o, as T5's T5LayerCrossAttention
    (huggingface/transformers src/transformers/models/t5/modeling_t5.py); 0 without one."""
    if not extension(spec, "cross_attention_layers"):
        return 0, 0
    attention_all, attention_matmul = attention_params(spec)
    return attention_all + norm_parameters(spec), attention_matmul


def encoder_decoder_extra_params(spec: ModelSpec) -> int:
    """What an encoder-decoder adds outside its layers: T5's relative position bias
    (relative_attention_num_buckets x heads, in the first layer of each stack: T5Attention
    has_relative_attention_bias) and the encoder stack's own final norm."""
    stacks = 2 if extension(spec, "cross_attention_layers") else 1
    bias = stacks * extension(spec, "relative_attention_buckets") * spec.n_heads
    return bias + (norm_parameters(spec) if extension(spec, "cross_attention_layers") else 0)


def parameter_count(spec: ModelSpec) -> ParameterCount:
    """The parameters of `spec` by place (_count_parameters), remembered: the planner asks for the
    same model's count thousands of times per search."""
    return remembered(_count_parameters, spec)


def remembered(compute: Callable[..., T], spec: ModelSpec, *args: Hashable) -> T:
    """compute(spec, *args), remembered by the spec's type and field values and by `args`: a fact of
    the model's shape that a search over settings asks for again and again (the planner, the memory
    engine under 'What to change'). Exact: a pydantic spec's field values are all it holds, each
    field of the one type pydantic gave it, and `compute` reads nothing else. A spec holding
    unhashable parts (a vision tower) is worked out afresh each time. The result is shared:
    `compute` must return something no caller changes."""
    try:
        # the values in field order, which the type fixes (hashing the names too cost more than
        # most facts: 2.5 us a key)
        key = (compute, type(spec), tuple(spec.__dict__.values()), args)
        found = _REMEMBERED.get(key)
    except TypeError:
        return compute(spec, *args)
    if found is None:
        if len(_REMEMBERED) >= _REMEMBERED_MAX:
            _REMEMBERED.clear()
        found = _REMEMBERED[key] = compute(spec, *args)
    return found


_REMEMBERED: dict[tuple, Any] = {}
_REMEMBERED_MAX = 1024  # a few facts for each of the models a session looks at


def _count_parameters(spec: ModelSpec) -> ParameterCount:
    """Count parameters module by module, as Hugging Face models build them. A mixture of experts
    may keep dense MLPs in some layers (DeepSeek-V3 `first_k_dense_replace`, Qwen-MoE
    `mlp_only_layers`); `extra_params` (a vision tower) is added to the total."""
    h = spec.hidden_size
    per_layer, matmul_per_layer = layer_params(spec)
    dense_layers = spec.n_dense_layers if spec.n_experts > 1 else 0
    dense_all, dense_matmul = layer_params(spec, dense=True) if dense_layers else (0, 0)
    sparse_layers = spec.n_layers - dense_layers

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
        head += lm_head_params(spec) + (spec.vocab_size if extension(spec, "lm_head_bias") else 0)
    else:
        if spec.has_pooler:
            head += h * h + h
            matmul_head += h * h
        head += h * spec.num_labels + spec.num_labels
        matmul_head += h * spec.num_labels

    cross_all, cross_matmul = cross_attention_params(spec)
    layers = (
        sparse_layers * per_layer + dense_layers * dense_all + extension(spec, "cross_attention_layers") * cross_all
    )
    layers += encoder_decoder_extra_params(spec)
    widest = max(spec.ffn_hidden_size, spec.dense_ffn_hidden_size or 0, spec.shared_expert_ffn_size)
    largest = max(vocab_matrix_elements(spec), h * widest * (2 if spec.fused_gate_up else 1))
    return ParameterCount(
        embedding=embedding,
        per_layer=per_layer,
        layers=layers,
        head=head,
        total=embedding + layers + head + spec.extra_params,
        matmul_per_layer=matmul_per_layer,
        matmul_head=matmul_head,
        largest_tensor=largest,
        matmul_total=sparse_layers * matmul_per_layer
        + dense_layers * dense_matmul
        + extension(spec, "cross_attention_layers") * cross_matmul
        + matmul_head,
    )


def unused_expert_parameters(spec: ModelSpec, matmul_only: bool) -> int:
    """Parameters of the experts a token does not run through, over all sparse layers: a mixture
    of experts runs `experts_per_token` of `n_experts` routed MLPs per token, shared experts always
    (Fedus et al. 2021; DeepSeek-V3 card: 671B total, 37B activated)."""
    if spec.n_experts == 1:
        return 0
    per_expert = routed_expert_params(spec)
    if matmul_only:
        linears = [linear for linear in layer_linears(spec) if linear.name in ROUTED_MLP_NAMES]
        per_expert = sum(int(linear.in_features * linear.out_features) for linear in linears)
    return spec.n_moe_layers * (spec.n_experts - spec.experts_per_token) * per_expert


def active_matmul_parameters(spec: ModelSpec) -> int:
    """Matmul weights one token multiplies by: every layer's attention and MLP weights plus the
    LM head (Kaplan et al. 2020, arXiv 2001.08361, count the head in N for compute); the
    embedding lookup is no matmul. Only the routed experts (and the router) run per token."""
    return parameter_count(spec).matmul_total - unused_expert_parameters(spec, matmul_only=True)


def active_parameters(spec: ModelSpec) -> int:
    """Parameters one token uses, the embedding table included: all of a dense model; a MoE only
    its routed and shared experts (Mixtral 8x7B: 46.7B total, 12.9B active, arXiv 2401.04088).
    The vision tower is left out: a text token does not run it."""
    return parameter_count(spec).total - spec.extra_params - unused_expert_parameters(spec, matmul_only=False)


def siglip_vision_params(hidden: int, intermediate: int, layers: int, patch: int, image: int, channels: int = 3) -> int:
    """Parameters of a SigLIP vision encoder without its pooling head (Zhai et al. 2023, arXiv
    2303.15343; transformers models/siglip/modeling_siglip.py SiglipVisionTransformer): a patch
    convolution with bias, one learned position per patch, per layer q/k/v/o with biases, a GELU
    MLP with biases and two LayerNorms, and a final LayerNorm."""
    patches = (image // patch) ** 2
    embeddings = channels * patch * patch * hidden + hidden + patches * hidden
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    return embeddings + layers * per_layer + 2 * hidden


def clip_vision_params(hidden: int, intermediate: int, layers: int, patch: int, image: int, channels: int = 3) -> int:
    """Parameters of a CLIP vision encoder (Radford et al. 2021, arXiv 2103.00020; huggingface/
    transformers src/transformers/models/clip/modeling_clip.py CLIPVisionTransformer): a patch
    convolution without bias, a class embedding, one learned position per patch plus the class
    token, a LayerNorm before the layers, per layer q/k/v/o with biases, a GELU MLP with biases
    and two LayerNorms, and a LayerNorm after them."""
    positions = (image // patch) ** 2 + 1
    embeddings = channels * patch * patch * hidden + hidden + positions * hidden + 2 * hidden
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    return embeddings + layers * per_layer + 2 * hidden


def qwen25_vision_params(
    hidden: int,
    intermediate: int,
    depth: int,
    out_hidden: int,
    patch: int = 14,
    temporal_patch: int = 2,
    spatial_merge: int = 2,
    channels: int = 3,
) -> int:
    """Parameters of the Qwen2.5-VL vision transformer with its patch merger (Qwen2.5-VL technical
    report, arXiv 2502.13923; huggingface/transformers src/transformers/models/qwen2_5_vl/
    modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel): a Conv3d patch embedding of
    temporal_patch x patch x patch without bias; per block two RMSNorms (weight only), a fused qkv
    with bias, an output projection with bias, and a gated SiLU MLP (gate, up, down) with biases;
    no learned positions (2D RoPE). The PatchMerger normalises (RMSNorm, vision width) and folds
    spatial_merge^2 neighbouring patches into one vector of m = width x spatial_merge^2, then an
    MLP m x m and m x out_hidden (the text width), both with biases. Window attention in all but
    the fullatt_block_indexes blocks changes no parameter."""
    embedding = channels * temporal_patch * patch * patch * hidden
    attention = 3 * hidden * hidden + 3 * hidden + hidden * hidden + hidden
    mlp = 2 * (hidden * intermediate + intermediate) + intermediate * hidden + hidden
    per_block = 2 * hidden + attention + mlp
    return embedding + depth * per_block + qwen25_merger_params(hidden, out_hidden, spatial_merge)


def qwen25_merger_params(hidden: int, out_hidden: int, spatial_merge: int = 2) -> int:
    """Qwen2.5-VL's PatchMerger, the projector from the vision width to the text width: an
    RMSNorm (vision width), then an MLP m x m and m x out_hidden with biases, m = hidden x
    spatial_merge^2 (modeling_qwen2_5_vl.py Qwen2_5_VLPatchMerger)."""
    merged = hidden * spatial_merge**2
    return hidden + merged * merged + merged + merged * out_hidden + out_hidden


def mllama_vision_params(
    hidden: int,
    intermediate: int,
    layers: int,
    global_layers: int,
    patch: int,
    image: int,
    max_tiles: int,
    aspect_ratios: int,
    channels: int = 3,
) -> int:
    """Parameters of the Llama 3.2 Vision encoder (huggingface/transformers src/transformers/models/
    mllama/modeling_mllama.py MllamaVisionModel): a patch convolution without bias; a class
    embedding; the gated positional embedding (one gate, (image / patch)^2 + 1 learned positions,
    and a tile-position table of (aspect_ratios + 1) x max_tiles x positions x width); gated pre- and
    post-tile embeddings of (aspect_ratios + 1) x max_tiles x width each; LayerNorms (weight and bias)
    before and after the local transformer; `layers` local and `global_layers` global encoder layers,
    each q/k/v/o without bias, a GELU MLP with biases and two LayerNorms, the global ones with two
    scalar gates (attention and MLP). `aspect_ratios` is len(supported_aspect_ratios)
    (MllamaVisionConfig.max_aspect_ratio_id); row 0 of each aspect-ratio table is padding."""
    positions = (image // patch) ** 2 + 1
    ratio_rows = aspect_ratios + 1
    embedding = channels * patch * patch * hidden + hidden
    positional = 1 + positions * hidden + ratio_rows * max_tiles * positions * hidden
    tiles = 2 * (ratio_rows * max_tiles * hidden + 1)
    norms = 2 * 2 * hidden
    per_layer = 4 * hidden * hidden + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    return embedding + positional + tiles + norms + layers * per_layer + global_layers * (per_layer + 2)
