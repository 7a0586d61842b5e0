"""Peak GPU memory of one training step, phase by phase.

The peak is the maximum over the phases of a step (end of forward, the loss
gradient, the backward through the layers, the optimizer step), not a plain sum
of everything that ever exists. All sizes are bytes on one data-parallel GPU.

Sources:
- ZeRO: Rajbhandari et al. 2019, arXiv 1910.02054 (bytes per parameter, sharding).
- Activations: Korthikanti et al. 2022, arXiv 2205.05198 (Sec. 4, per-layer
  activations), adjusted to what PyTorch/Hugging Face code really saves for backward:
  separate autocast casts per linear, fp32 upcasts in RMSNorm and softmax, dropout
  masks as 1-byte bool tensors, fused (flash/SDPA) attention saving only its output
  and the log-sum-exp (Dao et al. 2022, arXiv 2205.14135).
- Logits and cross-entropy in fp32: b*s*V*4 bytes for the log-probabilities and
  the same again for each of their gradients.
- Fine-tuning: LoRA (Hu et al. 2021, arXiv 2106.09685) and QLoRA (Dettmers et al. 2023,
  arXiv 2305.14314), see calculators/finetune.py; frozen layers save no activations
  (autograd records nothing before the first tensor that requires grad).
- CPU offload: ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) and ZeRO-Infinity
  (Rajbhandari et al. 2021, arXiv 2104.07857), as DeepSpeed implements them.
- Model parallelism: Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053)
  with sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2), and the 1F1B pipeline
  schedule (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2).
- Training stacks, read from their source (each function cites its file and revision):
  torchtune's chunked cross-entropy, compiled loss, activation offloading and optimizer in
  backward; Liger-Kernel's RMSNorm, SwiGLU and fused linear cross-entropy; torchtitan's per-op
  selective checkpointing; bitsandbytes' paged optimizers and 4-bit matmul; DeepSpeed's
  whole-model move to the GPU before ZeRO-3 partitions it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from pydantic import BaseModel

from calculators.finetune import (
    ALL_LINEARS,
    LORA_TARGET_MODULES,
    NF4_BITS_PER_WEIGHT,
    adapted_linears,
    adapter_matrix_shapes,
    adapter_parameters,
    cross_attention_adapted_linears,
    dequantised_bytes_per_element,
    is_adapted,
    model_lora_parameters,
    nf4_bytes,
    nf4_quantisation_staging_bytes,
    qlora_dequantised_weight_bytes,
)
from calculators.geometry import (
    Linear,
    ParameterCount,
    attention_linears,
    cross_attention_params,
    encoder_decoder_extra_params,
    factored_matrices,
    layer_ffn_width,
    layer_matmul_elements,
    layer_params,
    norm_parameters,
    parameter_count,
    split,
    vocab_matrix_elements,
)
from calculators.mllama import (
    cross_layer_gate_bytes,
    cross_lse_padding_bytes,
    cross_mask_bytes,
    cross_mask_copies_bytes,
    layers_skipped_without_images,
    mllama_tower,
    tile_position_bytes,
    vision_gate_bytes,
    vision_lse_padding_bytes,
    vision_mask_bytes,
)
from calculators.model_spec import ModelSpec, extension
from calculators.training import (
    LORA_TARGET_LABEL,
    PAGED_OPTIMIZERS,
    TrainingSettings,
    autocast_casts_hidden_states,
    compute_bytes,
    decoder_settings,
    frozen_weight_bytes,
    gradient_bytes,
    hidden_states_fp32,
    image_tokens_per_image,
    is_adapter_method,
    is_autocast,
    language_model_settings,
    master_weight_bytes,
    model_dtype_bytes,
    optimizer_state_element_bytes,
    residual_bytes,
    weight_bytes,
)
from calculators.vision import (
    cross_attention_image_tokens,
    frozen_tower_parameters,
    tower_model_spec,
    tower_settings,
    tower_trains,
    trained_vision_parameters,
    vision_cast_elements,
    vision_tower,
)

GIB = 2**30

COMPONENTS = (
    "weights",
    "master_weights",
    "autocast_weight_copies",
    "gradients",
    "optimizer_states",
    "optimizer_step_temporaries",
    "activations",
    "logits_and_loss",
    "allocator_reserve",
    "framework_overhead",
)

COMPONENT_LABEL = {
    "weights": "Weights",
    "master_weights": "FP32 master weights",
    "autocast_weight_copies": "Autocast weight copies",
    "gradients": "Gradients",
    "optimizer_states": "Optimizer states",
    "optimizer_step_temporaries": "Optimizer step temporaries",
    "activations": "Activations",
    "logits_and_loss": "Logits and loss",
    "allocator_reserve": "Allocator reserve",
    "framework_overhead": "CUDA context, cuBLAS, NCCL",
}


class PhaseMemory(BaseModel):
    """Bytes allocated by torch at one moment of the step, by component."""

    name: str
    components: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.components.values())


class MemoryEstimate(BaseModel):
    """Result of the estimate: the peak (GiB), its breakdown and the phases."""

    peak_gib: float
    allocated_gib: float
    reserved_gib: float
    peak_phase: str
    components_gib: dict[str, float]
    phases_gib: dict[str, float]
    phase_components_gib: dict[str, dict[str, float]]
    activations_per_layer_gib: dict[str, float]
    parameters: int
    trainable_parameters: int
    tokens_per_micro_batch: int
    assumptions: list[str]
    host_memory_gib: float = 0.0
    # the whole model on the GPU while it is loaded (0 when loading never holds it whole)
    load_peak_gib: float = 0.0
    # paged optimizer states in CUDA unified memory: on the device, outside torch's caching allocator
    outside_allocator_gib: float = 0.0
    pipeline_stage: str = "only"


# --- What one GPU holds: its pipeline stage, tensor-parallel shard and trainable part ---


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
    every vector (Shazeer & Stern 2018, arXiv 1804.04235, Alg. 4)."""
    matrices = factored_matrices(spec, tensor_parallel, dense=dense)
    matrix_elements = sum(rows * columns for rows, columns in matrices)
    layer_all, _ = local_layer_parameters(spec, params, tensor_parallel, dense=dense)
    return sum(rows + columns for rows, columns in matrices) + layer_all - matrix_elements


def adafactor_state_elements(spec: ModelSpec, params: ParameterCount) -> float:
    """Adafactor keeps one row and one column second-moment vector per weight matrix,
    and a full second moment for vectors; no first moment by default (Shazeer & Stern
    2018, arXiv 1804.04235, Alg. 4; HF transformers Adafactor with beta1=None). The
    embedding is factored; the head is kept as it is."""
    embedding_factored = spec.vocab_size + spec.hidden_size + params.embedding - vocab_matrix_elements(spec)
    dense = spec.n_layers - spec.n_moe_layers if spec.n_experts > 1 else 0
    layers = (spec.n_layers - dense) * adafactor_layer_elements(spec, params)
    if dense:
        layers += dense * adafactor_layer_elements(spec, params, dense=True)
    return layers + embedding_factored + params.head


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
    weight = weight_bytes(settings.precision)
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
    frozen = frozen_weight_bytes(settings.precision)
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
    weight = weight_bytes(settings.precision)
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


# --- Per-parameter state (ZeRO paper, Sec. 3 and 5) ---------------------------------


def shard_divisor(zero: int, stage_that_shards: int, gpus: int) -> int:
    """ZeRO stage 1 shards optimizer states, 2 also gradients, 3 also parameters
    across the data-parallel GPUs (ZeRO paper Sec. 5.1, Fig. 1)."""
    return gpus if zero >= stage_that_shards else 1


def optimizer_state_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """Optimizer state bytes for the trainable parameters on one GPU, before sharding.

    AdamW: exp_avg and exp_avg_sq (Loshchilov & Hutter 2019), 2 states.
    SGD with momentum: 1 state. Adafactor: factored second moment (see above).
    8-bit AdamW: 2 states of 1 byte plus one fp32 absmax per 2048-element block
    (Dettmers et al. 2021, arXiv 2110.02861; bitsandbytes blockwise quantisation).
    Paged AdamW (QLoRA paper Sec. 3; bitsandbytes bitsandbytes/optim/optimizer.py
    Optimizer2State: 32-bit states are fp32 whatever the parameter dtype) allocates the same
    states in CUDA unified memory with cudaMallocManaged, outside torch's caching allocator:
    estimate_memory reports them as outside_allocator_gib, not as allocated or reserved.
    """
    n = layout.trainable
    element = optimizer_state_element_bytes(settings.precision)
    if settings.optimizer == "adamw":
        return 2 * element * n
    if settings.optimizer == "paged-adamw":
        return 2 * 4 * n
    if settings.optimizer == "none":  # forward and backward only (benchmarks)
        return 0.0
    if settings.optimizer == "sgd":
        return element * n
    if settings.optimizer == "adafactor":
        return element * layout.adafactor_elements
    return 2 * (1 + 4 / 2048) * n  # adamw-8bit, paged-adamw-8bit


def optimizer_step_temporary_bytes(layout: StageLayout, settings: TrainingSettings, divisor: int) -> float:
    """Transient memory of optimizer.step().

    Mixed precision (DeepSpeed ZeRO, Megatron) first converts this GPU's gradient
    partition to fp32 for the master update: 4 bytes per trainable parameter.
    On top of that, the AdamW implementation decides what the update allocates
    (torch/optim/adam.py):
    - foreach=True (torch's default on CUDA) computes `_foreach_sqrt(exp_avg_sqs)`
      over every parameter at once: one state-sized tensor per parameter
      (_multi_tensor_adam);
    - the for-loop computes `exp_avg_sq.sqrt() / bias_correction2_sqrt`, two
      temporaries the size of the parameter, one parameter at a time
      (_single_tensor_adam), so twice the largest parameter;
    - fused=True, DeepSpeed's FusedAdam and bitsandbytes' 8-bit kernels update in place.
    Adafactor (HF) builds about two full-size fp32 temporaries per parameter.
    """
    fp32_gradient_copy = 4 * layout.trainable / divisor if master_weight_bytes(settings.precision) else 0.0
    element = optimizer_state_element_bytes(settings.precision)
    update = 0.0
    if settings.optimizer == "adamw":
        if settings.optimizer_impl == "foreach":
            update = element * layout.trainable / divisor
        elif settings.optimizer_impl == "for-loop":
            update = 2 * element * layout.largest_trainable
    elif settings.optimizer == "adafactor":
        update = 2 * 4 * layout.largest_trainable
    return fp32_gradient_copy + update


# DeepSpeed's zero_optimization.reduce_bucket_size default: 5e8 elements.
REDUCE_BUCKET_ELEMENTS = 500_000_000


def unsharded_gradient_elements(layout: StageLayout) -> float:
    """Under ZeRO-2/3 a unit's gradients exist whole until their reduce-scatter: one trained
    layer's, or, when every layer is frozen, the largest trainable unit left (the head's),
    never more than everything trainable (ZeRO paper Sec. 5.2: gradients reduced bucket by
    bucket as backward produces them)."""
    unit = layout.trainable_per_layer if layout.active_layers > 0 else layout.head_gradient_elements
    return min(unit, layout.trainable)


def offload_gradient_bucket_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """GPU gradient memory under ZeRO-Offload: gradients leave for the CPU bucket by
    bucket as backward produces them (Ren et al. 2021, Sec. 4.1), so one reduce bucket of
    5e8 elements (DeepSpeed's default reduce_bucket_size) is in flight, capped at the
    size of all the gradients."""
    element = gradient_bytes(settings.precision)
    return min(REDUCE_BUCKET_ELEMENTS * element, element * layout.trainable)


def offloaded_optimizer_host_bytes(settings: TrainingSettings, layout: StageLayout, state_div: int) -> float:
    """Host RAM per GPU under ZeRO-Offload (Ren et al. 2021, Sec. 4.1; DeepSpeed
    stage_1_and_2.py with cpu_offload): for this GPU's partition, the fp32 master copy
    (a copy in the weights' dtype without mixed precision), its fp32 gradient, the
    optimizer states, a pinned half-precision copy of the partition for the copy back to
    the GPU (mixed precision only), a pinned staging buffer the size of the largest
    parameter, and, when accumulating, the gradients accumulated on the CPU."""
    precision = settings.precision
    partition = layout.trainable / state_div
    mixed = master_weight_bytes(precision) > 0
    parameter_copy = master_weight_bytes(precision) if mixed else weight_bytes(precision)
    gradient = 4 if mixed else gradient_bytes(precision)
    half_copy = weight_bytes(precision) if mixed else 0
    staging = gradient_bytes(precision) * layout.largest_trainable
    accumulated = gradient_bytes(precision) * partition if settings.grad_accum > 1 else 0.0
    states = optimizer_state_bytes(settings, layout) / state_div
    return (parameter_copy + gradient + half_copy) * partition + states + staging + accumulated


class ModelStates(NamedTuple):
    """Bytes of the model states on one GPU, and on the host for offload."""

    weights: float
    master: float
    states: float
    gradients: float  # when all of them are alive (end of backward, optimizer step)
    autocast_copies: float
    autocast_first_layer: float
    step_temporaries: float
    host: float
    outside_allocator: float = 0.0  # paged optimizer states (CUDA unified memory)
    gathered_root: float = 0.0  # FSDP2's root unit, gathered through forward and backward (in `weights`)
    reduce_scatter_input: float = 0.0  # FSDP2's last reduce-scatter input, alive in backward


def fsdp2_active(settings: TrainingSettings) -> bool:
    """FSDP2 (fully_shard) shards the parameters: ZeRO-3 over more than one GPU, on the GPU."""
    fsdp2 = settings.sharding_impl == "fsdp2" and settings.zero == 3
    return fsdp2 and settings.gpus > 1 and not settings.offload_parameters


def fsdp2_root_gathered_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """FSDP2's root unit (what fully_shard(model) holds once every layer is its own unit: the
    embeddings, the final norm and the LM head, a tied matrix once) gathered in the compute
    dtype (param_dtype) from its forward to the end of backward: the root is not resharded
    after forward (pytorch/pytorch torch/distributed/_composable/fsdp/_fsdp_state.py,
    FSDPState._lazy_init: `post_forward_mesh_info = None` for the root; from torch 2.8,
    torch/distributed/fsdp/_fully_shard/_fsdp_state.py @1fd469d0, when reshard_after_forward is
    left to auto; NeMo Automodel passes False) and reshards in its post-backward."""
    if not fsdp2_active(settings):
        return 0.0
    return compute_bytes(settings.precision) * layout.outside_layer_elements


def fsdp2_reduce_scatter_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """The reduce-scatter input of the unit whose gradients were reduced last, alive while the
    next unit runs its backward: foreach_reduce copies a unit's unsharded gradients into a new
    buffer in reduce_dtype, frees the gradients, and the buffer is held in reduce_scatter_state
    until the next unit's reduce-scatter (pytorch/pytorch
    torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py @010ae4a8, foreach_reduce). The
    reduce dtype is fp32 where the sharded parameters are fp32 (torchtitan's default
    mixed_precision_reduce = "float32", pytorch/torchtitan torchtitan/config_manager.py @9dec370),
    the gradients' own dtype otherwise (NeMo Automodel: reduce_dtype bf16)."""
    if not fsdp2_active(settings):
        return 0.0
    reduce_bytes = 4 if master_weight_bytes(settings.precision) else gradient_bytes(settings.precision)
    return reduce_bytes * unsharded_gradient_elements(layout)


def fsdp2_root_gradient_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """The root unit's unsharded gradients from the head's backward to the end of backward: the
    root reduce-scatters in its own post-backward, which runs last since its embedding runs
    first (pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
    FSDPParamGroup.post_backward; the gradients accumulate on the unsharded parameters until
    then). In the parameters' dtype: the head's (a tied matrix's) and the final norm's."""
    if not fsdp2_active(settings):
        return 0.0
    return gradient_bytes(settings.precision) * layout.head_gradient_elements


def fsdp1_frozen_gradient_bytes(settings: TrainingSettings, layout: StageLayout) -> float:
    """FSDP1 flattens each wrapped layer into one FlatParameter. A layer that mixes a frozen base
    with LoRA adapters (allowed with use_orig_params=True) gets a gradient for the whole flat
    parameter, so its frozen weights take gradient memory as if they trained (PyTorch docs,
    torch.distributed.fsdp.FullyShardedDataParallel: mixing frozen and non-frozen parameters is
    supported with use_orig_params=True, but 'recommended to avoid doing so to prevent higher than
    expected gradient memory usage'). PEFT's fsdp_auto_wrap_policy, which the HF Trainer applies
    to a PEFT model, avoids it by wrapping the adapters in their own units: then choose "zero".
    Before sharding; the caller divides. The root unit
    (embeddings, final norm, head) holds no adapter and gets none. LoRA only: QLoRA's NF4 storage
    under FSDP1 is not modelled."""
    if settings.sharding_impl != "fsdp1" or settings.method != "lora":
        return 0.0
    return gradient_bytes(settings.precision) * layout.frozen_active_elements


