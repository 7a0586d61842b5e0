"""Properties of the planner over generated asks.

- No plan exceeds its GPU's memory (checked again with the memory engine) and the plan chosen
  under a deadline meets it.
- The planner's cheapest plan is never dearer than the cheapest option of the Cost page
  (calculators.cost.options.cost_options) for one fixed layout with the same global batch and tokens:
  the planner searches that layout's GPU count among others.

Examples per property: 25 here, 400 with GPU_SIZING_LONG_PROPERTIES=1.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from calculators.cost.options import cheapest, cost_options
from calculators.cost.prices import load_prices
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.memory.engine import estimate_memory
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.models.presets import get_preset
from calculators.plan.search import PlanRequest, plan_run
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

LONG = os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1"
PROPERTY = settings(
    max_examples=400 if LONG else 25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PRICES = load_prices()
PRICED = sorted({price.gpu for price in PRICES})
CATALOGUE = [gpu for gpu in load_gpu_catalogue() if gpu.name in PRICED and gpu.dense_tflops("bf16")]
MODELS = ["gpt2", "llama-3.2-1b", "llama-3.1-8b", "qwen2.5-0.5b"]


@st.composite
def asks(draw):
    model = draw(st.sampled_from([name for name in MODELS if _exists(name)]))
    gpus = draw(st.lists(st.sampled_from(CATALOGUE), min_size=1, max_size=3, unique_by=lambda gpu: gpu.name))
    fixed = TrainingSettings(
        seq_len=draw(st.sampled_from([512, 1024, 2048])),
        micro_batch=draw(st.sampled_from([1, 2, 4, 8])),
        grad_accum=draw(st.sampled_from([1, 2, 4])),
        gpus=draw(st.sampled_from([1, 2, 4, 8])),
        zero=draw(st.integers(0, 3)),
        checkpointing=draw(st.sampled_from(["none", "selective", "full"])),
    )
    tokens = draw(st.sampled_from([1e8, 1e9, 2e10]))
    deadline = draw(st.sampled_from([None, 1.0, 24.0, 500.0]))
    return get_preset(model), gpus, fixed, tokens, deadline


def _exists(name: str) -> bool:
    try:
        get_preset(name)
    except KeyError:
        return False
    return True


@PROPERTY
@given(asks())
def test_plans_fit_meet_the_deadline_and_beat_the_fixed_layout(ask):
    spec, gpus, fixed, tokens, deadline = ask
    global_batch = fixed.micro_batch * fixed.grad_accum * fixed.gpus * fixed.seq_len
    request = PlanRequest(dataset_tokens=tokens, global_batch_tokens=global_batch, deadline_hours=deadline,
                          max_gpus=fixed.gpus)  # fmt: skip
    result = plan_run(spec, fixed, request, gpus, PRICES)
    capacity = {gpu.name: gpu_memory_gib(gpu) for gpu in gpus}
    for plan in result.plans:
        assert plan.peak_gib <= capacity[plan.gpu]
        recomputed = estimate_memory(spec, plan.training_settings(fixed)).peak_gib
        assert recomputed <= capacity[plan.gpu] + 1e-9
        assert plan.global_batch_tokens == global_batch
    if result.best_under_deadline is not None and deadline is not None:
        assert result.best_under_deadline.hours <= deadline
    if deadline is not None and result.plans and result.fastest.hours > deadline:
        assert result.best_under_deadline is None and result.problems

    peak = estimate_memory(spec, fixed).peak_gib
    options = cost_options(spec, fixed, TimeSettings(dataset_tokens=tokens), PRICES, gpus, peak_gib=peak)
    options = [option for option in options if option.gpus_per_instance >= option.gpus or
               option.gpus % option.gpus_per_instance == 0]  # fmt: skip
    on_demand, spot = cheapest(options), cheapest(options, spot=True)
    assume(on_demand is not None)
    fixed_usd = on_demand.usd_on_demand if spot is None else min(on_demand.usd_on_demand, spot.usd_spot_expected)
    assert result.cheapest is not None
    assert result.cheapest.usd <= fixed_usd * (1 + 1e-9)
