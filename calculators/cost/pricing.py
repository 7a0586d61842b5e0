"""What one run costs on one instance type: on demand, on spot, or on owned servers.

The one pricing path of the Cost page (calculators.cost.options.cost_options) and the planner
(calculators.plan.search.plan_run). For a run of `gpus` GPUs that takes `hours` on demand:

    instances = ceil(gpus / gpus_per_instance)             (whole instances are billed)
    usd       = instances x instance USD/hour x hours      (on demand)
    spot usd  = instances x spot USD/hour x spot hours     (expected, low and high: calculators.cost.spot)

A multi-instance job restarts when any instance is interrupted, so its interruption rate is
instances x the per-instance rate (the row's, else DEFAULT_INTERRUPTIONS_PER_HOUR). Owned servers
cost GPUs x USD per GPU-hour (amortised purchase and power) for the on-demand hours.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from calculators.cost.prices import CloudPrice
from calculators.cost.spot import DEFAULT_INTERRUPTIONS_PER_HOUR, SpotEstimate, expected_spot_hours


class RunPrice(NamedTuple):
    """A run priced on one instance type: the whole job's rates and costs."""

    instances: int
    usd_per_hour: float  # on demand (or owned), every instance of the job
    usd: float  # on demand (or owned) for the on-demand hours
    spot: SpotEstimate | None = None  # None without a spot price; its hours are None when not worth it
    spot_usd_per_hour: float | None = None  # every instance of the job
    usd_spot_expected: float | None = None  # None without a spot price or when not worth it
    usd_spot_low: float | None = None
    usd_spot_high: float | None = None

    @property
    def spot_hours_expected(self) -> float | None:
        """Expected billed hours on spot; None without a spot price or when not worth it."""
        return None if self.spot is None else self.spot.expected_hours


def instances_needed(gpus: int, gpus_per_instance: int) -> int:
    """Whole instances that hold `gpus` GPUs."""
    return math.ceil(gpus / gpus_per_instance)


def run_cost_usd(instances: int, usd_per_instance_hour: float, hours: float) -> float:
    """Billed cost: instances x price per instance-hour x hours."""
    return instances * usd_per_instance_hour * hours


def job_interruptions_per_hour(price: CloudPrice, instances: int) -> float:
    """Interruptions per hour of the whole job: instances x the row's per-instance rate
    (DEFAULT_INTERRUPTIONS_PER_HOUR where the row has none)."""
    per_instance = price.interruptions_per_hour
    return instances * (DEFAULT_INTERRUPTIONS_PER_HOUR if per_instance is None else per_instance)


def price_run(price: CloudPrice, gpus: int, hours: float, checkpoint_write_h: float, restart_h: float) -> RunPrice:
    """A run of `gpus` GPUs that takes `hours` on demand, priced on `price`'s instances: on demand,
    and on spot (Young/Daly checkpoints, restarts and lost work) where the row has a spot price.
    Raises ValueError for a checkpoint write or restart time out of range (calculators.cost.spot)."""
    instances = instances_needed(gpus, price.gpu_count)
    usd = run_cost_usd(instances, price.on_demand_usd_per_hour, hours)
    usd_per_hour = instances * price.on_demand_usd_per_hour
    spot_usd = price.spot_usd_per_hour
    if spot_usd is None:
        return RunPrice(instances, usd_per_hour, usd)
    rate = job_interruptions_per_hour(price, instances)
    spot = expected_spot_hours(hours, rate, checkpoint_write_h, restart_h)

    def spot_cost(hours_on_spot: float | None) -> float | None:
        """None when spot is not worth it (the estimate has no hours then)."""
        return None if hours_on_spot is None else run_cost_usd(instances, spot_usd, hours_on_spot)

    return RunPrice(
        instances=instances,
        usd_per_hour=usd_per_hour,
        usd=usd,
        spot=spot,
        spot_usd_per_hour=instances * spot_usd,
        usd_spot_expected=spot_cost(spot.expected_hours),
        usd_spot_low=spot_cost(spot.low_hours),
        usd_spot_high=spot_cost(spot.high_hours),
    )


def price_owned_run(gpus: int, usd_per_gpu_hour: float, hours: float, gpus_per_server: int) -> RunPrice:
    """A run of `gpus` owned GPUs for `hours`, in servers of `gpus_per_server`: GPUs x USD per
    GPU-hour (calculators.cost.options.owned_usd_per_gpu_hour) x hours; no spot."""
    usd_per_hour = gpus * usd_per_gpu_hour
    return RunPrice(instances_needed(gpus, gpus_per_server), usd_per_hour, usd_per_hour * hours)
