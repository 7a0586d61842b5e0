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

from calculators.geometry import split
from calculators.model_spec import ModelSpec, VisionTower
from calculators.training import TrainingSettings, compute_bytes, model_dtype_bytes
from calculators.vision import cross_attention_image_tokens, tower_trains, vision_tower

# SDPA pads an additive mask whose rows are not this many elements apart for its memory-efficient
# kernel (pytorch aten/src/ATen/native/transformers/attention.cpp, preprocess_mask: mem_eff_alignment)
SDPA_MASK_ALIGNMENT = 8
# CUDA's memory-efficient kernel pads its log-sum-exp to a multiple of 32 query rows (pytorch
# aten/src/ATen/native/transformers/cuda/attention.cu, _efficient_attention_forward: kAlignLSE = 32;
# torch/_meta_registrations.py meta__scaled_dot_product_efficient_attention: ceil(M / 32) * 32)
LSE_ROW_ALIGNMENT = 32


def mllama_tower(spec: ModelSpec, settings: TrainingSettings) -> VisionTower | None:
    """The encoder of an Mllama model when the step runs images, else None."""
    tower = vision_tower(spec)
    if tower is None or not tower.cross_attention_layers or not settings.images_per_sample:
        return None
    return tower


def layers_skipped_without_images(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Cross-attention layers a step without images skips: MllamaTextModel.forward `continue`s
    past a cross-attention layer that has no cross_attention_states, so it keeps, casts and
    computes nothing. `settings` before the images are read (images_per_sample as given)."""
    tower = vision_tower(spec)
    if tower is None or not tower.cross_attention_layers or settings.images_per_sample:
        return 0
    return tower.cross_attention_layers


def mask_kept(settings: TrainingSettings) -> bool:
    """Whether an additive attention mask stays alive until backward. SDPA given a mask runs the
    memory-efficient kernel (CUDA's flash kernel takes none), whose backward reads the mask; a
    checkpointed layer or attention core keeps its arguments to run again, the mask among them.
    Eager attention only adds it to the scores, which keeps nothing of it."""
    return settings.attention != "eager" or settings.checkpointing != "none"


def vision_mask_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The encoder's aspect-ratio mask, (images, 1, T, T) for T padded patches per image (4 tiles x
    1608), one tensor every encoder layer reads; kept when the encoder trains. It is a matmul's
    output (_prepare_aspect_ratio_attention_mask: the column times its transpose), so half under
    autocast; T is a multiple of 8, so SDPA reads it as it is."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings) or not mask_kept(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    return float(compute_bytes(settings.precision) * images * tower.tokens_per_image**2)


def vision_gate_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Each gated (global) encoder layer scales its attention output and its MLP output by
    `gate.tanh()` before the residual add; the product keeps the output (compute dtype) for the
    gate's gradient. Kept when the encoder trains, except under full checkpointing (inside the layer)."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings) or settings.checkpointing == "full":
        return 0.0
    patches = settings.micro_batch * settings.images_per_sample * tower.tokens_per_image
    return float(tower.gated_layers * 2 * compute_bytes(settings.precision) * patches * tower.hidden_size)


def tile_position_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The gathered tile positions, one row per unpadded patch in the model's dtype, which
    `gate.tanh() * tile_position_embedding` keeps when the encoder trains
    (MllamaPrecomputedPositionEmbedding.forward)."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    return float(images * tower.cross_attention_tokens_per_image * tower.hidden_size * model_dtype_bytes(settings))


def cross_mask_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The language model's masks, under LoRA too (the text's hidden states require grad): the
    full-text-row mask (batch, 1, text, 1), which the masked MLP product keeps, and the
    cross-attention mask (batch, 1, text, image tokens), both in the model's dtype and shared by
    every cross-attention layer. A checkpointed layer or attention core keeps the mask itself;
    fused attention without checkpointing keeps per-layer copies instead (cross_mask_copies_bytes);
    eager attention adds it to the scores and keeps none of it."""
    tower = mllama_tower(spec, settings)
    if tower is None:
        return 0.0
    rows = settings.micro_batch * settings.seq_len
    row_mask = model_dtype_bytes(settings) * rows
    if not mask_kept(settings):
        return float(row_mask)
    copies = cross_mask_copies_bytes(spec, settings)
    shared = 0 if copies else model_dtype_bytes(settings) * rows * cross_attention_image_tokens(spec, settings)
    return float(row_mask + shared + copies)


def cross_mask_copies_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Fused attention without checkpointing keeps what SDPA hands its memory-efficient kernel,
    one per layer, when that is not the mask itself: autocast's half cast of an fp32 mask, and a
    copy padded to a multiple of 8 image tokens when a row is not (pytorch aten/src/ATen/native/
    transformers/attention.cpp, preprocess_mask and pad_bias: 6404 -> 6408)."""
    tower = mllama_tower(spec, settings)
    if tower is None or settings.attention == "eager" or settings.checkpointing != "none":
        return 0.0
    image_tokens = cross_attention_image_tokens(spec, settings)
    padding = -image_tokens % SDPA_MASK_ALIGNMENT
    c = compute_bytes(settings.precision)
    if not padding and model_dtype_bytes(settings) == c:
        return 0.0
    rows = settings.micro_batch * settings.seq_len
    return float(tower.cross_attention_layers * c * rows * (image_tokens + padding))


def cross_layer_gate_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Per cross-attention layer, when its two gates train (full training) and the layer is not
    checkpointed whole: the attention output (o_proj's, compute dtype) and the MLP output masked
    by full_text_row_masked_out_mask, promoted to that mask's model dtype, each kept by its
    `gate.tanh() *` product. Per tensor-parallel rank, as the engine splits every layer's saved
    activations (sequence parallelism)."""
    tower = mllama_tower(spec, settings)
    if tower is None or settings.method != "full" or settings.checkpointing == "full":
        return 0.0
    c = compute_bytes(settings.precision)
    per_row = (c + max(c, model_dtype_bytes(settings))) * spec.hidden_size
    rows = settings.micro_batch * settings.seq_len
    return split(tower.cross_attention_layers * rows * per_row, settings.tensor_parallel)


def lse_padding_bytes(heads: int, sequences: int, rows: int, settings: TrainingSettings) -> float:
    """The fp32 log-sum-exp rows the memory-efficient kernel adds to reach a multiple of 32 query
    rows, per layer, where it keeps its log-sum-exp (fused attention, the core not recomputed):
    Mllama's masked attention runs that kernel, the other layers' flash kernel pads nothing."""
    if settings.attention == "eager" or settings.checkpointing in ("selective", "full"):
        return 0.0
    return float(4 * sequences * heads * (-rows % LSE_ROW_ALIGNMENT))


def vision_lse_padding_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """lse_padding_bytes over the encoder's layers, each image one sequence of T patches."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    return tower.n_layers * lse_padding_bytes(tower.n_heads, images, tower.tokens_per_image, settings)


def cross_lse_padding_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """lse_padding_bytes over the cross-attention layers, each sample one sequence of text."""
    tower = mllama_tower(spec, settings)
    if tower is None:
        return 0.0
    heads = spec.n_heads // settings.tensor_parallel
    padding = lse_padding_bytes(heads, settings.micro_batch, settings.seq_len, settings)
    return tower.cross_attention_layers * padding
