"""What one GPU holds: its pipeline stage, its tensor-parallel shard of each layer, and which
parameters it trains (full training, frozen layers, LoRA/QLoRA adapters).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from calculators.models.geometry import (
    Linear,
    ParameterCount,
    attention_linears,
    cross_attention_params,
    encoder_decoder_extra_params,
    factored_matrices,
    layer_matmul_elements,
    layer_params,
    remembered,
    split,
    vocab_matrix_elements,
)
from calculators.models.spec import ModelSpec, extension
from calculators.workload.finetune import (
    adapted_linears,
    adapter_matrix_shapes,
    adapter_parameters,
    cross_attention_adapted_linears,
    model_lora_parameters,
    nf4_bytes,
)
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings
from calculators.workload.vision import frozen_tower_parameters, trained_vision_parameters


class StageLayout(NamedTuple):
    """Parameters on one GPU (one pipeline stage, one tensor-parallel rank) before ZeRO
    sharding, and the counts the model states are built from."""

    stage: str  # "only", "first" or "last"
    layers: int  # transformer layers this stage holds
    active_layers: int  # of those, the layers that run backward (index >= frozen_layers)
    in_flight: int  # micro-batches whose activations are alive at once (1F1B)
    has_embedding: bool
    has_head: bool
    trainable: float  # trainable parameters
    trainable_per_layer: float
    weight_bytes: float  # every weight, trainable and frozen, in its storage dtype
    layer_weight_bytes: float  # one layer's weights (what ZeRO-3 gathers)
    cast_elements: float  # matmul weights whose autocast casts are kept for backward
    cast_elements_per_layer: float
    largest_trainable: float  # elements of the largest trainable tensor
    head_gradient_elements: float  # gradients the head's backward makes (a tied matrix's included)
    embedding_gradient_elements: float  # gradients only the embedding's backward makes
    tied_matrix_elements: float  # a trained tied embedding/LM-head matrix (two gradients summed)
    adafactor_elements: float  # Adafactor's factored state elements
    outside_layer_elements: float = 0.0  # embeddings, final norm and head (FSDP2's root unit)
    head_cast_elements: float = 0.0  # the LM head's matmul weight (torchtitan keeps it out of float8)
    vision_cast_elements: float = 0.0  # trained vision weights cast until the encoder's backward
    frozen_active_elements: float = 0.0  # frozen base parameters of the layers whose adapters train (LoRA)
    skipped_layers: float = 0.0  # trained layers that run nothing (Mllama's cross-attention without images)


def pipeline_stages(settings: TrainingSettings) -> tuple[str, ...]:
    """The stages that can hold the peak: the first (most micro-batches in flight) and the
    last (LM head, logits and loss); a single stage without pipeline parallelism."""
    return ("only",) if settings.pipeline_parallel == 1 else ("first", "last")


def stage_layer_counts(spec: ModelSpec, settings: TrainingSettings, stage: str) -> tuple[int, int]:
    """(layers, layers that run backward) of a stage. Each stage holds ceil(L/p) layers
    (Narayanan et al. 2021, Sec. 2.2); the first k layers are frozen."""
    n_layers, frozen = spec.n_layers, settings.frozen_layers
    if stage == "only":
        return n_layers, n_layers - frozen
    per_stage = math.ceil(n_layers / settings.pipeline_parallel)
    if stage == "first":
        return per_stage, per_stage - min(frozen, per_stage)
    return per_stage, max(0, min(per_stage, n_layers - frozen))


def stage_dense_layer_counts(spec: ModelSpec, settings: TrainingSettings, stage: str) -> tuple[int, int]:
    """(dense layers, dense layers that run backward) of a stage of a mixture of experts whose
    first `n_dense_layers` layers keep a dense MLP (DeepSeek-V3 `first_k_dense_replace`:
    DeepseekV3DecoderLayer builds DeepseekV3MoE only for layer_idx >= first_k_dense_replace,
    huggingface/transformers src/transformers/models/deepseek_v3/modeling_deepseek_v3.py @00b676f8).
    The first stage holds layers [0, ceil(L/p)), the last the final ceil(L/p); layers below
    frozen_layers do not run backward. 0 for a dense model."""
    n_dense = spec.n_dense_layers if spec.n_experts > 1 else 0
    return _stage_layers_within(spec, settings, stage, 0, n_dense)


def _stage_layers_within(
    spec: ModelSpec, settings: TrainingSettings, stage: str, first: int, end: int
) -> tuple[int, int]:
    """(layers, layers that run backward) of a stage among the layers numbered [first, end)."""
    n_layers, frozen = spec.n_layers, settings.frozen_layers
    if stage == "only":
        start, stop = 0, n_layers
    else:
        per_stage = math.ceil(n_layers / settings.pipeline_parallel)
        start, stop = (0, per_stage) if stage == "first" else (n_layers - per_stage, n_layers)
    held = max(0, min(end, stop) - max(first, start))
    active = max(0, min(end, stop) - max(first, start, frozen))
    return held, active


def in_flight_micro_batches(settings: TrainingSettings, stage: str) -> int:
    """Under 1F1B stage i keeps the activations of p - i micro-batches (Narayanan et al.
    2021, Sec. 2.2), never more than the micro-batches of the step: min(p, m) on the first
    stage, one on the last."""
    if stage == "first":
        return min(settings.pipeline_parallel, settings.grad_accum)
    return 1


def embedding_trainable(settings: TrainingSettings) -> bool:
    """Embeddings train in full training unless layers are frozen (then they are too)."""
    return settings.method == "full" and settings.frozen_layers == 0


def head_trainable(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """The LM head trains in full training; a tied head is the embedding matrix itself."""
    return settings.method == "full" and (not spec.tied_embeddings or embedding_trainable(settings))


def local_layer_parameters(
    spec: ModelSpec, params: ParameterCount, tensor_parallel: int, dense: bool = False
) -> tuple[float, float]:
    """(all, matmul) parameters of one layer on one tensor-parallel rank: matmul weights
    are split (Megatron-LM Sec. 3), norms and biases replicated (an upper bound for biases).
    `dense=True` gives one of a mixture of experts' dense layers (geometry.layer_params)."""
    per_layer, matmul_per_layer = params.per_layer, params.matmul_per_layer
    if dense:
        per_layer, matmul_per_layer = layer_params(spec, dense=True)
    if tensor_parallel == 1:
        return per_layer, matmul_per_layer
    matmul = layer_matmul_elements(spec, tensor_parallel, dense=dense)
    return per_layer - matmul_per_layer + matmul, matmul


