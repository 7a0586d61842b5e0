"""What a training run costs: every priced cloud instance, spot, and buying the GPUs instead.

For each price row the run uses `settings.total_gpus` GPUs (data x tensor x pipeline parallel) of the row's type,
priced by calculators.cost.pricing.price_run (the planner's pricing too):

    instances = ceil(gpus / gpus_per_instance)            (whole instances are billed)
    usd       = instances x instance USD/hour x hours     (on demand: the time estimate's hours)
    spot usd  = instances x spot USD/hour x expected spot hours (see calculators.cost.spot)

A multi-instance job restarts when any instance is interrupted, so its interruption rate is
instances x the per-instance rate. Idle GPUs of a partly used instance are still paid for.
A price of 0 (hardware you already own, say) gives a cost of 0. Where interruptions outpace
progress, spot is "not worth it" (calculators.cost.spot): the reason in words, no spot costs.

Options whose GPU the workload does not fit, or whose software stack cannot run it
(calculators.workload.compatibility), are kept but set apart with the reason (`excluded_reason`):
`ranked_and_set_apart` splits them from the ranking.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from calculators.cost.energy import DEFAULT_PUE, EnergySettings, co2_kg, energy_kwh, facility_w_per_gpu
from calculators.cost.grid import GridTable, grid_for, grid_unknown_reason, load_grid_intensity
from calculators.cost.pareto import time_cost_front
from calculators.cost.prices import CloudPrice
from calculators.cost.pricing import RunPrice, price_run
from calculators.cost.ranges import NO_BAND, BandFor, TimeBand, scaled_range, spot_hours_range, spot_usd_range
from calculators.cost.spot import DEFAULT_CHECKPOINT_WRITE_H, DEFAULT_RESTART_H, check_pause_hours
from calculators.cost.spot_spread import SpotSaving, load_spot_savings, spot_price_range
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.models.spec import ModelSpec
from calculators.timing.estimate import TimeEstimate, estimate_workload_time
from calculators.timing.memo import Workload, workload_of
from calculators.timing.settings import TimeSettings
from calculators.workload.compatibility import training_stack_problem
from calculators.workload.training import TrainingSettings

HOURS_PER_YEAR = 8760.0

MemoryFits = Callable[[GpuSpec], bool]


class CostOption(BaseModel):
    """One way to rent the run: a priced instance type, how many, how long, what it costs."""

    model_config = ConfigDict(allow_inf_nan=False)

    gpu: str
    provider: str
    instance_type: str
    region: str
    gpus: int = Field(description="GPUs the run uses in total")
    gpus_per_instance: int
    instances: int
    step_s: float
    tokens_per_s_per_gpu: float = 0.0
    mfu: float = Field(default=0.0, description="model FLOPs utilisation of the dense peak")
    hours: float = Field(description="wall hours on demand")
    on_demand_usd_per_hour: float = Field(description="per instance")
    spot_usd_per_hour: float | None = Field(description="per instance")
    usd_on_demand: float
    usd_per_epoch_on_demand: float
    usd_per_million_tokens_on_demand: float
    interruptions_per_hour: float | None = Field(description="for the whole job: instances x per-instance rate")
    spot_hours_expected: float | None = Field(description="None without a spot price or when not worth it")
    usd_spot_expected: float | None
    usd_spot_low: float | None
    usd_spot_high: float | None
    usd_per_epoch_spot: float | None
    usd_per_million_tokens_spot: float | None = None
    fits_in_memory: bool | None = Field(description="None when no memory check was given")
    price_as_of: dt.date
    source: str
    spot_not_worth_reason: str | None = Field(
        default=None, description="why this option should not run on spot (its spot costs are None then)"
    )
    stack_problem: str | None = Field(default=None, description="why the GPU's software stack cannot run the workload")
    excluded_reason: str | None = Field(
        default=None, description="why the option is set apart from the ranking: does not fit, or cannot run"
    )
    energy_kwh: float | None = Field(
        default=None,
        description="facility energy of the on-demand hours: (GPU TDP x share + host W) x PUE x GPUs x hours "
        "(calculators.cost.energy); None without a TDP",
    )
    co2_kg: float | None = Field(
        default=None, description="energy_kwh x the region's grid gCO2e/kWh / 1000; None when either is not known"
    )
    grid_gco2e_per_kwh: float | None = Field(
        default=None, description="grid intensity used: given, or the region's from data/grid_intensity.csv"
    )
    co2_unknown_reason: str | None = Field(default=None, description="why co2_kg is not known, in words")
    hours_range: tuple[float, float] | None = Field(
        default=None, description="[low, high] wall hours on demand from the time model's measured error"
    )
    usd_on_demand_range: tuple[float, float] | None = Field(default=None, description="[low, high] of usd_on_demand")
    usd_spot_expected_range: tuple[float, float] | None = Field(
        default=None, description="[low, high] of usd_spot_expected: time error, interruptions, regional spot prices"
    )
    spot_hours_range: tuple[float, float] | None = Field(
        default=None, description="[low, high] of spot_hours_expected: time error and interruptions"
    )
    range_notes: list[str] = Field(default_factory=list, description="what the ranges rest on, in words")


class GpuVerdict(NamedTuple):
    """Whether the workload can run on one GPU type: memory and software stack."""

    fits_in_memory: bool | None
    stack_problem: str | None
    excluded_reason: str | None


def gpu_verdict(
    gpu: GpuSpec, settings: TrainingSettings, memory_fits: MemoryFits | None = None, peak_gib: float | None = None
) -> GpuVerdict:
    """Does the workload fit `gpu` (by `memory_fits`, else `peak_gib` against its capacity; None
    when neither is given) and can its stack run it (calculators.workload.compatibility)? With the reason
    to set the option apart, in words, when not."""
    if memory_fits is not None:
        fits = bool(memory_fits(gpu))
    else:
        fits = None if peak_gib is None else peak_gib <= gpu_memory_gib(gpu)
    stack = training_stack_problem(gpu, settings)
    reasons = [_fit_problem(gpu, peak_gib)] if fits is False else []
    reasons += [stack] if stack else []
    return GpuVerdict(fits, stack, "; ".join(reasons) or None)


def _fit_problem(gpu: GpuSpec, peak_gib: float | None) -> str:
    """The memory verdict in words for a GPU the workload does not fit."""
    if peak_gib is None:
        return f"does not fit in the {gpu.memory_gb:g} GB of {gpu.name}"
    return f"does not fit: the workload needs {peak_gib:,.1f} GiB per GPU, {gpu.name} has {gpu.memory_gb:g} GB"


class RunEnergy(NamedTuple):
    """A run's energy and carbon on one instance row; None where not known, with the reason."""

    energy_kwh: float | None
    co2_kg: float | None
    grid_gco2e_per_kwh: float | None
    co2_unknown_reason: str | None


