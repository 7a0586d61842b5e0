"""What the memory engine remembers and shares to be fast must never change an answer: a model's
shape facts are remembered by its field values (geometry.remembered), the change search reads the
engine's numbers without the report (engine.step_memory) and estimates each distinct settings once.
bench/engine_equivalence.py compares whole results with the code before these caches."""

from __future__ import annotations

from calculators.hardware.catalogue import find_gpu
from calculators.memory.engine import estimate_memory, step_memory
from calculators.models.geometry import layer_linears, parameter_count
from calculators.models.library import library_spec
from calculators.models.presets import get_preset
from calculators.plan.changes import ChangeSearch
from calculators.workload.training import TrainingSettings

GPT2 = get_preset("gpt2")


def test_a_changed_field_is_a_new_model_for_the_remembered_count():
    """GPT-2 small has 124,439,808 parameters, 7,087,872 per layer (4h^2 + 4h attention with
    biases, 8h^2 + 5h MLP, two LayerNorms of 2h, h = 768); a copy with a 13th layer has one more
    layer's worth, whatever was remembered for the 12-layer model before."""
    assert parameter_count(GPT2).total == 124_439_808
    deeper = GPT2.model_copy(update={"n_layers": 13})
    assert parameter_count(deeper).total == 124_439_808 + 7_087_872
    assert parameter_count(GPT2).total == 124_439_808


def test_each_caller_gets_its_own_list_of_linears():
    """Dropping a linear from one answer leaves the next answer whole: GPT-2's layer has a fused
    qkv, o, fc1 and fc2."""
    first = layer_linears(GPT2)
    first.pop()
    assert [linear.name for linear in layer_linears(GPT2)] == ["qkv", "o", "fc1", "fc2"]


def test_a_model_with_a_vision_tower_is_counted_afresh():
    """A vision tower is a pydantic model, unhashable: such a spec is not remembered, and counting
    it twice gives the same count."""
    spec = library_spec("Qwen/Qwen2.5-VL-3B-Instruct")
    assert parameter_count(spec) == parameter_count(spec.model_copy(deep=True))


def test_the_search_reads_the_numbers_the_report_shows():
    """step_memory is what estimate_memory reports from: the same peak, phases, host memory and
    reserve, under ZeRO-3 with the optimizer offloaded and under pipeline parallelism."""
    for settings in (
        TrainingSettings(zero=3, gpus=8, offload_optimizer=True),
        TrainingSettings(pipeline_parallel=4, grad_accum=8, micro_batch=2),
    ):
        numbers, report = step_memory(GPT2, settings), estimate_memory(GPT2, settings)
        assert numbers.peak_gib == report.peak_gib and numbers.phases_gib == report.phases_gib
        assert numbers.host_memory_gib == report.host_memory_gib
        assert numbers.reserved_gib == report.reserved_gib


def test_an_update_to_the_value_already_set_is_not_estimated_again():
    """The GPU bisection asks for the current GPU count first: the same settings as the combination
    without it, so the estimate is shared."""
    settings = TrainingSettings(zero=3)
    search = ChangeSearch(GPT2, settings, 24.0, find_gpu("RTX-4090-24GB"))
    made = search.estimates
    same = search._estimate({"gpus": 1}, settings.model_copy(update={"gpus": 1}))
    assert search.estimates == made and same is search.base