def stage_layer_sums(
    spec: ModelSpec, params: ParameterCount, settings: TrainingSettings, stage: str
) -> tuple[float, float, float, float]:
    """(all parameters of the layers held, of the layers that train, matmul weights of the layers
    that train, Adafactor elements of the layers that train) on one rank of a stage, a MoE's dense
    layers counted at their own size."""
    t = settings.tensor_parallel
    layers, active = stage_layer_counts(spec, settings, stage)
    dense_held, dense_active = stage_dense_layer_counts(spec, settings, stage)
    sparse_all, sparse_matmul = local_layer_parameters(spec, params, t)
    held = (layers - dense_held) * sparse_all
    trained = (active - dense_active) * sparse_all
    matmul = (active - dense_active) * sparse_matmul
    adafactor = (active - dense_active) * adafactor_layer_elements(spec, params, t)
    if dense_held:
        dense_all, dense_matmul = local_layer_parameters(spec, params, t, dense=True)
        held += dense_held * dense_all
        trained += dense_active * dense_all
        matmul += dense_active * dense_matmul
        adafactor += dense_active * adafactor_layer_elements(spec, params, t, dense=True)
    if extension(spec, "cross_attention_layers"):
        # an encoder-decoder's last layers are its decoder's, each with a cross-attention block
        cross_held, cross_active = stage_cross_attention_layers(spec, settings, stage)
        local_all, local_matmul = local_cross_attention_parameters(spec, t)
        linears = attention_linears(spec, t)
        held += cross_held * local_all
        trained += cross_active * local_all
        matmul += cross_active * local_matmul
        vectors = sum(linear.in_features + linear.out_features for linear in linears)
        adafactor += cross_active * (vectors + local_all - local_matmul)
        if stage in ("only", "first"):  # relative position biases and the encoder's final norm
            extra = encoder_decoder_extra_params(spec)
            held += extra
            trained += extra if settings.frozen_layers == 0 else 0
            adafactor += extra if settings.frozen_layers == 0 else 0
    return held, trained, matmul, adafactor


def decoder_layer_share(spec: ModelSpec, settings: TrainingSettings, stage: str) -> float:
    """The share of an encoder-decoder's decoder layers a pipeline stage holds (0 without them)."""
    decoder = extension(spec, "cross_attention_layers")
    return stage_cross_attention_layers(spec, settings, stage)[0] / decoder if decoder else 0.0


