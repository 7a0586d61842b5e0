"""Settings a model cannot take (images whose token count the model leaves open, more frozen or pipeline
layers than it has, tensor parallel that does not divide its heads, fp8 with what is not modelled):
checked before any estimate, each refused with one message.
"""

from __future__ import annotations

from calculators.models.spec import ModelSpec
from calculators.workload.training import (
    TrainingSettings,
    image_tokens_per_image,
)


def check_supported(spec: ModelSpec, settings: TrainingSettings) -> None:
    """Raise ValueError for settings this model cannot take."""
    if settings.optimizer == "lamb":
        raise ValueError(
            "LAMB is sized for the vision library's image models only; for a transformer choose adamw (the same two "
            "fp32 moments per parameter)"
        )
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