def model_state_bytes(settings: TrainingSettings, layout: StageLayout) -> ModelStates:
    """Weights, master copy, gradients and optimizer states per GPU after ZeRO sharding
    over the data-parallel GPUs (ZeRO paper Sec. 5), with CPU offload applied."""
    gpus, zero, precision = settings.gpus, settings.zero, settings.precision
    state_div = shard_divisor(zero, 1, gpus)
    grad_div = shard_divisor(zero, 2, gpus)
    weight_div = shard_divisor(zero, 3, gpus)

    weights = layout.weight_bytes / weight_div
    if settings.offload_parameters:
        # ZeRO-Infinity: parameters live on the host; the layer in use and the prefetched one are on the GPU.
        weights = 2 * layout.layer_weight_bytes
    elif zero == 3 and gpus > 1:
        # FSDP/ZeRO-3 gathers the layer in use and prefetches the next one.
        weights += 2 * layout.layer_weight_bytes
    gathered_root = fsdp2_root_gathered_bytes(settings, layout)
    weights += gathered_root
    master = master_weight_bytes(precision) * layout.trainable / state_div
    states = optimizer_state_bytes(settings, layout) / state_div
    gradients = gradient_bytes(precision) * layout.trainable / grad_div
    gradients += fsdp1_frozen_gradient_bytes(settings, layout) / grad_div
    if gpus > 1 and zero == 0:
        gradients *= 2  # DDP gradient buckets
    if zero >= 2 and gpus > 1:
        gradients += gradient_bytes(precision) * unsharded_gradient_elements(layout)
    # a layer that does not run (Mllama's cross-attention without images) casts nothing
    cast_elements = layout.cast_elements - layout.skipped_layers * layout.cast_elements_per_layer
    if settings.checkpointing == "full":
        # Checkpointed layers run their forward without saving anything, so their weight casts
        # die with autocast's cache; only the head's casts and the layer being recomputed remain
        # (measured in the trace: bench/accuracy.py).
        cast_elements -= (layout.active_layers - layout.skipped_layers - 1) * layout.cast_elements_per_layer
        cast_elements = max(cast_elements, layout.cast_elements_per_layer)
    autocast_copies = 2.0 * (cast_elements + layout.vision_cast_elements) if is_autocast(precision) else 0.0
    # only the first layer's autocast casts (and the vision encoder's, whose backward comes
    # last) are still saved when backward reaches it
    autocast_first_layer = 2.0 * (layout.cast_elements_per_layer + layout.vision_cast_elements)
    autocast_first_layer = autocast_first_layer if autocast_copies else 0.0
    if precision == "fp8":
        autocast_copies = fp8_weight_cast_bytes(cast_elements - layout.head_cast_elements)
        autocast_first_layer = fp8_weight_cast_bytes(layout.cast_elements_per_layer)
    step_temporaries = optimizer_step_temporary_bytes(layout, settings, state_div)

    if settings.optimizer_in_backward:
        gradients, step_temporaries = optimizer_in_backward_bytes(settings, layout, weight_div)

    host = outside_allocator = 0.0
    if settings.offload_optimizer:
        host += offloaded_optimizer_host_bytes(settings, layout, state_div)
        master = states = step_temporaries = 0.0
        gradients = offload_gradient_bucket_bytes(settings, layout)
    elif settings.optimizer in PAGED_OPTIMIZERS:
        outside_allocator, states = states, 0.0
    if settings.offload_parameters:
        host += layout.weight_bytes / weight_div
    return ModelStates(
        weights,
        master,
        states,
        gradients,
        autocast_copies,
        autocast_first_layer,
        step_temporaries,
        host,
        outside_allocator,
        gathered_root,
        fsdp2_reduce_scatter_bytes(settings, layout),
    )


# torchao float8: e4m3 casts, one byte per element; each cast's scale is one fp32 scalar.
FP8_BYTES = 1


def fp8_weight_cast_bytes(elements: float) -> float:
    """The float8 casts of the linear weights that the forward keeps for backward: torchao's
    Float8Linear casts its weight with a dynamic tensorwise scale and
    manual_float8_matmul_with_args_in_float8 saves it (`ctx.save_for_backward(input_fp8,
    weight_fp8_t)`, pytorch/ao torchao/float8/float8_linear.py @eab345c;
    force_recompute_fp8_weight_in_bwd is False by default, torchao/float8/config.py), one byte
    per element. torchtitan converts every nn.Linear but the LM head (`fqn != "output"`,
    pytorch/torchtitan torchtitan/float8.py @9dec370). Like autocast's casts, a checkpointed
    layer's die with its forward (model_state_bytes)."""
    return FP8_BYTES * elements


def optimizer_in_backward_bytes(
    settings: TrainingSettings, layout: StageLayout, weight_div: int
) -> tuple[float, float]:
    """(gradients, step temporaries) when the optimizer steps each parameter in a
    post-accumulate-grad hook and frees its gradient at once (torchtune
    recipes/full_finetune_single_device.py @ce5433b0 with optimizer_in_bwd: True, after
    torch's register_post_accumulate_grad_hook tutorial). At most one parameter's gradient
    is alive (the largest: its shard under FSDP/ZeRO-3), and the step's temporaries are
    that one parameter's (ZeRO-sharded gradients become the one reduced shard)."""
    largest = layout.largest_trainable / weight_div
    gradient = gradient_bytes(settings.precision) * largest
    fp32_copy = 4 * largest if master_weight_bytes(settings.precision) else 0.0
    element = optimizer_state_element_bytes(settings.precision)
    update = element * largest if settings.optimizer == "adamw" and settings.optimizer_impl != "fused" else 0.0
    return gradient, fp32_copy + update


# --- Activations (Korthikanti et al. 2022, adjusted to PyTorch) --------------------


def trained_linear_names(settings: TrainingSettings) -> frozenset[str]:
    """Linears whose weight (full training) or adapter (LoRA) trains. Only those save their
    input: the gradient with respect to a frozen linear's input needs its weight alone
    (PyTorch saves an op's inputs only for the gradients it must compute)."""
    if is_adapter_method(settings.method):
        return LORA_TARGET_MODULES[settings.lora_targets]
    return ALL_LINEARS


def input_saving_linears(settings: TrainingSettings) -> frozenset[str]:
    """Linears that save their input for backward. A trained linear does; under QLoRA with
    bitsandbytes so does every quantised base linear, adapter or not: MatMul4Bit.forward keeps
    `ctx.tensors = (A, B)` whenever A requires grad (bitsandbytes bitsandbytes/autograd/
    _functions.py), while torchao's linear_nf4 (torchtune) saves only the NF4 weight."""
    if settings.method == "qlora" and settings.quant_backend == "bitsandbytes":
        return ALL_LINEARS
    return trained_linear_names(settings)


def norm_saved_bytes(
    spec: ModelSpec,
    settings: TrainingSettings,
    tokens: int,
    weight_trainable: bool = True,
    width: int | None = None,
    input_bytes: int | None = None,
) -> float:
    """Bytes one norm saves for backward.

    LayerNorm (native op) saves its input plus fp32 mean and rstd per token.
    RMSNorm as written in HF Llama upcasts to fp32 (saved), keeps fp32 rstd, and
    saves the normalised tensor cast back to the input dtype for the weight multiply,
    which only a trainable weight needs (LoRA freezes it).
    Liger's fused RMSNorm saves only its input, in its own dtype, and the fp32 rstd per
    token (linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py @00eba634,
    LigerRMSNormFunction.forward: ctx.save_for_backward(X, W, RSTD)). torch.compile saves the
    same: AOT autograd's min-cut partitioner (torch/_functorch/partitioners.py,
    min_cut_rematerialization_partition) recomputes the upcast and the normalised tensor, which
    are pointwise functions of the saved input and rstd.
    Gemma's RMSNorm multiplies by (1 + weight) before casting back, so that copy is fp32
    (rmsnorm_weight_operand_bytes).
    `width` is the normalised width when it is not the hidden size, and `input_bytes` the input's
    element size when it is not the residual stream's (MLA's latent norms).
    """
    h = spec.hidden_size if width is None else width
    r = residual_bytes(settings) if input_bytes is None else input_bytes
    if spec.norm == "layernorm":
        # CUDA autocast runs layer_norm in fp32 (its fp32 op list): a half input is cast, and
        # the fp32 cast is what the norm saves
        saved_input = 4 if is_autocast(settings.precision) else r
        return saved_input * tokens * h + 8 * tokens + layernorm_parameter_casts_bytes(spec, settings, h)
    if settings.liger or settings.compile:
        return r * tokens * h + 4 * tokens
    normalised_for_weight = rmsnorm_weight_operand_bytes(spec, r) * tokens * h if weight_trainable else 0
    return 4 * tokens * h + normalised_for_weight + 4 * tokens + t5_norm_input_bytes(spec, r) * tokens * h


def layernorm_parameter_casts_bytes(spec: ModelSpec, settings: TrainingSettings, width: int) -> float:
    """The fp32 copies of a frozen half LayerNorm's weight and bias under autocast: layer_norm is
    on CUDA autocast's fp32 list, which casts every floating input, parameters too, and
    native_layer_norm keeps its weight and bias for backward. Only a LoRA/QLoRA base is half
    under autocast (full training keeps fp32 weights, which need no cast). Traced:
    tests/test_trace_lora_autocast.py (1,024 B for a 64-wide layer's two norms)."""
    if not (is_autocast(settings.precision) and is_adapter_method(settings.method)):
        return 0.0
    return 4.0 * norm_parameters(spec, width)


def t5_norm_input_bytes(spec: ModelSpec, input_bytes: int) -> int:
    """T5LayerNorm multiplies its input itself, not its fp32 copy, by rsqrt(variance)
    (`hidden_states * torch.rsqrt(variance + eps)`, transformers models/t5/modeling_t5.py
    @6b8b757d), so a half input is kept besides the fp32 copy the variance keeps; an fp32 input
    is that copy. Traced (tests/test_trace_t5.py)."""
    return input_bytes if spec.position_embedding == "relative" and input_bytes < 4 else 0


def rmsnorm_weight_operand_bytes(spec: ModelSpec, input_bytes: int) -> int:
    """Bytes per element of the normalised tensor an HF RMSNorm saves for its weight's gradient:
    Llama's casts to the input dtype and then multiplies (`self.weight * x.to(input_dtype)`,
    transformers models/llama/modeling_llama.py), Gemma's multiplies the fp32 tensor by
    (1 + weight) and casts the product (ModelSpec.scales_norm_in_fp32), so it saves 4 bytes even
    when the input is half. Traced (tests/test_trace_softcap.py)."""
    return 4 if spec.scales_norm_in_fp32 else input_bytes


def parallel_residual_shared_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What a parallel block saves once that the per-part terms count twice.

    Attention and MLP side by side on the layer's input x (GPT-J; GPT-NeoX's use_parallel_residual,
    transformers models/gpt_neox/modeling_gpt_neox.py @203bf6f1 GPTNeoXLayer: mlp(ln2(x)) +
    attn(ln1(x)) + x; Phi-2 and Falcon-7B with one norm for both):
    - two norms read the same x: a LayerNorm (or a fused RMSNorm) saves its input itself, so
      once, r t h; HF's RMSNorm saves its fp32 upcast, the same tensor only when x is fp32;
    - one norm feeds q/k/v and the MLP's input linear: they save the same normed tensor, c t h,
      unless autocast or float8 gives each linear its own cast (linear_inputs_saved_bytes).
    Traced: tests/test_trace_parallel_residual.py."""
    if not spec.parallel_residual:
        return 0.0
    h, r = spec.hidden_size, residual_bytes(settings)
    if spec.norms_per_layer == 2:
        if spec.norm == "layernorm" and is_autocast(settings.precision) and r < 4:
            return 0.0  # each LayerNorm saves its own fp32 cast of the half input
        if spec.norm == "layernorm" or settings.liger or settings.compile:
            return float(r * tokens * h)
        return float(4 * tokens * h) if r == 4 else 0.0
    if spec.norms_per_layer != 1 or autocast_casts_norm_output(spec, settings) or settings.precision == "fp8":
        return 0.0
    trained = input_saving_linears(settings)
    attention_in = trained.intersection(("qkv", "q", "k", "v"))
    mlp_in = trained.intersection(("fc1", "gate", "up", "gate_up"))
    return float(compute_bytes(settings.precision) * tokens * h) if attention_in and mlp_in else 0.0


def linear_inputs_saved_bytes(
    settings: TrainingSettings, tokens: int, width: int, n_linears: int, input_fp32: bool | None = None
) -> float:
    """Inputs saved by `n_linears` linears (with a trainable weight or adapter) that read the same tensor.

    Under autocast each linear casts an fp32 input to half separately and saves its own copy
    (autocast caches only weight casts); a half input, or no autocast, and they share one tensor.
    `input_fp32`: whether the tensor they read is fp32; None: the hidden states' dtype
    (hidden_states_fp32). A float8 linear saves its own e4m3 cast of the input instead, one byte
    per element (torchao Float8Linear.cast_input_to_float8, saved by
    manual_float8_matmul_with_args_in_float8, pytorch/ao torchao/float8/float8_linear.py @eab345c).
    """
    if settings.precision == "fp8":
        return n_linears * FP8_BYTES * tokens * width
    c = compute_bytes(settings.precision)
    if input_fp32 is None:
        input_fp32 = hidden_states_fp32(settings)
    copies = n_linears if is_autocast(settings.precision) and input_fp32 else min(n_linears, 1)
    return copies * c * tokens * width


def norm_output_fp32(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Whether a layer norm's output, the input of the linears after it, is fp32: when the hidden
    states are (hidden_states_fp32), and under autocast after torch's LayerNorm, which CUDA
    autocast runs in fp32 whatever its input (autocast's fp32 op list). An HF RMSNorm casts its
    result back to the input's dtype. The trace emulates CUDA autocast's layer_norm
    (measure/trace/cuda_emulation.py)."""
    if hidden_states_fp32(settings):
        return True
    return is_autocast(settings.precision) and spec.norm == "layernorm"


def autocast_casts_norm_output(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Whether autocast gives each linear after a layer norm its own half cast of the norm's
    output: under autocast when that output is fp32 (norm_output_fp32)."""
    return is_autocast(settings.precision) and norm_output_fp32(spec, settings)


def softmax_in_fp32(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Softmax output is fp32 under fp32 and autocast (softmax is on autocast's fp32
    list) and in Llama-style code, which calls softmax(dtype=torch.float32)."""
    # T5Attention calls softmax(scores.float()) (transformers models/t5/modeling_t5.py @6b8b757d)
    upcasting_code = spec.position_embedding in ("rope", "relative")
    return compute_bytes(settings.precision) == 4 or is_autocast(settings.precision) or upcasting_code


def attention_score_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes saved per element of the b x heads x s x s score matrix (eager attention).

    Korthikanti Sec. 4.1 at 16 bits: softmax output 2, dropout mask 1, dropout output 2
    (5 bytes). Here the softmax output may be fp32 and the matmul with V then saves
    its own half-precision copy. Under torch.compile the scores are kept instead of the
    softmax output, with the row statistics to rebuild it.
    """
    c = compute_bytes(settings.precision)
    if spec.attention_sinks and not settings.compile:
        return sink_attention_score_bytes(spec, settings)
    softmax_out = softmax_output_bytes(spec, settings)
    mask = 1 if spec.dropout > 0 else 0
    probs_for_value_matmul = c if (softmax_out != c or spec.dropout > 0) else 0
    if settings.compile:
        # AOT autograd's min-cut partitioner keeps the scores in the compute dtype and the fp32
        # row max and row sum (8 bytes per row of s scores), and recomputes the softmax from
        # them (traced: measure/trace/compile_partition.py)
        return c + mask + probs_for_value_matmul + 8 / settings.seq_len
    return softmax_out + mask + probs_for_value_matmul + softcap_tanh_bytes(spec, settings)


def softmax_output_bytes(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Bytes per element of the eager attention softmax's output: fp32 where softmax_in_fp32, else
    the compute dtype. gpt-oss's softmax over the scores and the sink column runs in the dtype of
    the concatenated logits, the scores' compute dtype promoted by the sink logits' parameter dtype
    (fp32 weights under autocast or fp32; a LoRA base's half dtype), with no fp32 upcast: autocast
    leaves a softmax with an explicit dtype as it is (measure/trace/cuda_emulation.py)."""
    if spec.attention_sinks:
        sinks = frozen_weight_bytes(settings.precision) if is_adapter_method(settings.method) else None
        return max(compute_bytes(settings.precision), sinks or weight_bytes(settings.precision))
    return 4 if softmax_in_fp32(spec, settings) else compute_bytes(settings.precision)


def sink_attention_score_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes saved per score element by gpt-oss's eager attention with sinks (transformers
    src/transformers/models/gpt_oss/modeling_gpt_oss.py @6edf5b31, eager_attention_forward): one
    learned logit per head is concatenated to each row of scores, the row max is subtracted
    (`.max(dim=-1)` keeps its int64 indices, 8 bytes per row), the softmax keeps its output, s + 1
    columns in the logits' dtype (softmax_output_bytes), and the sink column is sliced off: the
    weighted sum with v keeps that view, or, when the softmax ran in fp32 under autocast, its own
    half cast. The sliding window is only a mask: windowed layers keep full rows too. Pure bf16
    keeps about 2 bytes per score where Llama's fp32 softmax keeps 6. Traced
    (tests/test_trace_gpt_oss.py)."""
    c, s = compute_bytes(settings.precision), settings.seq_len
    softmax_out = softmax_output_bytes(spec, settings)
    cast_for_value_matmul = c if softmax_out != c else 0
    return softmax_out * (s + 1) / s + 8 / s + cast_for_value_matmul


def softcap_tanh_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per score element that Gemma 2's attention soft-capping saves under eager attention:
    the scores go through `/ cap`, `tanh`, `* cap` before the mask and the softmax (huggingface/
    transformers src/transformers/models/gemma2/modeling_gemma2.py @006e8693, eager_attention_forward;
    torchtune torchtune/models/gemma2/_attention.py @bd2a0fc7 does the same). Scaling by a constant
    saves nothing; tanh saves its output, in the compute dtype, for its backward (1 - y^2).
    Flash-attention 2.6+ caps inside the kernel (`softcap=`) and saves nothing more."""
    if spec.attention_softcap is None or settings.attention != "eager" or settings.compile:
        return 0.0
    return float(compute_bytes(settings.precision))


