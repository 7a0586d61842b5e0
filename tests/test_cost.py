"""Tests for calculators.cost.options: cost options, spot costs, the Pareto front and buy-vs-rent."""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest
from pydantic import ValidationError

from calculators.cost.options import (
    CostOption,
    OwnershipSettings,
    break_even_hours,
    buy_vs_rent,
    cheapest,
    cost_options,
    pareto_front,
    priced_options,
    ranked_and_set_apart,
    timed_rows,
)
from calculators.cost.prices import CloudPrice, load_prices
from calculators.cost.pricing import instances_needed, run_cost_usd
from calculators.cost.spot import expected_spot_hours
from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue
from calculators.models.presets import get_preset
from calculators.timing.estimate import estimate_time
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings

CATALOGUE = load_gpu_catalogue()
LLAMA2_7B = get_preset("llama-2-7b")
H100 = find_gpu("H100-SXM5-80GB")
# Llama-2-7B, bf16-mixed, micro-batch 1 x 4096 tokens on one H100 at utilisation 0.5:
# 46,084,915,200 FLOPs/token x 4096 / 494.5e12 = 0.381727 s per step; 1e9 tokens = 244,141 steps
# -> 244,141 x 0.381727 / 3600 = 25.8875 h.
ONE_GPU_HOURS = 25.8875
TIME = TimeSettings(dataset_tokens=1e9, utilisation=0.5)


def settings(**changes) -> TrainingSettings:
    return TrainingSettings(**({"micro_batch": 1, "seq_len": 4096, "precision": "bf16-mixed"} | changes))


def price(**changes) -> CloudPrice:
    base = {
        "provider": "TestCloud",
        "instance_type": "h100x1",
        "gpu": "H100-SXM5-80GB",
        "gpu_count": 1,
        "region": "r1",
        "on_demand_usd_per_hour": 3.0,
        "source": "test",
        "as_of": dt.date(2026, 1, 1),
    }
    return CloudPrice(**(base | changes))


def option(hours: float, usd: float, **changes) -> CostOption:
    """A CostOption with only time and cost that matter (for the Pareto front and cheapest)."""
    base = {
        "gpu": "H100-SXM5-80GB", "provider": "P", "instance_type": "i", "region": "r", "gpus": 8,
        "gpus_per_instance": 8, "instances": 1, "step_s": 1.0, "hours": hours, "on_demand_usd_per_hour": usd / hours,
        "spot_usd_per_hour": None, "usd_on_demand": usd, "usd_per_epoch_on_demand": usd,
        "usd_per_million_tokens_on_demand": usd, "interruptions_per_hour": None, "spot_hours_expected": None,
        "usd_spot_expected": None, "usd_spot_low": None, "usd_spot_high": None, "usd_per_epoch_spot": None,
        "fits_in_memory": None, "price_as_of": dt.date(2026, 1, 1), "source": "test",
    }  # fmt: skip
    return CostOption(**(base | changes))


def test_instances_round_up():
    assert instances_needed(8, 8) == 1
    assert instances_needed(9, 8) == 2
    assert instances_needed(1, 8) == 1
    assert instances_needed(8, 1) == 8


def test_cost_is_instances_times_price_times_hours():
    # 25.8875 h x 3.00 USD/h x 1 instance = 77.66 USD.
    (only,) = cost_options(LLAMA2_7B, settings(), TIME, [price()], CATALOGUE)
    assert only.hours == pytest.approx(ONE_GPU_HOURS, rel=1e-4)
    assert only.usd_on_demand == pytest.approx(77.66, rel=1e-3)
    assert only.usd_on_demand == run_cost_usd(1, 3.0, only.hours)
    # 1e9 tokens: 77.66 USD / 1000 million tokens = 0.0777 USD per million tokens.
    assert only.usd_per_million_tokens_on_demand == pytest.approx(only.usd_on_demand / 1000)


def test_eight_gpus_on_one_gpu_instances_rent_eight_instances_and_use_the_network():
    (only,) = cost_options(LLAMA2_7B, settings(gpus=8), TIME, [price()], CATALOGUE)
    assert only.instances == 8
    # 8 x 3.00 USD/h x hours
    assert only.usd_on_demand == pytest.approx(8 * 3.0 * only.hours)
    network = estimate_time(LLAMA2_7B, settings(gpus=8), H100, TIME.model_copy(update={"gpus_per_node": 1}))
    assert only.step_s == pytest.approx(network.step_s)