def stage_cross_attention_layers(spec: ModelSpec, settings: TrainingSettings, stage: str) -> tuple[int, int]:
    """(decoder layers, those that run backward) of a stage of an encoder-decoder: its last
    cross_attention_layers layers, each with a cross-attention block."""
    decoder = extension(spec, "cross_attention_layers")
    return _stage_layers_within(spec, settings, stage, spec.n_layers - decoder, spec.n_layers)


def local_cross_attention_parameters(spec: ModelSpec, tensor_parallel: int) -> tuple[float, float]:
    """(all, matmul) parameters of one cross-attention block on one tensor-parallel rank: its
    q/k/v/o weights split as self-attention's, its norm replicated."""
    cross_all, cross_matmul = cross_attention_params(spec)
    local_matmul = sum(linear.weight_elements for linear in attention_linears(spec, tensor_parallel))
    return cross_all - cross_matmul + local_matmul, local_matmul


class AdaptedLayers(NamedTuple):
    """One kind of layer (or block) a stage holds under LoRA: how many, how many train their
    adapters, its parameters and matmul weights on one rank, and the linears adapted."""

    held: int
    active: int
    all_parameters: float
    matmul_parameters: float
    adapted: list[Linear]
    cross_attention: bool = False  # a decoder layer's cross-attention block, part of that layer


def adapted_layer_kinds(
    spec: ModelSpec, params: ParameterCount, settings: TrainingSettings, stage: str
) -> list[AdaptedLayers]:
    """The kinds of layer one rank of a stage holds under LoRA, each at its own size: a
    mixture of experts' sparse and dense layers (stage_dense_layer_counts), and the decoder
    layers' cross-attention blocks of an encoder-decoder, counted apart from their layers."""
    t, targets = settings.tensor_parallel, settings.lora_targets
    layers, active = stage_layer_counts(spec, settings, stage)
    dense_held, dense_active = stage_dense_layer_counts(spec, settings, stage)
    sparse = local_layer_parameters(spec, params, t)
    kinds = [AdaptedLayers(layers - dense_held, active - dense_active, *sparse, adapted_linears(spec, targets, t))]
    if dense_held:
        dense = local_layer_parameters(spec, params, t, dense=True)
        kinds.append(AdaptedLayers(dense_held, dense_active, *dense, adapted_linears(spec, targets, t, dense=True)))
    if extension(spec, "cross_attention_layers"):
        cross_held, cross_active = stage_cross_attention_layers(spec, settings, stage)
        cross = local_cross_attention_parameters(spec, t)
        adapted = cross_attention_adapted_linears(spec, targets, t)
        kinds.append(AdaptedLayers(cross_held, cross_active, *cross, adapted, cross_attention=True))
    return kinds


def local_embedding_parameters(spec: ModelSpec, params: ParameterCount, tensor_parallel: int) -> float:
    """Embedding parameters on one rank: the word embedding is vocab-parallel (split by t),
    position and token-type embeddings and the embedding norm are replicated."""
    if tensor_parallel == 1:
        return params.embedding
    vocab_matrix = vocab_matrix_elements(spec)
    return params.embedding - vocab_matrix + split(vocab_matrix, tensor_parallel)


def local_head_parameters(
    spec: ModelSpec, params: ParameterCount, tensor_parallel: int, stage: str
) -> tuple[float, float, float]:
    """(other, vocab matrix held, matmul) head parameters on one rank: the final norm (or a
    classifier) replicated, the LM head vocab-parallel. A tied LM head is the embedding
    matrix itself, except on the last pipeline stage, which keeps its own copy for the LM
    head (Megatron-LM, Narayanan et al. 2021)."""
    if spec.head != "lm":
        return params.head, 0, params.matmul_head
    vocab_matrix = vocab_matrix_elements(spec)
    other = params.head - (0 if spec.tied_embeddings else vocab_matrix)
    matrix = split(vocab_matrix, tensor_parallel)
    holds_matrix = not spec.tied_embeddings or stage == "last"
    return other, (matrix if holds_matrix else 0), matrix


def adafactor_layer_elements(
    spec: ModelSpec, params: ParameterCount, tensor_parallel: int = 1, dense: bool = False
) -> float:
    """Adafactor state of one layer: row + column vectors per weight matrix (a fused qkv or
    gate-up projection is one matrix, the MoE router another) and the full second moment of
    every vector (Shazeer & Stern 2018, arXiv 1804.04235, Alg. 4). A fact of the model's shape,
    worked out once per model (geometry.remembered): every estimate counts it, whatever the optimizer."""
    return remembered(_adafactor_layer_elements, spec, params, tensor_parallel, dense)