def run_energy(
    gpu: GpuSpec, price: CloudPrice, gpus: int, hours: float, energy: EnergySettings, grid: GridTable
) -> RunEnergy:
    """Energy of `gpus` GPUs of `gpu` for `hours` (calculators.cost.energy) and its CO2 at the grid
    intensity given in `energy`, else that of the price row's region in `grid`."""
    watts = facility_w_per_gpu(gpu, energy)
    kwh = None if watts is None else energy_kwh(watts, gpus, hours)
    intensity = energy.grid_gco2e_per_kwh
    if intensity is None:
        row = grid_for(price.provider, price.region, grid)
        intensity = None if row is None else row.gco2e_per_kwh
    if kwh is None:
        return RunEnergy(None, None, intensity, f"energy not known: {gpu.name} has no TDP in the catalogue")
    if intensity is None:
        return RunEnergy(kwh, None, None, grid_unknown_reason(price.provider, price.region, grid))
    return RunEnergy(kwh, co2_kg(kwh, intensity), intensity, None)


def _option(
    price: CloudPrice,
    estimate: TimeEstimate,
    gpus: int,
    verdict: GpuVerdict,
    checkpoint_write_h: float,
    restart_h: float,
    power: RunEnergy,
    band: TimeBand = NO_BAND,
    spot_savings: Sequence[SpotSaving] = (),
) -> CostOption:
    """Price one instance row for a time estimate (calculators.cost.pricing.price_run), with its
    energy and carbon (`run_energy`) and the ranges of calculators.cost.ranges."""
    hours = estimate.hours_total
    run = price_run(price, gpus, hours, checkpoint_write_h, restart_h)
    spot = run.spot
    million_tokens = estimate.dataset_tokens * estimate.epochs / 1e6

    def per(usd: float | None, amount: float) -> float | None:
        return None if usd is None else usd / amount

    return CostOption(
        gpu=price.gpu,
        provider=price.provider,
        instance_type=price.instance_type,
        region=price.region,
        gpus=gpus,
        gpus_per_instance=price.gpu_count,
        instances=run.instances,
        step_s=estimate.step_s,
        tokens_per_s_per_gpu=estimate.tokens_per_s_per_gpu,
        mfu=estimate.mfu,
        hours=hours,
        on_demand_usd_per_hour=price.on_demand_usd_per_hour,
        spot_usd_per_hour=price.spot_usd_per_hour,
        usd_on_demand=run.usd,
        usd_per_epoch_on_demand=run.usd / estimate.epochs,
        usd_per_million_tokens_on_demand=run.usd / million_tokens,
        interruptions_per_hour=None if spot is None else spot.interruptions_per_hour,
        spot_hours_expected=run.spot_hours_expected,
        usd_spot_expected=run.usd_spot_expected,
        usd_spot_low=run.usd_spot_low,
        usd_spot_high=run.usd_spot_high,
        usd_per_epoch_spot=per(run.usd_spot_expected, estimate.epochs),
        usd_per_million_tokens_spot=per(run.usd_spot_expected, million_tokens),
        fits_in_memory=verdict.fits_in_memory,
        price_as_of=price.as_of,
        source=price.source,
        spot_not_worth_reason=None if spot is None else spot.not_worth_reason,
        stack_problem=verdict.stack_problem,
        excluded_reason=verdict.excluded_reason,
        energy_kwh=power.energy_kwh,
        co2_kg=power.co2_kg,
        grid_gco2e_per_kwh=power.grid_gco2e_per_kwh,
        co2_unknown_reason=power.co2_unknown_reason,
        **_ranges(price, run, hours, band, spot_savings),
    )


