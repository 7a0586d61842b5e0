"""Fit answers: verdict, largest micro-batch, fewest GPUs, and what to change."""

import pytest

from calculators.memory.fit import check_fit, max_micro_batch, min_gpus, peak_gib, suggestions, verdict
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings

LLAMA_8B = get_preset("llama-3.1-8b")


@pytest.mark.parametrize(
    ("peak", "capacity", "expected"),
    [(75.9, 80, "fits"), (76.0, 80, "fits"), (76.1, 80, "tight"), (80.0, 80, "tight"), (80.01, 80, "does not fit")],
)
def test_verdict_keeps_five_percent_headroom_for_fits(peak, capacity, expected):
    assert verdict(peak, capacity) == expected


def test_largest_micro_batch_fits_and_one_more_does_not():
    settings = TrainingSettings(precision="bf16-mixed", optimizer_impl="fused", checkpointing="full", seq_len=4096)
    largest = max_micro_batch(LLAMA_8B, settings, 192.0)
    assert largest is not None and largest > 1
    assert peak_gib(LLAMA_8B, settings, micro_batch=largest) <= 192.0
    assert peak_gib(LLAMA_8B, settings, micro_batch=largest + 1) > 192.0


def test_no_micro_batch_fits_when_the_states_alone_overflow():
    """bf16-mixed AdamW keeps 16 bytes per parameter: 8.03e9 x 16 B = 119.7 GiB > 80 GiB."""
    assert max_micro_batch(LLAMA_8B, TrainingSettings(), 80.0) is None


def test_fewest_gpus_with_zero3_is_the_first_count_that_fits():
    settings = TrainingSettings(zero=3, gpus=1, checkpointing="full", optimizer_impl="fused")
    fewest = min_gpus(LLAMA_8B, settings, 24.0)
    assert fewest is not None and fewest > 1
    assert peak_gib(LLAMA_8B, settings, gpus=fewest) <= 24.0
    assert peak_gib(LLAMA_8B, settings, gpus=fewest - 1) > 24.0


def test_without_zero_more_gpus_do_not_help():
    assert min_gpus(LLAMA_8B, TrainingSettings(gpus=4), 80.0) is None


def test_check_fit_reports_headroom_against_the_capacity():
    result = check_fit(get_preset("gpt2"), TrainingSettings(micro_batch=8, seq_len=1024), 80.0)
    assert result.verdict == "fits"
    assert result.headroom_gib == pytest.approx(80.0 - result.peak_gib)
    assert result.headroom_fraction == pytest.approx(result.headroom_gib / 80.0)
    assert result.min_gpus == 1 and result.max_micro_batch >= 8


def test_suggestions_only_list_changes_that_lower_the_peak_and_put_fits_first():
    settings = TrainingSettings(micro_batch=4, seq_len=4096, precision="amp-bf16", optimizer_impl="fused")
    current = peak_gib(LLAMA_8B, settings)
    found = suggestions(LLAMA_8B, settings, 80.0)
    assert found and all(s.peak_gib < current for s in found)
    fitting = [s.fits for s in found]
    assert fitting == sorted(fitting, reverse=True)
    assert found[0].fits  # something, alone or combined, makes it fit


def test_suggestions_leave_out_changes_the_engine_does_not_model():
    """fp8 without checkpointing on a card too small: op-selective checkpointing and LoRA/QLoRA
    are not modelled with fp8 (estimate_memory refuses both), so neither is suggested, and the
    suggestions (the Memory page's, found crashing it by the page fuzz test) come back."""
    settings = TrainingSettings(micro_batch=4, seq_len=4096, precision="fp8", checkpointing="none")
    found = suggestions(LLAMA_8B, settings, 24.0)
    changes = [s.change for s in found]
    assert changes and "Turn on full activation checkpointing" in changes
    assert not any("op" in c and "selective" in c or "LoRA" in c for c in changes), changes


def test_suggestions_leave_out_changes_the_settings_themselves_refuse():
    """Stepping the optimizer in backward refuses gradient accumulation and CPU optimizer offload,
    and Liger replaces the loss with its fused linear cross-entropy: neither is suggested."""
    in_backward = suggestions(LLAMA_8B, TrainingSettings(micro_batch=4, seq_len=4096, optimizer_in_backward=True), 24)
    assert not [s.change for s in in_backward if "accumulation" in s.change or "Offload the optimizer" in s.change]
    liger = suggestions(LLAMA_8B, TrainingSettings(micro_batch=4, seq_len=4096, liger=True), 24.0)
    assert in_backward and liger and not [s.change for s in liger if "cross-entropy" in s.change]


def test_a_combination_is_offered_when_no_single_change_fits():
    """8B with fp32 autocast weights on 4k tokens needs both sharding and recomputation."""
    settings = TrainingSettings(micro_batch=4, seq_len=4096, precision="amp-bf16")
    found = suggestions(LLAMA_8B, settings, 80.0)
    assert found[0].change.startswith("Together: ") and found[0].fits
    assert found[0].peak_gib <= 80.0


@pytest.mark.parametrize("preset", ["gpt2", "bert-large-uncased", "llama-3.1-8b", "mixtral-8x7b"])
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"precision": "amp-bf16", "attention": "eager", "checkpointing": "selective"},
        {"precision": "fp32", "optimizer": "adafactor", "zero": 3, "gpus": 16, "checkpointing": "full"},
        {"method": "lora", "checkpointing": "full"},
        {"method": "qlora", "lora_rank": 64, "lora_targets": "qvo-mlp", "precision": "bf16", "attention": "eager"},
        {"method": "lora", "precision": "amp-bf16", "lora_targets": "attention", "frozen_layers": 4},
        {"tensor_parallel": 2, "gpus": 4, "zero": 1, "checkpointing": "selective"},
        {"pipeline_parallel": 4, "grad_accum": 8, "checkpointing": "full", "frozen_layers": 2},
        {"offload_optimizer": True, "zero": 2, "gpus": 8, "grad_accum": 2},
        {"zero": 3, "gpus": 8, "offload_parameters": True, "offload_optimizer": True, "method": "qlora"},
        {"tensor_parallel": 4, "pipeline_parallel": 2, "grad_accum": 4, "method": "lora", "optimizer": "adamw-8bit"},
    ],
)
@pytest.mark.parametrize("capacity_gib", [24.0, 80.0, 192.0])
def test_solved_max_micro_batch_equals_a_plain_binary_search(preset, changes, capacity_gib):
    """The affine shortcut must give exactly what searching the estimator gives."""
    from calculators.memory.fit import MAX_MICRO_BATCH_SEARCHED, largest_passing

    spec, settings = get_preset(preset), TrainingSettings(**changes)
    searched = largest_passing(
        1, MAX_MICRO_BATCH_SEARCHED, lambda b: peak_gib(spec, settings, micro_batch=b) <= capacity_gib
    )
    assert max_micro_batch(spec, settings, capacity_gib) == searched