def test_a_partly_used_instance_is_paid_in_full():
    (only,) = cost_options(
        LLAMA2_7B, settings(gpus=2), TIME, [price(gpu_count=8, on_demand_usd_per_hour=24.0)], CATALOGUE
    )
    assert only.instances == 1 and only.gpus == 2
    assert only.usd_on_demand == pytest.approx(24.0 * only.hours)


def test_options_are_ranked_by_on_demand_cost():
    rows = [price(instance_type=f"i{usd}", on_demand_usd_per_hour=usd) for usd in (5.0, 2.0, 9.0)]
    options = cost_options(LLAMA2_7B, settings(), TIME, rows, CATALOGUE)
    assert [o.on_demand_usd_per_hour for o in options] == [2.0, 5.0, 9.0]


def test_spot_with_no_interruptions_is_the_spot_price_times_the_hours():
    row = price(spot_usd_per_hour=1.2, interruptions_per_hour=0.0)
    (only,) = cost_options(LLAMA2_7B, settings(), TIME, [row], CATALOGUE)
    assert only.spot_hours_expected == only.hours
    assert only.usd_spot_expected == only.usd_spot_low == only.usd_spot_high == 1.2 * only.hours


def test_spot_cost_uses_the_expected_spot_hours():
    row = price(spot_usd_per_hour=1.2, interruptions_per_hour=0.5)
    (only,) = cost_options(LLAMA2_7B, settings(), TIME, [row], CATALOGUE, checkpoint_write_h=0.05, restart_h=0.25)
    spot = expected_spot_hours(only.hours, 0.5, 0.05, 0.25)
    assert only.usd_spot_expected == pytest.approx(1.2 * spot.expected_hours)
    assert only.usd_spot_low < only.usd_spot_expected < only.usd_spot_high


def test_a_multi_instance_job_is_interrupted_by_any_instance():
    row = price(spot_usd_per_hour=1.2, interruptions_per_hour=0.1)
    (only,) = cost_options(LLAMA2_7B, settings(gpus=4), TIME, [row], CATALOGUE)
    assert only.instances == 4
    assert only.interruptions_per_hour == pytest.approx(0.4)  # 4 instances x 0.1/h


def test_more_interruptions_never_cost_less():
    rows = [
        price(instance_type=f"i{rate}", spot_usd_per_hour=1.2, interruptions_per_hour=rate)
        for rate in (0.0, 0.01, 0.1, 0.5, 1.0, 3.0)
    ]
    options = cost_options(LLAMA2_7B, settings(), TIME, rows, CATALOGUE)
    by_rate = sorted(options, key=lambda o: o.interruptions_per_hour)
    costs = [o.usd_spot_expected for o in by_rate]
    assert costs[:5] == sorted(costs[:5])
    # 3/h with the default 3 min writes and 15 min restarts: tau = sqrt(2 x 0.05 / 3) = 0.1826 h, so each
    # interruption costs 0.25 + (0.1826 + 0.05) / 2 = 0.366 h, more than the 0.333 h between two.
    assert costs[5] is None and by_rate[5].spot_not_worth_reason is not None


def test_spot_that_is_not_worth_it_has_the_reason_and_no_spot_costs():
    # 4 interruptions/h, C = 0.05 h, R = 0.25 h: 21 min lost per interruption, one every 15 min.
    row = price(spot_usd_per_hour=1.2, interruptions_per_hour=4.0)
    (only,) = cost_options(LLAMA2_7B, settings(), TIME, [row], CATALOGUE, checkpoint_write_h=0.05, restart_h=0.25)
    assert only.usd_on_demand == pytest.approx(77.66, rel=1e-3)  # on demand is unaffected
    assert only.spot_usd_per_hour == 1.2 and only.interruptions_per_hour == 4.0
    assert only.spot_hours_expected is None and only.usd_spot_expected is None
    assert only.usd_spot_low is None and only.usd_spot_high is None
    assert only.usd_per_epoch_spot is None and only.usd_per_million_tokens_spot is None
    assert only.spot_not_worth_reason == (
        "not worth running on spot: an interruption comes every 15 min on average (4 per hour) and each "
        "costs 21 min (a 15 min restart and about 6 min of work done again), so the job would lose ground "
        "faster than it progresses"
    )
    assert cheapest([only], spot=True) is None and pareto_front([only], spot=True) == []


