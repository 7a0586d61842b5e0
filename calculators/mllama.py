"""What Llama 3.2 Vision (Mllama) keeps for backward beyond what the engine counts for its
encoder as plain ViT layers and for its cross-attention layers as Llama layers over the image:
its trained tanh gates' inputs, its two additive attention masks, and the encoder's norms and tile
positions outside its layers (huggingface/transformers src/transformers/models/mllama/
modeling_mllama.py @befb7955: MllamaVisionModel.forward, MllamaVisionEncoderLayer,
MllamaPrecomputedPositionEmbedding, MllamaCrossAttentionDecoderLayer, _prepare_aspect_ratio_
attention_mask, _prepare_cross_attention_mask).

Every function returns bytes for one micro-batch, 0 for a model that is not Mllama or a step
without images.
"""

from __future__ import annotations

from calculators.model_spec import ModelSpec, VisionTower
from calculators.training import TrainingSettings, compute_bytes, residual_bytes
from calculators.vision import cross_attention_image_tokens, tower_trains, vision_tower

# LayerNorm keeps an fp32 mean and rstd per row for its backward (aten native_layer_norm).
LAYERNORM_STATS_BYTES_PER_ROW = 8


def _mllama_tower(spec: ModelSpec, settings: TrainingSettings) -> VisionTower | None:
    """The encoder of an Mllama model when the step runs images, else None."""
    tower = vision_tower(spec)
    if tower is None or not tower.cross_attention_layers or not settings.images_per_sample:
        return None
    return tower


def model_dtype_bytes(settings: TrainingSettings) -> int:
    """Bytes per element of what Mllama builds in the model's dtype (`self.dtype`, its parameters'):
    both masks and the gathered tile positions. fp32 where the parameters are fp32 (full training
    under fp32 or autocast), half otherwise (pure half training; LoRA loads the base in half):
    the hidden states' rule (calculators.training.hidden_states_fp32)."""
    return residual_bytes(settings)


def mask_kept(settings: TrainingSettings) -> bool:
    """Whether an additive attention mask stays alive until backward. SDPA given a mask runs the
    memory-efficient kernel (CUDA's flash kernel takes none), whose backward reads the mask; a
    checkpointed layer keeps its arguments to run again, the mask among them. Eager attention only
    adds it to the scores, which keeps nothing of it."""
    return settings.attention != "eager" or settings.checkpointing != "none"


def vision_mask_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The encoder's aspect-ratio mask, (images, 1, T, T) for T padded patches per image (4 tiles x
    1608), one tensor every encoder layer reads; kept when the encoder trains."""
    tower = _mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings) or not mask_kept(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    return float(model_dtype_bytes(settings) * images * tower.tokens_per_image**2)


def vision_gate_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Each gated (global) encoder layer scales its attention output and its MLP output by
    `gate.tanh()` before the residual add; the product keeps the output (compute dtype) for the
    gate's gradient. Kept when the encoder trains, except under full checkpointing (inside the layer)."""
    tower = _mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings) or settings.checkpointing == "full":
        return 0.0
    patches = settings.micro_batch * settings.images_per_sample * tower.tokens_per_image
    return float(tower.gated_layers * 2 * compute_bytes(settings.precision) * patches * tower.hidden_size)


def vision_outside_layers_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What the encoder keeps outside its layers when it trains (checkpointing wraps the layers
    only): ln_pre's input, the unpadded patches (images x tiles x 1601), and ln_post's, the padded
    ones (tiles x 1608), each with LayerNorm's fp32 mean and rstd per row; and the gathered tile
    positions, one per unpadded patch in the model's dtype, kept by `gate.tanh() *
    tile_position_embedding`. Left out: the patch convolution's pixel input (3 x 560^2 per tile)."""
    tower = _mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    unpadded, padded = tower.cross_attention_tokens_per_image, tower.tokens_per_image
    row = residual_bytes(settings) * tower.hidden_size + LAYERNORM_STATS_BYTES_PER_ROW
    norms = images * (unpadded + padded) * row
    tile_positions = images * unpadded * tower.hidden_size * model_dtype_bytes(settings)
    return float(norms + tile_positions)


def cross_mask_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The language model's cross-attention mask, (batch, 1, text, image tokens) in the model's
    dtype, one tensor every cross-attention layer reads; kept as mask_kept says, under LoRA too
    (the text's hidden states require grad)."""
    if _mllama_tower(spec, settings) is None or not mask_kept(settings):
        return 0.0
    image_tokens = cross_attention_image_tokens(spec, settings)
    return float(model_dtype_bytes(settings) * settings.micro_batch * settings.seq_len * image_tokens)


def cross_layer_gate_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Per cross-attention layer, when its two gates train (full training) and the layer is not
    checkpointed whole: the attention output (o_proj's, compute dtype) and the MLP output masked
    by full_text_row_masked_out_mask, promoted to that mask's model dtype, each kept by its
    `gate.tanh() *` product. Whole rows, not split by tensor parallelism."""
    tower = _mllama_tower(spec, settings)
    if tower is None or settings.method != "full" or settings.checkpointing == "full":
        return 0.0
    c = compute_bytes(settings.precision)
    per_row = (c + max(c, model_dtype_bytes(settings))) * spec.hidden_size
    return float(tower.cross_attention_layers * settings.micro_batch * settings.seq_len * per_row)