def _ranges(price: CloudPrice, run: RunPrice, hours: float, band: TimeBand, spot_savings: Sequence[SpotSaving]) -> dict:
    """An option's ranges (calculators.cost.ranges) and what they rest on."""
    prices = spot_price_range(price, spot_savings)
    spot = run.spot
    return {
        "hours_range": scaled_range(hours, band),
        "usd_on_demand_range": scaled_range(run.usd, band),
        "usd_spot_expected_range": spot_usd_range(
            run.usd_spot_expected, run.usd_spot_low, run.usd_spot_high, band, price.spot_usd_per_hour, prices
        ),
        "spot_hours_range": None
        if spot is None
        else spot_hours_range(spot.expected_hours, spot.low_hours, spot.high_hours, band),
        "range_notes": [band.assumption] + ([prices.note] if prices is not None and prices.note else []),
    }


class TimedRow(NamedTuple):
    """A price row the time model can time: its GPU, the time estimate on its instance size and the
    GPU's verdict (fits, can run); `priced_options` prices it."""

    price: CloudPrice
    gpu: GpuSpec
    estimate: TimeEstimate
    verdict: GpuVerdict

    @property
    def excluded_reason(self) -> str | None:
        """Why the row's option is set apart from the ranking (the verdict's), as on CostOption."""
        return self.verdict.excluded_reason

    @property
    def stack_problem(self) -> str | None:
        """Why the GPU's software stack cannot run the workload (the verdict's), as on CostOption."""
        return self.verdict.stack_problem


