"""Llama 3.2 Vision's images in the traced step (measure.trace.mllama): the encoder's local and
gated global layers over padded tiles with their aspect-ratio mask, the projector over the final
and intermediate outputs, and cross-attention layers with their gates and masks. The engine
(calculators.memory, calculators.memory.mllama) keeps what the trace keeps, to the byte once the trace's
own CPU artefacts are set aside, trained, frozen, under LoRA and every checkpointing."""

from __future__ import annotations

import functools

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.hf_config import spec_from_config_dict
from calculators.units import GIB
from calculators.workload.training import TrainingSettings, model_dtype_bytes

torch = pytest.importorskip("torch")

from measure.trace.mllama import MllamaVision, cross_attention_positions  # noqa: E402
from measure.trace.result import UnsupportedConfiguration  # noqa: E402
from measure.trace.support import check_traceable  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402

# A small Llama 3.2 Vision: 3 text layers of width 64, the third (index 2) a cross-attention
# layer; an encoder of width 32, 2 local and 1 gated global layer, on 2 tiles of 28 px in 14 px
# patches (4 + 1 class = 5 patches, padded to 8), the projector reading 3 x 32 = 96 channels.
TINY_MLLAMA = spec_from_config_dict(
    {
        "model_type": "mllama",
        "text_config": {
            "model_type": "mllama_text_model", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 3,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
            "cross_attention_layers": [2],
        },
        "vision_config": {
            "model_type": "mllama_vision_model", "hidden_size": 32, "intermediate_size": 64, "attention_heads": 2,
            "num_hidden_layers": 2, "num_global_layers": 1, "image_size": 28, "patch_size": 14, "max_num_tiles": 2,
            "vision_output_dim": 96,
        },
    }
)  # fmt: skip
UNPADDED, PADDED = 2 * 5, 2 * 8  # patches per image
ENCODER_LAYERS, CROSS_LAYERS = 3, 1


@functools.cache
def _activations(measure, settings_json: str) -> float:
    settings = TrainingSettings.model_validate_json(settings_json)
    return measure(TINY_MLLAMA, settings).phase_components_gib["end of forward"]["activations"] * GIB


def end_of_forward_activations(measure, settings: TrainingSettings) -> float:
    """Activations at the end of forward, each step traced once (the text-only steps recur)."""
    return _activations(measure, settings.model_dump_json())


def images_part(changes: dict, images: int = 1) -> tuple[float, float]:
    """(traced, estimated) bytes that `images` images per sample add at the end of forward, each
    against its own text-only step (32 tokens; the cross-attention layer skipped)."""
    base = TrainingSettings(**{"seq_len": 32, "precision": "bf16"} | changes)
    with_images = base.model_copy(update={"images_per_sample": images})
    return tuple(
        end_of_forward_activations(measure, with_images) - end_of_forward_activations(measure, base)
        for measure in (trace_step, estimate_memory)
    )


def trace_artefacts(changes: dict, images: int = 1) -> int:
    """Estimated - traced bytes the engine accounts for differently, by design:
    - the CPU's LayerNorm keeps its mean and rstd in bf16 under pure bf16 (fp32 on CUDA, which the
      engine counts): 2 x 2 B per row of every LayerNorm that saves, the encoder's two per layer
      over its padded patches and ln_pre's and ln_post's over the unpadded and padded ones;
    - scalars the engine leaves out: the memory-efficient kernel's philox seed and offset, 2 x 8 B
      per call that keeps them (every encoder layer when it trains and the cross-attention layer,
      fused attention whose core is not recomputed); each tanh gate's 1-element output in the
      model's dtype; the tile-position lookup's int64 index, 8 B per image.
    `images` per sample, over the micro-batch."""
    settings = TrainingSettings(**{"precision": "bf16"} | changes)
    checkpointing = settings.checkpointing
    encoder_trains = settings.method == "full" and not settings.freeze_vision_tower
    layers_run_whole = checkpointing != "full"
    model_bytes = model_dtype_bytes(settings)
    images *= settings.micro_batch
    stats = 0
    if settings.precision == "bf16" and encoder_trains:
        rows = (UNPADDED + PADDED) + (2 * ENCODER_LAYERS * PADDED if layers_run_whole else 0)
        stats = 4 * rows * images
    keeps_seeds = changes.get("attention", "fused") == "fused" and checkpointing not in ("selective", "full")
    seeds = 16 * ((ENCODER_LAYERS if encoder_trains else 0) + CROSS_LAYERS) if keeps_seeds else 0
    gates = (2 * CROSS_LAYERS if layers_run_whole else 0) + (2 * 1 if encoder_trains and layers_run_whole else 0)
    gates += 1 if encoder_trains else 0  # the tile positions' gate, outside the layers
    indices = 8 * images if encoder_trains else 0
    return stats - seeds - model_bytes * gates - indices


