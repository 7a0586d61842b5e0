"""Ranges on every time and cost: the time model's measured error, and spot's price spread.

The Validation page (calculators.validation.throughput) sets the time model's tokens/s per GPU
against published runs (data/measured_throughput.csv, each row with its public source). The same
work at the measured rate instead of the estimated one takes

    real hours = estimated hours x (estimated tokens/s / measured tokens/s)

so a run's hours lie in [hours x min(1, lowest ratio), hours x max(1, highest ratio)], the ratios
(estimate / measured) of the runs on the GPU's family (calculators.timing.operations.gpu_family:
H100, H200 and GH200 are one family) and software stack where there are at least MIN_ROWS of
them, else of the family's runs, else of every run. 1 stays inside, so the estimate is always
within its own range. Costs scale with hours: on demand and owned, USD/h x hours; on spot, Daly's
expected hours are proportional to the work hours (calculators.cost.spot). So

    usd_on_demand_range     = usd_on_demand x (low factor, high factor)
    usd_spot_expected_range = (usd_spot_low  x low factor  x lowest spot price  / spot price,
                               usd_spot_high x high factor x highest spot price / spot price)

with the interruption range of calculators.cost.spot (half and twice the rate) and the spot price
across regions of calculators.cost.spot_spread.

The band itself comes from running the time model on the published rows, which is the validation
package's (calculators.validation.error_band); cost and plan are below it, so they take a
`BandFor` (GPU, settings -> TimeBand) from their caller: the command line and the pages pass
calculators.validation.error_band.time_band_for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from calculators.cost.spot_spread import SpotPriceRange
from calculators.hardware.catalogue import GpuSpec
from calculators.workload.training import TrainingSettings

MIN_ROWS = 3  # fewer published runs than this say too little about a group: take the wider group
VALIDATION_SOURCE = "Validation page; each run's public source in data/measured_throughput.csv"


class ThroughputError(BaseModel):
    """One published run's estimate / measured tokens per second per GPU (the Validation page's ratio)."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    id: str
    gpu: str
    gpu_family: str | None = Field(description="calculators.timing.operations.gpu_family of the run's GPU")
    stack: str = Field(description="the run's training stack as a workload framework name, e.g. torchtitan")
    ratio: float = Field(gt=0, description="estimated / measured tokens per second per GPU")


class TimeBand(BaseModel):
    """How far real hours may lie from the estimate: estimate / measured over a group of published runs."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    low_ratio: float = Field(gt=0, description="the lowest estimate / measured of the group")
    high_ratio: float = Field(gt=0, description="the highest estimate / measured of the group")
    runs: int = Field(ge=0, description="published runs in the group")
    basis: str = Field(description="which runs, in words")

    @property
    def low_factor(self) -> float:
        """Real hours / estimated hours at the fast end (at most 1: the estimate stays inside)."""
        return min(1.0, self.low_ratio)

    @property
    def high_factor(self) -> float:
        """Real hours / estimated hours at the slow end (at least 1)."""
        return max(1.0, self.high_ratio)

    @property
    def assumption(self) -> str:
        """The band in one line, with where it comes from."""
        if self.runs == 0:
            return f"time and cost ranges: {self.basis}"
        return (
            f"range from {self.basis}: estimate/measured {self.low_ratio:.2f}-{self.high_ratio:.2f} "
            f"({VALIDATION_SOURCE})"
        )


# No band given (a caller that passes none): the range is the estimate alone, and says so.
NO_BAND = TimeBand(low_ratio=1.0, high_ratio=1.0, runs=0, basis="no validation band was given, the estimate alone")

BandFor = Callable[[GpuSpec, TrainingSettings], TimeBand]


def _band(errors: Sequence[ThroughputError], basis: str) -> TimeBand:
    ratios = [error.ratio for error in errors]
    return TimeBand(low_ratio=min(ratios), high_ratio=max(ratios), runs=len(ratios), basis=basis)


def select_band(
    errors: Sequence[ThroughputError], family: str | None, stack: str | None, min_rows: int = MIN_ROWS
) -> TimeBand:
    """The band of the runs on `family` with `stack` when there are `min_rows` of them, else of the
    runs on `family`, else of every run; `basis` says which and why."""
    if not errors:
        return NO_BAND
    in_family = [error for error in errors if family is not None and error.gpu_family == family]
    same_stack = [error for error in in_family if stack is not None and error.stack == stack]
    if len(same_stack) >= min_rows:
        return _band(same_stack, f"{len(same_stack)} published {stack} runs on {family}-family GPUs")
    short_stack = f"; {len(same_stack)} {stack} runs, fewer than {min_rows}" if stack else ""
    if len(in_family) >= min_rows:
        return _band(in_family, f"{len(in_family)} published runs on {family}-family GPUs (any stack{short_stack})")
    short_family = "none on this GPU's family"
    if family:
        short_family = f"{len(in_family)} on {family}-family GPUs, fewer than {min_rows}"
    return _band(errors, f"all {len(errors)} published runs ({short_family})")


def bracket(value: float, low: float, high: float) -> tuple[float, float]:
    """[low, high] widened to hold `value` (floating-point rounding must never leave it outside)."""
    return min(low, value), max(high, value)


def scaled_range(value: float, band: TimeBand) -> tuple[float, float]:
    """Hours, or a cost proportional to hours, at both ends of the band: value x (low, high factor)."""
    return bracket(value, value * band.low_factor, value * band.high_factor)


def spot_usd_range(
    usd_spot_expected: float | None,
    usd_spot_low: float | None,
    usd_spot_high: float | None,
    band: TimeBand,
    spot_usd_per_hour: float | None,
    prices: SpotPriceRange | None,
) -> tuple[float, float] | None:
    """The expected spot cost's range: fewer interruptions (usd_spot_low), the fast end of the band
    and the cheapest region's price at the low end; more interruptions, the slow end and the dearest
    region at the high end. None when spot has no cost (no price, or not worth it)."""
    if usd_spot_expected is None or usd_spot_low is None or usd_spot_high is None:
        return None
    low_price, high_price = 1.0, 1.0
    if prices is not None and spot_usd_per_hour:
        low_price = prices.low_usd_per_hour / spot_usd_per_hour
        high_price = prices.high_usd_per_hour / spot_usd_per_hour
    low = usd_spot_low * band.low_factor * low_price
    high = usd_spot_high * band.high_factor * high_price
    return bracket(usd_spot_expected, low, high)


def spot_hours_range(
    hours_expected: float | None, low_hours: float | None, high_hours: float | None, band: TimeBand
) -> tuple[float, float] | None:
    """Expected spot hours' range: half the interruptions and the fast end of the band, twice the
    interruptions and the slow end (None when spot has no hours)."""
    if hours_expected is None or low_hours is None or high_hours is None:
        return None
    return bracket(hours_expected, low_hours * band.low_factor, high_hours * band.high_factor)