def cost_options(
    spec: ModelSpec,
    settings: TrainingSettings,
    time_settings: TimeSettings,
    prices: Iterable[CloudPrice],
    catalogue: Iterable[GpuSpec],
    memory_fits: MemoryFits | None = None,
    checkpoint_write_h: float = DEFAULT_CHECKPOINT_WRITE_H,
    restart_h: float = DEFAULT_RESTART_H,
    measured_matmul_fraction: dict[str, float] | None = None,
    peak_gib: float | None = None,
    energy: EnergySettings | None = None,
    grid: GridTable | None = None,
    time_band: BandFor | None = None,
    spot_savings: Sequence[SpotSaving] | None = None,
) -> list[CostOption]:
    """Every priced instance with a time estimate: those that fit and can run first, each group
    cheapest on demand first.

    The time estimate uses each instance's GPU count as `gpus_per_node` (more GPUs than one
    instance holds talk over the network). Rows whose GPU is not in `catalogue`, or has no rate
    for the precision, are left out. `memory_fits(gpu)` (e.g. built on calculators.memory.fit), or else
    `peak_gib` (the workload's peak per GPU, against calculators.memory.fit_matrix.gpu_memory_gib), fills
    `fits_in_memory`; `stack_problem` comes from calculators.workload.compatibility. Options that do not
    fit or cannot run are kept and marked with `excluded_reason`, not dropped.
    `measured_matmul_fraction` (GPU name -> fraction of dense peak, from a calibration) replaces
    mamf-finder's per-family fraction in those GPUs' GEMMs unless the user gave a utilisation or
    a matmul fraction for all GPUs.
    Each option's energy and CO2 follow `energy` (default EnergySettings()) and the grid table
    `grid` (default data/grid_intensity.csv) for the on-demand hours.
    `time_band(gpu, settings)` (calculators.validation.error_band.time_band_for from the command
    line and the pages) gives each option's hours and cost ranges the time model's measured error;
    without it the ranges are the estimate alone. `spot_savings` (default: data/aws_spot_savings.csv)
    spreads the spot price across regions (calculators.cost.spot_spread).
    Raises ValueError for a checkpoint write or restart time that is negative, not finite, or
    over a week (calculators.cost.spot.check_pause_hours).

    The two steps apart, `timed_rows` then `priced_options`, let a caller price only the rows it shows
    (the Time and cost page prices the options set apart only when their section is open).
    """
    check_pause_hours(checkpoint_write_h, restart_h)
    rows = timed_rows(spec, settings, time_settings, prices, catalogue, memory_fits, measured_matmul_fraction, peak_gib)
    return priced_options(
        rows,
        settings,
        checkpoint_write_h,
        restart_h,
        energy=energy,
        grid=grid,
        time_band=time_band,
        spot_savings=spot_savings,
    )


def timed_rows(
    spec: ModelSpec,
    settings: TrainingSettings,
    time_settings: TimeSettings,
    prices: Iterable[CloudPrice],
    catalogue: Iterable[GpuSpec],
    memory_fits: MemoryFits | None = None,
    measured_matmul_fraction: dict[str, float] | None = None,
    peak_gib: float | None = None,
) -> list[TimedRow]:
    """Each price row whose GPU is in `catalogue` and has a rate for the precision, in the order
    given, with its time estimate on its instance size and the GPU's verdict (cost_options says how)."""
    gpus_by_name = {gpu.name: gpu for gpu in catalogue}
    workload = workload_of(spec, settings)  # one workload timed on every GPU and instance size
    estimates: dict[tuple[str, int], TimeEstimate | None] = {}
    verdicts: dict[str, GpuVerdict] = {}
    rows = []
    for price in prices:
        gpu = gpus_by_name.get(price.gpu)
        if gpu is None:
            continue
        key = (gpu.name, price.gpu_count)
        if key not in estimates:
            gpu_time_settings = time_settings.with_measured_matmul_fraction(gpu.name, measured_matmul_fraction)
            estimates[key] = _estimate_or_none(workload, gpu, gpu_time_settings, price.gpu_count)
        if estimates[key] is None:
            continue
        if gpu.name not in verdicts:
            verdicts[gpu.name] = gpu_verdict(gpu, settings, memory_fits, peak_gib)
        rows.append(TimedRow(price, gpu, estimates[key], verdicts[gpu.name]))
    return rows


