"""A vision-language model in the traced step (measure.trace.models._build_vision): its encoder's
layers built as calculators.workload.vision describes them and run on each image's patches, a one-linear
stand-in projector, and the image tokens joined to the text's. The trace and the engine agree on
the weights, gradients and optimizer states, trained, frozen and under LoRA, and on what the
images add: the encoder's saved tensors, the projector's input and the autocast weight casts."""

from __future__ import annotations

import pytest

from calculators.memory.engine import estimate_memory
from calculators.models.hf_config import spec_from_config_dict
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.result import UnsupportedConfiguration  # noqa: E402
from measure.trace.support import check_traceable  # noqa: E402
from measure.trace.tracer import trace_step  # noqa: E402

# A small LLaVA: a 2-layer Llama of width 64 and a 2-layer CLIP of width 32 on 28 px images.
TINY_LLAVA = spec_from_config_dict(
    {
        "model_type": "llava",
        "text_config": {
            "model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        },
        "vision_config": {
            "model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2,
            "num_hidden_layers": 2, "image_size": 28, "patch_size": 14,
        },
    }
)  # fmt: skip


@pytest.mark.parametrize("changes", [{}, {"freeze_vision_tower": True}, {"method": "lora", "precision": "bf16-mixed"}])
def test_trace_and_engine_agree_on_the_vision_weights(changes):
    settings = TrainingSettings(**({"seq_len": 32, "precision": "bf16-mixed"} | changes))
    traced = trace_step(TINY_LLAVA, settings)
    estimate = estimate_memory(TINY_LLAVA, settings)
    assert TINY_LLAVA.vision.parameters > 0 and TINY_LLAVA.extra_params > TINY_LLAVA.vision.parameters
    assert traced.allocated_gib * GIB == pytest.approx(estimate.allocated_gib * GIB, rel=1e-3)


def test_a_frozen_encoder_has_no_gradient_or_state_in_the_trace():
    """Frozen, the encoder's parameters leave the trained set: in fp32 the trace's gradients at the
    peak shrink by exactly its parameters x 4 bytes."""
    trained = trace_step(TINY_LLAVA, TrainingSettings(seq_len=32, precision="fp32"))
    frozen = trace_step(TINY_LLAVA, TrainingSettings(seq_len=32, precision="fp32", freeze_vision_tower=True))
    fewer = (trained.components_gib["gradients"] - frozen.components_gib["gradients"]) * GIB
    assert fewer == pytest.approx(4 * TINY_LLAVA.vision.parameters)


def images_add(measure, part: str, changes: dict, images: int = 2) -> float:
    """Bytes of `part` at the end of forward that `images` images add per sample, against the
    same sequence of text tokens alone (4 image tokens each)."""
    base = {"seq_len": 32, "precision": "bf16"} | changes
    with_images = measure(TINY_LLAVA, TrainingSettings(**base | {"images_per_sample": images}))
    text_only = measure(TINY_LLAVA, TrainingSettings(**base | {"seq_len": 32 + 4 * images}))
    after = with_images.phase_components_gib["end of forward"].get(part, 0.0)
    before = text_only.phase_components_gib["end of forward"].get(part, 0.0)
    return (after - before) * GIB


@pytest.mark.parametrize(
    "changes",
    [
        {"precision": "amp-bf16"},
        {"precision": "fp32"},
        {"freeze_vision_tower": True},
        {"checkpointing": "full"},
        {"method": "lora"},
        {"checkpointing": "full", "checkpoint_unit": "submodule"},
        {"liger": True},
        {"attention": "eager"},
        {"checkpointing": "selective"},
    ],
)
def test_images_add_what_the_engine_counts(changes):
    """Two images of 5 patches (4 and a CLS) each: the encoder's two layers keep what the
    language model's formulas give on its shapes (16,032 B in bf16), the projector its input, the
    4 image tokens of each image copied out of the slice that drops the CLS patch (2 x 4 x 32 x 2
    = 512 B in bf16; all there is with the encoder frozen), and nothing under LoRA, whose frozen
    encoder records nothing. In bf16 the CPU's LayerNorm keeps its mean and rstd in bf16 (a trace
    limit: fp32 on CUDA): 4 B less per norm and patch, 160 B here."""
    traced, estimated = (
        images_add(trace_step, "activations", changes),
        images_add(estimate_memory, "activations", changes),
    )
    cpu_layernorm_stats = (
        160 if changes.get("precision", "bf16") == "bf16" and "freeze_vision_tower" not in changes else 0
    )
    if changes.get("checkpointing") == "full" or changes.get("method") == "lora":
        cpu_layernorm_stats = 0  # no LayerNorm statistics kept
    assert estimated == pytest.approx(traced + cpu_layernorm_stats, abs=1)


def test_one_image_keeps_the_whole_encoder_output_through_the_projector_slice():
    """One image: the slice dropping the CLS patch flattens without a copy, so the projector keeps
    a view holding all 5 patches: 5 x 32 x 2 = 320 B (the encoder frozen, nothing else)."""
    changes = {"freeze_vision_tower": True}
    assert images_add(trace_step, "activations", changes, images=1) == 320
    assert images_add(estimate_memory, "activations", changes, images=1) == 320


def test_autocast_keeps_the_trained_vision_weights_casts():
    """Under amp-bf16 autocast caches a bf16 copy of every trained weight the images run through,
    until the encoder's backward. The trace casts the encoder's linears (biases included) and its
    one-linear projector (32 x 64); the engine the encoder's matmul weights and the whole projector
    (6,272 parameters), as a real projector's linears all are. Apart by 2 x (6,272 - 2,048) = 8,448
    less the biases' 2 x 2 x (4 x 32 + 64 + 32) = 896: 7,552 B."""
    changes = {"precision": "amp-bf16"}
    traced = images_add(trace_step, "autocast_weight_copies", changes)
    estimated = images_add(estimate_memory, "autocast_weight_copies", changes)
    assert TINY_LLAVA.extra_params - TINY_LLAVA.vision.parameters == 6_272
    assert estimated - traced == 7_552


def test_compiled_images_or_unknown_encoders_are_refused_by_name():
    with pytest.raises(UnsupportedConfiguration, match="torch.compile with images"):
        check_traceable(TINY_LLAVA, TrainingSettings(images_per_sample=1, compile=True, precision="bf16"))
    no_encoder = TINY_LLAVA.model_copy(update={"vision": None})
    with pytest.raises(UnsupportedConfiguration, match="encoder's shapes are not read"):
        check_traceable(no_encoder, TrainingSettings(images_per_sample=1, image_tokens=4))
