"""FSDP2 and NeMo Automodel: the gathered root unit, the reduce-scatter buffer, per-submodule
checkpointing and logits kept through backward, each with hand-worked numbers."""

from __future__ import annotations

import pytest

from calculators.memory.activations.head import kept_logits_bytes
from calculators.memory.activations.layer import (
    kept_per_layer_bytes,
    layer_activation_terms,
    submodule_backward_peak_bytes,
    submodule_checkpoint_inputs_bytes,
)
from calculators.memory.engine import estimate_memory
from calculators.memory.layout import stage_layout
from calculators.memory.states import fsdp2_reduce_scatter_bytes, fsdp2_root_gathered_bytes, fsdp2_root_gradient_bytes
from calculators.models.geometry import parameter_count
from calculators.models.presets import get_preset
from calculators.workload.frameworks import framework_defaults
from calculators.workload.training import TrainingSettings

LLAMA_1B = get_preset("llama-3.2-1b")  # 16 layers, h 2048, ffn 8192, vocab 128256, tied
LLAMA_8B = get_preset("llama-3.1-8b")
GIB = 2**30


def automodel(**changes) -> TrainingSettings:
    """The Automodel rows' workload: 8 x 2048 tokens, pure bf16, FSDP2 over 8 GPUs, full AC."""
    values = dict(framework="automodel", precision="bf16", zero=3, gpus=8, checkpointing="full")
    return TrainingSettings(**(values | dict(micro_batch=8, seq_len=2048) | changes))


def layout(spec, settings):
    return stage_layout(spec, parameter_count(spec), settings, "only")


def test_automodel_ships_submodule_checkpointing_kept_logits_and_fsdp2():
    assert framework_defaults("automodel") == {
        "loss": "full",
        "optimizer_impl": "foreach",
        "checkpoint_unit": "submodule",
        "logits_in_backward": "kept",
        "sharding_impl": "fsdp2",
    }
    plain = TrainingSettings()
    assert (plain.checkpoint_unit, plain.logits_in_backward, plain.sharding_impl) == ("layer", "freed", "zero")
    assert automodel(checkpoint_unit="layer").checkpoint_unit == "layer"  # explicit wins
    assert TrainingSettings(framework="torchtitan").sharding_impl == "fsdp2"


def test_submodule_checkpointing_keeps_four_inputs_per_layer():
    """Two norms' inputs (the residual stream) and their outputs (attention's and MLP's input):
    (2 + 2) x 2 B x 16,384 tokens x 2048 = 268,435,456 B, against 67,108,864 for the layer's input."""
    tokens = 8 * 2048
    assert submodule_checkpoint_inputs_bytes(LLAMA_1B, automodel(), tokens) == 268_435_456
    terms = layer_activation_terms(LLAMA_1B, automodel())
    assert kept_per_layer_bytes(terms, LLAMA_1B, automodel()) == 268_435_456
    assert kept_per_layer_bytes(terms, LLAMA_1B, automodel(checkpoint_unit="layer")) == 67_108_864


def test_one_rebuilt_submodule_at_a_time_in_backward():
    """The MLP is rebuilt alone: its saved tensors (input 64 MiB, gate, up, silu(gate), product:
    4 x 256 MiB = 1088 MiB) plus the gradients of gate and up, 2 x 2 B x 16,384 x 8192 = 512 MiB:
    1600 MiB; the attention (projections 256 MiB and core 66 MiB, plus the gradients of its output
    and of v, 2 x 64 MiB, and of the residual stream, 64 MiB: 514 MiB) is smaller."""
    terms = layer_activation_terms(LLAMA_1B, automodel())
    assert terms["mlp"] == 1088 * 2**20
    assert submodule_backward_peak_bytes(terms, LLAMA_1B, automodel()) == 1600 * 2**20


def test_kept_logits_are_the_bf16_logits():
    """2 B x 16,384 tokens x 128,256 = 4,202,692,608 B; none with the fused-linear loss or when freed."""
    assert kept_logits_bytes(LLAMA_1B, automodel()) == 4_202_692_608
    assert kept_logits_bytes(LLAMA_1B, automodel(loss="fused-linear")) == 0
    assert kept_logits_bytes(LLAMA_1B, automodel(logits_in_backward="freed")) == 0