def priced_options(
    rows: Iterable[TimedRow],
    settings: TrainingSettings,
    checkpoint_write_h: float = DEFAULT_CHECKPOINT_WRITE_H,
    restart_h: float = DEFAULT_RESTART_H,
    energy: EnergySettings | None = None,
    grid: GridTable | None = None,
    time_band: BandFor | None = None,
    spot_savings: Sequence[SpotSaving] | None = None,
) -> list[CostOption]:
    """The options of `rows` (timed_rows) for `settings.total_gpus` GPUs, sorted as cost_options sorts
    them: those not set apart first, then by USD on demand, then by hours. The sort is stable, so the
    options of any part of the rows come in the order they have among all of them (the Time and cost page
    prices its table's rows and those set apart apart). Raises ValueError for pause hours out of range
    (calculators.cost.spot.check_pause_hours)."""
    check_pause_hours(checkpoint_write_h, restart_h)
    energy = energy or EnergySettings()
    grid = load_grid_intensity() if grid is None else grid
    savings = load_spot_savings() if spot_savings is None else spot_savings
    bands: dict[str, TimeBand] = {}
    options = []
    for price, gpu, estimate, verdict in rows:
        power = run_energy(gpu, price, settings.total_gpus, estimate.hours_total, energy, grid)
        if gpu.name not in bands:
            bands[gpu.name] = NO_BAND if time_band is None else time_band(gpu, settings)
        options.append(
            _option(
                price,
                estimate,
                settings.total_gpus,
                verdict,
                checkpoint_write_h,
                restart_h,
                power,
                bands[gpu.name],
                savings,
            )
        )
    return sorted(options, key=lambda option: (option.excluded_reason is not None, option.usd_on_demand, option.hours))


Option = TypeVar("Option", CostOption, TimedRow)


def ranked_and_set_apart(options: Iterable[Option]) -> tuple[list[Option], list[Option]]:
    """(ranked, set apart): the options (or the timed rows they are priced from) that fit and can run,
    and those with an `excluded_reason`, each in the order given."""
    options = list(options)
    ranked = [option for option in options if option.excluded_reason is None]
    set_apart = [option for option in options if option.excluded_reason is not None]
    return ranked, set_apart


def _estimate_or_none(
    workload: Workload, gpu: GpuSpec, time_settings: TimeSettings, gpus_per_node: int
) -> TimeEstimate | None:
    """The time estimate with this instance size as the node, or None when the GPU lacks the precision."""
    node_settings = time_settings.model_copy(update={"gpus_per_node": gpus_per_node})
    try:
        return estimate_workload_time(workload, gpu, node_settings)
    except ValueError:
        return None


def cheapest(options: Iterable[CostOption], spot: bool = False, fits_only: bool = True) -> CostOption | None:
    """The cheapest option on demand (or by expected spot cost, among those worth running on
    spot); by default only those not set apart (they fit, or were not checked, and can run)."""
    candidates = [option for option in options if not fits_only or option.excluded_reason is None]
    if spot:
        candidates = [option for option in candidates if option.usd_spot_expected is not None]
        return min(candidates, key=lambda option: option.usd_spot_expected, default=None)
    return min(candidates, key=lambda option: option.usd_on_demand, default=None)


def pareto_front(options: Sequence[CostOption], spot: bool = False) -> list[CostOption]:
    """Options no other option beats on both time and cost (hours vs USD), fastest first.

    With `spot`, time is the expected spot hours and cost the expected spot USD (options
    without a spot price are left out). Of exact ties the first in `options` is kept.
    """
    return time_cost_front(options, lambda option: _time_and_cost(option, spot))


def _time_and_cost(option: CostOption, spot: bool) -> tuple[float | None, float | None]:
    """(hours, usd) of an option on demand or on spot."""
    if spot:
        return option.spot_hours_expected, option.usd_spot_expected
    return option.hours, option.usd_on_demand


# --- buying instead of renting --------------------------------------------------------


class OwnershipSettings(BaseModel):
    """What owning GPUs costs; each default is a stated assumption the caller may change."""

    model_config = ConfigDict(extra="forbid")

    purchase_usd_per_gpu: float | None = Field(
        default=None, gt=0, description="None: the catalogue's price_usd (street or MSRP, GPU only)"
    )
    host_overhead_fraction: float = Field(
        default=0.0, ge=0, le=10, description="server, network, storage as a fraction of GPU capex; 0 = GPUs only"
    )
    years: float = Field(default=3.0, gt=0, le=30, description="amortisation period, used around the clock")
    pue: float = Field(
        default=DEFAULT_PUE, ge=1, le=5, description="power usage effectiveness of your facility (facility / IT power)"
    )
    electricity_usd_per_kwh: float = Field(default=0.13, ge=0, le=10)


