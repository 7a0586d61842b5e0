"""Tests for calculators.cost.spot: the Young/Daly interval and expected spot hours."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from calculators.cost.spot import (
    SpotEstimate,
    check_pause_hours,
    daly_wall_hours,
    expected_spot_hours,
    hours_lost_per_interruption,
    spot_not_worth_reason,
    young_daly_interval_hours,
)


def test_young_daly_interval_by_hand():
    # C = 0.1 h, 0.5 interruptions/h -> MTBF 2 h: sqrt(2 x 0.1 x 2) = sqrt(0.4) = 0.632 h.
    assert young_daly_interval_hours(0.1, 0.5) == pytest.approx(0.632456, rel=1e-6)
    # C = 0.05 h, 0.5/h: sqrt(2 x 0.05 x 2) = sqrt(0.2) = 0.447 h.
    assert young_daly_interval_hours(0.05, 0.5) == pytest.approx(0.447214, rel=1e-6)


def test_no_interruptions_means_no_checkpoints():
    assert young_daly_interval_hours(0.1, 0) == math.inf


def test_zero_interruptions_cost_exactly_the_work():
    estimate = expected_spot_hours(10.0, 0.0, checkpoint_write_h=0.1, restart_h=0.25)
    assert estimate.expected_hours == estimate.low_hours == estimate.high_hours == 10.0
    assert estimate.checkpoint_interval_h is None
    assert estimate.checkpoint_overhead_h == 0
    assert estimate.interruptions_expected == 0


def test_expected_hours_by_hand():
    # W = 10 h, lambda = 0.5/h (M = 2 h), C = 0.1 h, R = 0.25 h, tau = 0.632456 h (Young).
    # Daly: M e^(R/M) (e^((tau+C)/M) - 1) W / tau
    #   e^(0.125) = 1.133148; e^(0.366228) - 1 = 0.442308; x 2 / 0.632456 = 1.398702
    #   T = 10 x 1.133148 x 1.398702 = 15.8494 h; interruptions = 0.5 x 15.8494 = 7.92 expected.
    estimate = expected_spot_hours(10.0, 0.5, checkpoint_write_h=0.1, restart_h=0.25)
    assert estimate.checkpoint_interval_h == pytest.approx(0.632456, rel=1e-6)
    assert estimate.expected_hours == pytest.approx(15.8494, rel=1e-4)
    assert estimate.interruptions_expected == pytest.approx(0.5 * estimate.expected_hours)
    # Checkpoint writes alone: W x C / tau = 10 x 0.1 / 0.632456 = 1.5811 h.
    assert estimate.checkpoint_overhead_h == pytest.approx(1.58114, rel=1e-5)


def test_first_order_terms_agree_for_rare_interruptions():
    # Young's first order: work + checkpoint writes + per interruption (restart + half a segment).
    # W = 10, lambda = 0.01, C = 0.1, R = 0.25: tau = sqrt(20) = 4.4721; W(1 + C/tau) = 10.2236;
    # N = lambda x T = 0.1049; each costs 0.25 + (4.4721 + 0.1)/2 = 2.5361 -> 10.2236 + 0.2660 = 10.4896.
    work, rate, write, restart = 10.0, 0.01, 0.1, 0.25
    estimate = expected_spot_hours(work, rate, write, restart)
    tau = math.sqrt(2 * write / rate)
    first_order = work * (1 + write / tau) + rate * estimate.expected_hours * (restart + (tau + write) / 2)
    assert estimate.expected_hours == pytest.approx(first_order, rel=2e-3)
    assert estimate.expected_hours == pytest.approx(10.487, rel=1e-3)


@pytest.mark.parametrize(("write_h", "restart_h"), [(0.0, 0.0), (0.0, 0.5), (0.05, 0.25), (0.5, 1.0), (2.0, 0.0)])
def test_more_interruptions_never_cost_less(write_h, restart_h):
    rates = [i * 0.02 for i in range(0, 150)]
    hours = [expected_spot_hours(8.0, rate, write_h, restart_h).expected_hours for rate in rates]
    worth = [value for value in hours if value is not None]
    assert all(later >= earlier for earlier, later in zip(worth, worth[1:], strict=False))
    assert hours[0] == 8.0
    # Once not worth it, a higher rate stays not worth it: the None values form the tail.
    assert hours[len(worth) :] == [None] * (len(hours) - len(worth))


@pytest.mark.parametrize("rate", [1e-5, 0.1, 0.5, 2.0])
def test_range_brackets_the_expected_hours(rate):
    estimate = expected_spot_hours(5.0, rate, 0.05, 0.25)
    assert estimate.work_hours < estimate.low_hours <= estimate.expected_hours <= estimate.high_hours


def test_range_is_half_and_twice_the_rate_at_the_planned_interval():
    estimate = expected_spot_hours(5.0, 0.4, 0.05, 0.25)
    tau = estimate.checkpoint_interval_h
    assert estimate.low_hours == pytest.approx(daly_wall_hours(5.0, 0.2, 0.05, 0.25, tau))
    assert estimate.high_hours == pytest.approx(daly_wall_hours(5.0, 0.8, 0.05, 0.25, tau))


def test_free_checkpoints_lose_only_restarts():
    # C = 0: tau = 0 (checkpoint continuously); T = W e^(lambda R) = 10 x e^(0.5 x 0.25) = 11.3315 h.
    estimate = expected_spot_hours(10.0, 0.5, checkpoint_write_h=0.0, restart_h=0.25)
    assert estimate.expected_hours == pytest.approx(10 * math.exp(0.125))


def test_a_given_interval_is_used():
    estimate = expected_spot_hours(10.0, 0.5, 0.1, 0.25, interval_h=2.0)
    assert estimate.checkpoint_interval_h == 2.0
    # Not the optimum, so it costs more than Young's interval.
    assert estimate.expected_hours > expected_spot_hours(10.0, 0.5, 0.1, 0.25).expected_hours


def test_checkpointing_without_interruptions_costs_the_writes():
    # A 1 h interval and no interruptions: W + W x C / tau = 10 + 10 x 0.1 / 1 = 11 h.
    assert expected_spot_hours(10.0, 0.0, 0.1, 0.25, interval_h=1.0).expected_hours == pytest.approx(11.0)


def test_zero_work_costs_nothing():
    assert expected_spot_hours(0.0, 0.5, 0.1, 0.25).expected_hours == 0.0


def test_hopeless_rates_are_not_worth_running_and_have_no_hours():
    # 100 interruptions/h with 10 h restarts: e^(100 x 10) overflows; the first-order test fails first.
    estimate = expected_spot_hours(10.0, 100.0, 10.0, 10.0)
    assert estimate.expected_hours is None and estimate.low_hours is None and estimate.high_hours is None
    assert estimate.interruptions_expected is None
    assert estimate.not_worth_reason.startswith("not worth running on spot")


def test_each_interruption_loses_a_restart_and_half_a_segment():
    # R = 0.25 h, tau = 0.2 h, C = 0.05 h: 0.25 + (0.2 + 0.05) / 2 = 0.375 h.
    assert hours_lost_per_interruption(0.05, 0.25, 0.2) == pytest.approx(0.375)


def test_spot_is_not_worth_it_when_an_interruption_costs_more_than_the_time_between_two():
    # lambda = 4/h (one every 15 min), C = 0.05 h, R = 0.25 h: tau = sqrt(2 x 0.05 / 4) = 0.158114 h.
    # Each costs 0.25 + (0.158114 + 0.05) / 2 = 0.354057 h = 21 min > 15 min: the first-order
    # time W (1 + C/tau) / (1 - 4 x 0.354057) = W x 1.316 / (-0.416) has no meaning.
    estimate = expected_spot_hours(10.0, 4.0, 0.05, 0.25)
    assert estimate.checkpoint_interval_h == pytest.approx(0.158114, rel=1e-5)
    assert estimate.expected_hours is None
    assert estimate.not_worth_reason == (
        "not worth running on spot: an interruption comes every 15 min on average (4 per hour) and each "
        "costs 21 min (a 15 min restart and about 6 min of work done again), so the job would lose ground "
        "faster than it progresses"
    )


def test_just_below_the_limit_spot_is_worth_pricing():
    # lambda = 2.5/h (M = 0.4 h), C = 0.05 h, R = 0.25 h: tau = sqrt(2 x 0.05 x 0.4) = 0.2 h.
    # Loss per interruption 0.25 + 0.125 = 0.375 h < 0.4 h between two: priced.
    # Daly: e^(0.25/0.4) = e^0.625 = 1.868246; (e^(0.25/0.4) - 1) x 0.4 / 0.2 = 1.736492;
    # T = 10 x 1.868246 x 1.736492 = 32.4419 h.
    estimate = expected_spot_hours(10.0, 2.5, 0.05, 0.25)
    assert estimate.not_worth_reason is None
    assert estimate.expected_hours == pytest.approx(32.4419, rel=1e-5)


def test_free_checkpoints_are_not_worth_it_once_restarts_fill_the_time_between_interruptions():
    # C = 0 gives tau = 0: each interruption costs R. lambda R = 4 x 0.25 = 1: not worth it.
    assert spot_not_worth_reason(4.0, 0.0, 0.25, 0.0) is not None
    # lambda = 3.9: 0.975 < 1, priced at W e^(lambda R) = 10 x e^0.975 = 26.5117 h.
    estimate = expected_spot_hours(10.0, 3.9, 0.0, 0.25)
    assert estimate.not_worth_reason is None
    assert estimate.expected_hours == pytest.approx(26.5117, rel=1e-5)


def test_no_interruptions_are_always_worth_it():
    assert spot_not_worth_reason(0.0, 0.05, 0.25, math.inf) is None


def test_hours_too_large_for_a_float_are_a_reason_not_infinity():
    # lambda = 0.01/h costs a factor of 1.035 on 1.78e308 h of work: past the largest float, 1.797e308.
    estimate = expected_spot_hours(1.78e308, 0.01, 0.05, 0.25)
    assert estimate.expected_hours is None
    assert "too large to compute" in estimate.not_worth_reason


def test_the_estimate_refuses_infinity_and_nan():
    fields = {
        "work_hours": 1.0, "interruptions_per_hour": 0.5, "checkpoint_write_h": 0.05, "restart_h": 0.25,
        "checkpoint_interval_h": 0.45, "checkpoint_overhead_h": 0.1, "low_hours": 1.1, "high_hours": 1.5,
        "interruptions_expected": 0.6,
    }  # fmt: skip
    for bad in (math.inf, math.nan):
        with pytest.raises(ValidationError):
            SpotEstimate(**fields, expected_hours=bad)


@pytest.mark.parametrize(
    "arguments",
    [(-1.0, 0.5, 0.1, 0.25), (10.0, -0.5, 0.1, 0.25), (math.inf, 0.5, 0.1, 0.25), (10.0, math.nan, 0.1, 0.25)],
)
def test_negative_or_nan_work_and_rates_are_rejected(arguments):
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        expected_spot_hours(*arguments)


@pytest.mark.parametrize(
    ("write_h", "restart_h", "message"),
    [
        (-0.1, 0.25, "checkpoint write time must be from 0 to 10,080 minutes (one week), got -6 minutes"),
        (0.05, 1e6 / 60, "restart time must be from 0 to 10,080 minutes (one week), got 1e+06 minutes"),
        (0.05, math.nan, "restart time must be from 0 to 10,080 minutes (one week), got nan minutes"),
        (math.inf, 0.25, "checkpoint write time must be from 0 to 10,080 minutes (one week), got inf minutes"),
        (0.05, 168.5, "restart time must be from 0 to 10,080 minutes (one week), got 10110 minutes"),
    ],
)
def test_checkpoint_write_and_restart_times_are_checked_by_name(write_h, restart_h, message):
    with pytest.raises(ValueError) as error:
        expected_spot_hours(10.0, 0.5, write_h, restart_h)
    assert str(error.value) == message


def test_a_week_is_the_longest_pause_accepted():
    check_pause_hours(168.0, 168.0)  # 10,080 minutes each
    assert expected_spot_hours(10.0, 0.0, 168.0, 168.0).expected_hours == 10.0


@pytest.mark.parametrize("interval", [0.0, -1.0, math.inf, math.nan])
def test_non_positive_interval_is_rejected(interval):
    with pytest.raises(ValueError, match="interval_h"):
        expected_spot_hours(10.0, 0.5, 0.1, 0.25, interval_h=interval)