def test_the_root_unit_is_gathered_in_the_compute_dtype():
    """Llama-3.2-1B's root unit: the tied embedding/head 128,256 x 2048 = 262,668,288 and the final
    norm 2048: 262,670,336 x 2 B = 525,340,672 B. Llama-3.1-8B (untied): embedding 525,336,576 + head
    525,340,672 = 1,050,677,248 x 2 B. Nothing under ZeRO's own ZeRO-3 or on one GPU."""
    assert fsdp2_root_gathered_bytes(automodel(), layout(LLAMA_1B, automodel())) == 525_340_672
    titan = TrainingSettings(framework="torchtitan", precision="bf16-mixed", zero=3, gpus=8)
    assert fsdp2_root_gathered_bytes(titan, layout(LLAMA_8B, titan)) == 2 * 1_050_677_248
    zero = automodel(sharding_impl="zero")
    assert fsdp2_root_gathered_bytes(zero, layout(LLAMA_1B, zero)) == 0
    one = automodel(gpus=1)
    assert fsdp2_root_gathered_bytes(one, layout(LLAMA_1B, one)) == 0


def test_the_reduce_scatter_input_is_one_layer_in_the_reduce_dtype():
    """torchtitan reduces in fp32: 4 B x 218,112,000 (one Llama-3.1-8B layer) = 872,448,000 B;
    Automodel in bf16: 2 B x 60,821,504 (one Llama-3.2-1B layer) = 121,643,008 B."""
    titan = TrainingSettings(framework="torchtitan", precision="bf16-mixed", zero=3, gpus=8)
    assert fsdp2_reduce_scatter_bytes(titan, layout(LLAMA_8B, titan)) == 872_448_000
    assert fsdp2_reduce_scatter_bytes(automodel(), layout(LLAMA_1B, automodel())) == 121_643_008


def test_automodel_peak_is_the_loss_gradient_with_the_logits_kept():
    """At the loss gradient the weights are the shards 1,235,814,400 x 2 B / 8 = 308,953,600, two
    gathered layers 2 x 60,821,504 x 2 B = 243,286,016 and the root 525,340,672; the logits part is
    the full loss's 12 E (fp32 log-probabilities and two fp32 gradients) plus the 2 E bf16 logits
    `out` keeps, E = 16,384 x 128,256 = 2,101,346,304 elements."""
    estimate = estimate_memory(LLAMA_1B, automodel())
    assert estimate.peak_phase == "loss backward"
    logits = estimate.phase_components_gib["loss backward"]["logits_and_loss"]
    assert logits == pytest.approx(14 * 16_384 * 128_256 / GIB)
    weights = estimate.phase_components_gib["loss backward"]["weights"]
    assert weights == pytest.approx((308_953_600 + 243_286_016 + 525_340_672) / GIB)
    # after its backward the root is resharded: the optimizer step holds the shards and no root
    step = estimate.phase_components_gib["optimizer step"]["weights"]
    assert step == pytest.approx((308_953_600 + 243_286_016) / GIB)


def test_the_roots_gradients_wait_for_its_post_backward():
    """The tied head's and the final norm's unsharded bf16 gradients, (262,668,288 + 2048) x 2 B =
    525,340,672 B, are alive from the head's backward on; the last layer's backward has no pending
    reduce-scatter yet, the first layer's has one (121,643,008 B)."""
    settings = automodel(loss="fused-linear")
    assert fsdp2_root_gradient_bytes(settings, layout(LLAMA_1B, settings)) == 525_340_672
    phases = estimate_memory(LLAMA_1B, settings).phase_components_gib
    last, first = phases["backward, last layer"]["gradients"], phases["backward, first layer"]["gradients"]
    sharded = 2 * 1_235_814_400 / 8 + 2 * 60_821_504  # the shards and one layer's unsharded gradients
    assert last == pytest.approx((sharded * 262_670_336 / 1_235_814_400 + 525_340_672) / GIB)
    # by the first layer every gradient is made (the tied embedding has none of its own)
    assert first == pytest.approx((sharded + 525_340_672 + 121_643_008) / GIB)
