"""The peak's floor from the model states alone (engine.peak_floor_gib), which the search over
changes reads to leave out triples and GPU counts that cannot fit: never above the peak
step_memory works out, over a grid of models and settings, and a hand-worked figure."""

from __future__ import annotations

import pytest

from calculators.memory.engine import peak_floor_gib, step_memory, step_states
from calculators.models.library import library_spec
from calculators.models.presets import get_preset
from calculators.units import GIB
from calculators.workload.training import TrainingSettings

MODELS = {
    "gpt2": lambda: get_preset("gpt2"),
    "llama-3.2-1b": lambda: get_preset("llama-3.2-1b"),
    "mixtral-8x7b": lambda: get_preset("mixtral-8x7b"),  # a mixture of experts
    "deepseek-v2": lambda: library_spec("deepseek-ai/DeepSeek-V2"),  # latent attention, dense first layer
    "t5-small": lambda: library_spec("google-t5/t5-small"),  # encoder-decoder
    "llama-3.2-11b-vision": lambda: library_spec("meta-llama/Llama-3.2-11B-Vision"),  # cross-attention images
}

VARIANTS: tuple[dict, ...] = (
    {},
    {"micro_batch": 8, "seq_len": 4096},
    {"grad_accum": 4},
    {"checkpointing": "full", "precision": "amp-bf16"},
    {"precision": "fp8", "checkpointing": "selective"},
    {"method": "lora"},
    {"method": "qlora", "optimizer": "paged-adamw-8bit"},  # the loading phase; states outside the allocator
    {"optimizer": "paged-adamw"},
    {"optimizer_in_backward": True},  # no optimizer step phase
    {"optimizer_in_backward": True, "precision": "bf16", "optimizer_impl": "for-loop"},
    {"optimizer": "adafactor", "frozen_layers": 1},
    {"zero": 3, "gpus": 8, "sharding_impl": "fsdp2"},
    {"zero": 3, "gpus": 8, "load_whole_model": True},  # the loading phase holds the whole model
    {"zero": 2, "gpus": 2, "offload_optimizer": True},
    {"zero": 3, "gpus": 16, "offload_optimizer": True, "offload_parameters": True},
    {"activation_offload": True, "checkpointing": "full"},
    {"tensor_parallel": 2, "gpus": 4},
    {"pipeline_parallel": 4, "grad_accum": 8},  # two stages, each with its own states
    {"pipeline_parallel": 2, "tensor_parallel": 2, "method": "lora"},
    {"loss": "fused-linear", "keep_gradients": True},
    {"images_per_sample": 1},
)


@pytest.mark.parametrize("model", MODELS)
def test_the_floor_is_never_above_the_peak(model):
    spec = MODELS[model]()
    compared = 0
    for variant in VARIANTS:
        settings = TrainingSettings(**variant)
        try:
            before = step_states(spec, settings)
        except ValueError:  # settings this model cannot take: step_memory refuses them too
            with pytest.raises(ValueError):
                step_memory(spec, settings)
            continue
        floor, peak = peak_floor_gib(before), step_memory(spec, settings, before).peak_gib
        assert floor <= peak, (model, variant, floor, peak)
        assert step_memory(spec, settings).peak_gib == peak  # `before` is what step_memory works out itself
        compared += 1
    assert compared >= len(VARIANTS) // 2


def test_gpt2_fp32_floor_is_its_optimizer_step():
    """GPT-2 small (P = 124,439,808 parameters, all trained) in fp32 with AdamW (foreach) on one GPU,
    gradients freed after each step: the optimizer step holds the weights (4P bytes), the gradients
    (4P), exp_avg and exp_avg_sq (8P) and the foreach update's sqrt of every state (4P): 20P =
    2,488,796,160 bytes. With the allocator's 10% reserve and the CUDA context (0.5 GiB) and cuBLAS
    workspace (0.03 GiB): 2,737,675,776 / 2^30 + 0.53 = 3.0796 GiB."""
    before = step_states(get_preset("gpt2"), TrainingSettings(precision="fp32"))
    assert peak_floor_gib(before) == pytest.approx(2_737_675_776 / GIB + 0.53, rel=1e-12)