class BuyVsRent(BaseModel):
    """Owning `gpus` GPUs versus renting them, for this run and in general."""

    model_config = ConfigDict(allow_inf_nan=False)

    gpu: str
    gpus: int
    purchase_usd_per_gpu: float
    capex_usd: float = Field(description="GPUs x price x (1 + host overhead)")
    years: float = Field(description="amortisation period, every hour of it")
    power_kw: float = Field(description="GPUs x (TDP x share + host W) x PUE (calculators.cost.energy)")
    energy_usd_per_hour: float
    amortised_usd_per_hour: float = Field(description="capex spread over every hour of `years`")
    owned_usd_per_hour: float = Field(description="amortised capex + energy")
    rent_usd_per_hour: float
    break_even_hours: float | None = Field(description="hours of use at which buying costs what renting does")
    run_hours: float
    run_usd_owned: float = Field(description="amortised capex x run hours + energy")
    run_usd_rented: float
    assumptions: list[str]


def energy_usd_per_hour(facility_w_per_gpu: float, gpus: int, electricity_usd_per_kwh: float) -> float:
    """Electricity per hour of use: GPUs x facility W per GPU (calculators.cost.energy.facility_w_per_gpu,
    the figure the rented options' energy uses) / 1000 x price per kWh."""
    return gpus * facility_w_per_gpu / 1000 * electricity_usd_per_kwh


def break_even_hours(capex_usd: float, rent_usd_per_hour: float, energy_usd_per_hour: float) -> float | None:
    """Hours h with capex + energy x h = rent x h; None when renting costs no more than the power."""
    saving_per_hour = rent_usd_per_hour - energy_usd_per_hour
    return capex_usd / saving_per_hour if saving_per_hour > 0 else None


def purchase_usd_per_gpu(gpu: GpuSpec, ownership: OwnershipSettings) -> float | None:
    """The price of one GPU: the one given, else the catalogue's; None without either."""
    return ownership.purchase_usd_per_gpu or gpu.price_usd


def capex_usd(gpus: int, purchase_usd_per_gpu: float, ownership: OwnershipSettings) -> float:
    """Buying `gpus` GPUs and their share of the host: GPUs x price x (1 + host overhead)."""
    return gpus * purchase_usd_per_gpu * (1 + ownership.host_overhead_fraction)


def amortised_usd_per_hour(capex: float, ownership: OwnershipSettings) -> float:
    """`capex` spread over every hour of the amortisation period."""
    return capex / (ownership.years * HOURS_PER_YEAR)


def owned_facility_w_per_gpu(
    gpu: GpuSpec, ownership: OwnershipSettings, energy: EnergySettings | None = None, share_of_tdp: float | None = None
) -> float | None:
    """Facility W per owned GPU: the rented options' figure (calculators.cost.energy.facility_w_per_gpu:
    TDP x share + host W, by `energy`) at your facility's PUE; `share_of_tdp` replaces the share."""
    energy = energy or EnergySettings()
    if share_of_tdp is not None:
        energy = energy.model_copy(update={"gpu_share_of_tdp": share_of_tdp})
    return facility_w_per_gpu(gpu, energy, pue=ownership.pue)


def owned_usd_per_gpu_hour(
    gpu: GpuSpec,
    ownership: OwnershipSettings,
    utilisation: float | None = None,
    energy: EnergySettings | None = None,
) -> float | None:
    """Owning one GPU for an hour: purchase x (1 + host overhead) spread over every hour of the
    amortisation period, plus its facility power (owned_facility_w_per_gpu; `utilisation` is the
    share of TDP the GPU draws, None: `energy`'s) x electricity price. None without a purchase
    price or TDP."""
    purchase = purchase_usd_per_gpu(gpu, ownership)
    watts = owned_facility_w_per_gpu(gpu, ownership, energy, utilisation)
    if purchase is None or watts is None:
        return None
    amortised = amortised_usd_per_hour(capex_usd(1, purchase, ownership), ownership)
    return amortised + energy_usd_per_hour(watts, 1, ownership.electricity_usd_per_kwh)