def attention_inputs_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """q, k and v as the attention core keeps them: 3 c t q_dim, since HF repeats grouped
    k/v to every head (repeat_kv) before the matmuls or SDPA. Two cases keep more (traced):
    - selective checkpointing keeps the core's inputs themselves; with RoPE under autocast and
      fp32 hidden states (full training), q and k are fp32 there (the rotation multiplies by
      cos/sin in the hidden states' dtype): +2 (4 - c) t q_dim;
    - a fused qkv projection with RoPE and no k/v repeat: v stays a view of the fused
      projection output wherever it is kept as it is (by SDPA, or by the checkpointed core),
      which keeps all of that output alive: + c t (q_dim + kv_dim)."""
    c = compute_bytes(settings.precision)
    saved = 3 * c * tokens * spec.q_dim
    rope = spec.position_embedding == "rope"
    # cos/sin come in the hidden states' dtype: fp32 ones leave q and k fp32 for autocast to cast
    if rope and settings.checkpointing == "selective" and autocast_casts_hidden_states(settings):
        saved += 2 * (4 - c) * tokens * spec.q_dim
    v_kept_as_view = settings.attention == "fused" or settings.checkpointing == "selective"
    if rope and fuses_qkv(spec, settings) and spec.n_kv_heads == spec.n_heads and v_kept_as_view:
        saved += c * tokens * (spec.q_dim + spec.kv_dim)
    return saved


def qk_norm_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What q and k RMSNorms save (Qwen3 and Gemma 3 per head, transformers Qwen3Attention:
    `self.q_norm(self.q_proj(x).view(hidden_shape))`; OLMo 2 over the whole projection,
    Olmo2Attention). The norm reads the projection's output in the compute dtype and, written as
    HF writes it, saves its fp32 upcast (4 bytes per element) and the fp32 rstd per normalised row
    (heads or kv-heads rows per token, or one), plus the normalised copy in the input dtype when
    the norm's weight trains; Liger's or torch.compile's fused norm saves the input in its own dtype
    and the rstd (norm_saved_bytes). RoPE then multiplies by cos and sin, which it saves instead of
    q and k."""
    if spec.qk_norm == "none":
        return 0.0
    c = compute_bytes(settings.precision)
    width = spec.q_dim + spec.kv_dim
    rows = spec.n_heads + spec.n_kv_heads if spec.qk_norm == "head" else 2
    if settings.liger or settings.compile:
        return tokens * (c * width + 4 * rows)
    normalised = rmsnorm_weight_operand_bytes(spec, c) if settings.method == "full" else 0
    return tokens * ((4 + normalised) * width + 4 * rows)


def recomputed_core_input_copies_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """Copies of q, k and v that eager attention's matmuls make and save: autocast's half
    casts of fp32 inputs, and bmm's contiguous copies of head views (torch.matmul reshapes a
    transposed (b, heads, s, d) view). Without checkpointing these copies are the q, k, v
    counted in attention_inputs_saved_bytes; under selective checkpointing the core is
    rebuilt in backward and makes them again, next to the kept inputs. RoPE makes q and k
    fresh contiguous tensors and repeat_kv makes k and v contiguous."""
    c = compute_bytes(settings.precision)
    rope = spec.position_embedding == "rope"
    repeated = spec.n_kv_heads != spec.n_heads
    # RoPE with fp32 cos/sin (hidden states fp32) leaves q and k fp32 for autocast to cast
    q_k_copies = 2 if (autocast_casts_hidden_states(settings) or not rope) else 0
    v_copies = 0 if repeated else 1
    return (q_k_copies + v_copies) * c * tokens * spec.q_dim


def dropout_mask_bytes(spec: ModelSpec, tokens: int) -> float:
    """A hidden-size dropout saves its 1-byte bool mask (none without dropout)."""
    return tokens * spec.hidden_size if spec.dropout > 0 else 0.0


def attention_output_width(spec: ModelSpec) -> int:
    """Width of the attention output, o's input: heads x the value head dim (q_dim, except for
    MLA, whose value heads are v_head_dim wide: DeepSeek-V3 128 against 192 for q and k)."""
    return spec.n_heads * spec.value_head_dim


def mla_attention_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What multi-head latent attention saves for backward before its core and output projection
    (DeepseekV3Attention.forward, huggingface/transformers
    src/transformers/models/deepseek_v3/modeling_deepseek_v3.py @00b676f8), per token:
    - q_a (or q, without q_lora_rank) and kv_a_proj_with_mqa read the normed hidden state: its
      input, h wide (one copy per linear under autocast, as linear_inputs_saved_bytes);
    - q_a_layernorm and kv_a_layernorm, RMSNorms over q_lora_rank and kv_lora_rank
      (norm_saved_bytes at those widths), and q_b and kv_b's inputs, their outputs (c x rank);
    - the core's inputs: query_states and key_states are torch.cat of the nope and rotated rope
      parts, fresh heads x (nope + rope) tensors each. value_states is a split view of kv_b's
      output: fused attention (and a checkpointed core) keeps the view, so all of that output
      stays alive, heads x (nope + v_head_dim); eager attention's matmul saves a contiguous
      copy of the view instead, heads x v_head_dim (torch.matmul reshapes it), and kv_b's output
      is freed. RoPE's multiplies save only cos and sin (the rotated tensors' partners need no
      gradient).
    The rotated k_rot is one head broadcast to all (expand), made whole by the cat.
    The latent norms read q_a's and kv_a's outputs, in the compute dtype whatever the residual
    stream's (latent_norm_saved_bytes).
    LoRA targets: q_a/q_b count as "q", kv_a/kv_b as "k" or "v" (the names PEFT's presets use
    for the projections they replace). Traced: tests/test_trace_mla.py."""
    c = compute_bytes(settings.precision)
    trained = input_saving_linears(settings)
    q_trained = "q" in trained
    kv_trained = bool(trained.intersection(("k", "v")))
    saved = linear_inputs_saved_bytes(
        settings, tokens, spec.hidden_size, int(q_trained) + int(kv_trained), norm_output_fp32(spec, settings)
    )
    if spec.q_lora_rank:
        saved += latent_norm_saved_bytes(spec, settings, tokens, spec.q_lora_rank)
        saved += c * tokens * spec.q_lora_rank if q_trained else 0
    kv_rank = spec.kv_lora_rank or 0
    saved += latent_norm_saved_bytes(spec, settings, tokens, kv_rank, shares_output_with=spec.qk_rope_head_dim)
    saved += c * tokens * kv_rank if kv_trained else 0
    nope = spec.attention_head_dim - spec.qk_rope_head_dim
    value_copied = settings.attention == "eager" and settings.checkpointing != "selective"
    kept_of_kv_b = spec.value_head_dim if value_copied else nope + spec.value_head_dim
    saved += c * tokens * (2 * spec.q_dim + spec.n_heads * kept_of_kv_b)
    return saved


def latent_norm_saved_bytes(
    spec: ModelSpec, settings: TrainingSettings, tokens: int, width: int, shares_output_with: int = 0
) -> float:
    """What one of MLA's latent RMSNorms (q_a_layernorm, kv_a_layernorm) saves. Its input is a
    linear's output, so in the compute dtype even where the residual stream is fp32 (autocast
    full training): HF's RMSNorm then saves the fp32 upcast, the rstd and the normalised tensor in
    that half dtype. Where the norm keeps its input itself (an fp32 input, which the upcast
    leaves as it is, or a fused norm), the input is kv_a's output split from the shared rope key
    (`shares_output_with` channels), and the view keeps the whole output alive."""
    c = compute_bytes(settings.precision)
    weight_trainable = settings.method == "full"
    saved = norm_saved_bytes(spec, settings, tokens, weight_trainable, width=width, input_bytes=c)
    keeps_input_itself = c == 4 or settings.liger or settings.compile
    return saved + (c * tokens * shares_output_with if keeps_input_itself else 0.0)


def out_projection_input_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """The attention output projection's saved input.

    Fused attention on CUDA (flash / memory-efficient SDPA) returns its output in
    (b, s, heads, d) layout, so o's input, output.transpose(1, 2).contiguous(), is the same
    storage as the output SDPA saves: counted once, in attention_core. Eager attention
    makes o's input a separate copy, saved only if o trains. A float8 o saves its own one-byte
    cast of the input in either case (linear_inputs_saved_bytes)."""
    if "o" not in input_saving_linears(settings):
        return 0.0
    if settings.precision == "fp8":  # o's own float8 cast of its input, besides SDPA's saved output
        return FP8_BYTES * tokens * attention_output_width(spec)
    if settings.attention != "eager" and not fused_output_is_copied(spec, settings):
        return 0.0
    return compute_bytes(settings.precision) * tokens * attention_output_width(spec)


def fused_output_is_copied(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Whether o's input is a copy of the fused attention's output rather than a view of it.

    The flash kernel allocates its output with the memory layout of q (pytorch
    aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp, mha_fwd: empty_like of q's
    (b, s, heads, d) view; measure/trace/cuda_emulation.py). Full RoPE computes q element-wise from
    a head view of the projection, so q, the output and o's input share the (b, s, heads, d)
    layout. Partial rotary (GPT-NeoX's rotary_pct, Phi-2's partial_rotary_factor) rebuilds q with
    torch.cat of the turned and the passed channels, a (b, heads, s, d)-contiguous tensor, so
    HF's transpose(1, 2) before o copies (traced: tests/test_trace_parallel_residual.py). The
    memory-efficient kernel, which fp32 takes, always writes (b, s, heads, d). Selective
    checkpointing recomputes the core, and torchtitan's per-op policy the copy, so the output and
    its copy are not both kept."""
    partial_rotary = spec.position_embedding == "rope" and spec.rotary_fraction < 1 and not spec.is_mla
    core_output_kept = settings.checkpointing not in ("selective", "op-selective")
    return partial_rotary and compute_bytes(settings.precision) < 4 and core_output_kept


def gated_activation_saved_tensors(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Hidden-width tensors a gated MLP's activation saves, down's input aside.
    SwiGLU and GeGLU: gate, act(gate) and up (the product's operands). Liger's fused SwiGLU saves
    only gate and up (Liger-Kernel src/liger_kernel/ops/swiglu.py @00eba634), and so does
    torch.compile's partitioner, which recomputes the pointwise ops.
    gpt-oss's clamped SwiGLU (transformers models/gpt_oss/modeling_gpt_oss.py @6edf5b31,
    GptOssExperts.forward: gate.clamp(max=7), up.clamp(-7, 7), glu = gate * sigmoid(1.702 gate),
    (up + 1) * glu) saves six: the gate and up inputs of the clamps, sigmoid's output, the clamped
    gate, up + 1 and glu (measured with autograd's saved tensors; compile recomputes all but gate
    and up)."""
    if spec.activation == "clamped-swiglu":
        return 2 if settings.compile else 6
    fused = settings.liger or settings.compile
    return 2 if fused and spec.activation == "swiglu" else 3


def runs_written_out_gelu(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """The model code's "gelu_new" runs op by op: transformers' NewGELUActivation, not under
    torch.compile (whose partitioner recomputes pointwise ops from the saved input) nor in
    litgpt's model code (qkv_projection "fused"), which calls torch's one-kernel tanh GELU
    (lit_gpt/model.py @8641822, gelu_approximate="tanh")."""
    return spec.gelu_written_out and not settings.compile and settings.qkv_projection != "fused"


def mlp_activation_saved_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes the MLP's activation keeps for backward per hidden-width element, down's (fc2's)
    input aside: one input for a one-kernel GELU, gated_activation_saved_tensors for a gated MLP.

    transformers' "gelu_new" (NewGELUActivation, src/transformers/activations.py: 0.5 * x * (1 +
    tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))))) keeps four tensors: pow's input, tanh's
    output and the last multiply's operands, 0.5 x and 1 + tanh. Under autocast pow runs in fp32
    (CUDA autocast's fp32 list), so its input is an fp32 cast and everything after it is fp32 but
    0.5 x: 4 + 4 + c + 4 bytes, with an fp32 output. A gated GELU (Flan-T5's
    T5DenseGatedActDense) adds the product's operands, act(gate) and up. Measured with autograd's
    saved tensors (tests/test_trace_gelu_new.py)."""
    c = compute_bytes(settings.precision)
    if spec.activation == "relu":
        return 0  # ReLU's backward reads its output, fc2's input, counted with it
    if not runs_written_out_gelu(spec, settings):
        return (gated_activation_saved_tensors(spec, settings) if spec.is_gated_mlp else 1) * c
    autocast = is_autocast(settings.precision)
    gelu = 12 + c if autocast else 4 * c
    if not spec.is_gated_mlp:
        return gelu
    return gelu + (4 if autocast else c) + c


def mlp_hidden_gradient_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per hidden-width element of the gradients alive at the worst moment of the MLP's
    backward: one hidden gradient (two for a gated MLP, act(gate)'s and up's), in the compute
    dtype. The written-out "gelu_new" backward holds one more in the compute dtype (traced in
    bf16 and fp32), and under autocast, where its ops ran in fp32, two fp32 ones (traced: 7.5 to
    9.5 bytes per element with and without checkpointing; counted as 8)."""
    c = compute_bytes(settings.precision)
    gradients = (2 if spec.is_gated_mlp else 1) * c
    if runs_written_out_gelu(spec, settings):
        gradients += 2 * 4 if is_autocast(settings.precision) else c
    return gradients


def routed_output_weighting_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What weighting and summing the experts' outputs saves, per routed (token, expert) pair.

    The HF MoE loop (transformers MixtralSparseMoeBlock; Qwen2/3-MoE, DeepseekV3MoE.moe, Phimoe
    and GptOssExperts alike) computes `expert(x) * routing_weights[...]` and adds it into the
    output with `index_add_`, which saves its source, the weighted output in the hidden state's
    dtype (r bytes per element), for backward (PyTorch tools/autograd/derivatives.yaml, index_add:
    source's gradient is `grad.index_select(dim, index).expand_as(source)`; measured:
    IndexAddBackward0._saved_source). The multiply saves the expert's output (compute dtype) because
    the routing weights need a gradient: the router trains in full training, and under LoRA its
    frozen weights still pass the gradient of the layer's input, which the adapters before it make
    require grad. Traced: tests/test_trace_moe.py."""
    per_element = residual_bytes(settings) + compute_bytes(settings.precision)
    return spec.experts_per_token * per_element * tokens * spec.hidden_size


def router_bookkeeping_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What top-k routing saves besides the experts' inputs and outputs, per token (HF
    MixtralSparseMoeBlock.forward, huggingface/transformers src/transformers/models/mixtral/
    modeling_mixtral.py; Qwen2/3-MoE alike): the fp32 softmax over the E router logits (4E),
    top-k's int64 indices (8k), the renormalisation's division, which keeps the k fp32 weights and
    their sum (4k + 4), and per routed pair the two int64 indices torch.where gives each expert
    (token, choice: 16k), which its gathers keep, and the gathered routing weight in the block
    input's dtype, which the weighting multiply keeps. Traced: tests/test_trace_moe.py (whose
    router is Mixtral's). Other routers are counted the same way, an approximation: DeepSeek-V2/V3's
    gate computes its logits in fp32 (DeepseekV3TopkRouter: F.linear(hidden.float(),
    weight.float())), which also keeps an fp32 copy of the block's input (4h per token, 28,672 B
    on DeepSeek-V3) and of the router weight, not counted here; gpt-oss softmaxes the top-k
    logits instead of all of them."""
    weight_bytes_per_pair = 4 if norm_output_fp32(spec, settings) else compute_bytes(settings.precision)
    k = spec.experts_per_token
    return tokens * (4 * spec.n_experts + (8 + 4 + 16 + weight_bytes_per_pair) * k + 4)


# Mixtures of experts whose router runs in fp32 whatever the weights' dtype: transformers'
# DeepseekV3TopkRouter.forward (models/deepseek_v3/modeling_deepseek_v3.py @00b676f8) and
# DeepseekV2Moe.forward (models/deepseek_v2/modeling_deepseek_v2.py @0233e509) both call
# F.linear(hidden_states.type(torch.float32), weight.type(torch.float32)).
FP32_ROUTER_FAMILIES = ("deepseek_v2", "deepseek_v3")


def fp32_router_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, frozen_router: bool) -> float:
    """What an fp32 router (FP32_ROUTER_FAMILIES) keeps beyond a half one, in half precision
    without autocast: the linear keeps the fp32 copy of the block's input when its weight trains
    (4h per token) and the fp32 copy of its half weight when its input needs a gradient (4 E h
    per layer, under LoRA too). Under autocast the linear runs in half anyway (F.linear is on its
    lower-precision list), and in fp32 the copies are the tensors themselves."""
    if spec.family not in FP32_ROUTER_FAMILIES or is_autocast(settings.precision):
        return 0.0
    if compute_bytes(settings.precision) == 4:
        return 0.0
    input_copy = 0.0 if frozen_router else 4.0 * tokens * spec.hidden_size
    return input_copy + 4.0 * spec.n_experts * spec.hidden_size


