"""The fewest data-parallel GPUs 'What to change' offers (ChangeSearch._fewest_gpus: a guess on
the line through two peaks, checked on both sides, then bisection) against every count tried one
by one, and the guess itself on a hand-worked line."""

from __future__ import annotations

from calculators.hardware.catalogue import find_gpu
from calculators.memory.engine import step_memory
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.models.presets import get_preset
from calculators.plan.changes import ChangeSearch, crossing_gpus
from calculators.workload.training import TrainingSettings


def test_the_guess_is_where_the_line_on_one_over_gpus_meets_the_capacity():
    """Peaks of 100 GiB on 2 GPUs and 20 GiB on 10: on x = 1/GPUs the line falls 80 GiB over
    1/2 - 1/10 = 0.4, a slope of 200 GiB; it reaches 50 GiB at x = 1/10 + (50 - 20)/200 = 0.25,
    4 GPUs. A crossing at 3.2 GPUs rounds up to 4; one outside the interval is kept inside it."""
    assert crossing_gpus({2: 100.0, 10: 20.0}, 2, 10, 50.0) == 4
    assert crossing_gpus({2: 100.0, 10: 20.0}, 2, 10, 20.0 + 200 * (1 / 3.2 - 1 / 10)) == 4
    assert crossing_gpus({2: 100.0, 10: 20.0}, 2, 10, 99.9) == 3
    assert crossing_gpus({2: 100.0, 10: 20.0}, 2, 3, 50.0) is None  # no count between
    assert crossing_gpus({10: 20.0}, 2, 10, 50.0) is None  # a peak left out by its floor


def test_the_fewest_gpus_are_the_first_count_that_fits():
    """llama-2-7b full fine-tuning at micro-batch 8 on an 80 GB H100, with ZeRO-3 and each change
    that leaves it short on one GPU: the count found is the first that fits, counting up from two."""
    spec, gpu = get_preset("llama-2-7b"), find_gpu("H100-SXM5-80GB")
    capacity_gib = gpu_memory_gib(gpu)
    settings = TrainingSettings(micro_batch=8)
    search = ChangeSearch(spec, settings, capacity_gib, gpu)
    found = 0
    for update in (
        {"zero": 3, "offload_parameters": True, "checkpointing": "full"},
        {"zero": 3, "offload_parameters": True, "checkpointing": "op-selective"},
        {"zero": 3, "offload_parameters": True, "micro_batch": 4, "grad_accum": 2},
        {"zero": 3, "checkpointing": "full"},
        {"zero": 3, "checkpointing": "full", "optimizer": "adamw-8bit"},
        {"zero": 2, "checkpointing": "full"},
    ):
        fewest = search._fewest_gpus(update, 64)
        peaks = {g: step_memory(spec, settings.model_copy(update=update | {"gpus": g})).peak_gib for g in range(1, 65)}
        assert peaks[1] > capacity_gib, update  # short on one GPU: what the search asks more GPUs for
        fitting = [g for g in range(2, 65) if peaks[g] <= capacity_gib]
        assert fewest == (fitting[0] if fitting else None), update
        found += fewest is not None
    assert found >= 3
