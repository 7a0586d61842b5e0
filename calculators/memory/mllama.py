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

from calculators.memory.activations.adapters import lora_dropout_sites_bytes
from calculators.memory.activations.attention import attention_score_bytes, recomputes_attention_core
from calculators.memory.activations.linears import (
    input_saving_linears,
    linear_inputs_saved_bytes,
    per_rank,
    trained_linear_names,
)
from calculators.memory.activations.norms import autocast_casts_norm_output, norm_saved_bytes
from calculators.memory.layout import StageLayout
from calculators.models.geometry import (
    split,
)
from calculators.models.spec import ModelSpec, VisionTower
from calculators.workload.finetune import (
    is_adapted,
)
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings
from calculators.workload.vision import (
    cross_attention_image_tokens,
    tower_trains,
    vision_tower,
)

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
    return float(settings.precision_facts.compute_bytes * images * tower.tokens_per_image**2)


def vision_gate_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Each gated (global) encoder layer scales its attention output and its MLP output by
    `gate.tanh()` before the residual add; the product keeps the output (compute dtype) for the
    gate's gradient. Kept when the encoder trains, except under full checkpointing (inside the layer)."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings) or settings.checkpointing == "full":
        return 0.0
    patches = settings.micro_batch * settings.images_per_sample * tower.tokens_per_image
    return float(tower.gated_layers * 2 * settings.precision_facts.compute_bytes * patches * tower.hidden_size)


def tile_position_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The gathered tile positions, one row per unpadded patch in the model's dtype, which
    `gate.tanh() * tile_position_embedding` keeps when the encoder trains
    (MllamaPrecomputedPositionEmbedding.forward)."""
    tower = mllama_tower(spec, settings)
    if tower is None or not tower_trains(settings):
        return 0.0
    images = settings.micro_batch * settings.images_per_sample
    return float(
        images * tower.cross_attention_tokens_per_image * tower.hidden_size * settings.precision_facts.model_dtype_bytes
    )


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
    rows = settings.tokens
    row_mask = settings.precision_facts.model_dtype_bytes * rows
    if not mask_kept(settings):
        return float(row_mask)
    copies = cross_mask_copies_bytes(spec, settings)
    shared = (
        0
        if copies
        else settings.precision_facts.model_dtype_bytes * rows * cross_attention_image_tokens(spec, settings)
    )
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
    c = settings.precision_facts.compute_bytes
    if not padding and settings.precision_facts.model_dtype_bytes == c:
        return 0.0
    rows = settings.tokens
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
    c = settings.precision_facts.compute_bytes
    per_row = (c + max(c, settings.precision_facts.model_dtype_bytes)) * spec.hidden_size
    rows = settings.tokens
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
    dropouts' outputs), and the masks unless SDPA copies them per layer (calculators.memory.mllama).
    A checkpointed layer keeps the states, its argument."""
    image_tokens_per_sample = cross_attention_image_tokens(spec, settings)
    if not image_tokens_per_sample:
        return 0.0
    states = settings.precision_facts.compute_bytes * settings.micro_batch * image_tokens_per_sample * spec.hidden_size
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
    padding (calculators.memory.mllama). A fully checkpointed layer keeps nothing of its own. Per
    tensor-parallel rank, the shared tensors replicated. Traced (tests/test_trace_mllama.py)."""
    image_tokens_per_sample = cross_attention_image_tokens(spec, settings)
    if not image_tokens_per_sample:
        return 0.0
    shared = cross_attention_shared_bytes(spec, settings)
    if settings.checkpointing == "full":
        return shared
    layers = vision_tower(spec).cross_attention_layers
    b, s, h = settings.micro_batch, settings.seq_len, spec.hidden_size
    text, image = settings.tokens, b * image_tokens_per_sample
    c = settings.precision_facts.compute_bytes
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
    return shared + own + layers * per_rank(per_layer, settings)
