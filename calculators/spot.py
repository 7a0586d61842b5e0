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

Billed hours are the wall hours while an instance runs; time waiting for spot capacity is
neither billed nor modelled (it lengthens the calendar time only).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

LOW_RATE_FACTOR = 0.5  # the range assumes the real rate is between half and twice the estimate
HIGH_RATE_FACTOR = 2.0
DEFAULT_CHECKPOINT_WRITE_H = 0.05  # 3 minutes: an 8B model's ~100 GB of states at ~0.5-1 GB/s
DEFAULT_RESTART_H = 0.25  # 15 minutes: get a new instance, start the container, load the checkpoint


class SpotEstimate(BaseModel):
    """Expected billed hours of a job on spot instances, with a range."""

    work_hours: float = Field(description="hours of useful compute (the on-demand run length)")
    interruptions_per_hour: float
    checkpoint_write_h: float
    restart_h: float
    checkpoint_interval_h: float | None = Field(description="hours of work between checkpoints; None: no checkpoints")
    checkpoint_overhead_h: float = Field(description="hours spent writing checkpoints if nothing is interrupted")
    expected_hours: float
    low_hours: float = Field(description=f"at {LOW_RATE_FACTOR}x the interruption rate, same interval")
    high_hours: float = Field(description=f"at {HIGH_RATE_FACTOR}x the interruption rate, same interval")
    interruptions_expected: float


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


def daly_wall_hours(
    work_hours: float, interruptions_per_hour: float, checkpoint_write_h: float, restart_h: float, interval_h: float
) -> float:
    """Expected wall hours (Daly 2006): M e^(R/M) (e^((tau+C)/M) - 1) W / tau with M = 1/lambda.

    lambda = 0 gives W + W*C/tau (checkpoints only); tau -> 0 (free checkpoints) gives
    W * e^(lambda*R). Returns inf when the exponent overflows (the job practically never ends).
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
    """
    _check_non_negative(
        work_hours=work_hours,
        interruptions_per_hour=interruptions_per_hour,
        checkpoint_write_h=checkpoint_write_h,
        restart_h=restart_h,
    )
    if interval_h is not None and not 0 < interval_h < math.inf:
        raise ValueError(f"interval_h must be a finite number > 0, got {interval_h}")
    tau = young_daly_interval_hours(checkpoint_write_h, interruptions_per_hour) if interval_h is None else interval_h

    def hours(rate: float) -> float:
        return daly_wall_hours(work_hours, rate, checkpoint_write_h, restart_h, tau)

    expected = hours(interruptions_per_hour)
    overhead = work_hours * checkpoint_write_h / tau if math.isfinite(tau) and tau > 0 else 0.0
    return SpotEstimate(
        work_hours=work_hours,
        interruptions_per_hour=interruptions_per_hour,
        checkpoint_write_h=checkpoint_write_h,
        restart_h=restart_h,
        checkpoint_interval_h=tau if math.isfinite(tau) else None,
        checkpoint_overhead_h=overhead,
        expected_hours=expected,
        low_hours=hours(interruptions_per_hour * LOW_RATE_FACTOR),
        high_hours=hours(interruptions_per_hour * HIGH_RATE_FACTOR),
        interruptions_expected=interruptions_per_hour * expected,
    )
