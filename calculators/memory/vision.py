"""A vision-language model's image encoder and projector: what they keep for backward when a step runs images."""

from __future__ import annotations

from calculators.memory.activations.layer import kept_per_layer_bytes, layer_activation_terms
from calculators.memory.activations.norms import norm_saved_bytes
from calculators.memory.mllama import (
    mllama_tower,
    tile_position_bytes,
    vision_gate_bytes,
    vision_lse_padding_bytes,
    vision_mask_bytes,
)
from calculators.models.spec import ModelSpec
from calculators.workload.training import (
    TrainingSettings,
    image_tokens_per_image,
)
from calculators.workload.vision import tower_model_spec, tower_settings, tower_trains, vision_tower


def vision_tower_activation_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Bytes one micro-batch's images keep in the image encoder until its backward: its layers
    times what each keeps (layer_activation_terms and kept_per_layer_bytes, the language model's
    per-layer formulas, on the encoder's shapes and patches; calculators.workload.vision). A frozen encoder
    keeps nothing: no tensor in it requires grad, so autograd records nothing (the same rule as a
    frozen embedding's)."""
    if not settings.images_per_sample or vision_tower(spec) is None:
        return 0.0
    projector = projector_input_bytes(spec, settings)
    if not tower_trains(settings):
        return projector
    encoder, encoder_settings = tower_model_spec(spec), tower_settings(spec, settings)
    kept = kept_per_layer_bytes(layer_activation_terms(encoder, encoder_settings), encoder, encoder_settings)
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
    (norm_saved_bytes), and the gathered tile positions (calculators.memory.mllama). Left out: the patch
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
        return float(settings.precision_facts.compute_bytes * images * tower.cross_attention_tokens_per_image * width)
    encoder_settings = tower_settings(spec, settings)
    image_tokens = image_tokens_per_image(spec, settings)
    merged = encoder_settings.seq_len // max(image_tokens, 1) > 1
    dtypes = settings.precision_facts
    cast = dtypes.autocast_casts_hidden_states
    kept = image_tokens if merged or cast or encoder_settings.micro_batch > 1 else encoder_settings.seq_len
    element = dtypes.compute_bytes if cast else dtypes.residual_bytes
    return element * encoder_settings.micro_batch * kept * tower.hidden_size