def test_thousands_of_instances_on_spot_give_a_reason_never_infinity():
    # 4096 one-GPU instances at 0.5 interruptions/h each: 2048/h for the job, one every 1.76 s.
    row = price(spot_usd_per_hour=1.0, interruptions_per_hour=0.5)
    (only,) = cost_options(LLAMA2_7B, settings(gpus=4096), TimeSettings(dataset_tokens=1e12), [row], CATALOGUE)
    assert only.instances == 4096 and only.interruptions_per_hour == 2048
    assert "an interruption comes every 2 s on average (2048 per hour)" in only.spot_not_worth_reason
    text = json.dumps(only.model_dump(mode="json"))
    assert "Infinity" not in text and "NaN" not in text


def test_a_zero_price_costs_nothing():
    row = price(on_demand_usd_per_hour=0.0, spot_usd_per_hour=0.0, interruptions_per_hour=0.5)
    (only,) = cost_options(LLAMA2_7B, settings(), TIME, [row], CATALOGUE)
    assert only.usd_on_demand == 0 and only.usd_per_million_tokens_on_demand == 0
    assert only.usd_spot_expected == only.usd_spot_low == only.usd_spot_high == 0
    assert only.spot_hours_expected > only.hours  # the hours still count interruptions


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_a_cost_option_refuses_infinity_and_nan(bad):
    with pytest.raises(ValidationError):
        option(1.0, 10.0, usd_spot_high=bad)
    with pytest.raises(ValidationError):
        option(1.0, 10.0, usd_on_demand=bad)


@pytest.mark.parametrize(
    ("write_h", "restart_h", "setting"),
    [(-1 / 60, 0.25, "checkpoint write time"), (0.05, 1e6 / 60, "restart time"), (0.05, math.inf, "restart time")],
)
def test_checkpoint_write_and_restart_times_are_checked_even_without_spot_prices(write_h, restart_h, setting):
    with pytest.raises(ValueError, match=f"^{setting} must be from 0 to 10,080 minutes"):
        cost_options(LLAMA2_7B, settings(), TIME, [price()], CATALOGUE, checkpoint_write_h=write_h, restart_h=restart_h)


def test_no_spot_price_means_no_spot_figures():
    (only,) = cost_options(LLAMA2_7B, settings(), TIME, [price()], CATALOGUE)
    assert only.usd_spot_expected is None and only.spot_hours_expected is None and only.interruptions_per_hour is None
    assert only.spot_not_worth_reason is None


def test_unusable_rows_are_left_out():
    rows = [
        price(gpu="V100-SXM2-16GB", instance_type="v100"),  # no bf16 rate
        price(gpu="Not-In-This-Catalogue", instance_type="x"),
        price(),
    ]
    options = cost_options(LLAMA2_7B, settings(), TIME, rows, CATALOGUE)
    assert [o.instance_type for o in options] == ["h100x1"]


def test_memory_check_marks_options_and_cheapest_skips_what_does_not_fit():
    rows = [price(), price(gpu="B200-SXM-180GB", instance_type="b200", on_demand_usd_per_hour=20.0)]
    options = cost_options(LLAMA2_7B, settings(), TIME, rows, CATALOGUE, memory_fits=lambda gpu: gpu.memory_gb > 100)
    assert {o.gpu: o.fits_in_memory for o in options} == {"H100-SXM5-80GB": False, "B200-SXM-180GB": True}
    assert {o.gpu: o.excluded_reason for o in options} == {
        "H100-SXM5-80GB": "does not fit in the 80 GB of H100-SXM5-80GB",
        "B200-SXM-180GB": None,
    }
    assert cheapest(options).gpu == "B200-SXM-180GB"
    assert cheapest(options, fits_only=False).gpu == "H100-SXM5-80GB"
    assert cheapest(options, spot=True) is None


