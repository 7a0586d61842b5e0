"""CPU vs GPU vs mixed precision for an image model: images/s, hours and cost per epoch.

One table the Time and cost page draws: a server CPU (calculators.hardware.cpus) in fp32 and in
bf16 autocast (AMX or AVX512_BF16), and a GPU in fp32 (TF32 convolutions, PyTorch's cuDNN
default) and in mixed precision (bf16 autocast where the GPU has bf16, else fp16; channels-last),
each timed by calculators.timing.vision_step on one device. Cost per epoch is priced two ways:
owning the device (its purchase price over the amortisation years plus its facility power,
calculators.cost.options.owned_usd_per_gpu_hour) for every row, and renting it on demand (the
cheapest price per GPU-hour of the price sheet) where the sheet prices it; no sheet row rents a
bare CPU socket.

An applied calibration that trained a real ResNet on one of the table's devices in one of its
precisions (calculators.timing.vision_measured) replaces that row's estimated images/s with the
measured images/s scaled to the model and batch shown by the ratio of their estimates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from calculators.cost.options import OwnershipSettings, owned_usd_per_gpu_hour
from calculators.cost.prices import CloudPrice
from calculators.hardware.catalogue import GpuSpec
from calculators.hardware.cpus import is_cpu
from calculators.models.vision_library import VisionModel
from calculators.timing.vision_measured import MeasuredVisionThroughput, scaled_images_per_s
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES, VisionStepInput, estimate_vision_run


class ComparisonRow(BaseModel):
    """One device and precision."""

    device: str
    kind: str  # "CPU" or "GPU"
    precision: str
    samples_per_s: float
    hours_per_epoch: float
    owned_usd_per_hour: float | None
    owned_usd_per_epoch: float | None
    cloud_usd_per_hour: float | None
    cloud_usd_per_epoch: float | None
    measured_from: str | None = None  # the calibration measurement behind samples_per_s, if any


def mixed_precision_of(device: GpuSpec) -> str:
    """bf16 autocast where the device has a bf16 rate, else fp16 (a V100, a T4)."""
    return "amp-bf16" if device.dense_tflops("bf16") else "amp-fp16"


def cheapest_usd_per_gpu_hour(device: GpuSpec, prices: Iterable[CloudPrice]) -> float | None:
    """The lowest on-demand price of one of `device` for an hour in the sheet, or None."""
    per_gpu = [price.on_demand_usd_per_hour / price.gpu_count for price in prices if price.gpu == device.name]
    return min(per_gpu) if per_gpu else None


def comparison_row(
    model: VisionModel,
    device: GpuSpec,
    precision: str,
    micro_batch: int,
    image_size: int | None,
    prices: Iterable[CloudPrice],
    dataset_samples: int = IMAGENET_1K_TRAIN_IMAGES,
    ownership: OwnershipSettings | None = None,
    optimizer: str = "sgd",
) -> ComparisonRow:
    """One device in one precision; channels-last on a GPU in mixed precision (what its
    tensor-core convolutions want), the data loader left out (DALI on the GPU)."""
    step = VisionStepInput(
        model=model,
        micro_batch=micro_batch,
        image_size=image_size,
        precision=precision,
        channels_last=precision != "fp32",
        optimizer=optimizer,
    )
    run = estimate_vision_run(step, device, dataset_samples=dataset_samples, loader="dali-gpu")
    owned = owned_usd_per_gpu_hour(device, ownership or OwnershipSettings())
    cloud = None if is_cpu(device) else cheapest_usd_per_gpu_hour(device, prices)
    return ComparisonRow(
        device=device.name,
        kind="CPU" if is_cpu(device) else "GPU",
        precision=precision,
        samples_per_s=run.samples_per_s_per_gpu,
        hours_per_epoch=run.hours_per_epoch,
        owned_usd_per_hour=owned,
        owned_usd_per_epoch=None if owned is None else owned * run.hours_per_epoch,
        cloud_usd_per_hour=cloud,
        cloud_usd_per_epoch=None if cloud is None else cloud * run.hours_per_epoch,
    )


def cpu_gpu_precision_table(
    model: VisionModel,
    cpu: GpuSpec,
    gpu: GpuSpec,
    micro_batch: int,
    prices: Iterable[CloudPrice],
    image_size: int | None = None,
    dataset_samples: int = IMAGENET_1K_TRAIN_IMAGES,
    measured: Sequence[MeasuredVisionThroughput] = (),
    optimizer: str = "sgd",
) -> list[ComparisonRow]:
    """CPU fp32, CPU bf16, GPU fp32 and GPU mixed precision, in that order, each stepping `optimizer`;
    a row that `measured` (an applied calibration) covers by device and precision takes the measured
    rate."""
    prices = list(prices)
    cases = [(cpu, "fp32"), (cpu, "amp-bf16"), (gpu, "fp32"), (gpu, mixed_precision_of(gpu))]
    rows = []
    for device, precision in cases:
        row = comparison_row(
            model, device, precision, micro_batch, image_size, prices, dataset_samples, optimizer=optimizer
        )
        match = next((m for m in measured if m.device_name == device.name and m.precision == precision), None)
        if match is not None:
            rate = scaled_images_per_s(match, device, model, micro_batch, image_size, channels_last=precision != "fp32")
            row = with_measured_rate(row, rate, dataset_samples, measured_words(match))
        rows.append(row)
    return rows


def measured_words(measured: MeasuredVisionThroughput) -> str:
    """What was measured, for a row's note: 'resnet18, 8 images of 112 pixels: 47 images/s'."""
    return (
        f"{measured.model}, {measured.micro_batch} images of {measured.image_size} pixels: "
        f"{measured.images_per_s:,.1f} images/s"
    )


def with_measured_rate(row: ComparisonRow, images_per_s: float, dataset_samples: int, source: str) -> ComparisonRow:
    """The row with `images_per_s` in place of the estimate, hours and costs per epoch following it."""
    hours = dataset_samples / images_per_s / 3600
    owned, cloud = row.owned_usd_per_hour, row.cloud_usd_per_hour
    return row.model_copy(
        update={
            "samples_per_s": images_per_s,
            "hours_per_epoch": hours,
            "owned_usd_per_epoch": None if owned is None else owned * hours,
            "cloud_usd_per_epoch": None if cloud is None else cloud * hours,
            "measured_from": source,
        }
    )
