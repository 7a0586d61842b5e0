"""The traced step holds a vision-language model's encoder and projector as parameters of their
sizes (measure.trace.models._build_vision): the trace and the engine agree on their weights,
gradients and optimizer states, trained, frozen, and under LoRA; images are refused by name."""

from __future__ import annotations

import pytest

from calculators.memory import GIB, estimate_memory
from calculators.model_input import spec_from_config_dict
from calculators.training import TrainingSettings

torch = pytest.importorskip("torch")

from measure.trace.result import UnsupportedConfiguration  # noqa: E402
from measure.trace.support import check_settings  # noqa: E402
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


def test_images_are_refused_by_name():
    with pytest.raises(UnsupportedConfiguration, match="images are not traced"):
        check_settings(TrainingSettings(images_per_sample=1))
