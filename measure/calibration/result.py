"""What a calibration run measured, in a form the app can store, show and apply.

A `CalibrationResult` holds one `BenchmarkRecord` per benchmark (a value with its unit,
the datasheet figure it is compared with, or why it was skipped or failed) and the two
things the estimates can use directly:

- `overheads`: memory outside torch's tensors measured on this host (CUDA context,
  cuBLAS workspace, caching-allocator reserve). `apply_to_overheads()` puts them into a
  `calculators.workload.training.Overheads`, keeping the stated defaults for what was not measured.
- `utilisation`: achieved fraction of the datasheet's dense peak per precision
  (fp32, tf32, bf16, fp16, fp8) from the matmul benchmarks, and `training_mfu`, the
  model-FLOPs utilisation of the reference training step (6 x N x tokens / time / peak,
  Kaplan et al. 2020, arXiv 2001.08361; PaLM, arXiv 2204.02311, App. B).
- `vision`: images/s of a real torchvision ResNet trained on this host in each precision
  (`MeasuredVisionThroughput`, measure/calibration/vision.py); empty in results stored before it.
- `all_reduce`, `all_gather`, `reduce_scatter`: bus bandwidth against message size, measured by
  `calibrate --collectives` across this host's GPUs or across nodes (`CollectivePoint`).

Results also arrive from JSON files and the calibration store, so the models refuse what
no measurement can give and what would break the estimates that use them: NaN and
infinities, a utilisation below the least any GEMM reaches (0 or 5e-324: the Cost page divides
by it) or above 1 (see MIN_FRACTION_OF_PEAK for the source), a rate or a time
that is not above 0, a TFLOPS or GB/s figure above the fastest in the GPU catalogue
(physical_ceilings), overheads beyond `Overheads`' bounds, and a schema_version this code does not know. A refusal is a
pydantic ValidationError whose location names the field.

No torch import here: pages may import this module.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.timing.vision_measured import MeasuredVisionThroughput
from calculators.workload.training import Overheads

SCHEMA_VERSION = 1
KNOWN_SCHEMA_VERSIONS = (1,)

DetailValue = float | int | str | bool | None
# The least fraction of dense peak that any GEMM reaches in XLA's default GEMM performance table
# (github.com/openxla/xla xla/service/gpu/model/default_matmul_perf_table.txtpb
# @8b82b7bc8785e77264c3a214aa60b47ffc34de30, copied in data/matmul_efficiency.csv): B200 bf16, one
# 256 x 256 x 256 GEMM at 6.77 TFLOPS of its 2,250 dense bf16 TFLOPS (data/gpus.csv), 0.30%. The
# calibration's GEMMs (benchmarks.CUDA_MATMUL_SHAPES, 4096^3 and 8192^3) and its training step are far
# larger, so a fraction below it is no measurement of a working GPU; 5e-324 made the Cost page's hours NaN.
MIN_FRACTION_OF_PEAK = 6.77 / 2250
# The dense peak itself is the ceiling: the runner caps a measurement above a conservative datasheet
# figure (boost clocks) at 1 (runner._fraction_of_peak).
MAX_FRACTION_OF_PEAK = 1.0


def _plausible_fraction(value: float) -> float:
    """A fraction of dense peak within [MIN_FRACTION_OF_PEAK, 1], else a one-line refusal."""
    if not MIN_FRACTION_OF_PEAK <= value <= MAX_FRACTION_OF_PEAK:
        context = {"value": f"{value:.4g}", "low": f"{MIN_FRACTION_OF_PEAK:.2%}"}
        message = (
            "{value} of dense peak is not a measurement: a GPU's matmuls reach between {low} "
            "(the smallest GEMM in XLA's performance table) and 100%"
        )
        raise PydanticCustomError("plausible_fraction", message, context)
    return value


# Fraction of a peak rate that a workload achieves (NaN and infinities are refused by the models).
Fraction = Annotated[float, AfterValidator(_plausible_fraction)]
# Units whose values are rates or durations: a measurement of them is above 0.
POSITIVE_UNITS = ("TFLOPS", "GB/s", "s", "s/epoch", "images/s")

# Which matmul precision a training precision's matmuls run in.
MATMUL_PRECISION_OF = {
    "fp32": "fp32",
    "amp-fp16": "fp16",
    "fp16-mixed": "fp16",
    "amp-bf16": "bf16",
    "bf16-mixed": "bf16",
    "bf16": "bf16",
}


@functools.cache
def physical_ceilings() -> dict[str, tuple[float, str]]:
    """Unit -> (the most a measurement in it can be, what that is), from the GPU catalogue
    (data/gpus.csv, each row sourced): no matmul runs faster than the fastest dense peak of any
    precision of any accelerator there (MI355X fp8, 5,033 TFLOPS, amd.com), and no copy, memory
    sweep or all-reduce moves bytes faster than the fastest memory or interconnect there (8 TB/s,
    the HBM of GB200 and MI355X). A run's records are compared with the same catalogue's datasheets."""
    catalogue = load_gpu_catalogue()
    rates = [(rate, gpu.name) for gpu in catalogue for precision in ("fp32", "tf32", "bf16", "fp16", "fp8")
             if (rate := gpu.dense_tflops(precision)) is not None]  # fmt: skip
    links = [(gpu.memory_bandwidth_tbps * 1000, gpu.name) for gpu in catalogue if gpu.memory_bandwidth_tbps]
    links += [(gpu.interconnect_gbps, gpu.name) for gpu in catalogue if gpu.interconnect_gbps]
    tflops, fastest = max(rates)
    gbps, widest = max(links)
    return {
        "TFLOPS": (tflops, f"the fastest dense peak in the GPU catalogue, {fastest}'s"),
        "GB/s": (gbps, f"the fastest memory or link in the GPU catalogue, {widest}'s"),
    }


class BenchmarkRecord(BaseModel):
    """One benchmark's outcome. Exactly one of: a value, a skipped_reason, or an error."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=100)
    value: Annotated[float | None, Field(ge=0)] = None
    unit: str = Field(default="", max_length=40)
    datasheet_value: Annotated[float | None, Field(gt=0)] = None
    percent_of_datasheet: Annotated[float | None, Field(gt=0)] = None
    skipped_reason: str | None = Field(default=None, max_length=2000)
    error: str | None = Field(default=None, max_length=2000)
    duration_s: float = Field(default=0.0, ge=0)
    details: dict[str, DetailValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _rates_and_times_are_positive(self) -> BenchmarkRecord:
        """A bandwidth, a TFLOPS figure or a step time of 0 is no measurement; as a divisor
        it would give infinite times downstream."""
        if self.unit in POSITIVE_UNITS and self.value is not None and self.value <= 0:
            context = {"unit": self.unit, "value": self.value}
            raise PydanticCustomError("positive_measurement", "value must be above 0 {unit}, got {value}", context)
        return self

    @model_validator(mode="after")
    def _rates_within_the_fastest_datasheet(self) -> BenchmarkRecord:
        """A rate (or the datasheet figure it is compared with) above every accelerator's datasheet is
        not physical: see `physical_ceilings`."""
        ceiling = physical_ceilings().get(self.unit)
        if ceiling is None:
            return self
        limit, what = ceiling
        for field in ("value", "datasheet_value"):
            number = getattr(self, field)
            if number is not None and number > limit:
                context = {"field": field, "number": f"{number:.4g}", "unit": self.unit, "limit": f"{limit:,.0f}"}
                message = "{field} {number} {unit} is above " + what + " ({limit} {unit})"
                raise PydanticCustomError("physical_ceiling", message, context)
        return self

    @property
    def ok(self) -> bool:
        """True when the benchmark produced a value (not skipped, no error)."""
        return self.value is not None and self.skipped_reason is None and self.error is None


class CalibratedOverheads(BaseModel):
    """Measured replacements for `Overheads` fields; None where this run could not measure one."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cuda_context_gib: Annotated[float | None, Field(ge=0, le=16)] = None
    cublas_workspace_gib: Annotated[float | None, Field(ge=0, le=4)] = None
    allocator_reserve_fraction: Annotated[float | None, Field(ge=0, le=1)] = None

    def apply(self, overheads: Overheads | None = None) -> Overheads:
        """`overheads` (default: the stated defaults) with the measured fields replaced."""
        base = overheads or Overheads()
        measured = {name: value for name, value in self.model_dump().items() if value is not None}
        return base.model_copy(update=measured)


class CollectivePoint(BaseModel):
    """One message size of a collective's curve, in nccl-tests' terms (measure/calibration/collectives.py):
    `bytes` as nccl-tests prints it, algbw = bytes / time, busbw = algbw x the collective's bus factor."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    bytes: int = Field(gt=0)
    algbw_gbytes_per_s: float = Field(gt=0)
    busbw_gbytes_per_s: float = Field(ge=0)  # 0 for one rank: nothing crosses a link
    time_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _within_the_fastest_link(self) -> CollectivePoint:
        """No link carries more than the fastest memory or link in the catalogue (`physical_ceilings`)."""
        limit, what = physical_ceilings()["GB/s"]
        if self.busbw_gbytes_per_s > limit:
            context = {"number": f"{self.busbw_gbytes_per_s:.4g}", "limit": f"{limit:,.0f}"}
            raise PydanticCustomError(
                "physical_ceiling", "bus bandwidth {number} GB/s is above " + what + " ({limit} GB/s)", context
            )
        return self


Curve = Annotated[list[CollectivePoint], Field(max_length=64)]


class CalibrationResult(BaseModel):
    """Everything one calibration run measured on one host and device."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: int = SCHEMA_VERSION
    host: str = Field(min_length=1, max_length=255)
    device: str = Field(min_length=1, max_length=40)
    gpu_name: str | None = Field(default=None, max_length=255)
    catalogue_gpu: str | None = Field(default=None, max_length=255)
    driver_version: str | None = Field(default=None, max_length=64)
    cuda_version: str | None = Field(default=None, max_length=64)
    torch_version: str | None = Field(default=None, max_length=64)
    created_at: dt.datetime
    budget_s: float = Field(ge=0)
    duration_s: float = Field(default=0.0, ge=0)
    records: list[BenchmarkRecord] = Field(default_factory=list, max_length=200)
    overheads: CalibratedOverheads = Field(default_factory=CalibratedOverheads)
    utilisation: dict[str, Fraction] = Field(default_factory=dict)
    training_mfu: Fraction | None = None
    notes: list[str] = Field(default_factory=list, max_length=100)
    # Measured collective curves (`calibrate --collectives`), one point per message size; empty when not run.
    all_reduce: Curve = Field(default_factory=list)
    all_gather: Curve = Field(default_factory=list)
    reduce_scatter: Curve = Field(default_factory=list)
    # Measured images/s of a real ResNet per precision (calibration's vision benchmark); empty when not run.
    vision: list[MeasuredVisionThroughput] = Field(default_factory=list, max_length=8)

    @field_validator("schema_version")
    @classmethod
    def _known_schema_version(cls, version: int) -> int:
        """A file from a newer release may mean other things by the same fields: refuse it."""
        if version not in KNOWN_SCHEMA_VERSIONS:
            context = {"version": version, "known": ", ".join(str(known) for known in KNOWN_SCHEMA_VERSIONS)}
            message = "version {version} is not one this app reads ({known})"
            raise PydanticCustomError("schema_version", message, context)
        return version

    def record(self, name: str) -> BenchmarkRecord | None:
        """The record called `name`, or None."""
        return next((record for record in self.records if record.name == name), None)

    def best_busbw_gbytes_per_s(self, collective: str = "all_reduce") -> float | None:
        """The highest bus bandwidth on the collective's measured curve; for all-reduce without a
        curve, the one-size benchmark's (`allreduce`); None when neither was measured."""
        curve = getattr(self, collective)
        if curve:
            return max(point.busbw_gbytes_per_s for point in curve)
        single = self.record("allreduce") if collective == "all_reduce" else None
        return single.value if single is not None and single.ok else None

    def apply_to_overheads(self, overheads: Overheads | None = None) -> Overheads:
        """`overheads` with this host's measured CUDA context, cuBLAS workspace and allocator reserve."""
        return self.overheads.apply(overheads)

    def utilisation_for(self, training_precision: str) -> float | None:
        """Measured matmul fraction of dense peak for the matmuls of a training precision
        (e.g. 'bf16-mixed' -> the bf16 figure), or None if not measured."""
        matmul_precision = MATMUL_PRECISION_OF.get(training_precision, training_precision)
        return self.utilisation.get(matmul_precision)


def utc_now() -> dt.datetime:
    """Timezone-aware UTC now (stored as ISO 8601 so history sorts as text)."""
    return dt.datetime.now(dt.UTC)
