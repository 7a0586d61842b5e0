"""Tests for calculators.plan.search: hand-worked small cases, the stack rules, impossible asks, the CLI."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from calculators.cost.options import OwnershipSettings, owned_usd_per_gpu_hour
from calculators.cost.prices import CloudPrice, load_prices
from calculators.hardware.catalogue import GpuSpec, find_gpu, load_gpu_catalogue
from calculators.interface.cli import main
from calculators.models.presets import get_preset
from calculators.models.spec import ModelSpec
from calculators.plan.layouts import micro_batch_choices
from calculators.plan.search import (
    PlanRequest,
    default_global_batch_tokens,
    gpu_counts,
    plan_run,
)
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

# A two-layer model worked out by hand: per layer q, k, v, o 4 x 512 x 512 = 1,048,576 and a
# SwiGLU MLP 3 x 512 x 1024 = 1,572,864; two layers 5,242,880; LM head 512 x 1000 = 512,000:
# N = 5,754,880 matmul weights. At seq_len 512 without recomputation:
# 6N + 12 x L x s x (heads x head_dim) = 34,529,280 + 12 x 2 x 512 x 512 = 40,820,736 FLOPs per token.
TINY = ModelSpec(
    name="tiny", n_layers=2, hidden_size=512, n_heads=8, n_kv_heads=8, ffn_hidden_size=1024, vocab_size=1000,
    max_position_embeddings=512,
)  # fmt: skip
FLOPS_PER_TOKEN = 40_820_736
TOKENS = 4.096e11  # 1e8 steps of 8 x 512 tokens
# On one GPU at a flat utilisation of 0.5: hours = tokens x FLOPs per token / (peak x 0.5) / 3600.
FAST_HOURS = TOKENS * FLOPS_PER_TOKEN / (200e12 * 0.5) / 3600  # 46.4450 h
SLOW_HOURS = TOKENS * FLOPS_PER_TOKEN / (100e12 * 0.5) / 3600  # 92.8900 h
TIME = TimeSettings(dataset_tokens=1.0, utilisation=0.5)
BASE = TrainingSettings(seq_len=512)


def gpu(name: str, bf16_tflops: float, **changes) -> GpuSpec:
    fields = {
        "name": name,
        "vendor": "NVIDIA",
        "category": "datacenter",
        "memory_gb": 80,
        "memory_bandwidth_tbps": 2.0,
        "bf16_tflops": bf16_tflops,
        "launch_year": 2024,
        "source": "test",
        "as_of": dt.date(2026, 1, 1),
    }
    return GpuSpec(**(fields | changes))


def row(provider: str, gpu_name: str, usd: float, spot: float | None = None, count: int = 1) -> CloudPrice:
    return CloudPrice(
        provider=provider,
        instance_type=f"{gpu_name}-x{count}",
        gpu=gpu_name,
        gpu_count=count,
        region="r1",
        on_demand_usd_per_hour=usd,
        spot_usd_per_hour=spot,
        source="test",
        as_of=dt.date(2026, 1, 1),
    )


FAST, SLOW = gpu("Fast", 200), gpu("Slow", 100)
# Two providers: P1 rents Fast at $4/h; P2 rents Slow at $1/h and Fast at $5/h.
PRICES = [row("P1", "Fast", 4.0), row("P2", "Slow", 1.0), row("P2", "Fast", 5.0)]


def small_plan(**request):
    fields = {"dataset_tokens": TOKENS, "global_batch_tokens": 8 * 512, "max_gpus": 1} | request
    return plan_run(TINY, BASE, PlanRequest(**fields), [FAST, SLOW], PRICES, TIME)


def test_hand_worked_front_of_two_gpus_and_two_providers():
    result = small_plan()
    fastest, cheapest = result.plans
    assert (fastest.gpu, fastest.provider) == ("Fast", "P1")  # P2's Fast costs more for the same hours
    assert fastest.hours == pytest.approx(46.4450, rel=1e-4)
    assert fastest.usd == pytest.approx(4.0 * 46.4450, rel=1e-4)  # $185.78
    assert (cheapest.gpu, cheapest.provider) == ("Slow", "P2")
    assert cheapest.hours == pytest.approx(92.8900, rel=1e-4)
    assert cheapest.usd == pytest.approx(92.8900, rel=1e-4)  # half of the fast plan's cost
    assert fastest.hours == pytest.approx(FAST_HOURS) and cheapest.hours == pytest.approx(SLOW_HOURS)
    # The whole batch of 8 sequences in one micro-batch: nothing to accumulate, nothing to recompute.
    assert (fastest.micro_batch, fastest.grad_accum, fastest.zero, fastest.checkpointing) == (8, 1, 0, "none")
    assert fastest.peak_gib <= 80 and fastest.headroom_gib == pytest.approx(80 - fastest.peak_gib)
    assert "faster than the next cheaper plan" in fastest.reason
    assert "cheaper than the next faster plan" in cheapest.reason


def test_deadline_picks_the_cheapest_plan_that_meets_it_and_budget_the_fastest_within_it():
    result = small_plan(deadline_hours=60)
    assert result.best_under_deadline.gpu == "Fast" and result.problems == []
    result = small_plan(budget_usd=100)
    assert result.best_under_budget.gpu == "Slow"
    result = small_plan(deadline_hours=100, budget_usd=200)
    assert result.best_under_deadline.gpu == "Slow" and result.best_under_budget.gpu == "Fast"


def test_impossible_deadline_and_budget_say_what_would_make_them_possible():
    result = small_plan(deadline_hours=40, budget_usd=50)
    assert result.best_under_deadline is None and result.best_under_budget is None
    deadline, budget = result.problems
    assert "the 40 h deadline" in deadline and "the fastest takes 46.4 h" in deadline
    assert "$50 budget" in budget and "the cheapest costs $93" in budget


def test_deadline_and_budget_each_possible_but_not_together():
    result = small_plan(deadline_hours=60, budget_usd=150)
    assert result.best_under_deadline is None
    assert result.problems == [
        "no plan meets both the deadline and the budget: within 60 h the cheapest costs $186; "
        "raise the budget to that or relax the deadline"
    ]


def test_a_model_too_large_for_every_gpu_gets_a_sentence_not_an_empty_answer():
    tiny_gpu = gpu("Tiny", 100, memory_gb=0.5)
    result = plan_run(
        get_preset("llama-3.1-8b"), TrainingSettings(), PlanRequest(dataset_tokens=1e9, max_gpus=2),
        [tiny_gpu], [row("P1", "Tiny", 1.0)], TIME,
    )  # fmt: skip
    assert result.plans == [] and "does not fit in memory" in result.problems[0]


def test_measured_matmul_fraction_replaces_the_default_for_that_gpu():
    """A calibration measured Fast's matmuls at 20% of dense peak (Slow not calibrated) and no
    utilisation is given: Fast's GEMMs are timed at 0.2 instead of the 0.80 assumed for an
    unknown family, exactly as if the user had given that matmul fraction; Slow is unchanged."""
    measured = {"Fast": 0.2}
    no_utilisation = TIME.model_copy(update={"utilisation": None})
    request = PlanRequest(dataset_tokens=TOKENS, global_batch_tokens=8 * 512, max_gpus=1)
    plain_fast = plan_run(TINY, BASE, request, [FAST], PRICES, no_utilisation)
    fast = plan_run(TINY, BASE, request, [FAST], PRICES, no_utilisation, measured_matmul_fraction=measured)
    given = no_utilisation.model_copy(update={"matmul_fraction": 0.2})
    as_given = plan_run(TINY, BASE, request, [FAST], PRICES, given)
    assert fast.plans[0].hours == pytest.approx(as_given.plans[0].hours)
    assert fast.plans[0].hours > plain_fast.plans[0].hours
    slow = plan_run(TINY, BASE, request, [SLOW], PRICES, no_utilisation, measured_matmul_fraction=measured)
    plain_slow = plan_run(TINY, BASE, request, [SLOW], PRICES, no_utilisation)
    assert slow.plans[0].hours == plain_slow.plans[0].hours
    assert (
        "calibrated matmul fraction of dense peak replaces mamf-finder's in each GEMM's roofline: Fast 20%"
        in fast.assumptions
    )
    # A utilisation given for all GPUs wins over the calibration, as on the Cost page.
    flat = plan_run(TINY, BASE, request, [FAST, SLOW], PRICES, TIME, measured_matmul_fraction=measured)
    assert [plan.hours for plan in flat.plans] == pytest.approx([FAST_HOURS, SLOW_HOURS])
    assert not any("calibrated" in line for line in flat.assumptions)
    with pytest.raises(ValueError, match="measured matmul fraction of Fast is 1.5"):
        plan_run(TINY, BASE, request, [FAST], PRICES, no_utilisation, measured_matmul_fraction={"Fast": 1.5})


def test_spot_plan_uses_the_expected_spot_hours():
    # One instance, 0.5 interruptions per hour (the default), 3 min checkpoints, 15 min restarts:
    # Young's interval sqrt(2 x 0.05 x 2) = 0.4472 h; the spot plan takes longer and costs $0.5/h.
    prices = [row("P1", "Fast", 4.0, spot=0.5)]
    result = plan_run(TINY, BASE, PlanRequest(dataset_tokens=TOKENS, global_batch_tokens=4096, max_gpus=1),
                      [FAST], prices, TIME)  # fmt: skip
    on_demand, spot = result.plans
    assert on_demand.pricing == "on-demand" and spot.pricing == "spot"
    assert spot.hours > on_demand.hours == pytest.approx(FAST_HOURS)
    assert spot.usd == pytest.approx(0.5 * spot.hours)
    no_spot = plan_run(TINY, BASE, PlanRequest(dataset_tokens=TOKENS, global_batch_tokens=4096, max_gpus=1,
                                               allow_spot=False), [FAST], prices, TIME)  # fmt: skip
    assert [plan.pricing for plan in no_spot.plans] == ["on-demand"]


def test_owned_hardware_costs_amortised_purchase_plus_power():
    # $30,000 over 3 years of 8760 h = $1.14155/h; power at the share 1.0 of TDP given here:
    # (700 W + 437 W host per GPU) x PUE 1.56 = 1,773.72 W x $0.13/kWh = $0.230584/h (calculators.cost.energy).
    h100 = find_gpu("H100-SXM5-80GB")
    assert owned_usd_per_gpu_hour(h100, OwnershipSettings(), 1.0) == pytest.approx(1.14155 + 0.230584, rel=1e-4)
    assert owned_usd_per_gpu_hour(gpu("NoPrice", 100), OwnershipSettings(), 1.0) is None
    owned = gpu("Owned", 200, price_usd=8760.0, price_kind="street", tdp_w=1000.0)  # $8760 over 3 years: $1/3 per hour
    result = plan_run(TINY, BASE, PlanRequest(dataset_tokens=TOKENS, global_batch_tokens=4096, max_gpus=1,
                                              include_owned=True), [owned], [], TIME)  # fmt: skip
    (plan,) = result.plans
    assert plan.pricing == "owned" and plan.provider == "owned"
    # 1/3 + (1,000 W + 437 W host) x PUE 1.56 = 2,241.72 W x 0.13 = 0.33333 + 0.291424 = $0.624757 per hour.
    assert plan.usd == pytest.approx(0.624757 * FAST_HOURS, rel=1e-5)


def test_providers_filter_keeps_only_those_rows():
    result = small_plan(providers=("p1",))
    assert {plan.provider for plan in result.plans} == {"P1"}


def test_gpu_counts_fill_one_node_then_whole_nodes():
    assert gpu_counts(64, 8) == [1, 2, 4, 8, 16, 32, 64]
    assert gpu_counts(20, 8) == [1, 2, 4, 8, 16]
    assert gpu_counts(4, 1) == [1, 2, 4]
    assert micro_batch_choices(24) == [1, 2, 4, 8]
    assert micro_batch_choices(3) == [1]


def test_default_global_batch():
    assert default_global_batch_tokens("train", 2048) == 4_194_304  # Llama 2's 4M tokens
    assert default_global_batch_tokens("finetune-lora", 2048) == 262_144  # 128 sequences


CATALOGUE = load_gpu_catalogue()
PRICES_ALL = load_prices()


def test_qlora_never_lands_on_a_gpu_without_nf4_kernels_and_inferentia_never_trains():
    spec = get_preset("llama-3.1-8b")
    for mode in ("train", "finetune-qlora"):
        result = plan_run(spec, TrainingSettings(), PlanRequest(mode=mode, dataset_tokens=1e9, max_gpus=8),
                          CATALOGUE, PRICES_ALL)  # fmt: skip
        gpus = {plan.gpu for plan in result.plans} | {result.best_under_deadline.gpu}
        assert "Inferentia2-32GB" not in gpus
        if mode == "finetune-qlora":
            assert not any(name.startswith(("TPU", "Trainium")) for name in gpus)


def test_full_catalogue_plan_is_quick_and_fits():
    result = plan_run(get_preset("llama-3.1-8b"), TrainingSettings(), PlanRequest(dataset_tokens=2e10,
                      deadline_hours=72), CATALOGUE, PRICES_ALL)  # fmt: skip
    assert result.best_under_deadline is not None and result.best_under_deadline.hours <= 72
    assert all(plan.peak_gib <= plan.gpu_memory_gib for plan in result.plans)
    assert result.searched > 100


def test_cli_plan_json(capsys):
    code = main(["plan", "--model", "llama-3.1-8b", "--dataset-tokens", "2e10", "--deadline-hours", "72",
                 "--max-gpus", "16", "--providers", "Lambda", "AWS", "--no-spot", "--json"])  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("plans", "best_under_deadline", "best_under_budget", "searched", "seconds"):
        assert key in result
    plan = result["plans"][0]
    keys = ("gpu", "gpus", "provider", "instance_type", "pricing", "zero", "tensor_parallel", "pipeline_parallel",
            "checkpointing", "micro_batch", "grad_accum", "peak_gib", "hours", "usd")  # fmt: skip
    assert set(keys) <= set(plan)
    assert {p["provider"] for p in result["plans"]} <= {"Lambda", "AWS"}
    assert {p["pricing"] for p in result["plans"]} == {"on-demand"}
    assert all(p["gpus"] <= 16 for p in result["plans"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--deadline-hours", "-1"],
        ["--budget-usd", "0"],
        ["--max-gpus", "0"],
        ["--mode", "inference"],
        ["--global-batch-tokens", "100"],
        ["--providers", "NoSuchCloud"],
    ],
)
def test_cli_plan_bad_input_is_one_error_line(argv, capsys):
    code = main(["plan", "--model", "llama-3.1-8b", "--dataset-tokens", "1e9", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1


def test_plan_page_caption_says_the_calibration_is_applied():
    from ui.plan_view import calibration_caption

    assert calibration_caption({}) is None
    assert calibration_caption({"H100-SXM5-80GB": 0.4512}).startswith(
        "Calibrated matmul fraction applied: H100-SXM5-80GB 45% of dense peak"
    )


def test_the_plan_does_not_depend_on_the_sidebars_micro_batch():
    # the search sets the micro-batch and accumulation from the global batch (PLAN_LAYOUT_FIELDS), so the
    # Time and cost page keeps its cheapest fitting layout across changes of those two alone
    spec = get_preset("llama-2-7b")
    request = PlanRequest(mode="train", dataset_tokens=2e9, epochs=1, allow_spot=False, gpus=("RTX-4090-24GB",))
    plans = {
        plan_run(
            spec,
            TrainingSettings(micro_batch=mb, grad_accum=ga),
            request,
            list(load_gpu_catalogue()),
            load_prices(),
            TimeSettings(dataset_tokens=2e9),
        ).cheapest.model_dump_json()  # fmt: skip
        for mb, ga in ((1, 1), (7, 3), (16, 2))
    }
    assert len(plans) == 1