def test_options_that_cannot_run_are_set_apart_after_those_that_can():
    # The 8-bit AdamW comes from bitsandbytes, which has no TPU backend. At $1/h the TPU is the cheapest
    # row, yet it is ranked after both GPUs that can run; H100: 25.8875 h x $3 = $77.66.
    rows = [
        price(gpu="TPU-v5p", instance_type="tpu", on_demand_usd_per_hour=1.0),
        price(),
        price(gpu="B200-SXM-180GB", instance_type="b200", on_demand_usd_per_hour=20.0),
    ]
    options = cost_options(LLAMA2_7B, settings(optimizer="adamw-8bit"), TIME, rows, CATALOGUE, peak_gib=50.0)
    assert [o.gpu for o in options] == ["H100-SXM5-80GB", "B200-SXM-180GB", "TPU-v5p"]
    ranked, set_apart = ranked_and_set_apart(options)
    assert [o.gpu for o in ranked] == ["H100-SXM5-80GB", "B200-SXM-180GB"]
    (tpu,) = set_apart
    assert tpu.fits_in_memory is True  # 50 GiB fits its 95 GB; the stack is the problem
    assert (
        tpu.stack_problem
        == tpu.excluded_reason
        == (
            "TPU-v5p cannot run the adamw-8bit optimizer: it comes from bitsandbytes, which has no optimizers for "
            "Google TPU (XLA)"
        )
    )
    assert cheapest(options).usd_on_demand == pytest.approx(77.66, rel=1e-3)
    assert cheapest(options, fits_only=False).gpu == "TPU-v5p"


def test_a_peak_names_the_memory_in_the_reason_and_both_reasons_are_kept():
    rows = [price(), price(gpu="Gaudi2-96GB", instance_type="g2"), price(gpu="B200-SXM-180GB", instance_type="b")]
    options = cost_options(LLAMA2_7B, settings(optimizer="adamw-8bit"), TIME, rows, CATALOGUE, peak_gib=100.0)
    reasons = {o.gpu: o.excluded_reason for o in options}
    assert reasons == {
        "H100-SXM5-80GB": "does not fit: the workload needs 100.0 GiB per GPU, H100-SXM5-80GB has 80 GB",
        "Gaudi2-96GB": "does not fit: the workload needs 100.0 GiB per GPU, Gaudi2-96GB has 96 GB; Gaudi2-96GB "
        "cannot run the adamw-8bit optimizer: it comes from bitsandbytes, which has no optimizers for Intel Gaudi",
        "B200-SXM-180GB": None,
    }
    assert {o.gpu: o.fits_in_memory for o in options} == {
        "H100-SXM5-80GB": False,
        "Gaudi2-96GB": False,
        "B200-SXM-180GB": True,
    }


def test_an_inference_only_chip_is_set_apart_for_training():
    rows = [price(gpu="Inferentia2-32GB", instance_type="inf2")]
    (inf2,) = cost_options(LLAMA2_7B, settings(), TIME, rows, CATALOGUE)
    assert inf2.fits_in_memory is None  # no memory check given
    assert (
        inf2.excluded_reason
        == "Inferentia2-32GB is built for serving only: AWS documents training on Trainium, not on Inferentia"
    )
    assert ranked_and_set_apart([inf2]) == ([], [inf2])


def test_ranked_and_set_apart_keeps_the_order_given():
    first, apart, second = option(1.0, 10.0), option(1.0, 1.0, excluded_reason="no"), option(2.0, 20.0)
    assert ranked_and_set_apart([first, apart, second]) == ([first, second], [apart])


def test_timed_rows_keep_the_rows_the_time_model_times_in_order_with_their_verdicts():
    # The V100 has no bf16 rate and the last GPU is not in the catalogue: neither row is timed. Both H100
    # rows are: 25.8875 h each (one GPU at utilisation 0.5), and set apart at a peak of 100 GiB.
    rows = [
        price(instance_type="first"),
        price(gpu="V100-SXM2-16GB", instance_type="v100"),
        price(instance_type="second", on_demand_usd_per_hour=2.0),
        price(gpu="Not-In-This-Catalogue", instance_type="x"),
    ]
    timed = timed_rows(LLAMA2_7B, settings(), TIME, rows, CATALOGUE, peak_gib=100.0)
    assert [row.price.instance_type for row in timed] == ["first", "second"]
    assert [row.estimate.hours_total for row in timed] == pytest.approx([ONE_GPU_HOURS] * 2, rel=1e-4)
    reason = "does not fit: the workload needs 100.0 GiB per GPU, H100-SXM5-80GB has 80 GB"
    assert [row.excluded_reason for row in timed] == [reason, reason]
    assert [row.verdict.fits_in_memory for row in timed] == [False, False]
    assert ranked_and_set_apart(timed) == ([], timed)