CASES = [
    {},
    {"precision": "amp-bf16"},
    {"precision": "fp32"},
    {"checkpointing": "full"},
    {"checkpointing": "selective"},
    {"attention": "eager"},
    {"freeze_vision_tower": True},
    {"method": "lora"},
    {"method": "lora", "lora_targets": "qv", "attention": "eager"},
    {"method": "lora", "lora_dropout": 0.1},
]


@pytest.mark.parametrize("changes", CASES, ids=[str(case) for case in CASES])
def test_images_add_what_the_engine_counts(changes):
    """With one image, the encoder (its layers, the aspect-ratio mask, the global layer's gates,
    ln_pre/ln_post and the tile positions), the projector's 96-wide input, the projected states
    and the cross-attention layer (k/v over 10 image tokens, per-head q/k norms, gates, the
    padded cross mask) add exactly what the engine counts, less the trace's artefacts."""
    traced, estimated = images_part(changes)
    assert estimated - traced == trace_artefacts(changes)


def test_two_images_per_sample_and_two_samples():
    traced, estimated = images_part({"micro_batch": 2}, images=2)
    assert estimated - traced == trace_artefacts({"micro_batch": 2}, images=2)


def test_without_images_the_cross_attention_layers_are_skipped():
    """MllamaTextModel skips a cross-attention layer without images: the text-only step keeps
    what a 2-layer Llama of the same shapes keeps, in the trace and in the engine alike, and under
    autocast casts only the 2 layers' weights."""
    llama = TINY_MLLAMA.model_copy(update={"n_layers": 2, "vision": None, "extra_params": 0})
    for precision in ("bf16", "amp-bf16"):
        settings = TrainingSettings(seq_len=32, precision=precision)
        phase = "end of forward"
        for measure in (trace_step, estimate_memory):
            mllama = measure(TINY_MLLAMA, settings).phase_components_gib[phase]
            plain = measure(llama, settings).phase_components_gib[phase]
            for part in ("activations", "autocast_weight_copies"):
                assert mllama.get(part, 0.0) == pytest.approx(plain.get(part, 0.0))


def test_the_tiny_models_geometry():
    """2 tiles of 5 patches padded to 8: 16 patches per image; the cross-attention layer at index 2
    of 3 (Llama 3.2 Vision's 3, 8, ..., 38 of 40)."""
    vision = MllamaVision(TINY_MLLAMA, TINY_MLLAMA.vision, "fused", "none")
    assert (vision.tiles, vision.patches_per_tile, vision.padded_per_tile) == (2, 5, 8)
    assert TINY_MLLAMA.vision.tokens_per_image == PADDED
    assert cross_attention_positions(3, 1) == {2}
    assert cross_attention_positions(40, 8) == {3, 8, 13, 18, 23, 28, 33, 38}


def test_what_the_trace_does_not_build_is_refused_by_name():
    for changes, name in [
        ({"liger": True}, "Liger kernels"),
        ({"checkpointing": "full", "checkpoint_unit": "submodule"}, "per-submodule checkpointing"),
        ({"checkpointing": "op-selective"}, "per-op checkpointing"),
        ({"activation_offload": True}, "activation offloading"),
    ]:
        with pytest.raises(UnsupportedConfiguration, match=name):
            check_traceable(TINY_MLLAMA, TrainingSettings(images_per_sample=1, **changes))