def lora_intermediate_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """Per adapted linear, B saves its input, the r-wide output of A: tokens x r in the
    compute dtype (Hu et al. 2021: h = W0 x + B A x); an expert's adapter sees only its
    routed tokens, a MoE's dense layer (`dense=True`) has its MLP's adapters instead.
    lora_dropout = 0 (PEFT's default) saves no mask."""
    c, rank = compute_bytes(settings.precision), settings.lora_rank
    routed = spec.experts_per_token if spec.n_experts > 1 else 1
    linears = adapted_linears(spec, settings.lora_targets, dense=dense)
    return sum((routed if linear.copies > 1 else 1) * c * tokens * rank for linear in linears)


def fuses_qkv(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """One linear for q, k and v: the model's own (GPT-2, GPT-NeoX, Phi-3) or the stack's
    (qkv_projection "fused": litgpt builds every model with one, lit_gpt/model.py @8641822
    CausalSelfAttention.attn)."""
    return spec.fused_qkv or settings.qkv_projection == "fused"


def lora_zero_pad_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """litgpt's adapter on a fused q/k/v linear that adapts only some of q, k and v: zero_pad
    scatters the adapters' output into a zero tensor of the full q/k/v width with index_copy,
    whose derivative keeps that output (its `source`) for backward (pytorch tools/autograd/
    derivatives.yaml: index_copy's source gradient is `grad.index_select(dim, index)
    .expand_as(source)`; lit_gpt/lora.py @8641822 LoRAQKVLinear.zero_pad). Traced on lit-gpt's
    code: Llama-2-7B with q and v adapted saves tokens x (4096 + 4096) in bf16. A model whose own
    code fuses q/k/v is adapted whole by PEFT: no padding."""
    if settings.qkv_projection != "fused" or spec.is_mla:
        return 0.0
    targets = LORA_TARGET_MODULES[settings.lora_targets]
    widths = {"q": spec.q_dim, "k": spec.kv_dim, "v": spec.kv_dim}
    adapted = [width for name, width in widths.items() if name in targets]
    if not adapted or len(adapted) == len(widths):
        return 0.0
    return compute_bytes(settings.precision) * tokens * sum(adapted)


def lora_dropout_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int, dense: bool = False) -> float:
    """What LoRA dropout (p > 0) saves beyond the adapters' inputs counted elsewhere.

    Each adapter reads dropout(x) (Hu et al. 2021 via PEFT peft/tuners/lora/layer.py:
    `lora_A(lora_dropout(x))`, one dropout per adapted linear; lit_gpt/lora.py @8641822: one per
    LoRA module, so one for a fused q/k/v). A dropout saves its 1-byte mask, and A saves the
    dropout's output in place of x. So per dropout: mask + output (1 + c bytes per element),
    less the one copy of x the engine counts for the adapters when nothing else keeps x (no
    bitsandbytes base saving it; o's input under fused attention is SDPA's saved output and was
    not counted). Under autocast with an fp32 input (a norm's fp32 output: norm_output_fp32) A saves
    its own half cast of the fp32 dropout output (already counted per adapter), so only the masks
    are added; o's and down's inputs are half under autocast, as are the hidden states under LoRA.
    In a mixture of experts' sparse layer each expert's adapters drop out their own gathered
    tokens, experts_per_token x tokens rows in all, and a shared expert's adapters drop out the
    block's input (all tokens) and their own hidden state. Traced (tests/test_trace_lora_autocast.py)."""
    if not settings.lora_dropout or spec.is_mla:
        return 0.0
    gated, fused_in, fused_qkv = spec.is_gated_mlp, spec.fused_gate_up, fuses_qkv(spec, settings)
    normed_fp32 = autocast_casts_norm_output(spec, settings)
    sparse = spec.n_experts > 1 and not dense
    rows = spec.experts_per_token * tokens if sparse else tokens  # token rows each MLP linear reads
    mlp_in = ("gate_up",) if fused_in else (("gate", "up") if gated else ("fc1",))
    mlp_out = ("down",) if gated else ("fc2",)
    sites = [  # (linears reading one tensor, rows, width, one dropout for all, counted copy of x, fp32 input)
        (("q", "k", "v", "qkv"), tokens, spec.hidden_size, fused_qkv, True, normed_fp32),
        (("o",), tokens, attention_output_width(spec), True, settings.attention == "eager", False),
        (mlp_in, rows, spec.hidden_size, fused_in, True, normed_fp32),
        # ReLU keeps its output, down's input, for itself: the adapters' dropout does not free it
        (mlp_out, rows, layer_ffn_width(spec, dense), True, spec.activation != "relu", False),
    ]
    if sparse and spec.shared_expert_ffn_size:
        sites += [
            (mlp_in, tokens, spec.hidden_size, fused_in, True, normed_fp32),
            (mlp_out, tokens, spec.shared_expert_ffn_size, True, True, False),
        ]
    return lora_dropout_sites_bytes(settings, sites, fused_qkv)


def lora_dropout_sites_bytes(settings: TrainingSettings, sites: list[tuple], fused_qkv: bool = False) -> float:
    """LoRA dropout's bytes over `sites`: (linear names reading one tensor, rows, width, one
    dropout for all of them, whether the engine counted a copy of that tensor for the adapters,
    whether the tensor is fp32 under autocast). See lora_dropout_bytes."""
    c = compute_bytes(settings.precision)
    targets = LORA_TARGET_MODULES[settings.lora_targets]
    base_keeps_input = input_saving_linears(settings) != trained_linear_names(settings)
    saved = 0.0
    for names, site_rows, width, one_dropout, counted, cast_input in sites:
        adapted = [name for name in names if name in targets and (name != "qkv" or fused_qkv)]
        if not adapted:
            continue
        dropouts = 1 if one_dropout else len(adapted)
        if cast_input:
            saved += dropouts * site_rows * width
            continue
        saved += dropouts * (1 + c) * site_rows * width
        if counted and not base_keeps_input:
            saved -= c * site_rows * width
    return saved


def shared_expert_inputs_saved_bytes(
    spec: ModelSpec, settings: TrainingSettings, tokens: int, trained: frozenset[str], in_names: tuple[str, ...]
) -> float:
    """What the shared expert's input linears (and Qwen2-MoE's shared_expert_gate) save of the
    MoE block's input x beyond what the router keeps. Under autocast with an fp32 x each trained
    one keeps its own half cast, the gate's included when it trains (full training). Otherwise
    they read x itself: the trained router already keeps it, but a frozen one (LoRA) does not,
    and then the shared expert's adapters keep it, once. Traced (tests/test_trace_moe.py)."""
    shared_names = trained.intersection("shared_" + name for name in in_names)
    c, h = compute_bytes(settings.precision), spec.hidden_size
    if autocast_casts_norm_output(spec, settings):
        gate_trains = spec.shared_expert_gate and settings.method == "full"
        return (len(shared_names) + int(gate_trains)) * c * tokens * h
    if is_adapter_method(settings.method) and shared_names:
        return c * tokens * h
    return 0.0


def layer_activation_terms(spec: ModelSpec, settings: TrainingSettings, dense: bool = False) -> dict[str, float]:
    """Bytes one transformer layer saves for backward, by part (no checkpointing), on one
    tensor-parallel rank; for a mixture of experts a sparse layer, or with `dense=True` one of
    its dense layers (a single MLP of dense_ffn_hidden_size that every token runs).

    Multi-head latent attention saves what mla_attention_saved_bytes lists. Shared experts
    (DeepseekV3MoE.shared_experts, Qwen2-MoE's shared_expert) run on every token: their
    hidden tensors are tokens x shared width, and what their input linears keep of the block's
    input is shared_expert_inputs_saved_bytes.

    With LoRA the saved tensors change as follows: a linear without an adapter saves no
    input (the q/k/v, gate/up or down inputs drop out when untargeted, o's only under eager
    attention); the activation functions and multiplies still save theirs; the frozen norm
    weights need no saved normalised copy; each adapter adds its r-wide intermediate
    ('lora_adapters'). Checked against the tensors torch saves for one Llama layer. Under
    QLoRA with bitsandbytes every quantised linear saves its input (input_saving_linears).
    With tensor parallelism and sequence parallelism every term is divided by t
    (Korthikanti et al. 2022, Sec. 4.2.2: sbh(34/t + 5as/(ht)))."""
    b, s = settings.micro_batch, settings.seq_len
    tokens = b * s
    h = spec.hidden_size
    moe = spec.n_experts > 1 and not dense
    f = layer_ffn_width(spec, dense)
    c = compute_bytes(settings.precision)
    mask = dropout_mask_bytes(spec, tokens)
    trained = input_saving_linears(settings)

    terms: dict[str, float] = {}
    norm = norm_saved_bytes(spec, settings, tokens, weight_trainable=settings.method == "full")
    terms["norms"] = spec.norms_per_layer * norm - parallel_residual_shared_bytes(spec, settings, tokens)
    out_projection_input = out_projection_input_bytes(spec, settings, tokens)
    if spec.is_mla:
        terms["attention_projections"] = mla_attention_saved_bytes(spec, settings, tokens) + out_projection_input + mask
    else:
        qkv_names = ("qkv",) if fuses_qkv(spec, settings) else ("q", "k", "v")
        qkv_inputs = linear_inputs_saved_bytes(
            settings, tokens, h, len(trained.intersection(qkv_names)), norm_output_fp32(spec, settings)
        )
        qkv = attention_inputs_saved_bytes(spec, settings, tokens) + qk_norm_saved_bytes(spec, settings, tokens)
        terms["attention_projections"] = qkv_inputs + qkv + out_projection_input + mask
    if settings.attention == "fused":
        # flash/SDPA saves its output (heads x value head dim) and the fp32 log-sum-exp per head and token.
        terms["attention_core"] = c * tokens * attention_output_width(spec) + log_sum_exp_bytes(spec, tokens)
    else:
        terms["attention_core"] = attention_score_bytes(spec, settings) * b * spec.n_heads * s * s

    routed = spec.experts_per_token if moe else 1
    gated = spec.is_gated_mlp
    in_names = ("fc1",) if not gated else (("gate_up",) if spec.fused_gate_up else ("gate", "up"))
    n_in = len(trained.intersection(in_names))
    # a dense MLP's input linears keep the normed input, as a MoE's trained router does; a frozen
    # router (LoRA) keeps none, and nothing else reads the block's input but the experts' gathers
    frozen_router = moe and is_adapter_method(settings.method) and trained == trained_linear_names(settings)
    input_fp32 = norm_output_fp32(spec, settings)
    if moe:
        # the router reads the block's input; each expert gathers its routed tokens (HF Mixtral
        # sparse MoE block), and its input linears save that copy, or under autocast each its own
        # half cast of it
        mlp_inputs = linear_inputs_saved_bytes(settings, tokens, h, 0 if frozen_router else 1, input_fp32)
        mlp_inputs += linear_inputs_saved_bytes(settings, routed * tokens, h, n_in, input_fp32)
        mlp_inputs += routed_output_weighting_bytes(spec, settings, tokens)
        mlp_inputs += router_bookkeeping_bytes(spec, settings, tokens)
        mlp_inputs += fp32_router_bytes(spec, settings, tokens, frozen_router)
    else:
        mlp_inputs = linear_inputs_saved_bytes(settings, tokens, h, n_in, input_fp32)
    # What the activation saves (mlp_activation_saved_bytes) and its output, the down (fc2)
    # projection's input, which only a trained output linear saves.
    output_input_saved = ("down" if gated else "fc2") in trained
    # ReLU keeps its output (threshold_backward reads the result) whether or not fc2 trains
    output_kept = output_input_saved or spec.activation == "relu"
    per_element = mlp_activation_saved_bytes(spec, settings) + (c if output_kept else 0)
    if settings.precision == "fp8" and output_input_saved:
        # the down (fc2) projection keeps the float8 cast of its input, not the input itself
        per_element -= c - FP8_BYTES
    # T5's feed-forward also drops out its hidden activation (T5DenseActDense, T5DenseGatedActDense)
    inner_mask = tokens * f if spec.position_embedding == "relative" and spec.dropout > 0 else 0
    terms["mlp"] = mlp_inputs + routed * per_element * tokens * f + mask + inner_mask
    if moe and spec.shared_expert_ffn_size:
        shared_inputs = shared_expert_inputs_saved_bytes(spec, settings, tokens, trained, in_names)
        shared_hidden = per_element * tokens * spec.shared_expert_ffn_size
        # Qwen2-MoE scales the shared expert by sigmoid(shared_expert_gate(x)) (transformers
        # Qwen2MoeSparseMoeBlock): the multiply keeps the shared output and the sigmoid (traced)
        shared_gate = c * tokens * (spec.hidden_size + 1) if spec.shared_expert_gate else 0.0
        terms["shared_experts"] = shared_inputs + shared_hidden + shared_gate
    if is_adapter_method(settings.method):
        terms["lora_adapters"] = (
            lora_intermediate_bytes(spec, settings, tokens, dense)
            + lora_zero_pad_bytes(spec, settings, tokens)
            + lora_dropout_bytes(spec, settings, tokens, dense)
        )
    return {name: _per_rank(value, settings) for name, value in terms.items()}


def recomputes_attention_core(settings: TrainingSettings) -> bool:
    """Selective checkpointing rebuilds the eager attention core in backward (Korthikanti
    Sec. 5); fused attention saves no score matrix, so there is nothing to rebuild."""
    return settings.checkpointing == "selective" and settings.attention == "eager"


def log_sum_exp_bytes(spec: ModelSpec, tokens: int) -> float:
    """The fp32 log-sum-exp a fused attention kernel saves per head and token for its backward
    (FlashAttention-2, Dao 2023, arXiv 2307.08691, Algorithm 1: L = m + log(l))."""
    return 4 * tokens * spec.n_heads


def core_bytes_not_kept(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """What selective checkpointing does not keep of the attention core until backward: eager,
    the whole core (its scores), rebuilt in backward; fused, its log-sum-exp, since the rebuilt
    kernel makes it again while the core's output stays, the output projection's saved input
    (traced: -16 B per token and layer on a 4-head layer, tests/test_trace_mla.py)."""
    if settings.checkpointing != "selective":
        return 0.0
    if settings.attention == "eager":
        return terms["attention_core"]
    return _per_rank(log_sum_exp_bytes(spec, settings.micro_batch * settings.seq_len), settings)


def kept_per_layer_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """What each layer keeps from its forward until its backward.

    Full checkpointing keeps only each layer's input (Chen et al. 2016, arXiv
    1604.06174) and rebuilds the layer in backward. Selective checkpointing keeps all
    but the attention core, which it recomputes (Korthikanti Sec. 5).
    """
    full_layer = sum(terms.values())
    tokens = settings.micro_batch * settings.seq_len
    layer_input = _per_rank(residual_bytes(settings) * tokens * spec.hidden_size, settings)
    if settings.checkpointing == "full" and settings.checkpoint_unit == "submodule":
        return _per_rank(submodule_checkpoint_inputs_bytes(spec, settings, tokens), settings)
    if settings.checkpointing == "full":
        return layer_input
    if settings.checkpointing == "op-selective":
        return layer_input + _per_rank(op_selective_saved_bytes(spec, settings, tokens), settings)
    return full_layer - core_bytes_not_kept(terms, spec, settings)


def submodule_checkpoint_inputs_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What a layer keeps when full checkpointing wraps each of its submodules on its own
    (NVIDIA-NeMo/Automodel nemo_automodel/components/distributed/parallelizer.py @a6f64cb2,
    DefaultParallelizationStrategy: checkpoint_wrapper on mlp, self_attn, input_layernorm and
    post_attention_layernorm): each checkpoint keeps its input, so a pre-norm layer keeps the
    residual stream before each norm and each norm's output (the attention's and the MLP's
    input): norms + 2 hidden-sized tensors, the residual stream in its dtype and the norms' outputs
    in theirs (fp32 after a LayerNorm under autocast: norm_output_fp32), against one for a
    checkpointed layer."""
    r = residual_bytes(settings)
    normed = 4 if norm_output_fp32(spec, settings) else r
    return (spec.norms_per_layer * r + 2 * normed) * tokens * spec.hidden_size


def qlora_matmul_transient_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The largest NF4 weight dequantised for its matmul, with its output (finetune.py)."""
    return qlora_dequantised_weight_bytes(
        spec,
        compute_bytes(settings.precision),
        settings.micro_batch * settings.seq_len,
        settings.tensor_parallel,
        settings.quantised_linears or "layers",
        dequantised_bytes_per_element(settings.framework, settings.precision),
    )


