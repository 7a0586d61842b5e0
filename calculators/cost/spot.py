"""Spot (preemptible) instances: checkpoint interval and the expected billed hours.

A job of `work_hours` of useful compute checkpoints every tau hours (each write takes C hours).
Interruptions arrive as a Poisson process at rate lambda per running hour (M = 1/lambda is
the mean time between interruptions); after each one the job spends R hours restarting (new
instance, image, loading the checkpoint) and redoes the work since the last checkpoint.

- Interval: Young 1974 ("A first order approximation to the optimum checkpoint interval",
  CACM 17(9)): tau = sqrt(2*C*M).
- Expected wall time: Daly 2006 ("A higher order estimate of the optimum checkpoint interval
  for restart dumps", FGCS 22(3)), exact for Poisson interruptions that may also hit restarts
  and checkpoint writes:  T = M * e^(R/M) * (e^((tau + C)/M) - 1) * W / tau.
  To first order in 1/M this is W + W*C/tau + N*(R + (tau + C)/2) with N = T/M interruptions:
  the work, the checkpoint writes, and per interruption a restart plus half an interval lost.
- Not worth running on spot: solving the first-order form for T gives
  T = W * (1 + C/tau) / (1 - lambda*(R + (tau + C)/2)), which has no finite value once each
  interruption costs as much time as passes between two of them (lambda*(R + (tau+C)/2) >= 1):
  the job loses ground faster than it progresses. Such an estimate carries the reason in words
  and no hours.

Billed hours are the wall hours while an instance runs; time waiting for spot capacity is
neither billed nor modelled (it lengthens the calendar time only).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

LOW_RATE_FACTOR = 0.5  # the range assumes the real rate is between half and twice the estimate
HIGH_RATE_FACTOR = 2.0
DEFAULT_CHECKPOINT_WRITE_MIN = 3.0  # an 8B model's ~100 GB of states at ~0.5-1 GB/s
DEFAULT_RESTART_MIN = 15.0  # get a new instance, start the container, load the checkpoint
DEFAULT_CHECKPOINT_WRITE_H = DEFAULT_CHECKPOINT_WRITE_MIN / 60
DEFAULT_RESTART_H = DEFAULT_RESTART_MIN / 60
MAX_PAUSE_MIN = 10_080.0  # one week: the longest checkpoint write or restart accepted
# Interruptions per instance-hour for a spot price without a rate (the Cost page, the CLI and the
# planner alike): the median of the public GPU spot traces.
DEFAULT_INTERRUPTIONS_PER_HOUR = 0.5


class SpotEstimate(BaseModel):
    """Expected billed hours of a job on spot instances, with a range, or why spot is not worth it."""

    model_config = ConfigDict(allow_inf_nan=False)

    work_hours: float = Field(description="hours of useful compute (the on-demand run length)")
    interruptions_per_hour: float
    checkpoint_write_h: float
    restart_h: float
    checkpoint_interval_h: float | None = Field(description="hours of work between checkpoints; None: no checkpoints")
    checkpoint_overhead_h: float = Field(description="hours spent writing checkpoints if nothing is interrupted")
    expected_hours: float | None = Field(description="None when not worth running on spot")
    low_hours: float | None = Field(description=f"at {LOW_RATE_FACTOR}x the interruption rate, same interval")
    high_hours: float | None = Field(description=f"at {HIGH_RATE_FACTOR}x the interruption rate, same interval")
    interruptions_expected: float | None
    not_worth_reason: str | None = Field(
        default=None, description="why the job should not run on spot at all; the hours are None then"
    )


def young_daly_interval_hours(checkpoint_write_h: float, interruptions_per_hour: float) -> float:
    """Checkpoint interval minimising expected time, to first order: sqrt(2 * C * MTBF)
    (Young 1974; Daly 2006 eq. for the first-order optimum). Infinite when nothing interrupts."""
    _check_non_negative(checkpoint_write_h=checkpoint_write_h, interruptions_per_hour=interruptions_per_hour)
    if interruptions_per_hour == 0:
        return math.inf
    return math.sqrt(2.0 * checkpoint_write_h / interruptions_per_hour)


def _check_non_negative(**values: float) -> None:
    """ValueError naming the first negative or non-finite input."""
    for name, value in values.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")


def check_pause_hours(checkpoint_write_h: float, restart_h: float) -> None:
    """ValueError naming the setting unless the checkpoint write and the restart each take a
    finite time from 0 to MAX_PAUSE_MIN minutes (one week)."""
    for setting, hours in (("checkpoint write time", checkpoint_write_h), ("restart time", restart_h)):
        if not (math.isfinite(hours) and 0 <= hours * 60 <= MAX_PAUSE_MIN):
            raise ValueError(
                f"{setting} must be from 0 to {MAX_PAUSE_MIN:,.0f} minutes (one week), got {hours * 60:g} minutes"
            )


def daly_wall_hours(
    work_hours: float, interruptions_per_hour: float, checkpoint_write_h: float, restart_h: float, interval_h: float
) -> float:
    """Expected wall hours (Daly 2006): M e^(R/M) (e^((tau+C)/M) - 1) W / tau with M = 1/lambda.

    lambda = 0 gives W + W*C/tau (checkpoints only); tau -> 0 (free checkpoints) gives
    W * e^(lambda*R). Returns inf when the result overflows a float (the job practically never
    ends); expected_spot_hours turns that into a reason, never a number.
    """
    rate, tau = interruptions_per_hour, interval_h
    if rate == 0:
        return work_hours + (work_hours * checkpoint_write_h / tau if math.isfinite(tau) else 0.0)
    try:
        restart_factor = math.exp(rate * restart_h)
        if tau == 0:
            return work_hours * restart_factor
        segment_factor = math.expm1(rate * (tau + checkpoint_write_h)) / (rate * tau)
    except OverflowError:
        return math.inf
    return work_hours * restart_factor * segment_factor


def hours_lost_per_interruption(checkpoint_write_h: float, restart_h: float, interval_h: float) -> float:
    """First-order cost of one interruption (Young 1974; Daly 2006 sec. 3): the restart plus,
    on average, half a segment (interval + write) of work done again: R + (tau + C) / 2."""
    return restart_h + (interval_h + checkpoint_write_h) / 2


def spot_not_worth_reason(
    interruptions_per_hour: float, checkpoint_write_h: float, restart_h: float, interval_h: float
) -> str | None:
    """Why the job should not run on spot, in words, or None.

    Not worth it when an interruption costs at least the mean time between two of them:
    lambda * (R + (tau + C)/2) >= 1, where the first-order expected time
    W (1 + C/tau) / (1 - lambda (R + (tau + C)/2)) diverges (Young 1974; Daly 2006).
    """
    if interruptions_per_hour == 0:
        return None
    lost_h = hours_lost_per_interruption(checkpoint_write_h, restart_h, interval_h)
    between_h = 1 / interruptions_per_hour
    if lost_h < between_h:
        return None
    redone_h = lost_h - restart_h
    return (
        f"not worth running on spot: an interruption comes every {_duration(between_h)} on average "
        f"({interruptions_per_hour:g} per hour) and each costs {_duration(lost_h)} "
        f"(a {_duration(restart_h)} restart and about {_duration(redone_h)} of work done again), "
        "so the job would lose ground faster than it progresses"
    )


def _duration(hours: float) -> str:
    """Hours in words: '45 s', '12 min', '3.5 h'."""
    if hours < 1 / 60:
        return f"{hours * 3600:.0f} s"
    if hours < 2:
        return f"{hours * 60:.0f} min"
    return f"{hours:,.1f} h"


def expected_spot_hours(
    work_hours: float,
    interruptions_per_hour: float,
    checkpoint_write_h: float = DEFAULT_CHECKPOINT_WRITE_H,
    restart_h: float = DEFAULT_RESTART_H,
    interval_h: float | None = None,
) -> SpotEstimate:
    """Expected billed hours of `work_hours` of compute on spot, checkpointing every `interval_h`
    (default: Young/Daly's sqrt(2*C*MTBF)), with a low/high range at half and twice the rate.

    Zero interruptions give exactly `work_hours` (no checkpoints are needed). More
    interruptions never give fewer hours. The range keeps the planned interval fixed.
    When interruptions outpace progress (see spot_not_worth_reason) or the hours overflow,
    the hours are None and `not_worth_reason` says why. Raises ValueError for a negative or
    non-finite input, and for a checkpoint write or restart over a week (check_pause_hours).
    """
    _check_non_negative(work_hours=work_hours, interruptions_per_hour=interruptions_per_hour)
    check_pause_hours(checkpoint_write_h, restart_h)
    if interval_h is not None and not 0 < interval_h < math.inf:
        raise ValueError(f"interval_h must be a finite number > 0, got {interval_h}")
    tau = young_daly_interval_hours(checkpoint_write_h, interruptions_per_hour) if interval_h is None else interval_h

    def hours(rate: float) -> float:
        return daly_wall_hours(work_hours, rate, checkpoint_write_h, restart_h, tau)

    expected = hours(interruptions_per_hour)
    low = hours(interruptions_per_hour * LOW_RATE_FACTOR)
    high = hours(interruptions_per_hour * HIGH_RATE_FACTOR)
    reason = spot_not_worth_reason(interruptions_per_hour, checkpoint_write_h, restart_h, tau)
    if reason is None and not all(math.isfinite(value) for value in (expected, low, high)):
        reason = "not worth running on spot: the expected time is too large to compute (the job practically never ends)"
    worth = reason is None
    return SpotEstimate(
        work_hours=work_hours,
        interruptions_per_hour=interruptions_per_hour,
        checkpoint_write_h=checkpoint_write_h,
        restart_h=restart_h,
        checkpoint_interval_h=tau if math.isfinite(tau) else None,
        checkpoint_overhead_h=work_hours * checkpoint_write_h / tau if math.isfinite(tau) and tau > 0 else 0.0,
        expected_hours=expected if worth else None,
        low_hours=low if worth else None,
        high_hours=high if worth else None,
        interruptions_expected=interruptions_per_hour * expected if worth else None,
        not_worth_reason=reason,
    )