def _adafactor_layer_elements(spec: ModelSpec, params: ParameterCount, tensor_parallel: int, dense: bool) -> float:
    matrices = factored_matrices(spec, tensor_parallel, dense=dense)
    matrix_elements = sum(rows * columns for rows, columns in matrices)
    layer_all, _ = local_layer_parameters(spec, params, tensor_parallel, dense=dense)
    return sum(rows + columns for rows, columns in matrices) + layer_all - matrix_elements


def _full_layout(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings, stage: str) -> StageLayout:
    """Full training: every weight of the layers from frozen_layers on trains, stored in the
    precision's weight dtype; frozen layers keep that dtype but have no gradient or state."""
    t = settings.tensor_parallel
    layers, active = stage_layer_counts(spec, settings, stage)
    has_embedding, has_head = stage in ("only", "first"), stage in ("only", "last")
    layer_all, layer_matmul = local_layer_parameters(spec, params, t)
    embedding = local_embedding_parameters(spec, params, t) if has_embedding else 0
    head_other, head_matrix, head_matmul = local_head_parameters(spec, params, t, stage) if has_head else (0, 0, 0)
    train_embedding, train_head = embedding_trainable(settings), head_trainable(spec, settings)

    layers_held, layers_trained, layers_matmul, layers_adafactor = stage_layer_sums(spec, params, settings, stage)
    # a vision-language model's encoder and projector sit before the embedding, on its stage,
    # replicated across tensor-parallel ranks; their gradients come last in backward
    vision = spec.extra_params if has_embedding else 0
    vision_trained = trained_vision_parameters(spec, settings) if has_embedding else 0
    vision_frozen = vision - vision_trained
    trainable = layers_trained + (embedding if train_embedding else 0) + head_other + vision_trained
    trainable += head_matrix if train_head else 0
    frozen = layers_held - layers_trained + (0 if train_embedding else embedding) + (0 if train_head else head_matrix)
    frozen += vision_frozen
    weight = settings.precision_facts.weight_bytes
    vocab_matrix = split(vocab_matrix_elements(spec), t)
    widest = max(spec.ffn_hidden_size, spec.dense_ffn_hidden_size or 0, spec.shared_expert_ffn_size)
    largest = [split(spec.hidden_size * widest * (2 if spec.fused_gate_up else 1), t)]
    if (has_embedding and train_embedding) or (has_head and train_head and spec.head == "lm"):
        largest.append(vocab_matrix)
    adafactor = layers_adafactor
    if has_embedding and train_embedding:
        # the word embedding is factored (row + column), the rest of the embedding kept as is
        adafactor += split(spec.vocab_size, t) + spec.hidden_size + embedding - vocab_matrix
    adafactor += head_other + (head_matrix if train_head else 0)  # the head is kept as it is
    adafactor += vision_trained  # counted unfactored: an upper bound for the encoder's matrices
    # A tied matrix trained on a stage with both ends gets two gradients, the head's first.
    both_ends = has_embedding and has_head and spec.head == "lm" and spec.tied_embeddings
    tied_matrix = vocab_matrix if both_ends and train_embedding else 0
    return StageLayout(
        stage=stage,
        layers=layers,
        active_layers=active,
        in_flight=in_flight_micro_batches(settings, stage),
        has_embedding=has_embedding,
        has_head=has_head,
        trainable=trainable,
        trainable_per_layer=layer_all,
        weight_bytes=weight * trainable + weight * frozen,
        layer_weight_bytes=weight * layer_all,
        # autocast keeps casts of the trained layers' weights, and the head's (its matmul needs it)
        cast_elements=layers_matmul + head_matmul,
        cast_elements_per_layer=layer_matmul,
        largest_trainable=max(largest),
        head_gradient_elements=head_other + (head_matrix if train_head else 0) + tied_matrix,
        embedding_gradient_elements=((embedding - tied_matrix) if train_embedding else 0) + vision_trained,
        tied_matrix_elements=tied_matrix,
        adafactor_elements=adafactor,
        outside_layer_elements=embedding + head_other + head_matrix + vision,
        head_cast_elements=head_matmul,
    )