def submodule_backward_peak_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """The worst moment of a layer's backward when each submodule is checkpointed on its own:
    only one submodule is rebuilt at a time, so the larger of the MLP (its saved tensors and
    the gradients of its hidden activations: two for a gated MLP) and the attention (its saved
    tensors, the gradients of its output in head layout and of v, and of the residual stream).
    QLoRA adds the bf16 copy of one dequantised weight and its output."""
    tokens = settings.micro_batch * settings.seq_len
    c, r = compute_bytes(settings.precision), residual_bytes(settings)
    width = max(spec.ffn_hidden_size, spec.shared_expert_ffn_size)
    hidden_gradients = mlp_hidden_gradient_bytes(spec, settings) * tokens * width
    mlp = terms["mlp"] + terms.get("shared_experts", 0.0) + _per_rank(hidden_gradients, settings)
    attention_gradients = 2 * c * tokens * spec.q_dim + r * tokens * spec.hidden_size
    core = terms["attention_core"]
    if settings.attention == "eager":
        # the score-sized tensors at the worst moment of the core's backward, its saved ones included
        scores = settings.micro_batch * spec.n_heads * settings.seq_len**2
        core = _per_rank(attention_backward_bytes_per_score(spec, settings) * scores, settings)
    attention = terms["attention_projections"] + core + _per_rank(attention_gradients, settings)
    peak = max(mlp, attention)
    if settings.method == "qlora":
        peak += qlora_matmul_transient_bytes(spec, settings)
    return peak


def layer_matmul_outputs(spec: ModelSpec) -> list[int]:
    """Widths of one layer's aten.mm outputs per token, in the order its forward runs them:
    q, k, v (or the fused qkv), the output projection, then gate and up (or the fused gate-up,
    or fc1) and the down projection (torchtitan FeedForward: w2(silu(w1(x)) * w3(x))). A linear
    with a bias runs aten.addmm instead, which the per-op policy neither counts nor saves."""
    qkv_bias = spec.qkv_bias or spec.linear_bias
    attention = [spec.q_dim + 2 * spec.kv_dim] if spec.fused_qkv else [spec.q_dim, spec.kv_dim, spec.kv_dim]
    f = spec.ffn_hidden_size
    if not spec.is_gated_mlp:
        mlp = [f]
    elif spec.fused_gate_up:
        mlp = [2 * f]
    else:
        mlp = [f, f]
    widths = ([] if qkv_bias else attention) + ([] if spec.linear_bias else [spec.hidden_size, *mlp, spec.hidden_size])
    return widths