def test_options_priced_apart_come_in_the_order_they_have_among_all_of_them():
    """The Time and cost page prices the options of its table on each run and those set apart only when
    their section opens: each part must come sorted as cost_options sorts the whole."""
    # One GPU at utilisation 0.5: an H100 takes 25.8875 h, at $3 and $2 an hour $77.66 and $51.78; a B200
    # (2,250 dense bf16 TFLOPS) 0.381727 s x 989 / 2250 = 0.167790 s a step, 244,141 steps = 11.3790 h, at
    # $20 and $10 an hour $227.58 and $113.79. The H100s do not fit 100 GiB: after both B200s, each group
    # cheapest first.
    rows = [
        price(instance_type="h100 $3"),
        price(gpu="B200-SXM-180GB", instance_type="b200 $20", on_demand_usd_per_hour=20.0),
        price(instance_type="h100 $2", on_demand_usd_per_hour=2.0),
        price(gpu="B200-SXM-180GB", instance_type="b200 $10", on_demand_usd_per_hour=10.0),
    ]
    expected = ["b200 $10", "b200 $20", "h100 $2", "h100 $3"]
    whole = cost_options(LLAMA2_7B, settings(), TIME, rows, CATALOGUE, peak_gib=100.0)
    assert [option.instance_type for option in whole] == expected
    assert [option.usd_on_demand for option in whole] == pytest.approx([113.79, 227.58, 51.78, 77.66], rel=1e-3)
    ranked, set_apart = ranked_and_set_apart(timed_rows(LLAMA2_7B, settings(), TIME, rows, CATALOGUE, peak_gib=100.0))
    assert [option.instance_type for option in priced_options(ranked, settings())] == expected[:2]
    assert [option.instance_type for option in priced_options(set_apart, settings())] == expected[2:]
    assert priced_options(ranked, settings()) + priced_options(set_apart, settings()) == whole


def test_pricing_refuses_pauses_out_of_range_even_with_no_row_to_price():
    with pytest.raises(ValueError, match="restart"):
        priced_options([], settings(), restart_h=-1.0)


def test_per_epoch_costs_divide_by_epochs():
    two = TIME.model_copy(update={"epochs": 2.0})
    (only,) = cost_options(
        LLAMA2_7B, settings(), two, [price(spot_usd_per_hour=1.0, interruptions_per_hour=0.0)], CATALOGUE
    )
    assert only.usd_per_epoch_on_demand == pytest.approx(only.usd_on_demand / 2)
    assert only.usd_per_epoch_spot == pytest.approx(only.usd_spot_expected / 2)


def test_pareto_front_keeps_the_non_dominated_options_fastest_first():
    fast_dear, slow_cheap = option(1.0, 10.0), option(2.0, 5.0)
    dominated, tie = option(3.0, 6.0), option(2.0, 5.0, provider="Q")
    assert pareto_front([dominated, slow_cheap, fast_dear, tie]) == [fast_dear, slow_cheap]


def test_pareto_front_on_spot_skips_options_without_spot():
    with_spot = option(2.0, 10.0, spot_hours_expected=2.5, usd_spot_expected=4.0)
    assert pareto_front([option(1.0, 1.0), with_spot], spot=True) == [with_spot]
    assert pareto_front([]) == []


def test_llama31_8b_sample_cheapest_h100_is_an_8_gpu_instance():
    # 8 x H100, ZeRO-3, full checkpointing (it fits 80 GB then), 1e9 tokens.
    spec = get_preset("llama-3.1-8b")
    work = settings(micro_batch=4, gpus=8, zero=3, checkpointing="full")
    h100_rows = [row for row in load_prices() if row.gpu == "H100-SXM5-80GB"]
    # half the ZeRO-3 traffic overlapped: spread over 1-GPU instances it crosses the network
    half_hidden = TimeSettings(dataset_tokens=1e9, overlap_fraction=0.5)
    options = cost_options(spec, work, half_hidden, h100_rows, CATALOGUE)
    best = cheapest(options)
    assert best.gpus_per_instance == 8 and best.instances == 1
    assert best.usd_on_demand == pytest.approx(best.on_demand_usd_per_hour * best.hours)


# --- buy vs rent ----------------------------------------------------------------------


