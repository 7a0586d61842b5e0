"""The energy and the carbon of a run: what its GPUs and their servers draw, at the facility's meter.

For a run of `gpus` GPUs that takes `hours`:

    GPU W        = TDP x share of TDP drawn while training          (gpu_power_w)
    facility W   = (GPU W + host W per GPU) x PUE                   (facility_w_per_gpu)
    energy kWh   = facility W x GPUs x hours / 1000                 (energy_kwh)
    CO2 kg       = energy kWh x grid gCO2e/kWh / 1000               (co2_kg)

The defaults, each from a public source and each a user setting (EnergySettings):

- Share of TDP while training, 0.76: Newkirk et al. 2025 (https://arxiv.org/abs/2506.14551, abstract)
  measured 8-GPU H100 nodes under compute-intensive training at 76% of their 10.2 kW rating;
  Latif et al. 2024 (https://arxiv.org/abs/2412.08602, abstract) saw at most 8.4 kW (82%) with the GPUs
  near full utilisation. The split between GPUs and the rest of the node was not published, so both
  are taken at the same 76%. Counting every GPU at its full TDP, as the BLOOM paper (Luccioni et al.
  2022, https://arxiv.org/abs/2211.02001, section 4) and ML CO2 Impact (Lacoste et al. 2019,
  https://arxiv.org/abs/1910.09700) do, is the share 1.0: an upper bound by these measurements.
  One H200 measured in this repository (data/device_runs/README.md: NVML's energy counter over
  single-GPU training steps at 15-30% MFU) drew 85-105% of its 700 W TDP: one GPU busy on a step
  draws near TDP, a whole node over a whole run (communication, data, evaluation) less, which is
  what the default describes.
- Host W per GPU, 437 W: a DGX H100 is rated 10.2 kW for 8 x 700 W GPUs (NVIDIA DGX H100 user guide,
  https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html), so the rest of the
  server (CPUs, memory, NVSwitches, NICs, fans, power-supply losses) is rated (10,200 - 8 x 700) / 8 =
  575 W per GPU; at the same measured 76%, 437 W. It is an 8-GPU training server's figure: a small
  GPU in a small host draws less besides it.
- PUE 1.56: the Uptime Institute Global Data Center Survey 2024 average (facility power / IT power,
  https://uptimeinstitute.com/resources/research-and-reports/uptime-institute-global-data-center-survey-results-2024).
  Hyperscale clouds publish lower fleet figures; give the provider's own where known.

The grid's intensity comes from data/grid_intensity.csv (calculators.cost.grid) unless the user gives
one; a region the table does not know has no CO2 figure, said in words, never 0.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from calculators.hardware.catalogue import GpuSpec

# Newkirk et al. 2025, arXiv 2506.14551: 8 x H100 nodes in compute-intensive training at 76% of rating.
TRAINING_SHARE_OF_RATED_POWER = 0.76
# NVIDIA DGX H100 user guide: system power 10.2 kW max, 8 H100 SXM GPUs of 700 W TDP each.
DGX_H100_SYSTEM_W = 10_200.0
DGX_H100_GPUS = 8
H100_SXM_TDP_W = 700.0
# Uptime Institute Global Data Center Survey 2024: average annual PUE.
DEFAULT_PUE = 1.56


def gpu_power_w(tdp_w: float, share_of_tdp: float) -> float:
    """One GPU's draw while training: TDP x the share of TDP it draws (Newkirk et al. 2025 measured
    76% of rating on H100 nodes; 1.0 is the BLOOM paper's and ML CO2 Impact's count at TDP)."""
    return tdp_w * share_of_tdp


def host_w_per_gpu(system_w: float, gpus: int, gpu_tdp_w: float, share_of_rating: float) -> float:
    """The server's draw besides its GPUs, per GPU: (system rating - GPUs x TDP) / GPUs x the share
    of rating drawn while training. DGX H100: (10,200 - 8 x 700) / 8 x 0.76 = 437 W."""
    return (system_w - gpus * gpu_tdp_w) / gpus * share_of_rating


def facility_power_w(gpu_w: float, host_w: float, pue: float) -> float:
    """What one GPU and its share of the server cost the facility: (GPU W + host W) x PUE
    (PUE = facility power / IT power, The Green Grid's definition as Uptime Institute surveys it)."""
    return (gpu_w + host_w) * pue


def energy_kwh(facility_w_per_gpu: float, gpus: int, hours: float) -> float:
    """Energy of a run at the facility's meter: W per GPU x GPUs x hours / 1000."""
    return facility_w_per_gpu * gpus * hours / 1000


def co2_kg(kwh: float, grid_gco2e_per_kwh: float) -> float:
    """Location-based emissions of `kwh` drawn from a grid: kWh x gCO2e/kWh / 1000 (the GHG
    Protocol's location-based method, as Google's region carbon data publishes the intensities)."""
    return kwh * grid_gco2e_per_kwh / 1000


DEFAULT_HOST_W_PER_GPU = host_w_per_gpu(DGX_H100_SYSTEM_W, DGX_H100_GPUS, H100_SXM_TDP_W, TRAINING_SHARE_OF_RATED_POWER)


class EnergySettings(BaseModel):
    """What a run's energy and carbon assume; each default is sourced in this module's docstring."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    gpu_share_of_tdp: float = Field(
        default=TRAINING_SHARE_OF_RATED_POWER,
        gt=0,
        le=1.5,
        description="share of its TDP a GPU draws while training (measured: 0.76 on 8 x H100; 1 = at TDP)",
    )
    host_w_per_gpu: float = Field(
        default=DEFAULT_HOST_W_PER_GPU,
        ge=0,
        le=100_000,
        description="the server's draw besides its GPUs, per GPU (CPUs, memory, switches, fans), in W",
    )
    pue: float = Field(default=DEFAULT_PUE, ge=1, le=5, description="power usage effectiveness: facility / IT power")
    grid_gco2e_per_kwh: float | None = Field(
        default=None,
        ge=0,
        le=5000,
        description="grid carbon intensity for every option in gCO2e/kWh; None: the region's, from "
        "data/grid_intensity.csv",
    )


def facility_w_per_gpu(gpu: GpuSpec, settings: EnergySettings, pue: float | None = None) -> float | None:
    """Facility watts per GPU of `gpu` while training, by `settings` (`pue` replaces theirs: an owned
    server's own facility); None when the catalogue has no TDP for the GPU."""
    if gpu.tdp_w is None:
        return None
    gpu_w = gpu_power_w(gpu.tdp_w, settings.gpu_share_of_tdp)
    return facility_power_w(gpu_w, settings.host_w_per_gpu, settings.pue if pue is None else pue)


def energy_assumptions(settings: EnergySettings) -> list[str]:
    """What the energy and carbon figures assume, in words."""
    grid = (
        f"grid {settings.grid_gco2e_per_kwh:g} gCO2e/kWh (given) for every option"
        if settings.grid_gco2e_per_kwh is not None
        else "grid intensity of each option's region from data/grid_intensity.csv (dated, sourced per row); "
        "a region it does not know has no CO2 figure"
    )
    return [
        f"energy = (GPU TDP x {settings.gpu_share_of_tdp:g} + {settings.host_w_per_gpu:,.0f} W host per GPU) x PUE "
        f"{settings.pue:g} x GPUs x hours on demand (Newkirk et al. 2025: 8 x H100 nodes train at 76% of rated "
        "power; DGX H100 rated 10.2 kW; Uptime Institute 2024 average PUE 1.56)",
        grid,
    ]