def op_selective_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What torchtitan's per-op selective checkpointing keeps of one layer, besides its input
    (pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py @004b3148,
    _apply_ac_to_transformer_block with selective_ac_option='op'): the outputs of the ops in
    _save_list, that is every mm except every second one (the count restarts in each
    layer's checkpoint: the 1st, 3rd, 5th... are saved) and the fused attention's output with
    its fp32 log-sum-exp; everything else is recomputed in backward. Eager attention's
    bmm and softmax are not on the list, so its core is recomputed."""
    c = compute_bytes(settings.precision)
    kept_widths = layer_matmul_outputs(spec)[::2]
    saved = sum(c * tokens * width for width in kept_widths)
    if settings.attention == "fused":
        saved += c * tokens * spec.q_dim + 4 * tokens * spec.n_heads
    return saved


def _per_rank(value: float, settings: TrainingSettings) -> float:
    """A sequence- or vocab-parallel tensor's share on one tensor-parallel rank."""
    return split(value, settings.tensor_parallel)


def embedding_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Embedding output dropout mask and embedding LayerNorm (BERT). A frozen embedding
    saves nothing: no tensor before it requires grad, so autograd records nothing."""
    if not embedding_trainable(settings):
        return 0.0
    tokens = settings.micro_batch * settings.seq_len
    saved = tokens * spec.hidden_size if spec.dropout > 0 else 0
    if spec.embedding_norm:
        saved += norm_saved_bytes(spec, settings, tokens)
    return _per_rank(saved, settings)


def rotary_table_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The rotary cos and sin tables, built once per forward and kept by every layer's rotations
    of q and k (q * cos needs cos for q's gradient): (1, seq, rotary_dim) each in the hidden
    states' dtype, batch 1 (transformers LlamaRotaryEmbedding on position_ids of batch 1, cast
    `to(x.dtype)`). Traced: 64 B per token on a tiny Llama of 16-wide heads in bf16."""
    if spec.position_embedding != "rope":
        return 0.0
    return 2.0 * settings.seq_len * spec.rotary_dim * residual_bytes(settings)


def first_norm_unrecorded_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What the first layer's input norm does not keep when nothing before it trains: with a
    frozen embedding (LoRA, QLoRA, or frozen first layers) the layer's input needs no gradient,
    and neither does the frozen norm weight, so autograd records nothing for the norm (the
    embedding's own rule, embedding_activation_bytes); the linears after it, whose adapters train,
    keep its output as every layer's do. Pre-norm layers only (a post-norm layer's norms read the
    residual sum, which the attention's adapters make require grad), and not under full or per-op
    checkpointing, which keep the layer's input instead. Traced: a tiny Llama under LoRA, 4h + 4
    bytes per token less (tests/test_trace_lora_autocast.py). Under LoRA dropout the q/k/v
    adapters' dropouts of that output record no 1-byte mask either, as it needs no gradient
    (bench/accuracy.py's Llama LoRA dropout rows were 0.11-0.14% high by exactly those masks)."""
    if embedding_trainable(settings) or not spec.final_norm:
        return 0.0
    if settings.checkpointing in ("full", "op-selective"):
        return 0.0
    tokens = settings.micro_batch * settings.seq_len
    masks = 0.0
    if is_adapter_method(settings.method) and settings.lora_dropout:
        adapted = [name for name in ("q", "k", "v") if is_adapted(name, settings.lora_targets)]
        dropouts = min(len(adapted), 1) if fuses_qkv(spec, settings) else len(adapted)
        masks = dropouts * tokens * spec.hidden_size
    return _per_rank(norm_saved_bytes(spec, settings, tokens, weight_trainable=False) + masks, settings)


def head_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Final norm and the LM head's saved input (classifier heads read one token); a
    frozen LM head saves no input."""
    tokens = settings.micro_batch * settings.seq_len
    saved = norm_saved_bytes(spec, settings, tokens, settings.method == "full") if spec.final_norm else 0.0
    if spec.head == "lm" and head_trainable(spec, settings):
        saved += linear_inputs_saved_bytes(settings, tokens, spec.hidden_size, 1, norm_output_fp32(spec, settings))
    return _per_rank(saved, settings)


def logits_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, peak at the loss gradient) for logits and cross-entropy.

    The LM head's logits (compute dtype) and the fp32 log-softmax that cross-entropy
    saves: b*s*V*(c+4) at the end of forward. HF Trainer's compute_loss keeps only the
    loss, so the compute-dtype logits are freed before backward; at the loss gradient
    the fp32 log-probabilities and two fp32 gradients (of the log-probabilities and of
    the upcast logits) are alive: b*s*V*12 (measured in the trace at
    _log_softmax_backward_data). Gemma 2's final soft-capping keeps its tanh output through
    both moments (logit_softcap_tanh_bytes). A classifier head's logits are negligible. Under tensor
    parallelism each rank holds its vocabulary slice (Megatron's vocab-parallel
    cross-entropy).
    """
    if spec.head != "lm":
        tokens = settings.micro_batch
        return 4.0 * tokens * spec.num_labels, 12.0 * tokens * spec.num_labels
    if settings.loss == "chunked":
        return chunked_loss_bytes(spec, settings)
    if settings.loss == "fused-linear":
        return fused_linear_loss_bytes(spec, settings)
    elements = settings.micro_batch * settings.seq_len * spec.vocab_size
    capped = logit_softcap_tanh_bytes(spec, settings)
    forward = (compute_bytes(settings.precision) + 4) * elements + capped
    return _per_rank(forward, settings), _per_rank(3 * 4 * elements + capped, settings)


def logit_softcap_tanh_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Gemma 2's final soft-capping of the whole logits, `logits / cap`, `tanh`, `* cap` before
    the loss (huggingface/transformers src/transformers/models/gemma2/modeling_gemma2.py @006e8693,
    Gemma2ForCausalLM.forward): tanh saves its output, b*s*V in the compute dtype, alive from the
    end of forward until backward reaches it after the loss gradient. Only the full loss makes
    whole logits; Liger's fused linear cross-entropy caps inside its kernel (`softcap`), and
    torchtune caps the final norm's output, h wide, not the logits (torchtune/models/gemma2/
    _component_builders.py @bd2a0fc7, Gemma2FinalNorm)."""
    if spec.head != "lm" or spec.logit_softcap is None or settings.loss != "full":
        return 0.0
    return float(compute_bytes(settings.precision) * settings.micro_batch * settings.seq_len * spec.vocab_size)


def kept_logits_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The compute-dtype logits, b*s*V*c, when the training loop keeps the model's output
    referenced while backward runs (NVIDIA-NeMo/Automodel nemo_automodel/recipes/llm/train_ft.py
    @a6f64cb2, _forward_backward_step: `out = model(**batch)` is still in scope at
    `(local_loss * self._get_dp_group_size()).backward()`): alive on top of the loss gradient
    and through the whole backward. Only the full loss makes whole logits; HF Trainer's
    compute_loss returns the loss alone, so there they are freed (logits_bytes)."""
    if settings.logits_in_backward != "kept" or spec.head != "lm" or settings.loss != "full":
        return 0.0
    elements = settings.micro_batch * settings.seq_len * spec.vocab_size
    return _per_rank(compute_bytes(settings.precision) * elements, settings)


def chunked_loss_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, loss backward) for a cross-entropy computed chunk by chunk
    (pytorch/torchtune torchtune/modules/loss/ce_chunked_output_loss.py @ce5433b0,
    CEWithChunkedOutputLoss: the output projection returns n chunks of logits, each is
    upcast with .float() and goes through cross_entropy on its own; litgpt's
    chunked_cross_entropy does the same per 128 tokens).
    End of forward: the logits in the compute dtype and every chunk's fp32 log-softmax, which
    cross_entropy saves: (c + 4) x E, E = b*s*V, as for the full loss, plus, while the last
    chunk's log-softmax runs, that chunk's fp32 upcast, 4 E / n (traced: the forward's peak,
    bench/accuracy.py). The recipe then deletes
    the logits (`del logits`), and backward runs chunk by chunk: the fp32 log-probabilities
    not yet consumed (at most 4 E) plus one chunk's gradients, fp32 for the log-probabilities
    and for the upcast logits and the compute dtype for the logits: (8 + c) x E / n.
    The full loss holds 12 E at that moment.
    Compiled (torchtune's compile: True compiles compute_cross_entropy, torchtune/training/
    _compile.py @0078c31b compile_loss and
    CEWithChunkedOutputLoss.apply_compile_strategy), AOT autograd's partitioner saves each chunk's logits
    (compute dtype, the model's output itself) and the fp32 log-sum-exp per token instead of the
    fp32 log-probabilities: c E + 4 b s at the end of forward. Inductor fuses the backward's
    recomputed softmax and the one-hot subtraction into one kernel whose only output is the
    chunk's gradient in the compute dtype: c E + 4 b s + c E / n in backward."""
    elements = settings.micro_batch * settings.seq_len * spec.vocab_size
    tokens = settings.micro_batch * settings.seq_len
    c = compute_bytes(settings.precision)
    if settings.compile:
        forward = c * elements + 4 * tokens
        backward = c * elements + 4 * tokens + c * elements / settings.loss_chunks
        return _per_rank(forward, settings), _per_rank(backward, settings)
    forward = (c + 4) * elements + 4 * elements / settings.loss_chunks
    backward = 4 * elements + (8 + c) * elements / settings.loss_chunks
    return _per_rank(forward, settings), _per_rank(backward, settings)


def fused_linear_chunk_rows(tokens: int, spec: ModelSpec) -> int:
    """Tokens per chunk of Liger's fused linear cross-entropy: next_power_of_2(ceil(BT /
    ceil(V / H))), at most BT, so a chunk's logits are about BT x H elements
    (Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py @00eba634)."""
    inc_factor = -(-spec.vocab_size // spec.hidden_size)
    rows = -(-tokens // inc_factor)
    return min(1 << (rows - 1).bit_length(), tokens)


def fused_linear_loss_bytes(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(end of forward, loss backward) for a fused linear cross-entropy (Liger-Kernel
    src/liger_kernel/ops/fused_linear_cross_entropy.py @00eba634; Cut Cross-Entropy, Wijmans et
    al. 2024, arXiv 2411.09009, keeps even less). The logits are never whole: chunk by chunk
    the forward computes the logits (compute dtype), the loss and, at once, the gradient of the
    head's input (grad_input, b*s*h in the compute dtype, saved instead of the input itself,
    so counted with the head's activations) and of the head's weight (grad_weight, the
    weight's dtype, when the head trains). Left after forward: grad_weight, the fp32 loss per
    token, and the last chunk's logits buffer; in backward only the scaling of grad_input and
    grad_weight by the loss gradient, in place."""
    tokens = settings.micro_batch * settings.seq_len
    c = compute_bytes(settings.precision)
    chunk_logits = c * fused_linear_chunk_rows(tokens, spec) * spec.vocab_size
    grad_weight = (
        weight_bytes(settings.precision) * vocab_matrix_elements(spec) if head_trainable(spec, settings) else 0
    )
    loss_per_token = 4 * tokens
    forward = chunk_logits + grad_weight + loss_per_token + liger_weight_update_temporary_bytes(spec, settings)
    return _per_rank(forward, settings), _per_rank(grad_weight + loss_per_token, settings)


def liger_weight_update_temporary_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The V x H temporaries of Liger's per-chunk head-weight update (linkedin/Liger-Kernel
    src/liger_kernel/ops/fused_linear_cross_entropy.py @ead96b61, since v0.6.2 #830):
    `grad_weight += torch.mm(grad_logits.t(), input_chunk).float()` makes the product in the
    matmul's dtype and its fp32 copy; a fp32 grad_weight fed half logits (autocast over fp32
    weights) takes `torch.addmm(..., out_dtype=torch.float32, out=grad_weight)` on an Ampere or
    newer GPU instead, with no temporary. 0 when the head does not train. Measured in the trace
    (measure/trace/fused_loss.py)."""
    if not head_trainable(spec, settings):
        return 0.0
    c = compute_bytes(settings.precision)
    if weight_bytes(settings.precision) == 4 and c < 4:
        return 0.0
    return (c + (4 if c < 4 else 0)) * vocab_matrix_elements(spec)


def attention_backward_bytes_per_score(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes per element of the b x heads x s x s score matrix at the worst moment of an
    eager attention backward, the saved score-sized tensors included (torch autograd frees
    a node's saved tensors once it has run):
    - backward of probs @ V: every saved score-sized tensor (attention_score_bytes) plus the
      new gradient of the probabilities, in the compute dtype;
    - softmax backward (the dropout output and mask are gone by then): the softmax output,
      its gradient and the gradient of the scores, all in softmax's dtype
      (_softmax_backward_data), and soft-capping's tanh output (softcap_tanh_bytes), which its
      own backward reads next. Measured in the trace (bench/accuracy.py)."""
    softmax_out = softmax_output_bytes(spec, settings)
    value_matmul_moment = attention_score_bytes(spec, settings) + compute_bytes(settings.precision)
    # soft-capping's saved tanh output waits through the softmax backward for its own
    return max(value_matmul_moment, 3 * softmax_out + softcap_tanh_bytes(spec, settings))


def saved_after_attention_core_bytes(terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings) -> float:
    """What a layer saved after its attention core, all freed by the time backward reaches
    the core: o's input and the output dropout mask, the MLP, and the norms that follow
    the attention (pre-norm layers normalise once before attention, so all but one;
    post-norm layers like BERT, which have no final norm, all of them)."""
    tokens = settings.micro_batch * settings.seq_len
    norms_after = spec.norms_per_layer - (1 if spec.final_norm else 0)
    norm = terms["norms"] / spec.norms_per_layer if spec.norms_per_layer else 0.0
    after_core = out_projection_input_bytes(spec, settings, tokens) + dropout_mask_bytes(spec, tokens)
    return terms["mlp"] + terms.get("shared_experts", 0.0) + norms_after * norm + _per_rank(after_core, settings)


def layer_backward_peak_bytes(
    terms: dict[str, float], spec: ModelSpec, settings: TrainingSettings, dense: bool = False
) -> float:
    """Bytes of one layer alive at the worst moment of its backward, the larger of two
    moments (under full checkpointing the layer has been rebuilt by then):
    - the MLP backward: every tensor the layer saved (selective checkpointing rebuilds the
      attention core only later), plus the gradient of the MLP's hidden activation (gated
      MLPs: two, for the gate and the up projection);
    - the eager attention core's backward: only what was saved up to the core is left
      (saved_after_attention_core_bytes), plus the score-sized tensors
      (attention_backward_bytes_per_score), the gradients of the attention output (in head
      layout) and of v, and the gradient of the residual stream; selective checkpointing
      adds the copies of q, k and v its rebuilt core makes.
    QLoRA adds the bf16 copy of one dequantised linear weight and its output. The MLP's hidden
    width is a MoE dense layer's own (`dense=True`), or the wider of a routed and the shared
    expert (each runs its backward in turn)."""
    if settings.checkpointing == "full" and settings.checkpoint_unit == "submodule":
        return submodule_backward_peak_bytes(terms, spec, settings)
    b, s = settings.micro_batch, settings.seq_len
    tokens = b * s
    c, r = compute_bytes(settings.precision), residual_bytes(settings)
    full_layer = sum(terms.values())
    recomputed_core = recomputes_attention_core(settings)
    mlp_moment = full_layer - core_bytes_not_kept(terms, spec, settings)
    width = max(spec.ffn_hidden_size, spec.shared_expert_ffn_size)
    if dense and spec.n_experts > 1:
        width = layer_ffn_width(spec, dense)
    peak = mlp_moment + _per_rank(mlp_hidden_gradient_bytes(spec, settings) * tokens * width, settings)
    if settings.attention == "eager":
        up_to_core = full_layer - terms["attention_core"] - saved_after_attention_core_bytes(terms, spec, settings)
        scores = b * spec.n_heads * s * s
        temporaries = attention_backward_bytes_per_score(spec, settings) * scores
        temporaries += 2 * c * tokens * spec.q_dim + r * tokens * spec.hidden_size
        if recomputed_core:
            temporaries += recomputed_core_input_copies_bytes(spec, settings, tokens)
        peak = max(peak, up_to_core + _per_rank(temporaries, settings))
    if settings.method == "qlora":
        peak += qlora_matmul_transient_bytes(spec, settings)
    return peak


# --- Phases of the step ------------------------------------------------------------


ADAMW_STEP_NOTE = {
    "foreach": "torch's default on CUDA: _foreach_sqrt adds one state-sized tensor per parameter at the step.",
    "fused": "Updates in place, no step temporaries.",
    "for-loop": "One parameter at a time: two temporaries the size of the largest parameter.",
}


def _assumptions(spec: ModelSpec, settings: TrainingSettings, grads_persist: bool) -> list[str]:
    o = settings.overheads
    notes = [
        "Weights, gradients and optimizer states per ZeRO paper (arXiv 1910.02054): "
        f"ZeRO stage {settings.zero} over {settings.gpus} data-parallel GPU(s).",
        "Activations per Korthikanti et al. 2022 (arXiv 2205.05198), counted as PyTorch saves "
        "them: fp32 upcasts in norms/softmax, per-linear autocast casts, 1-byte dropout masks.",
        "Grouped k/v heads are repeated to all heads before attention (HF repeat_kv).",
        f"CUDA context {o.cuda_context_gib} GiB and cuBLAS workspace {o.cublas_workspace_gib} GiB "
        "(not seen by torch); replace with a calibrated figure for your host.",
        f"Caching allocator reserve: {o.allocator_reserve_fraction:.0%} of the allocated peak (reported range 5-15%).",
    ]
    if settings.loss == "full":
        notes.append("Cross-entropy in fp32: log-probabilities b*s*V*4 bytes plus two gradients of that size.")
    if settings.attention == "fused":
        notes.append("Fused attention (flash/SDPA) saves q, k, v, output and log-sum-exp, no score matrix.")
    if settings.total_gpus > 1:
        notes.append(f"NCCL buffers {o.nccl_gib} GiB per GPU.")
        if settings.zero == 0 and settings.gpus > 1:
            notes.append("DDP keeps gradient buckets equal to the gradients (gradient_as_bucket_view=False).")
    if grads_persist:
        notes.append("Gradients stay allocated through the forward pass (accumulation or set_to_none=False).")
    else:
        notes.append("Gradients are freed after each step (zero_grad(set_to_none=True), torch >= 2.0).")
    if settings.optimizer == "adamw":
        notes.append(f"AdamW implementation: {settings.optimizer_impl}. {ADAMW_STEP_NOTE[settings.optimizer_impl]}")
    if master_weight_bytes(settings.precision):
        notes.append(
            "The step converts the gradients to fp32 for the master update (+4 bytes per trainable parameter); "
            "DeepSpeed's FusedAdam and Megatron's fused Adam correspond to 'fused'."
        )
    if settings.precision == "fp8":
        notes.append(
            "FP8 (torchao Float8Linear, tensorwise dynamic scaling, as torchtitan converts every linear but the "
            "LM head): each linear saves its own e4m3 cast of its input (1 byte per element) and of its weight "
            "(1 byte per weight, shown as weight copies), the bf16 input itself is not kept."
        )
    if settings.checkpointing == "full" and settings.checkpoint_unit == "submodule":
        notes.append(
            "Full checkpointing per submodule (NeMo Automodel): each norm, the attention and the MLP keep their "
            "own input, and backward rebuilds one submodule at a time."
        )
    if settings.logits_in_backward == "kept" and settings.loss == "full":
        notes.append("The training loop keeps the model's output: the bf16 logits stay alive through backward.")
    if settings.sharding_impl == "fsdp2" and settings.zero == 3 and settings.gpus > 1:
        notes.append(
            "FSDP2: the root unit (embeddings, final norm, LM head) stays gathered from forward to the end of "
            "backward; the last unit's reduce-scatter input is alive while the next one runs backward."
        )
    notes.append(
        "Backward: the layer in backward holds the larger of its MLP-backward moment (all its saved tensors "
        "plus the hidden gradient) and, with eager attention, its attention-backward moment (score-sized "
        "gradients); gradients appear as backward reaches their layer (traced, bench/accuracy.py)."
    )
    return (
        notes
        + _softcap_notes(spec, settings)
        + _gelu_notes(spec, settings)
        + _t5_notes(spec, settings)
        + _method_notes(spec, settings)
        + _offload_notes(settings)
        + _parallel_notes(spec, settings)
    )


def _t5_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """How the encoder-decoder is counted (encoder_decoder_activation_bytes)."""
    if not extension(spec, "cross_attention_layers"):
        if settings.target_len:
            return [f"Target length ({settings.target_len}) ignored: {spec.name} has no separate decoder."]
        return []
    target = decoder_settings(spec, settings).seq_len
    lengths = (
        f"the encoder runs {settings.seq_len} input tokens, the decoder and LM head {target} target tokens"
        if settings.target_len
        else f"encoder and decoder each run {settings.seq_len} tokens (no target length given)"
    )
    return [
        f"T5: {lengths}; attention is eager (transformers' T5Attention adds the relative position bias to the "
        "scores and has no fused path), with its softmax in fp32; each decoder layer's cross-attention keeps a "
        "block like self-attention's, its k and v reading the encoder's output."
    ]


def _gelu_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """What transformers' written-out "gelu_new" keeps (mlp_activation_saved_bytes)."""
    if not runs_written_out_gelu(spec, settings):
        return []
    per_element = mlp_activation_saved_bytes(spec, settings)
    return [
        f"GELU as transformers' gelu_new, written out op by op: its ops keep {per_element:g} bytes per MLP hidden "
        "element (pow's input, tanh's output, 0.5x and 1 + tanh), where one GELU kernel keeps its input; "
        "torch.compile or a one-kernel GELU (gelu_pytorch_tanh) keeps one tensor."
    ]


def _softcap_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """What Gemma 2's soft-capping keeps, and transformers' advice to train it with eager attention
    (Gemma2ForCausalLM.forward warns otherwise, models/gemma2/modeling_gemma2.py @006e8693)."""
    notes = []
    if spec.attention_softcap is not None:
        if softcap_tanh_bytes(spec, settings):
            notes.append(
                f"Attention soft-capping ({spec.attention_softcap:g} x tanh(scores / {spec.attention_softcap:g})): "
                "tanh keeps its output, one more score matrix per layer in the compute dtype."
            )
        elif settings.attention == "fused":
            notes.append(
                "Attention soft-capping inside flash-attention (2.6+): nothing more kept. transformers "
                "recommends eager attention for training Gemma 2; choose eager to count its score matrices."
            )
    if spec.logit_softcap is not None and logit_softcap_tanh_bytes(spec, settings):
        notes.append(
            f"Logit soft-capping ({spec.logit_softcap:g} x tanh(logits / {spec.logit_softcap:g})): tanh keeps "
            "its output, b*s*V in the compute dtype, until backward reaches it."
        )
    return notes


def _method_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    notes = []
    if is_adapter_method(settings.method):
        notes += [
            f"LoRA (arXiv 2106.09685) rank {settings.lora_rank} on {LORA_TARGET_LABEL[settings.lora_targets]}: "
            "r x (in + out) trainable parameters per adapted linear; gradients, master copy and optimizer "
            "states for the adapters only.",
            "Frozen base weights in the half compute dtype (fp32 under fp32); adapters in the weights' dtype "
            "(fp32 under fp32/AMP as PEFT keeps them, half + fp32 master under *-mixed, bf16 under pure bf16). "
            "With the base half, the hidden states are half under autocast too: autocast casts none of them "
            "(after a LayerNorm, which CUDA autocast runs in fp32, each adapter keeps its own half cast).",
            "A linear without an adapter, the frozen norms and the frozen LM head save no input for backward; "
            "each adapter saves its r-wide intermediate; nothing before the first adapter is recorded.",
        ]
    if settings.method == "qlora":
        notes.append(
            f"QLoRA (arXiv 2305.14314): the layers' linear weights in NF4 with double quantisation, "
            f"{NF4_BITS_PER_WEIGHT:.3f} bits each; embeddings, norms and the LM head stay in the half dtype; "
            "one linear weight at a time is dequantised to bf16 during forward and backward."
        )
    if settings.frozen_layers:
        notes.append(
            f"The first {settings.frozen_layers} layers and the embeddings are frozen: no gradients or optimizer "
            "states, and no saved activations (nothing before them requires grad)."
        )
    if settings.optimizer in PAGED_OPTIMIZERS:
        notes.append(
            "Paged AdamW (bitsandbytes, QLoRA paper Sec. 3): states in CUDA unified memory, outside torch's "
            "caching allocator: reported as outside_allocator_gib (in the device peak, not in allocated or "
            "reserved); an upper bound, since pages move to the host under memory pressure."
        )
    return notes + _stack_notes(spec, settings)


def _stack_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """What the training stack's features change, one sentence each."""
    notes = []
    if settings.framework:
        notes.append(
            f"Framework {settings.framework}: unset settings take its defaults (loss {settings.loss}, "
            f"AdamW implementation {settings.optimizer_impl}); see calculators/frameworks.py."
        )
    if settings.loss == "chunked":
        notes.append(
            f"Chunked cross-entropy in {settings.loss_chunks} chunks (torchtune CEWithChunkedOutputLoss): fp32 "
            "log-probabilities of every chunk saved, but only one chunk's gradients at a time."
        )
    if settings.loss == "fused-linear" and spec.head == "lm":
        notes.append(
            "Fused linear cross-entropy (Liger / Cut Cross-Entropy): logits computed chunk by chunk "
            "(about b*s*h elements at a time), never whole; the head's input and weight gradients made in forward."
        )
    if settings.liger:
        notes.append(
            "Liger kernels: RMSNorm saves its input and fp32 rstd only; SwiGLU saves gate and up only; RoPE "
            "rotates in place (HF's rotation saves no q/k either)."
        )
    if settings.checkpointing == "op-selective":
        notes.append(
            "Per-op selective checkpointing (torchtitan 'op'): each layer keeps its input, every other matmul "
            "output (1st, 3rd, ...) and the fused attention output; the rest is recomputed in backward."
        )
    if settings.optimizer_in_backward:
        notes.append(
            "Optimizer in backward: each parameter steps in its post-accumulate-grad hook and its gradient is "
            "freed at once; no separate optimizer-step phase."
        )
    if settings.compile:
        notes.append(
            "torch.compile: norms save their input and rstd, SwiGLU its gate and up, eager attention its scores "
            "and row statistics, a chunked loss its logits and log-sum-exp (AOT autograd's min-cut partitioner "
            "recomputes pointwise ops); the layers are traced through the partitioner (measure/trace/"
            "compile_partition.py), the chunked loss is not."
        )
    if settings.load_whole_model:
        notes.append(
            "Loading: the whole model is moved to each GPU in its weight dtype before ZeRO-3 partitions it "
            "(DeepSpeed without zero.Init); where that exceeds the step, it is the peak."
        )
    if settings.method == "qlora":
        notes.append(
            "Loading (load_peak_gib): the base is quantised to NF4 tensor by tensor on the GPU; the peak is the "
            "finished weights plus the largest linear's staging copies (bitsandbytes 2, litgpt 4, torchao 5 bytes "
            "per element); where that exceeds the step, it is the peak."
        )
    if settings.qkv_projection == "fused" and not spec.fused_qkv:
        notes.append(
            "One fused q/k/v linear (litgpt's model code): v stays a view of its output, which keeps all of it; "
            "adapters on some of q, k, v are zero-padded to its width (index_copy keeps their output)."
        )
    if settings.sharding_impl == "fsdp1" and settings.method == "lora":
        notes.append(
            "FSDP1: each layer is one flat parameter, and with adapters in it the frozen base gets gradients too "
            "(PyTorch FSDP docs); FSDP2 and DeepSpeed ZeRO-3 keep per-parameter gradients."
        )
    if settings.lora_dropout and is_adapter_method(settings.method):
        notes.append(
            f"LoRA dropout {settings.lora_dropout:g}: each adapter's dropout saves a 1-byte mask and its own "
            "output, which the adapter keeps instead of the shared input."
        )
    if settings.method == "qlora" and settings.quantised_linears == "all":
        notes.append("Every nn.Linear in NF4, the LM head included (Lightning's BitsandbytesPrecision, litgpt).")
    if settings.activation_offload:
        notes.append(
            f"Activation offloading: saved tensors of all but {OFFLOAD_RESIDENT_LAYERS} layers in pinned host "
            "memory (host_memory_gib); the LM head's stay on the GPU."
        )
    return notes


def _offload_notes(settings: TrainingSettings) -> list[str]:
    notes = []
    if settings.offload_optimizer:
        notes.append(
            "ZeRO-Offload (arXiv 2101.06840): fp32 master, optimizer states and the step on the CPU; the GPU "
            f"keeps the weights and one gradient bucket of {REDUCE_BUCKET_ELEMENTS:.0e} elements "
            "(DeepSpeed reduce_bucket_size), capped at the gradients' size."
        )
    if settings.offload_parameters:
        notes.append(
            "ZeRO-Infinity parameter offload (arXiv 2104.07857): the parameter shards on the CPU; the GPU holds "
            "the layer in use and the prefetched one."
        )
    if settings.offload_optimizer or settings.offload_parameters:
        notes.append(
            "Host RAM per GPU: master copy, fp32 gradients, optimizer states, a pinned half-precision copy of "
            "the partition and a staging buffer (DeepSpeed cpu_offload), plus offloaded parameters."
        )
    return notes


def _parallel_notes(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    notes = []
    t, p = settings.tensor_parallel, settings.pipeline_parallel
    if t > 1:
        notes.append(
            f"Tensor parallel {t} (Megatron-LM, arXiv 1909.08053) with sequence parallelism (arXiv 2205.05198): "
            "matmul weights, vocab-parallel embedding and LM head, per-layer activations and the logits "
            f"divided by {t}; norms and biases replicated."
        )
    if p > 1:
        notes.append(
            f"Pipeline parallel {p}, 1F1B schedule (arXiv 2104.04473): {math.ceil(spec.n_layers / p)} layers per "
            f"stage; the first stage keeps {min(p, settings.grad_accum)} micro-batch(es) of activations in flight, "
            "the last holds the LM head, logits and loss; the larger of the two is reported."
        )
    if t > 1 or p > 1:
        notes.append(f"Total GPUs: {settings.gpus} data x {t} tensor x {p} pipeline = {settings.total_gpus}.")
    return notes


def check_supported(spec: ModelSpec, settings: TrainingSettings) -> None:
    """Raise ValueError for settings this model cannot take."""
    if settings.images_per_sample:
        image_tokens_per_image(spec, settings)  # raises when the model's count depends on the image
    if settings.frozen_layers > spec.n_layers:
        raise ValueError(f"frozen_layers ({settings.frozen_layers}) cannot exceed the model's {spec.n_layers} layers")
    if spec.n_heads % settings.tensor_parallel:
        raise ValueError(
            f"tensor parallel {settings.tensor_parallel} does not divide the {spec.n_heads} attention heads"
        )
    if settings.pipeline_parallel > spec.n_layers:
        raise ValueError(f"pipeline parallel {settings.pipeline_parallel} exceeds the model's {spec.n_layers} layers")
    if settings.precision == "fp8" and settings.checkpointing == "op-selective":
        raise ValueError(
            "fp8 with op-selective checkpointing is not modelled: torchtitan's policy saves aten.mm outputs, which "
            "float8 linears do not call (they call _scaled_mm), and the abs() of every scale's amax; use "
            "--checkpointing none, selective or full with --precision fp8"
        )
    if settings.precision == "fp8" and settings.method != "full":
        raise ValueError(
            "fp8 is modelled for full training (torchao Float8Linear on every linear but the head); with LoRA or "
            "QLoRA use --precision bf16"
        )


# torchtune's OffloadActivations (torchtune/training/_activation_offloading.py @e511d5a2,
# use_streams=True) moves each saved tensor to pinned host memory as forward goes on and,
# in backward, brings back the next layer's tensors while the current layer runs: two
# layers' saved tensors are on the GPU at once; the LM head is kept (NoOpManager).
OFFLOAD_RESIDENT_LAYERS = 2


def stage_phases(
    spec: ModelSpec,
    settings: TrainingSettings,
    layout: StageLayout,
    states: ModelStates,
    grads_persist: bool,
    tower_bytes: float = 0.0,
    cross_bytes: float = 0.0,
) -> tuple[list[PhaseMemory], dict[str, float], float]:
    """The phases of one step on one pipeline stage, the per-layer activation terms and the
    activation bytes offloaded to the host. What one micro-batch's images keep on this stage:
    `tower_bytes` in the image encoder (vision_tower_activation_bytes), alive until the backward
    is past the embeddings, like the embedding's own; `cross_bytes` in its cross-attention layers
    (cross_attention_activation_bytes), alive with the layers' own until their backward. A mixture
    of experts with dense first layers (DeepSeek-V3) saves each kind of layer's own activations;
    the last layer in backward is a sparse one, the first a dense one when the stage trains one."""
    terms = layer_activation_terms(spec, settings)

    def kept_and_backward(
        layer_terms: dict[str, float], dense: bool, run: TrainingSettings = settings
    ) -> tuple[float, float]:
        """(bytes a layer keeps until its backward, bytes its backward adds on top); `run`: the
        settings the layer runs with (an encoder-decoder's decoder: decoder_settings)."""
        kept = kept_per_layer_bytes(layer_terms, spec, run)
        # The layer in backward holds its peak (layer_backward_peak_bytes); under full
        # checkpointing its kept input stays alive on top, otherwise the peak includes it.
        in_backward = layer_backward_peak_bytes(layer_terms, spec, run, dense=dense)
        if run.checkpointing == "op-selective":
            # the rebuilt layer replaces what was kept of it; its checkpointed input stays on top
            tokens = run.micro_batch * run.seq_len
            in_backward -= _per_rank(op_selective_saved_bytes(spec, run, tokens), run)
        elif run.checkpointing != "full":
            in_backward -= kept
        return kept, in_backward

    saved_per_layer, layer_in_backward = kept_and_backward(terms, dense=False)
    _, dense_active = stage_dense_layer_counts(spec, settings, layout.stage)
    sparse_active = layout.active_layers - dense_active
    saved_dense, dense_in_backward = saved_per_layer, layer_in_backward
    if dense_active:
        saved_dense, dense_in_backward = kept_and_backward(layer_activation_terms(spec, settings, dense=True), True)
    if layout.active_layers == 0:
        saved_per_layer = layer_in_backward = saved_dense = dense_in_backward = 0.0
    saved_layers = sparse_active * saved_per_layer + dense_active * saved_dense
    # the last layer to run backward first is sparse unless the stage trains dense layers only
    last_in_backward = layer_in_backward if sparse_active else dense_in_backward
    # an encoder-decoder's decoder layers and head run on the target's tokens: its decoder layers
    # keep what a layer keeps on them, its last layer in backward is a decoder layer, which under
    # full checkpointing rebuilds its cross-attention block too
    decoder = decoder_settings(spec, settings)
    decoder_active = (
        stage_cross_attention_layers(spec, settings, layout.stage)[1]
        if extension(spec, "cross_attention_layers")
        else 0
    )
    if decoder_active:
        saved_decoder, last_in_backward = kept_and_backward(layer_activation_terms(spec, decoder), False, decoder)
        saved_layers += decoder_active * (saved_decoder - saved_per_layer)
        if settings.checkpointing == "full":
            last_in_backward += cross_attention_block_bytes(spec, settings)
    first_saved, first_in_backward = saved_per_layer, layer_in_backward
    if dense_active:
        first_saved, first_in_backward = saved_dense, dense_in_backward
    saved_layers -= layout.skipped_layers * saved_per_layer
    if layout.has_embedding and layout.active_layers:
        unrecorded = first_norm_unrecorded_bytes(spec, settings)
        saved_layers -= unrecorded
        first_saved -= unrecorded
    embedding_act = embedding_activation_bytes(spec, settings) if layout.has_embedding else 0.0
    if layout.has_embedding and layout.active_layers:
        embedding_act += rotary_table_bytes(spec, settings)
    embedding_act += tower_bytes
    head_act = head_activation_bytes(spec, decoder) if layout.has_head else 0.0
    layers_on_gpu_bytes = saved_layers
    if settings.activation_offload:
        resident = min(layout.active_layers, OFFLOAD_RESIDENT_LAYERS)
        layers_on_gpu_bytes = min(saved_layers, resident * max(saved_per_layer, saved_dense))
    layers_on_gpu_bytes += cross_bytes
    one_micro_batch = embedding_act + layers_on_gpu_bytes + head_act
    earlier_micro_batches = (layout.in_flight - 1) * one_micro_batch
    all_activations = one_micro_batch + earlier_micro_batches
    offloaded_bytes = (saved_layers - layers_on_gpu_bytes) * layout.in_flight
    logits_forward, logits_backward = logits_bytes(spec, decoder) if layout.has_head else (0.0, 0.0)
    held_logits = kept_logits_bytes(spec, decoder) if layout.has_head else 0.0

    base = {
        "weights": states.weights,
        "master_weights": states.master,
        "autocast_weight_copies": states.autocast_copies,
        "gradients": states.gradients if grads_persist else 0.0,
        "optimizer_states": states.states,
    }

    # autograd holds the head's gradient of a tied matrix until the embedding's arrives, then
    # adds the two out of place (torch's InputBuffer, traced): two more matrix-sized gradients.
    tied_gradient_sum = 2 * gradient_bytes(settings.precision) * layout.tied_matrix_elements
    # FSDP2: the root's unsharded gradients wait for its post-backward; a unit's reduce-scatter
    # input waits for the next unit's, so none is pending while the last layer runs backward
    root_gradients = fsdp2_root_gradient_bytes(settings, layout)

    in_backward_step = {"optimizer_step_temporaries": states.step_temporaries} if settings.optimizer_in_backward else {}

    def gradients_made(parameters: float) -> float:
        """Gradient bytes alive once backward has made the gradients of `parameters`."""
        if grads_persist or layout.trainable == 0 or settings.optimizer_in_backward:
            return states.gradients
        return states.gradients * parameters / layout.trainable

    phases = [
        PhaseMemory(
            name="end of forward",
            components=base | {"activations": all_activations, "logits_and_loss": logits_forward},
        ),
        PhaseMemory(
            name="loss backward",
            components=base | {"activations": all_activations, "logits_and_loss": logits_backward + held_logits},
        ),
        PhaseMemory(
            name="backward, last layer",
            components=base
            | in_backward_step
            | {
                "gradients": gradients_made(layout.head_gradient_elements) + root_gradients,
                "activations": all_activations + last_in_backward,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="backward, first layer",
            components=base
            | in_backward_step
            | {
                "gradients": gradients_made(layout.trainable - layout.embedding_gradient_elements)
                + root_gradients
                + states.reduce_scatter_input,
                "autocast_weight_copies": states.autocast_first_layer,
                "activations": embedding_act + first_saved + first_in_backward + earlier_micro_batches,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="backward, embeddings",
            components=base
            | in_backward_step
            | {
                "gradients": states.gradients + tied_gradient_sum + states.reduce_scatter_input,
                "autocast_weight_copies": 0.0,
                "activations": embedding_act + earlier_micro_batches,
                "logits_and_loss": held_logits,
            },
        ),
        PhaseMemory(
            name="optimizer step",
            components=base
            | {
                "weights": states.weights - states.gathered_root,  # the root resharded after its backward
                "autocast_weight_copies": 0.0,
                "gradients": states.gradients,
                "optimizer_step_temporaries": states.step_temporaries,
            },
        ),
    ]
    if settings.optimizer_in_backward:  # the step ran inside backward
        phases = [phase for phase in phases if phase.name != "optimizer step"]
    if not layout.has_head:
        phases = [phase for phase in phases if phase.name != "loss backward"]
    if not layout.has_embedding:
        phases = [phase for phase in phases if phase.name != "backward, embeddings"]
    if layout.stage != "only":
        phases = [PhaseMemory(name=f"{p.name}, {layout.stage} stage", components=p.components) for p in phases]
    return phases, terms, offloaded_bytes


def whole_model_load_bytes(spec: ModelSpec, params: ParameterCount, settings: TrainingSettings) -> float:
    """The whole model on one GPU while it is set up, when the stack moves it there before
    sharding: DeepSpeed casts the module to bf16/fp16 and calls module.to(device) unless
    zero.Init() created it (microsoft/DeepSpeed deepspeed/runtime/engine.py,
    _configure_distributed_model: `if not (self.dont_change_device or is_zero_init_model):
    self.module.to(self.device)`); ZeRO-3 partitions it afterwards. Every parameter in the
    weight dtype (the half compute dtype for a LoRA/QLoRA base). 0 when not set."""
    if not settings.load_whole_model:
        return 0.0
    per_parameter = weight_bytes(settings.precision) if settings.method == "full" else compute_bytes(settings.precision)
    return per_parameter * params.total


def quantised_load_bytes(spec: ModelSpec, settings: TrainingSettings, first: StageLayout) -> float:
    """QLoRA's peak while the base is loaded and quantised tensor by tensor: the finished
    weights (NF4 linears, half-precision rest, the adapters) of the first stage's `first` layout
    plus the staging of the largest linear's quantisation (nf4_quantisation_staging_bytes). 0 for
    other methods."""
    if settings.method != "qlora":
        return 0.0
    staging = nf4_quantisation_staging_bytes(
        spec,
        settings.quant_backend or "bitsandbytes",
        settings.framework,
        settings.tensor_parallel,
        settings.quantised_linears or "layers",
    )
    return first.weight_bytes + staging


def vision_weights_note(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """The assumption line for a vision-language model's encoder and projector weights."""
    if not spec.extra_params:
        return []
    frozen = frozen_tower_parameters(spec, settings)
    if is_adapter_method(settings.method):
        how = "frozen with the base, in the half compute dtype (not quantised)"
    elif frozen:
        how = f"the encoder's {frozen / 1e6:,.0f}M frozen (no gradient or optimizer state), the projector trained"
    else:
        how = "trained like the language model"
    return [f"Vision encoder and projector: {spec.extra_params / 1e6:,.0f}M parameters, {how}."]


def images_note(spec: ModelSpec, settings: TrainingSettings) -> list[str]:
    """The assumption lines for a vision-language model's weights and its images."""
    if not settings.images_per_sample:
        skipped = layers_skipped_without_images(spec, settings)
        skipped_note = [
            f"Without images the {skipped} cross-attention layers do not run (MllamaTextModel skips them): no "
            "activations, casts or compute; their weights keep gradients and optimizer states, as in a run whose "
            "other batches carry images (a text-only run under DDP would have neither)."
        ]
        return vision_weights_note(spec, settings) + (skipped_note if skipped else [])
    tower = vision_tower(spec)
    if tower is not None and tower.cross_attention_layers:
        reads = (
            f"Images: {settings.images_per_sample} per sample, each read by the {tower.cross_attention_layers} "
            f"cross-attention layers as {tower.cross_attention_tokens_per_image} keys and values (all tiles used)"
        )
    else:
        per_image = image_tokens_per_image(spec, settings)
        reads = (
            f"Images: {settings.images_per_sample} per sample x {per_image} tokens each = "
            f"{settings.images_per_sample * per_image} tokens added to the {settings.seq_len} text tokens of each "
            "sequence"
        )
    if tower is None:  # tokens per image given by hand, or an encoder whose shapes are not read
        counted = "its weights are counted, its activations are not" if spec.extra_params else "it is not counted"
        return [f"{reads}; the vision tower's shapes are not known: {counted}."]
    notes = vision_weights_note(spec, settings)
    patches = tower_settings(spec, settings).seq_len
    if tower_trains(settings):
        encoder = f"the encoder trains and keeps its activations over {patches} patches per image"
    else:
        encoder = f"the encoder is frozen: it runs on {patches} patches per image and keeps nothing for backward"
    if tower.cross_attention_layers:
        # Mllama's projector is one linear, whose input is counted (projector_input_bytes)
        extras = "its gates, attention masks and the projector's input are counted (calculators.mllama)"
        frozen = []
        if settings.frozen_layers and settings.method == "full":
            frozen = [
                "Frozen first layers with images: the trained projector's image states reach the frozen "
                "cross-attention layers among them, so backward runs through the frozen layers from the first of "
                "those; the estimate counts the frozen layers as keeping nothing and running no backward (low)."
            ]
        return notes + [f"{reads}; {encoder}; {extras}."] + frozen
    return notes + [f"{reads}; {encoder}; the projector's own activations are not counted."]


def vision_tower_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes one micro-batch's images keep in the image encoder until its backward: its layers
    times what each keeps (layer_activation_terms and kept_per_layer_bytes, the language model's
    per-layer formulas, on the encoder's shapes and patches; calculators.vision). A frozen encoder
    keeps nothing: no tensor in it requires grad, so autograd records nothing (the same rule as a
    frozen embedding's)."""
    if not settings.images_per_sample or vision_tower(spec) is None:
        return 0.0
    projector = projector_input_bytes(spec, settings)
    if not tower_trains(settings):
        return projector
    encoder, run = tower_model_spec(spec), tower_settings(spec, settings)
    kept = kept_per_layer_bytes(layer_activation_terms(encoder, run), encoder, run)
    mllama = (
        vision_mask_bytes(spec, settings)
        + vision_gate_bytes(spec, settings)
        + vision_outside_layers_bytes(spec, settings)
        + vision_lse_padding_bytes(spec, settings)
    )
    return encoder.n_layers * kept + projector + mllama


def vision_outside_layers_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What Llama 3.2 Vision's encoder keeps outside its layers when it trains (checkpointing
    wraps the layers only): ln_pre's input, the unpadded patches (images x tiles x 1601), and
    ln_post's, the padded ones (tiles x 1608), as the encoder's LayerNorms keep theirs
    (norm_saved_bytes), and the gathered tile positions (calculators.mllama). Left out: the patch
    convolution's pixel input (3 x 560^2 per tile)."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    rows = images * (tower.cross_attention_tokens_per_image + tower.tokens_per_image)
    norms = norm_saved_bytes(tower_model_spec(spec), tower_settings(spec, settings), rows)
    return norms + tile_position_bytes(spec, settings)


def projector_input_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What the projector's first linear keeps of the encoder's output, when the projector
    trains (full training, the encoder trained or frozen): each image token's patches merged into
    one (Qwen2.5-VL's 2 x 2 merger, Gemma 3's pooling) make a fresh tensor of the image tokens,
    as does autocast's half cast of an fp32 output; otherwise the linear reads a slice of the
    encoder's output (LLaVA drops the CLS patch), which it copies to flatten it when several
    images run, and keeps as a view, holding all of the patches alive, when one does. Counted
    for one linear, the trace's stand-in (tests/test_trace_vision.py), which real projectors
    exceed: LLaVA's GELU and second linear keep 2 x 2 x 4096 B more per image token in bf16;
    Qwen2.5-VL's merger normalises every patch before concatenating 2 x 2 of them (an fp32 copy
    and half copies of each, about 12 B per patch and channel in bf16, plus its GELU MLP) and
    Gemma 3's average pooling keeps its whole input. Under 1% of the encoder's own bytes on
    these models; not modelled. Llama 3.2 Vision's projector, one linear, keeps the final and
    intermediate encoder outputs concatenated (vision_output_dim wide) over the unpadded patches."""
    tower = vision_tower(spec)
    if tower is None or settings.method != "full":
        return 0.0
    if tower.cross_attention_layers:
        # Mllama's projector reads the final and intermediate encoder outputs concatenated, one
        # fresh tensor of the unpadded patches (MllamaVisionModel.forward's torch.cat)
        images = settings.micro_batch * settings.images_per_sample
        width = tower.projector_input_width or tower.hidden_size
        return float(compute_bytes(settings.precision) * images * tower.cross_attention_tokens_per_image * width)
    run = tower_settings(spec, settings)
    image_tokens = image_tokens_per_image(spec, settings)
    merged = run.seq_len // max(image_tokens, 1) > 1
    cast = autocast_casts_hidden_states(settings)
    kept = image_tokens if merged or cast or run.micro_batch > 1 else run.seq_len
    element = compute_bytes(settings.precision) if cast else residual_bytes(settings)
    return element * run.micro_batch * kept * tower.hidden_size


def t5_attention_settings(spec: ModelSpec, settings: TrainingSettings) -> TrainingSettings:
    """The settings as T5 runs them: its attention adds a relative position bias to the scores
    and has no fused (SDPA or flash) path in transformers (T5Attention.forward,
    models/t5/modeling_t5.py @6b8b757d), so it is eager whatever the attention setting says."""
    if spec.position_embedding != "relative" or settings.attention == "eager":
        return settings
    return settings.model_copy(update={"attention": "eager"})


def encoder_decoder_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What T5's decoder keeps beyond the self-attention layers the engine counts each of its
    layers as, for one micro-batch (transformers models/t5/modeling_t5.py @6b8b757d,
    T5LayerCrossAttention), the encoder on seq_len tokens and the decoder on target_len
    (decoder_settings; what a decoder layer keeps on the target's tokens rather than the input's is
    stage_phases', by the stage's decoder layers):
    - per decoder layer, a cross-attention block: its norm, q's input, the q/k/v copies the
      score matmuls keep (q over the target, k and v over the input), the eager core (target x
      input scores) and o's input, as a self-attention block keeps them, with k and v reading the
      encoder's output instead of the normed hidden state (under autocast each of them keeps its
      own half cast of it);
    - once, the encoder's output (without autocast the k/v linears of every decoder layer keep
      that one tensor), the encoder's final norm, the dropout masks outside the blocks, the
      relative positions' bucket indices (int64 queries x keys per stack, kept by the trained
      bias embedding) and the decoder's int64 input ids.
    Under full checkpointing (each block checkpointed, as transformers' gradient checkpointing
    does) the encoder's output is kept, and so are the three position biases every block is
    given: batch x heads x queries x keys each, in the model's dtype; the bucket indices are
    rebuilt inside the first blocks. Traced (tests/test_trace_t5.py)."""
    decoder_layers = extension(spec, "cross_attention_layers")
    if not decoder_layers:
        return 0.0
    decoder = decoder_settings(spec, settings)
    b, source, target = settings.micro_batch, settings.seq_len, decoder.seq_len
    inputs, targets = b * source, b * target
    h, c = spec.hidden_size, compute_bytes(settings.precision)
    trained = input_saving_linears(settings)
    encoder_output = c * inputs * h
    # outside the blocks: the encoder's final norm and the dropout masks of the encoder's output,
    # the decoder's final output and (when it trains) the decoder embedding's output; the decoder's
    # int64 input ids (the labels shifted right, T5ForConditionalGeneration._shift_right) when the
    # embedding keeps them; with the embeddings frozen (LoRA) the decoder's first norm, like the
    # encoder's, records nothing
    final_norm = norm_saved_bytes(spec, settings, inputs, weight_trainable=settings.method == "full")
    masks = dropout_mask_bytes(spec, inputs) + dropout_mask_bytes(spec, targets)
    replicated = 0.0  # int64 indices every tensor-parallel rank holds whole
    if embedding_trainable(settings):
        masks += dropout_mask_bytes(spec, targets)
        replicated += 8 * targets
    outside = final_norm + masks - first_norm_unrecorded_bytes(spec, decoder)
    if settings.checkpointing == "full":
        # every checkpointed block keeps the stack's position bias it was given, batch x heads x
        # queries x keys in the model's dtype: the encoder's, the decoder's and the cross-attention's;
        # the first block of each stack makes its bias inside itself (T5Attention.compute_bias), so its
        # bucket indices are rebuilt in backward, not kept
        squares = source**2 + target**2 + target * source
        biases = b * spec.n_heads * squares * model_dtype_bytes(settings)
        # and the attention masks they are given (get_extended_attention_mask): the encoder's
        # padding mask (batch, 1, 1, input) and the decoder's causal one (batch, 1, target, target)
        biases += b * (source + target**2) * model_dtype_bytes(settings)
        # the encoder's output itself, an argument of every decoder block: fp32 where the hidden
        # states are (T5LayerNorm casts down only to a half weight's dtype)
        kept_output = residual_bytes(settings) * inputs * h
        return _per_rank(kept_output + biases + outside, settings) + replicated
    if embedding_trainable(settings):
        replicated += 8 * (source**2 + target**2)  # the bucket indices the bias embeddings keep
    kv_names = trained.intersection(("k", "v"))
    dropped_out = is_adapter_method(settings.method) and settings.lora_dropout > 0
    if autocast_casts_hidden_states(settings) or not kv_names or dropped_out:
        # under autocast each k/v linear keeps its own half cast of the fp32 output instead; no k/v
        # linear keeps it without a trained one; LoRA dropout's adapters keep their dropouts' outputs
        encoder_output = 0.0
    block = cross_attention_block_bytes(spec, settings)
    return decoder_layers * block + _per_rank(encoder_output + outside, settings) + replicated


def cross_attention_block_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What one of T5's cross-attention blocks keeps, per decoder layer and rank, beyond the
    self-attention block the engine counts its layer as (encoder_decoder_activation_bytes): its
    norm, q's input, the q/k/v copies the score matmuls keep (q over the target, k and v over the
    input), the eager core (target x input scores) and o's input; under autocast k's and v's own
    half casts of the encoder's output; adapters' intermediates and dropouts under LoRA. What a
    checkpointed decoder layer rebuilds in its backward on top of its self-attention block."""
    decoder = decoder_settings(spec, settings)
    b, source, target = settings.micro_batch, settings.seq_len, decoder.seq_len
    inputs, targets = b * source, b * target
    h, c = spec.hidden_size, compute_bytes(settings.precision)
    trained = input_saving_linears(settings)
    terms = layer_activation_terms(spec, decoder)
    self_inputs = linear_inputs_saved_bytes(settings, targets, h, len(trained.intersection(("q", "k", "v"))))
    cross_inputs = linear_inputs_saved_bytes(settings, targets, h, len(trained.intersection(("q",))))
    if autocast_casts_hidden_states(settings):
        cross_inputs += linear_inputs_saved_bytes(settings, inputs, h, len(trained.intersection(("k", "v"))))
    norm = norm_saved_bytes(spec, settings, targets, weight_trainable=settings.method == "full")
    # k and v over the input's tokens, the scores over target x input, rather than the target's
    keys_over_input = 2 * c * (inputs - targets) * spec.kv_dim
    scores_over_input = attention_score_bytes(spec, decoder) * b * spec.n_heads * target * (source - target)
    block = norm + _per_rank(cross_inputs - self_inputs, settings) + terms["attention_projections"]
    if not recomputes_attention_core(decoder):  # selective checkpointing rebuilds the eager core
        block += terms["attention_core"] + _per_rank(scores_over_input, settings)
    block += _per_rank(keys_over_input, settings)
    block += _per_rank(cross_adapter_intermediate_bytes(spec, settings, targets, inputs), settings)
    if is_adapter_method(settings.method) and settings.lora_dropout:
        # each adapter drops out its own input: q the normed decoder state, k and v the encoder's
        # output (whose one counted copy no adapter keeps then), o the attention output
        sites = [
            (("q",), targets, h, True, True, False),
            (("k", "v"), inputs, h, False, False, False),
            (("o",), targets, attention_output_width(spec), True, settings.attention == "eager", False),
        ]
        block += _per_rank(lora_dropout_sites_bytes(settings, sites), settings)
    return block


def cross_adapter_intermediate_bytes(spec: ModelSpec, settings: TrainingSettings, targets: int, inputs: int) -> float:
    """Under LoRA, each adapted linear of a cross-attention block keeps its adapter's r-wide
    intermediate, as a self-attention block's do (lora_intermediate_bytes): q's and o's over the
    target's tokens, k's and v's over the input's; LoRA dropout's masks and outputs are
    encoder_decoder_activation_bytes'."""
    if not is_adapter_method(settings.method):
        return 0.0
    adapted = cross_attention_adapted_linears(spec, settings.lora_targets)
    rows = sum(inputs if linear.name in ("k", "v") else targets for linear in adapted)
    return compute_bytes(settings.precision) * rows * settings.lora_rank


def skipped_cross_attention_layers(spec: ModelSpec, settings: TrainingSettings, layout: StageLayout) -> float:
    """This stage's share of the layers a step without images skips (layers_skipped_without_images)."""
    return layers_skipped_without_images(spec, settings) * layout.active_layers / spec.n_layers


def cross_lora_dropout_bytes(spec: ModelSpec, settings: TrainingSettings, text: int, image: int) -> float:
    """LoRA dropout in a Llama 3.2 Vision cross-attention layer against the self-attention layer
    the engine counts it as (lora_dropout_bytes): q's adapter drops out the normed text, k's and
    v's the image states, each its own dropout (the states themselves are shared by every layer:
    cross_attention_shared_bytes). The states need no gradient under LoRA (the
    projector is frozen), so autograd records no dropout on them and keeps no mask: only the
    output, which A keeps. Under autocast the states are half (the projector's output) and the
    text's norm output as lora_dropout_bytes has it."""
    h, fp32_norm = spec.hidden_size, autocast_casts_norm_output(spec, settings)
    self_attention = [(("q", "k", "v"), text, h, False, True, fp32_norm)]
    cross_attention = [(("q",), text, h, False, True, fp32_norm), (("k", "v"), image, h, False, False, False)]
    unrecorded_masks = sum(is_adapted(name, settings.lora_targets) for name in ("k", "v")) * image * h
    sites = lora_dropout_sites_bytes(settings, cross_attention) - lora_dropout_sites_bytes(settings, self_attention)
    return sites - unrecorded_masks


def cross_attention_shared_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What one micro-batch's cross-attention layers share, one tensor for all of them: the
    projected image states (V x hidden, half under autocast: the projector's output) when a k or v
    linear keeps them, which the k and v adapters do not once they drop them out (they keep their
    dropouts' outputs), and the masks unless SDPA copies them per layer (calculators.mllama).
    A checkpointed layer keeps the states, its argument."""
    image_tokens_per_sample = cross_attention_image_tokens(spec, settings)
    if not image_tokens_per_sample:
        return 0.0
    states = compute_bytes(settings.precision) * settings.micro_batch * image_tokens_per_sample * spec.hidden_size
    masks = cross_mask_bytes(spec, settings) - cross_mask_copies_bytes(spec, settings)
    if settings.checkpointing == "full":
        return states + masks
    savers = input_saving_linears(settings).intersection(("k", "v"))
    dropped_out = is_adapter_method(settings.method) and settings.lora_dropout > 0
    base_keeps_input = input_saving_linears(settings) != trained_linear_names(settings)
    if not savers or (dropped_out and not base_keeps_input):
        states = 0.0
    return states + masks


def cross_attention_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What Llama 3.2 Vision's cross-attention layers keep beyond the self-attention layers the
    engine counts them as, for one micro-batch (transformers models/mllama/modeling_mllama.py
    MllamaTextCrossAttention as the attention-interface versions write it: k normalised per
    key-value head, then repeated by the attention function; @befb7955 normalised the repeated
    keys, 4 times the k norm's bytes): what the layers share (cross_attention_shared_bytes) and,
    per layer, k and v over the V image tokens instead of the text, both repeated to every head as
    q is (2 c (V - t) q_dim); under autocast k's and v's own half casts of the text's norm output
    go, q alone reading it; per-head q and k RMSNorms on the half projections (k's only when k
    trains: full training or a k adapter); k's and v's adapters' intermediates and dropouts over
    V; under eager attention t x V scores instead of t x t, and q left unkept by q k^T when k
    needs no gradient; and the per-layer mask copies, the gates' inputs and the log-sum-exp
    padding (calculators.mllama). A fully checkpointed layer keeps nothing of its own. Per
    tensor-parallel rank, the shared tensors replicated. Traced (tests/test_trace_mllama.py)."""
    image_tokens_per_sample = cross_attention_image_tokens(spec, settings)
    if not image_tokens_per_sample:
        return 0.0
    shared = cross_attention_shared_bytes(spec, settings)
    if settings.checkpointing == "full":
        return shared
    layers = vision_tower(spec).cross_attention_layers
    b, s, h = settings.micro_batch, settings.seq_len, spec.hidden_size
    text, image = b * s, b * image_tokens_per_sample
    c = compute_bytes(settings.precision)
    savers = input_saving_linears(settings)
    trains_norms = settings.method == "full"
    k_trains = trains_norms or is_adapted("k", settings.lora_targets)
    heads, head_dim = spec.n_heads, spec.attention_head_dim
    per_layer = 2 * c * (image - text) * spec.q_dim
    per_layer += linear_inputs_saved_bytes(settings, text, h, len(savers.intersection(("q",))))
    per_layer -= linear_inputs_saved_bytes(settings, text, h, len(savers.intersection(("q", "k", "v"))))
    per_layer += norm_saved_bytes(spec, settings, text * heads, trains_norms, width=head_dim, input_bytes=c)
    if k_trains:
        kv_rows = image * spec.n_kv_heads
        per_layer += norm_saved_bytes(spec, settings, kv_rows, trains_norms, width=head_dim, input_bytes=c)
    if is_adapter_method(settings.method):  # k's and v's adapters' r-wide intermediates over the image
        kv_adapters = sum(is_adapted(name, settings.lora_targets) for name in ("k", "v"))
        per_layer += kv_adapters * c * (image - text) * settings.lora_rank
        if settings.lora_dropout:
            per_layer += cross_lora_dropout_bytes(spec, settings, text, image)
    if settings.attention == "eager" and not recomputes_attention_core(settings):
        per_layer += attention_score_bytes(spec, settings) * b * spec.n_heads * s * (image_tokens_per_sample - s)
        if not k_trains:  # q @ k^T keeps q only for k's gradient
            per_layer -= c * text * spec.q_dim
    own = cross_mask_copies_bytes(spec, settings) + cross_layer_gate_bytes(spec, settings)
    own += cross_lse_padding_bytes(spec, settings)
    return shared + own + layers * _per_rank(per_layer, settings)


def estimate_memory(spec: ModelSpec, settings: TrainingSettings) -> MemoryEstimate:
    """Peak memory of one training step on each GPU, phase by phase; with pipeline
    parallelism, on the most loaded of the first and the last stage."""
    check_supported(spec, settings)
    image_note = images_note(spec, settings)
    image_settings = settings
    tower_bytes = vision_tower_activation_bytes(spec, settings)
    vision_cast = vision_cast_elements(spec, settings)
    settings = t5_attention_settings(spec, settings)
    cross_bytes = cross_attention_activation_bytes(spec, settings)
    # every pipeline stage with a cross-attention layer holds the tensors they share whole
    cross_shared = cross_attention_shared_bytes(spec, settings)
    # an encoder-decoder's decoder blocks (and what they read) sit on the stages of its decoder layers
    decoder_bytes = encoder_decoder_activation_bytes(spec, settings)
    settings = language_model_settings(spec, settings)
    params = parameter_count(spec)
    grads_persist = settings.grad_accum > 1 or not settings.grads_freed_after_step
    phases: list[PhaseMemory] = []
    stage_of_phase: dict[str, str] = {}
    host_bytes = outside_bytes = 0.0
    layouts = [stage_layout(spec, params, settings, stage) for stage in pipeline_stages(settings)]
    # the image encoder runs on the embedding's stage, with the settings before its images became tokens
    layouts = [
        layout._replace(vision_cast_elements=vision_cast) if layout.has_embedding else layout for layout in layouts
    ]
    layouts = [
        layout._replace(skipped_layers=skipped_cross_attention_layers(spec, image_settings, layout))
        for layout in layouts
    ]
    for layout in layouts:
        states = model_state_bytes(settings, layout)
        # the encoder runs on the embedding's stage; the cross-attention layers spread with the layers
        stage_phase_list, terms, offloaded_bytes = stage_phases(
            spec,
            settings,
            layout,
            states,
            grads_persist,
            tower_bytes if layout.has_embedding else 0.0,
            cross_shared
            + (cross_bytes - cross_shared) * layout.layers / spec.n_layers
            + decoder_bytes * decoder_layer_share(spec, settings, layout.stage),
        )
        phases += stage_phase_list
        stage_of_phase |= {phase.name: layout.stage for phase in stage_phase_list}
        host_bytes = max(host_bytes, states.host + offloaded_bytes)
        outside_bytes = max(outside_bytes, states.outside_allocator)

    load_bytes = max(whole_model_load_bytes(spec, params, settings), quantised_load_bytes(spec, settings, layouts[0]))
    if load_bytes:
        phases.insert(0, PhaseMemory(name="loading", components={"weights": load_bytes}))
        stage_of_phase["loading"] = layouts[0].stage
    peak = max(phases, key=lambda phase: phase.total)
    allocated = peak.total
    o = settings.overheads
    reserve = allocated * o.allocator_reserve_fraction
    framework = (o.cuda_context_gib + o.cublas_workspace_gib + (o.nccl_gib if settings.total_gpus > 1 else 0.0)) * GIB

    def device_view(phase: PhaseMemory) -> dict[str, float]:
        """A phase's components as the device sees them, reserve and context included."""
        view = {name: phase.components.get(name, 0.0) / GIB for name in COMPONENTS}
        view["allocator_reserve"] = phase.total * o.allocator_reserve_fraction / GIB
        view["framework_overhead"] = framework / GIB
        return view

    components = device_view(peak)
    return MemoryEstimate(
        peak_gib=(allocated + reserve + framework + outside_bytes) / GIB,
        allocated_gib=allocated / GIB,
        reserved_gib=(allocated + reserve) / GIB,
        peak_phase=peak.name,
        components_gib=components,
        phases_gib={phase.name: phase.total / GIB for phase in phases},
        phase_components_gib={phase.name: device_view(phase) for phase in phases},
        activations_per_layer_gib={k: v / GIB for k, v in terms.items()},
        parameters=params.total,
        trainable_parameters=trainable_parameter_count(spec, params, settings),
        tokens_per_micro_batch=settings.micro_batch * settings.seq_len,
        assumptions=image_note + _assumptions(spec, settings, grads_persist),
        host_memory_gib=host_bytes / GIB,
        load_peak_gib=load_bytes / GIB,
        outside_allocator_gib=outside_bytes / GIB,
        pipeline_stage=stage_of_phase[peak.name],
    )
