"""A calibration's measured images/s of a real torchvision ResNet, set against the time model.

The calibration (measure/calibration/vision.py) trains ResNet-50 on a GPU, or ResNet-18 at a small
batch on a CPU, for a few steps and records images/s after warm-up as a `MeasuredVisionThroughput`.
Here that measurement meets calculators.timing.vision_step:

- `measured_vs_estimate`: the estimate of the same configuration on the host's catalogue device
  and measured / estimate;
- `scaled_images_per_s`: the measurement carried over to another model or batch on the same device
  and precision by the ratio of the two estimates (an assumption the pages state: the time model's
  relative speed of two configurations holds where its absolute speed may not).

No torch here: pages import this module.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.hardware.cpus import find_cpu
from calculators.memory.vision_training import MAX_MICRO_BATCH
from calculators.models.vision_library import VisionModel, vision_model
from calculators.timing.vision_step import VisionStepInput, estimate_vision_step

VisionPrecision = Literal["fp32", "amp-bf16", "amp-fp16"]


class MeasuredVisionThroughput(BaseModel):
    """Images/s of one configuration trained on this host (median step after warm-up)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(min_length=1, max_length=100, description="vision library key, e.g. resnet50")
    device: Literal["cpu", "cuda"]
    device_name: str | None = Field(default=None, max_length=255, description="catalogue GPU or CPU; None: none")
    precision: VisionPrecision
    micro_batch: int = Field(ge=1, le=MAX_MICRO_BATCH)
    image_size: int = Field(ge=16, le=4096)
    channels_last: bool = False
    images_per_s: float = Field(gt=0, le=1e6)
    timed_steps: int = Field(ge=1)


class MeasuredVsEstimate(BaseModel):
    """A measurement next to the time model's estimate of the same configuration."""

    measured: MeasuredVisionThroughput
    estimate_images_per_s: float | None
    measured_over_estimate: float | None
    why_no_estimate: str | None = None


def _step_input(model: VisionModel, micro_batch: int, image_size: int | None, precision: str,
                channels_last: bool) -> VisionStepInput:  # fmt: skip
    return VisionStepInput(
        model=model, micro_batch=micro_batch, image_size=image_size, precision=precision, channels_last=channels_last
    )


def estimated_images_per_s(measured: MeasuredVisionThroughput, device: GpuSpec) -> float:
    """The time model's images/s for the measured configuration on `device` (one device, no loader:
    the benchmark feeds tensors already in memory)."""
    model = vision_model(measured.model)
    run = _step_input(model, measured.micro_batch, measured.image_size, measured.precision, measured.channels_last)
    return estimate_vision_step(run, device).samples_per_s_per_gpu


def catalogue_device(measured: MeasuredVisionThroughput) -> GpuSpec | None:
    """The catalogue GPU (data/gpus.csv) or CPU (data/cpus.csv) the measurement names, or None."""
    if measured.device_name is None:
        return None
    if measured.device == "cpu":
        return find_cpu(measured.device_name)
    try:
        return find_gpu(measured.device_name)
    except KeyError:
        return None


def measured_vs_estimate(measured: MeasuredVisionThroughput, device: GpuSpec | None = None) -> MeasuredVsEstimate:
    """Measured against the estimate on `device` (default: the catalogue row the measurement names);
    with no row, why not."""
    device = device or catalogue_device(measured)
    if device is None:
        name = measured.device_name or ("this CPU" if measured.device == "cpu" else "this GPU")
        why = f"{name} has no row in the catalogue, so there is no estimate to compare with"
        return MeasuredVsEstimate(measured=measured, estimate_images_per_s=None, measured_over_estimate=None,
                                  why_no_estimate=why)  # fmt: skip
    if vision_model(measured.model) is None:
        why = f"{measured.model} is not in the vision library"
        return MeasuredVsEstimate(measured=measured, estimate_images_per_s=None, measured_over_estimate=None,
                                  why_no_estimate=why)  # fmt: skip
    estimate = estimated_images_per_s(measured, device)
    return MeasuredVsEstimate(
        measured=measured, estimate_images_per_s=estimate, measured_over_estimate=measured.images_per_s / estimate
    )


def scaled_images_per_s(measured: MeasuredVisionThroughput, device: GpuSpec, model: VisionModel, micro_batch: int,
                        image_size: int | None, channels_last: bool) -> float:  # fmt: skip
    """The measured images/s carried to `model` at `micro_batch` on the same device and precision:
    measured x estimate(shown) / estimate(measured). Equal configurations give the measurement itself."""
    shown = _step_input(model, micro_batch, image_size, measured.precision, channels_last)
    shown_over_measured = estimate_vision_step(shown, device).samples_per_s_per_gpu / estimated_images_per_s(
        measured, device
    )
    return measured.images_per_s * shown_over_measured
