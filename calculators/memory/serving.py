"""Serving: GPU memory of an inference server and its decode speed.

Memory per GPU is what a vLLM-style server holds: the weights (sharded across
tensor-parallel ranks), the paged KV cache of every running sequence, a prefill
activation workspace, and framework overhead. Decode speed is a roofline: every
step reads the weights and every sequence's KV cache from memory, and does
2 FLOPs per active weight per sequence plus the attention over the context.

Sources, cited in each function's docstring:
- KV cache and paged blocks: Kwon et al. 2023, *PagedAttention* (arXiv 2309.06180).
- Tensor parallelism: Shoeybi et al. 2019, *Megatron-LM* (arXiv 1909.08053); kv-head
  replication when tp > kv-heads as vLLM's `QKVParallelLinear` does it.
- 4-/8-bit weights: Frantar et al. 2022, *GPTQ* (arXiv 2210.17323) and Lin et al. 2023,
  *AWQ* (arXiv 2306.00978), stored as vLLM's GPTQ/AWQ kernels load them.
- Mixture of experts: Jiang et al. 2024, *Mixtral of Experts* (arXiv 2401.04088).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit import largest_passing
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.models.geometry import (
    ROUTED_MLP_NAMES,
    active_matmul_parameters,
    active_parameters,
    kv_heads_per_rank,
    layer_linears,
    lm_head_params,
    parameter_count,
    vocab_matrix_elements,
)
from calculators.models.spec import ModelSpec
from calculators.units import GIB, counted
from calculators.workload.finetune import NF4_BITS_PER_WEIGHT
from calculators.workload.serving import (
    MAX_SEQUENCES_SEARCHED,
    ServingSettings,
    check_tensor_parallel,
    serving_problem,
    tensor_parallel_problem,
)
from calculators.workload.vision import vision_tower

DecodeBound = Literal["memory bandwidth", "compute"]

TENSOR_PARALLEL_SIZES: tuple[int, ...] = (1, 2, 4, 8)

WEIGHT_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4, "nf4": 4, "fp4": 4}
KV_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
GROUP_QUANTISED = ("int8", "int4")
SCALE_BYTES = 2  # one fp16 scale per group (GPTQ/AWQ `scales` tensor)
# fp4 weights: elements per shared scale and the scale's bytes. NVFP4: one fp8 E4M3 scale per 16
# (NVIDIA technical blog, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference",
# 2025; its per-tensor fp32 scale is negligible); MXFP4: one E8M0 scale per 32 (OCP Microscaling
# Formats (MX) Specification v1.0, 2023, Sec. 5), the format of gpt-oss's expert weights.
FP4_SCALE_BLOCK = {"nvfp4": (16, 1), "mxfp4": (32, 1)}


class ServingEstimate(BaseModel):
    """Memory on each GPU of the tensor-parallel group, in GiB."""

    weights_gib: float
    kv_cache_gib: float
    activations_gib: float
    overhead_gib: float
    total_gib: float
    kv_cache_per_sequence_gib: float
    kv_cache_bytes_per_token: int
    kv_heads_per_gpu: int
    tensor_parallel: int
    parameters: int
    active_parameters: int
    assumptions: list[str]


class DecodeSpeed(BaseModel):
    """One decode step of `concurrency` sequences on each GPU of the group."""

    concurrency: int
    step_time_s: float
    memory_time_s: float
    compute_time_s: float
    bound: DecodeBound
    bytes_read_per_step: float
    flops_per_step: float
    tokens_per_s_per_sequence: float
    tokens_per_s_aggregate: float


class ServingFit(BaseModel):
    """One GPU of the catalogue at the chosen settings (tensor_parallel GPUs of it)."""

    gpu: str
    memory_gib: float
    tensor_parallel: int
    total_gib: float
    budget_gib: float
    fits: bool
    weights_fit: bool
    max_concurrency: int
    max_context_len: int
    decode_tokens_per_s_per_sequence: float | None
    decode_tokens_per_s_aggregate: float | None
    decode_bound: DecodeBound | None
    gpus_needed: int | None = Field(description="fewest tensor-parallel GPUs (1, 2, 4, 8) that fit; None if none")


# --- Tensor parallelism -----------------------------------------------------------------


# --- KV cache ---------------------------------------------------------------------------


def kv_elements_per_token_layer(spec: ModelSpec, tp: int = 1) -> int:
    """Cache elements one token adds to one layer on one rank: K and V, kv-heads per rank x
    head_dim each (PagedAttention, arXiv 2309.06180, Sec. 3; grouped- and multi-query attention
    share K/V across heads). Multi-head latent attention caches only the compressed latent and
    the shared rope key, kv_lora_rank + qk_rope_head_dim (DeepSeek-V2, arXiv 2405.04434, Table 1),
    which every rank holds whole (vLLM's MLA backend)."""
    if spec.is_mla:
        return spec.kv_lora_rank + spec.qk_rope_head_dim
    return 2 * kv_heads_per_rank(spec, tp) * spec.attention_head_dim


def kv_cache_bytes_per_token(spec: ModelSpec, kv_precision: str = "bf16", tp: int = 1) -> int:
    """Cache bytes one token adds over all layers, while the context is within any sliding window
    (cross-attention layers cache the images' keys, not the tokens')."""
    return self_attention_layers(spec) * kv_elements_per_token_layer(spec, tp) * KV_BYTES[kv_precision]


def self_attention_layers(spec: ModelSpec) -> int:
    """Layers whose cache grows with the tokens: all but Llama 3.2 Vision's cross-attention layers."""
    tower = vision_tower(spec)
    return spec.n_layers - (tower.cross_attention_layers if tower is not None else 0)


def kv_cache_bytes_per_sequence(spec: ModelSpec, kv_precision: str, tp: int, tokens: int, images: int = 0) -> int:
    """Cache bytes of one sequence of `tokens` on one rank: full-attention layers keep every token,
    sliding-window layers only the last `sliding_window` (Mistral 7B, arXiv 2310.06825, Sec. 2
    rolling buffer cache; Gemma 2/3 and gpt-oss alternate such layers with global ones), and
    Llama 3.2 Vision's cross-attention layers the keys and values of the sequence's `images`,
    4 tiles x 1601 each, and nothing per text token (vLLM's Mllama caches the encoder's keys
    and values in those layers; transformers models/mllama/modeling_mllama.py computes them from
    the image states only)."""
    per_layer_token = kv_elements_per_token_layer(spec, tp) * KV_BYTES[kv_precision]
    sliding = spec.sliding_window_layers
    windowed = min(tokens, spec.sliding_window) if sliding else 0
    tower = vision_tower(spec)
    cross = spec.n_layers - self_attention_layers(spec)
    image_keys = images * tower.cross_attention_tokens_per_image if cross else 0
    return per_layer_token * ((spec.n_layers - sliding - cross) * tokens + sliding * windowed + cross * image_keys)


def kv_cache_tokens(settings: ServingSettings, context_len: int | None = None) -> int:
    """Token slots one sequence holds: the context rounded up to whole KV blocks
    (vLLM allocates the cache in blocks of 16 tokens; PagedAttention Sec. 4.1)."""
    tokens = context_len or settings.context_len
    return math.ceil(tokens / settings.kv_block_tokens) * settings.kv_block_tokens


def kv_cache_bytes(spec: ModelSpec, settings: ServingSettings) -> int:
    """KV cache of all concurrent sequences on one rank, at the full context length."""
    per_sequence = kv_cache_bytes_per_sequence(
        spec,
        settings.kv_cache_precision,
        settings.tensor_parallel,
        kv_cache_tokens(settings),
        settings.images_per_sequence,
    )
    return per_sequence * settings.concurrent_sequences


# --- Weights ----------------------------------------------------------------------------


class WeightSplit(NamedTuple):
    """Parameters on one rank: the layers' linear weights (quantisable), the input
    embedding table, and the rest (LM head, norms, biases, MoE router)."""

    linear: float
    input_embedding: float
    rest: float


def _layers_linear_elements(spec: ModelSpec, tp: int = 1, expert_fraction: float = 1.0) -> float:
    """Linear weights of all layers on one rank, the routed experts' times expert_fraction; a
    mixture of experts' dense layers (DeepSeek-V3's first three) and shared experts always whole."""

    def one_layer(dense: bool) -> float:
        return sum(
            item.weight_elements * (expert_fraction if item.name in ROUTED_MLP_NAMES and not dense else 1.0)
            for item in layer_linears(spec, tp, dense=dense)
        )

    dense_layers = spec.n_layers - spec.n_moe_layers if spec.n_experts > 1 else 0
    total = (spec.n_layers - dense_layers) * one_layer(dense=spec.n_experts == 1)
    return total + (dense_layers * one_layer(dense=True) if dense_layers else 0.0)


def weight_split_per_rank(spec: ModelSpec, tp: int = 1, expert_fraction: float = 1.0) -> WeightSplit:
    """Parameters one tensor-parallel rank holds (or reads, with expert_fraction < 1).

    The layers' linears follow their tensor-parallel split (calculators/models/geometry.py: q/o and
    MLP weights split, k/v by kv-heads per rank, replicated when tp > kv-heads); vLLM shards
    the vocabulary (VocabParallelEmbedding, ParallelLMHead). Norms, biases and the MoE router
    are counted whole on every rank (replicated, and tiny)."""
    linear = _layers_linear_elements(spec, tp, expert_fraction)
    embedding = vocab_matrix_elements(spec)
    lm_head = lm_head_params(spec)
    replicated = parameter_count(spec).total - _layers_linear_elements(spec) - embedding - lm_head
    if spec.head == "lm" and spec.tied_embeddings:  # the table is the LM head, read every step
        embedding, lm_head = 0, embedding
    return WeightSplit(
        linear=linear,
        input_embedding=embedding / tp,
        rest=lm_head / tp + replicated,
    )


def quantised_weight_bytes(settings: ServingSettings) -> float:
    """Bytes per linear weight in the layers.

    fp32/fp16/bf16/fp8: the element size (fp8 per-tensor or per-channel scales are
    negligible). int4/int8 (GPTQ arXiv 2210.17323, AWQ arXiv 2306.00978, as vLLM loads
    them): bits/8 for the packed `qweight`, plus per group of `quant_group_size` input
    channels one fp16 `scales` entry and, with zero points, one `qzeros` entry packed at
    the same bit width. int4 g128: 0.5 + (2 + 0.5) / 128 = 0.51953125 B. nf4: bitsandbytes
    NF4 with double quantisation as QLoRA stores it (arXiv 2305.14314 Sec. 3), 4.127 bits. fp4:
    half a byte plus one 1-byte scale per block (FP4_SCALE_BLOCK): NVFP4 0.5625 B, MXFP4 0.53125 B."""
    if settings.weight_precision == "nf4":
        return NF4_BITS_PER_WEIGHT / 8
    if settings.weight_precision == "fp4":
        block, scale_bytes = FP4_SCALE_BLOCK[settings.fp4_format]
        return 0.5 + scale_bytes / block
    bits = WEIGHT_BITS[settings.weight_precision]
    per_weight = bits / 8
    if settings.weight_precision in GROUP_QUANTISED:
        zero_bytes = bits / 8 if settings.quant_zero_points else 0.0
        per_weight += (SCALE_BYTES + zero_bytes) / settings.quant_group_size
    return per_weight


def unquantised_weight_bytes(weight_precision: str) -> int:
    """Bytes per weight of the tensors quantisation leaves alone: embeddings, LM head,
    norms, router. GPTQ/AWQ and fp8 checkpoints keep them in fp16/bf16 (AutoAWQ and
    llm-compressor skip `lm_head`; embeddings are not linear layers)."""
    return 4 if weight_precision == "fp32" else 2


def _weight_bytes(split: WeightSplit, settings: ServingSettings, include_embedding: bool = True) -> float:
    """Bytes of a weight split: quantisable linear weights and 16-bit everything else."""
    other = split.rest + (split.input_embedding if include_embedding else 0.0)
    return split.linear * quantised_weight_bytes(settings) + other * unquantised_weight_bytes(settings.weight_precision)


def serving_weight_bytes(spec: ModelSpec, settings: ServingSettings) -> float:
    """Weight bytes held by one GPU of the tensor-parallel group."""
    return _weight_bytes(weight_split_per_rank(spec, settings.tensor_parallel), settings)


# --- Activations and overhead -----------------------------------------------------------


def activation_element_bytes(weight_precision: str) -> int:
    """Activations run in fp32 for fp32 weights and in 16 bits otherwise (W4A16/W8A16 kernels)."""
    return 4 if weight_precision == "fp32" else 2


def prefill_activation_bytes(spec: ModelSpec, settings: ServingSettings) -> float:
    """Workspace of one prefill chunk, a stated estimate: max_batched_tokens x (residual
    + normed input, 2 x hidden, + the MLP's up/gate and activation outputs, 3 x ffn for a
    gated MLP or 2 x ffn, times experts_per_token, split across ranks) x element bytes.
    vLLM measures the real peak with a profiling forward pass at startup."""
    mlp_outputs = (3 if spec.is_gated_mlp else 2) * spec.ffn_hidden_size * spec.experts_per_token
    width = 2 * spec.hidden_size + mlp_outputs / settings.tensor_parallel
    return settings.max_batched_tokens * width * activation_element_bytes(settings.weight_precision)


# Bytes per logit alive while vLLM's sampler sorts for top-k/top-p, besides the logits in the
# model's dtype: the fp32 logits (4), sort's values (4) and int64 indices (8), the int64 reverse
# indices it sorts by segment (8), and cub's alternate key and value buffers (4 + 8).
SAMPLER_SORT_BYTES_PER_LOGIT = 4 + (4 + 8) + 8 + (4 + 8)


def sampler_peak_bytes(spec: ModelSpec, settings: ServingSettings) -> float:
    """vLLM's sampler at its worst moment, as its profile run drives it (one sampled row per
    sequence, max_num_seqs rows, SamplingParams(top_p=0.99, top_k=vocab - 1) so that the top-k /
    top-p path runs: vllm-project/vllm vllm/worker/model_runner.py profile_run, V0 as of PR
    #10511). Sampler.forward upcasts the logits to fp32 while the caller still holds them in the
    model's dtype, then _apply_top_k_top_p sorts them (vllm/model_executor/layers/sampler.py @00f5ff34:
    `logits.sort(dim=-1)`). torch sorts more than 128 rows by segment (pytorch/pytorch
    aten/src/ATen/native/cuda/SortStable.cu @420d374d, segmented_sort_pairs: an int64
    reverse-index tensor, then cub's DeviceSegmentedRadixSort::SortPairs, whose temporary storage
    holds an alternate copy of the keys and of the values, O(N) per the cub documentation). At that
    moment: rows x vocab x (c + 36) bytes, c the logits' dtype; the later moments of
    _apply_top_k_top_p (softmax, cumsum, masks, the re-sorted copy: c + 30) are smaller."""
    rows = min(settings.concurrent_sequences, settings.max_batched_tokens)
    c = activation_element_bytes(settings.weight_precision)
    return rows * spec.vocab_size * (c + SAMPLER_SORT_BYTES_PER_LOGIT)


def activation_bytes(spec: ModelSpec, settings: ServingSettings) -> float:
    """The larger of the prefill's workspace and the sampler's peak, which comes after the
    forward has freed its intermediates but while the batch's last hidden states (max_batched_tokens
    x hidden) are still held by the model runner."""
    hidden = settings.max_batched_tokens * spec.hidden_size * activation_element_bytes(settings.weight_precision)
    return max(prefill_activation_bytes(spec, settings), sampler_peak_bytes(spec, settings) + hidden)


def overhead_bytes(activations_bytes: float, settings: ServingSettings) -> float:
    """CUDA context, cuBLAS workspace, NCCL buffers (tp > 1), CUDA graphs, and the caching
    allocator's reserve on the transient activations (weights and the KV cache are
    allocated once, in large blocks). Overheads defaults: calculators.workload.training.Overheads,
    each with its source."""
    o = settings.overheads
    nccl_gib = o.nccl_gib if settings.tensor_parallel > 1 else 0.0
    fixed_gib = o.cuda_context_gib + o.cublas_workspace_gib + nccl_gib + settings.cuda_graphs_gib
    return fixed_gib * GIB + activations_bytes * o.allocator_reserve_fraction


# --- Memory estimate --------------------------------------------------------------------


def _memory_parts_bytes(spec: ModelSpec, settings: ServingSettings) -> dict[str, float]:
    """Bytes on one GPU of the group, by part."""
    check_tensor_parallel(spec, settings.tensor_parallel)
    activations = activation_bytes(spec, settings)
    return {
        "weights": serving_weight_bytes(spec, settings),
        "kv_cache": float(kv_cache_bytes(spec, settings)),
        "activations": activations,
        "overhead": overhead_bytes(activations, settings),
    }


def total_gib(spec: ModelSpec, settings: ServingSettings) -> float:
    """Memory of one GPU of the group (weights + KV cache + activations + overhead), GiB."""
    return sum(_memory_parts_bytes(spec, settings).values()) / GIB


def budget_gib(gpu_memory_gib: float, settings: ServingSettings) -> float:
    """Memory the server may use: capacity x gpu_memory_utilization (vLLM), or all of it."""
    return gpu_memory_gib * (settings.gpu_memory_utilization or 1.0)


def memory_assumptions(spec: ModelSpec, settings: ServingSettings) -> list[str]:
    tp = settings.tensor_parallel
    lines = [f"Weights: {_weight_storage_text(settings)}.", _kv_text(spec, settings)]
    if tp > 1:
        lines.append(f"Tensor parallel {tp}: {_tp_text(spec, tp)}; NCCL adds {settings.overheads.nccl_gib} GiB.")
    lines += [
        f"Activations: one prefill chunk of {settings.max_batched_tokens:,} tokens plus fp32 logits for "
        f"{counted(min(settings.concurrent_sequences, settings.max_batched_tokens), 'sequence')}, an estimate "
        "(vLLM profiles the real peak at startup).",
        f"Overhead: CUDA context {settings.overheads.cuda_context_gib} GiB, cuBLAS "
        f"{settings.overheads.cublas_workspace_gib} GiB, CUDA graphs {settings.cuda_graphs_gib} GiB, "
        f"{settings.overheads.allocator_reserve_fraction:.0%} allocator reserve on activations.",
    ]
    if settings.context_len > spec.max_position_embeddings:
        lines.append(f"The context exceeds the model's {spec.max_position_embeddings} trained positions.")
    return lines


def _weight_storage_text(settings: ServingSettings) -> str:
    precision = settings.weight_precision
    if precision not in GROUP_QUANTISED and precision not in ("fp8", "nf4", "fp4"):
        return f"{precision}, {quantised_weight_bytes(settings):g} B per parameter"
    if precision == "nf4":
        layout = "NF4 linear weights with double-quantised absmax per 64 (bitsandbytes)"
    elif precision == "fp8":
        layout = "fp8 linear weights (per-tensor scales)"
    elif precision == "fp4":
        block = FP4_SCALE_BLOCK[settings.fp4_format][0]
        layout = f"{settings.fp4_format.upper()} linear weights with one 1-byte scale per {block}"
    else:
        zero = f" and one {WEIGHT_BITS[precision]}-bit zero point" if settings.quant_zero_points else ""
        layout = (
            f"{precision} linear weights with one fp16 scale{zero} per group of {settings.quant_group_size} "
            "(GPTQ/AWQ checkpoint layout)"
        )
    return (
        f"{layout} = {quantised_weight_bytes(settings):.6g} B per weight; embeddings, LM head, norms "
        "and router stay 16-bit"
    )


def _kv_text(spec: ModelSpec, settings: ServingSettings) -> str:
    tp = settings.tensor_parallel
    per_token = kv_cache_bytes_per_token(spec, settings.kv_cache_precision, tp)
    element_bytes = KV_BYTES[settings.kv_cache_precision]
    if spec.is_mla:
        shape = (
            f"{spec.n_layers} layers x (latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim}) "
            f"x {element_bytes} B (multi-head latent attention)"
        )
    else:
        shape = (
            f"2 x {self_attention_layers(spec)} layers x {kv_heads_per_rank(spec, tp)} kv-heads per GPU x "
            f"{spec.attention_head_dim} x {element_bytes} B"
        )
    window = ""
    tower = vision_tower(spec)
    if tower is not None and tower.cross_attention_layers:
        window = (
            f" {tower.cross_attention_layers} cross-attention layers keep {tower.cross_attention_tokens_per_image:,}"
            f" image keys and values per image ({settings.images_per_sequence} per sequence), none per text token."
        )
    if spec.sliding_window_layers:
        window = (
            f" {spec.sliding_window_layers} of the {spec.n_layers} layers keep only the last "
            f"{spec.sliding_window:,} tokens (sliding window)."
        )
    return (
        f"KV cache {settings.kv_cache_precision}: {shape} = {per_token:,} B per token; contexts rounded up "
        f"to {settings.kv_block_tokens}-token blocks.{window}"
    )


def _tp_text(spec: ModelSpec, tp: int) -> str:
    if tp > spec.n_kv_heads:
        return f"the {spec.n_kv_heads} kv-heads are replicated, one per GPU (vLLM QKVParallelLinear)"
    return f"weights and the {spec.n_kv_heads} kv-heads split {tp} ways"


def estimate_serving(spec: ModelSpec, settings: ServingSettings) -> ServingEstimate:
    """Memory on each GPU of the tensor-parallel group serving `settings`."""
    problem = serving_problem(spec, settings)
    if problem:
        raise ValueError(problem)
    parts = _memory_parts_bytes(spec, settings)
    per_token = kv_cache_bytes_per_token(spec, settings.kv_cache_precision, settings.tensor_parallel)
    return ServingEstimate(
        weights_gib=parts["weights"] / GIB,
        kv_cache_gib=parts["kv_cache"] / GIB,
        activations_gib=parts["activations"] / GIB,
        overhead_gib=parts["overhead"] / GIB,
        total_gib=sum(parts.values()) / GIB,
        kv_cache_per_sequence_gib=kv_cache_bytes_per_sequence(
            spec,
            settings.kv_cache_precision,
            settings.tensor_parallel,
            kv_cache_tokens(settings),
            settings.images_per_sequence,
        )
        / GIB,
        kv_cache_bytes_per_token=per_token,
        kv_heads_per_gpu=kv_heads_per_rank(spec, settings.tensor_parallel),
        tensor_parallel=settings.tensor_parallel,
        parameters=parameter_count(spec).total,
        active_parameters=active_parameters(spec),
        assumptions=memory_assumptions(spec, settings),
    )


# --- Capacity ---------------------------------------------------------------------------


def _largest_passing(lower: int, upper: int, passes: Callable[[int], bool]) -> int:
    """fit.largest_passing, with lower - 1 (0 sequences or tokens) when nothing passes."""
    found = largest_passing(lower, upper, passes)
    return lower - 1 if found is None else found


def _fits(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float, **changes) -> bool:
    return total_gib(spec, settings.model_copy(update=changes)) <= budget_gib(gpu_memory_gib, settings)


def max_concurrency(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float) -> int:
    """Most sequences of settings.context_len tokens whose KV cache fits next to the
    weights, activations and overhead; 0 when not even one fits. Memory only: vLLM also
    caps the batch at max_num_seqs (256 by default)."""
    tokens = kv_cache_tokens(settings)
    per_sequence = kv_cache_bytes_per_sequence(
        spec, settings.kv_cache_precision, settings.tensor_parallel, tokens, settings.images_per_sequence
    )
    upper = int(budget_gib(gpu_memory_gib, settings) * GIB // per_sequence) + 1
    upper = min(max(upper, 1), MAX_SEQUENCES_SEARCHED)
    return _largest_passing(1, upper, lambda n: _fits(spec, settings, gpu_memory_gib, concurrent_sequences=n))


def max_context_len(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float) -> int:
    """Longest context (tokens) for settings.concurrent_sequences sequences that fits, at
    most the model's max_position_embeddings; 0 when not even one token fits."""
    upper = spec.max_position_embeddings
    return _largest_passing(1, upper, lambda tokens: _fits(spec, settings, gpu_memory_gib, context_len=tokens))


def context_limit(spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float) -> tuple[int, str]:
    """(longest context for settings.concurrent_sequences sequences, what binds it): "memory" when
    the GPU runs out first, "trained positions" when the model's max_position_embeddings does."""
    longest = max_context_len(spec, settings, gpu_memory_gib)
    trained = spec.max_position_embeddings
    return longest, "trained positions" if longest == trained else "memory"


def min_tensor_parallel(
    spec: ModelSpec, settings: ServingSettings, gpu_memory_gib: float, sizes: Iterable[int] = TENSOR_PARALLEL_SIZES
) -> int | None:
    """Fewest tensor-parallel GPUs among `sizes` that shard this model and fit; None if none."""
    for tp in sizes:
        if tensor_parallel_problem(spec, tp) is None and _fits(spec, settings, gpu_memory_gib, tensor_parallel=tp):
            return tp
    return None


# --- Decode speed -----------------------------------------------------------------------


def expected_experts_read(spec: ModelSpec, concurrency: int) -> float:
    """Distinct experts a decode step reads per layer, routing taken as uniform:
    E x (1 - (1 - k/E)^B). One sequence reads k; a large batch reads all E."""
    unused = 1 - spec.experts_per_token / spec.n_experts
    return spec.n_experts * (1 - unused**concurrency)


def decode_weight_read_bytes(spec: ModelSpec, settings: ServingSettings, concurrency: int) -> float:
    """Weight bytes one rank reads per decode step: its weights once, the experts the batch
    routes to, and not the input embedding table (a lookup of one row per sequence)."""
    fraction = expected_experts_read(spec, concurrency) / spec.n_experts
    split = weight_split_per_rank(spec, settings.tensor_parallel, expert_fraction=fraction)
    return _weight_bytes(split, settings, include_embedding=False)


def decode_kv_read_bytes(spec: ModelSpec, settings: ServingSettings, concurrency: int) -> float:
    """KV bytes one rank reads per decode step: every sequence's cache at the full context
    (the last step of generation, the slowest)."""
    tp, tokens = settings.tensor_parallel, settings.context_len
    images = settings.images_per_sequence
    return concurrency * kv_cache_bytes_per_sequence(spec, settings.kv_cache_precision, tp, tokens, images)


def decode_flops(spec: ModelSpec, settings: ServingSettings, concurrency: int) -> float:
    """FLOPs one rank does per decode step: 2 per active matmul weight per sequence, plus
    attention over the context, 4 x layers x context x (heads x head_dim) per sequence
    (QK^T and softmax x V; Kaplan et al. 2020, arXiv 2001.08361, Table 1), a sliding-window
    layer attending to at most its window."""
    matmul = 2 * active_matmul_parameters(spec)
    context = settings.context_len
    sliding = spec.sliding_window_layers
    attended = (spec.n_layers - sliding) * context + (sliding * min(context, spec.sliding_window) if sliding else 0)
    attention = 4 * attended * spec.q_dim
    return concurrency * (matmul + attention) / settings.tensor_parallel


def matmul_tflops(gpu: GpuSpec, weight_precision: str) -> float | None:
    """Dense rate the matmuls run at: fp8 on fp8 tensor cores; int4/int8 weight-only kernels
    (W4A16/W8A16, GPTQ/AWQ/Marlin) dequantise to fp16; falls back to fp16, bf16, fp32."""
    first = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8"}.get(weight_precision, "fp16")
    for precision in (first, "fp16", "bf16", "fp32"):
        rate = gpu.dense_tflops(precision)
        if rate:
            return rate
    return None


def decode_tokens_per_s(spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, concurrency: int) -> DecodeSpeed:
    """Roofline of one decode step: the longer of reading the weights and KV cache at
    memory_bandwidth_efficiency x datasheet bandwidth, and doing its FLOPs at
    compute_efficiency x dense peak. Defaults 0.8 and 0.8: memory-bound kernels reach
    80-90% of datasheet bandwidth (A100 read kernel 88%, NVIDIA developer forum), and
    bf16 matmuls 80-87% of dense peak (H100 80.3%, A100 86.9%; mamf-finder,
    github.com/stas00/ml-engineering compute/accelerator/README.md @7bc7c305).
    Tensor-parallel all-reduces are not counted."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    check_tensor_parallel(spec, settings.tensor_parallel)
    bytes_read = decode_weight_read_bytes(spec, settings, concurrency)
    bytes_read += decode_kv_read_bytes(spec, settings, concurrency)
    memory_time = bytes_read / (gpu.memory_bandwidth_tbps * 1e12 * settings.memory_bandwidth_efficiency)
    flops = decode_flops(spec, settings, concurrency)
    tflops = matmul_tflops(gpu, settings.weight_precision)
    compute_time = flops / (tflops * 1e12 * settings.compute_efficiency) if tflops else 0.0
    step = max(memory_time, compute_time)
    return DecodeSpeed(
        concurrency=concurrency,
        step_time_s=step,
        memory_time_s=memory_time,
        compute_time_s=compute_time,
        bound="memory bandwidth" if memory_time >= compute_time else "compute",
        bytes_read_per_step=bytes_read,
        flops_per_step=flops,
        tokens_per_s_per_sequence=1 / step,
        tokens_per_s_aggregate=concurrency / step,
    )


# --- Table over the catalogue -----------------------------------------------------------


def serving_fit(spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec) -> ServingFit:
    """The serving answers for one GPU at the chosen settings."""
    capacity = gpu_memory_gib(gpu)
    budget = budget_gib(capacity, settings)
    estimate = estimate_serving(spec, settings)
    fits = estimate.total_gib <= budget
    speed = decode_tokens_per_s(spec, settings, gpu, settings.concurrent_sequences) if fits else None
    return ServingFit(
        gpu=gpu.name,
        memory_gib=capacity,
        tensor_parallel=settings.tensor_parallel,
        total_gib=estimate.total_gib,
        budget_gib=budget,
        fits=fits,
        weights_fit=estimate.weights_gib <= budget,
        max_concurrency=max_concurrency(spec, settings, capacity),
        max_context_len=max_context_len(spec, settings, capacity),
        decode_tokens_per_s_per_sequence=speed.tokens_per_s_per_sequence if speed else None,
        decode_tokens_per_s_aggregate=speed.tokens_per_s_aggregate if speed else None,
        decode_bound=speed.bound if speed else None,
        gpus_needed=min_tensor_parallel(spec, settings, capacity),
    )


def serving_table(spec: ModelSpec, settings: ServingSettings, catalogue: Iterable[GpuSpec]) -> list[ServingFit]:
    """One row per GPU of the catalogue, in its order."""
    return [serving_fit(spec, settings, gpu) for gpu in catalogue]