def test_buy_vs_rent_by_hand():
    # 8 H100 at 30,000 USD = 240,000 USD capex; over 3 years x 8760 h: 9.1324 USD/h.
    # Power per GPU (calculators.cost.energy defaults): 700 W TDP x 0.76 = 532 W + 437 W host
    # = 969 W x PUE 1.56 = 1,511.64 W; 8 GPUs: 12.09312 kW x 0.13 USD/kWh = 1.5721056 USD/h.
    # Renting at 23.60 USD/h: break-even 240,000 / (23.60 - 1.5721056) = 10,895.26 h.
    # A 10 h run owned: (9.13242 + 1.57211) x 10 = 107.045 USD; rented 236 USD.
    result = buy_vs_rent(H100, 8, rent_usd_per_hour=23.6, run_hours=10.0)
    assert result.capex_usd == 240_000
    assert result.amortised_usd_per_hour == pytest.approx(9.1324, rel=1e-4)
    assert result.energy_usd_per_hour == pytest.approx(1.5721056)
    assert result.power_kw == pytest.approx(12.09312)
    assert result.break_even_hours == pytest.approx(10_895.26, rel=1e-5)
    assert result.run_usd_owned == pytest.approx(107.045, rel=1e-5)
    assert result.run_usd_rented == pytest.approx(236.0)


def test_buy_vs_rent_with_own_settings():
    # 20,000 USD + 30% host = 26,000 per GPU x 2 = 52,000 USD; 5 years: 52,000 / 43,800 = 1.1872 USD/h.
    ownership = OwnershipSettings(purchase_usd_per_gpu=20_000, host_overhead_fraction=0.3, years=5, pue=1.2)
    result = buy_vs_rent(H100, 2, rent_usd_per_hour=6.0, run_hours=1.0, ownership=ownership)
    assert result.capex_usd == pytest.approx(52_000)
    assert result.amortised_usd_per_hour == pytest.approx(1.18721, rel=1e-5)
    # (700 W x 0.76 + 437 W host) x PUE 1.2 = 969 x 1.2 = 1,162.8 W per GPU; 2 GPUs 2.3256 kW x 0.13 = 0.302328 USD/h
    assert result.energy_usd_per_hour == pytest.approx(0.302328)


def test_renting_cheaper_than_power_never_breaks_even():
    assert break_even_hours(1000.0, rent_usd_per_hour=1.0, energy_usd_per_hour=1.5) is None


def test_buy_vs_rent_needs_a_price():
    with pytest.raises(ValueError, match="A100-SXM4-80GB has no purchase price in the GPU catalogue"):
        buy_vs_rent(find_gpu("A100-SXM4-80GB"), 8, 20.0, 10.0)


def test_spot_cost_per_million_tokens_is_the_expected_spot_cost_over_the_tokens():
    """2e9 tokens: USD per million tokens = expected spot USD / 2000."""
    from calculators.cost.options import cost_options as options_for
    from calculators.cost.prices import load_prices
    from calculators.hardware.catalogue import load_gpu_catalogue
    from calculators.models.presets import get_preset
    from calculators.timing.settings import TimeSettings
    from calculators.workload.training import TrainingSettings

    options = options_for(
        get_preset("gpt2"), TrainingSettings(), TimeSettings(dataset_tokens=2e9), load_prices(), load_gpu_catalogue()
    )
    spot = [option for option in options if option.usd_spot_expected is not None]
    assert spot
    for option in spot:
        assert option.usd_per_million_tokens_spot == pytest.approx(option.usd_spot_expected / 2000)


def test_measured_matmul_fraction_replaces_the_default_for_that_gpu_only():
    """A measured matmul fraction of 0.24 replaces mamf-finder's 0.803 in H100's GEMMs only: its
    options take the step of that matmul fraction given by hand (slower), the other GPUs' are
    unchanged."""
    from calculators.cost.options import cost_options as options_for
    from calculators.cost.prices import load_prices
    from calculators.hardware.catalogue import load_gpu_catalogue
    from calculators.models.presets import get_preset
    from calculators.timing.settings import TimeSettings
    from calculators.workload.training import TrainingSettings

    args = (
        get_preset("gpt2"),
        TrainingSettings(),
        TimeSettings(dataset_tokens=1e9),
        load_prices(),
        load_gpu_catalogue(),
    )
    plain = {(o.gpu, o.instance_type): o for o in options_for(*args)}
    measured = {
        (o.gpu, o.instance_type): o for o in options_for(*args, measured_matmul_fraction={"H100-SXM5-80GB": 0.24})
    }
    for key, option in measured.items():
        if key[0] == "H100-SXM5-80GB":
            given = TimeSettings(dataset_tokens=1e9, matmul_fraction=0.24, gpus_per_node=option.gpus_per_instance)
            expected = estimate_time(get_preset("gpt2"), TrainingSettings(), find_gpu("H100-SXM5-80GB"), given)
            assert option.step_s == pytest.approx(expected.step_s)
            assert option.step_s > plain[key].step_s
        else:
            assert option.step_s == plain[key].step_s
