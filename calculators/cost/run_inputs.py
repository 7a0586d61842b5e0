"""What a priced run needs beyond its throughput: the spot-market and price assumptions
(checkpoint writes, restarts, interruptions, a negotiated discount), given in minutes and per
cent as a user gives them; calculators.cost takes them in hours and fractions."""

from __future__ import annotations

from pydantic import BaseModel, Field

from calculators.cost.spot import DEFAULT_CHECKPOINT_WRITE_MIN, DEFAULT_RESTART_MIN, MAX_PAUSE_MIN


class RunInputs(BaseModel):
    """What a priced run needs beyond its throughput: the spot-market and price assumptions."""

    checkpoint_write_min: float = Field(
        default=DEFAULT_CHECKPOINT_WRITE_MIN,
        ge=0,
        le=MAX_PAUSE_MIN,
        allow_inf_nan=False,
        description="minutes to write one checkpoint",
    )
    restart_min: float = Field(
        default=DEFAULT_RESTART_MIN,
        ge=0,
        le=MAX_PAUSE_MIN,
        allow_inf_nan=False,
        description="minutes from an interruption to training again (new instance, load the checkpoint)",
    )
    interruptions_per_hour: float | None = Field(
        default=None,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="spot interruptions per instance-hour; None = the price sheet's figure",
    )
    discount_pct: float = Field(
        default=0.0, ge=0, lt=100, allow_inf_nan=False, description="negotiated discount on every price, in %"
    )