def _adapter_layout(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings, stage: str) -> StageLayout:
    """LoRA/QLoRA: a frozen base in the half compute dtype (NF4 linear weights for QLoRA),
    and adapters in the layers from frozen_layers on, stored in the precision's weight
    dtype (fp32 under fp32/AMP: PEFT keeps adapters fp32; half + fp32 master under *-mixed)."""
    t, rank = settings.tensor_parallel, settings.lora_rank
    layers, active = stage_layer_counts(spec, settings, stage)
    has_embedding, has_head = stage in ("only", "first"), stage in ("only", "last")
    embedding = local_embedding_parameters(spec, params, t) if has_embedding else 0
    head_other, head_matrix, _ = local_head_parameters(spec, params, t, stage) if has_head else (0, 0, 0)
    head_all = head_other + head_matrix
    frozen = settings.precision_facts.frozen_weight_bytes
    qlora = settings.method == "qlora"
    scales = settings.nf4_scales or "double-quant"
    head_in_nf4 = qlora and settings.quantised_linears == "all" and spec.head == "lm"
    head_bytes = frozen * head_other + (nf4_bytes(head_matrix, scales) if head_in_nf4 else frozen * head_matrix)

    def base_bytes(all_parameters: float, matmul: float) -> float:
        linear_bytes = nf4_bytes(matmul, scales) if qlora else frozen * matmul
        return frozen * (all_parameters - matmul) + linear_bytes

    kinds = adapted_layer_kinds(spec, params, settings, stage)
    layers_base_bytes = sum(kind.held * base_bytes(kind.all_parameters, kind.matmul_parameters) for kind in kinds)
    trainable = sum(kind.active * adapter_parameters(kind.adapted, rank) for kind in kinds)
    shapes = [shape for kind in kinds for shape in adapter_matrix_shapes(kind.adapted, rank)]
    adafactor = sum(kind.active * sum(r + c for r, c in adapter_matrix_shapes(kind.adapted, rank)) for kind in kinds)
    # The per-layer figures (one ZeRO-3 / FSDP unit) are the largest kind of layer this stage
    # holds, with its cross-attention block for an encoder-decoder's decoder layer.
    held = [kind for kind in kinds if kind.held]
    layer_kinds = [kind for kind in held if not kind.cross_attention]
    unit = max(layer_kinds, key=lambda kind: kind.all_parameters, default=kinds[0])
    unit_parts = [unit] + [kind for kind in held if kind.cross_attention]
    adapters_per_layer = sum(adapter_parameters(part.adapted, rank) for part in unit_parts)
    layer_base_bytes = sum(base_bytes(part.all_parameters, part.matmul_parameters) for part in unit_parts)
    weight = settings.precision_facts.weight_bytes
    # a vision-language model's encoder and projector: frozen base in the half dtype, never quantised
    # (the assumption line says so), on the embedding's stage; an encoder-decoder's position biases
    vision = spec.extra_params if has_embedding else 0
    outside = encoder_decoder_extra_params(spec) if has_embedding else 0
    return StageLayout(
        stage=stage,
        layers=layers,
        active_layers=active,
        in_flight=in_flight_micro_batches(settings, stage),
        has_embedding=has_embedding,
        has_head=has_head,
        trainable=trainable,
        trainable_per_layer=adapters_per_layer,
        weight_bytes=weight * trainable + layers_base_bytes + frozen * (embedding + vision + outside) + head_bytes,
        layer_weight_bytes=layer_base_bytes + weight * adapters_per_layer,
        # only the fp32 adapters are cast under autocast; the base is already half
        cast_elements=trainable,
        cast_elements_per_layer=adapters_per_layer,
        largest_trainable=max((r * c for r, c in shapes), default=0),
        head_gradient_elements=0,
        embedding_gradient_elements=0,
        tied_matrix_elements=0,
        adafactor_elements=adafactor,
        outside_layer_elements=embedding + head_all + vision,
        frozen_active_elements=sum(kind.active * kind.all_parameters for kind in kinds),
    )


def stage_layout(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings, stage: str) -> StageLayout:
    if is_adapter_method(settings.method):
        return _adapter_layout(spec, params, settings, stage)
    return _full_layout(spec, params, settings, stage)


def trainable_parameter_count(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings) -> int:
    """Trainable parameters of the whole model: adapters for LoRA/QLoRA, otherwise every
    parameter but the frozen layers and, when layers are frozen, the embeddings."""
    if is_adapter_method(settings.method):
        return round(model_lora_parameters(spec, settings.lora_rank, settings.lora_targets, 1, settings.frozen_layers))
    if settings.frozen_layers == 0:
        return params.total - frozen_tower_parameters(spec, settings)
    frozen_dense = min(settings.frozen_layers, spec.n_dense_layers) if spec.n_experts > 1 else 0
    frozen = (settings.frozen_layers - frozen_dense) * params.per_layer
    frozen += frozen_dense * layer_params(spec, dense=True)[0] if frozen_dense else 0
    return params.total - frozen - params.embedding - frozen_tower_parameters(spec, settings)