def buy_vs_rent(
    gpu: GpuSpec,
    gpus: int,
    rent_usd_per_hour: float,
    run_hours: float,
    ownership: OwnershipSettings | None = None,
    energy: EnergySettings | None = None,
) -> BuyVsRent:
    """Compare owning `gpus` of `gpu` with renting them at `rent_usd_per_hour` (all of them).

    Raises ValueError when there is no purchase price (none given, none in the catalogue) or
    the catalogue has no TDP for the GPU. Power is the rented options' figure (`energy`: share of
    TDP and host W) at your facility's PUE (`ownership.pue`).
    """
    ownership = ownership or OwnershipSettings()
    energy = energy or EnergySettings()
    price = purchase_usd_per_gpu(gpu, ownership)
    if price is None:
        raise ValueError(f"{gpu.name} has no purchase price in the GPU catalogue: give a price per GPU")
    watts = owned_facility_w_per_gpu(gpu, ownership, energy)
    if watts is None:
        raise ValueError(f"{gpu.name} has no TDP in the catalogue; its power cost is unknown")
    capex = capex_usd(gpus, price, ownership)
    power_usd = energy_usd_per_hour(watts, gpus, ownership.electricity_usd_per_kwh)
    amortised = amortised_usd_per_hour(capex, ownership)
    return BuyVsRent(
        gpu=gpu.name,
        gpus=gpus,
        purchase_usd_per_gpu=price,
        capex_usd=capex,
        years=ownership.years,
        power_kw=gpus * watts / 1000,
        energy_usd_per_hour=power_usd,
        amortised_usd_per_hour=amortised,
        owned_usd_per_hour=amortised + power_usd,
        rent_usd_per_hour=rent_usd_per_hour,
        break_even_hours=break_even_hours(capex, rent_usd_per_hour, power_usd),
        run_hours=run_hours,
        run_usd_owned=(amortised + power_usd) * run_hours,
        run_usd_rented=rent_usd_per_hour * run_hours,
        assumptions=_ownership_assumptions(gpu, ownership, price, energy),
    )


def _ownership_assumptions(
    gpu: GpuSpec, ownership: OwnershipSettings, price: float, energy: EnergySettings
) -> list[str]:
    """Plain-language list of what the buy-vs-rent comparison assumes."""
    kind = "given" if ownership.purchase_usd_per_gpu else f"catalogue {gpu.price_kind or 'price'}"
    return [
        f"purchase {price:,.0f} USD per GPU ({kind}), host overhead {ownership.host_overhead_fraction:.0%} of it",
        f"amortised over {ownership.years:g} years of every hour (idle hours are paid for too)",
        f"power per GPU (TDP {gpu.tdp_w:g} W x {energy.gpu_share_of_tdp:g} + {energy.host_w_per_gpu:,.0f} W host) x "
        f"PUE {ownership.pue:g} (Uptime Institute 2024 average 1.56), as the rented options' energy, electricity "
        f"{ownership.electricity_usd_per_kwh:g} USD/kWh (about the US commercial average)",
        "no staff, space, maintenance, financing or resale value",
    ]


# --- the user's own terms -----------------------------------------------------------


def adjusted_prices(
    prices: Iterable[CloudPrice], discount_fraction: float = 0.0, interruptions_per_hour: float | None = None
) -> list[CloudPrice]:
    """Prices with a negotiated discount taken off both on-demand and spot, and, when given,
    one interruption rate (per instance-hour) for every row that has a spot price."""
    if not 0 <= discount_fraction < 1:
        raise ValueError(f"discount must be in [0, 1), got {discount_fraction}")
    if discount_fraction == 0 and interruptions_per_hour is None:
        # nothing to adjust: the rows themselves (frozen models), not a copy of each on every rerun of the page
        return list(prices)
    adjusted = []
    for price in prices:
        update: dict[str, float | None] = {
            "on_demand_usd_per_hour": price.on_demand_usd_per_hour * (1 - discount_fraction)
        }
        if price.spot_usd_per_hour is not None:
            update["spot_usd_per_hour"] = price.spot_usd_per_hour * (1 - discount_fraction)
            if interruptions_per_hour is not None:
                update["interruptions_per_hour"] = interruptions_per_hour
        adjusted.append(price.model_copy(update=update))
    return adjusted
