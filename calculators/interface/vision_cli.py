"""The command line's image-model path: `time` and `cost` for a model of the vision library.

`--model resnet50` (or a timm name or Hub id of a library model) trains an image model: the flags
`--micro-batch` (images per GPU), `--image-size`, `--precision`, `--channels-last`, `--optimizer`,
`--gpus`, `--dataset-samples` (default ImageNet-1k's training images), `--epochs`,
`--host-cores-per-gpu` and `--data-loader` describe the run. Every problem is a VisionUsageError
(calculators.interface.vision_args), one line the CLI prints as `error: ...`.
"""

from __future__ import annotations

import argparse
import math
from typing import NamedTuple

from pydantic import BaseModel

from calculators.cost.options import OwnershipSettings, owned_usd_per_gpu_hour
from calculators.cost.prices import CloudPrice
from calculators.cost.vision_comparison import ComparisonRow, cpu_gpu_precision_table
from calculators.hardware.catalogue import GpuSpec, find_gpu, load_gpu_catalogue
from calculators.hardware.cpus import find_cpu, is_cpu, load_cpus
from calculators.interface.vision_args import (
    VisionUsageError,
    image_precision,
    micro_batch_of,
    named_vision_model,
    one_line_validation,
    vision_choice,
)
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.memory.vision_training import VisionInputError, estimate_vision_memory
from calculators.models.vision_library import VisionModel
from calculators.plan.vision import VisionPlan, VisionPlanRequest, VisionPlanResult, plan_vision_run
from calculators.timing.data_loading import DataLoader
from calculators.timing.settings import DEFAULT_HOST_CORES_PER_GPU
from calculators.timing.vision_step import (
    IMAGENET_1K_TRAIN_IMAGES,
    VisionRunTime,
    VisionStepInput,
    estimate_vision_run,
)

# The optimizers the time model steps (calculators.timing.vision_step.OPTIMIZER_MOVES_PER_PARAMETER).
TIME_OPTIMIZERS = ("sgd", "adamw", "lamb")

# The one error of the image-model paths (calculators.interface.vision_args), by the name the pages import.
VisionCliError = VisionUsageError
vision_model_of = named_vision_model


def step_input(model: VisionModel, args: argparse.Namespace) -> VisionStepInput:
    """The step the flags describe, refused in one line where an image model cannot take them."""
    precision = image_precision(args, model)
    optimizer = vision_choice(args.optimizer, TIME_OPTIMIZERS, "--optimizer", model)
    with one_line_validation():
        return VisionStepInput(
            model=model,
            micro_batch=micro_batch_of(args, model),
            image_size=args.image_size or None,
            precision=precision,
            channels_last=args.channels_last,
            optimizer=optimizer,
            gpus=args.gpus,
            conv_tf32=True,
            matmul_tf32=args.tf32,
            gpus_per_node=args.gpus_per_node,
            inter_node_gbps=args.inter_node_gbps,
            overlap_fraction=args.overlap,
        )


def dataset_images(args: argparse.Namespace) -> int:
    """--dataset-samples, or ImageNet-1k's training images; tokens mean nothing to an image model."""
    if getattr(args, "dataset_tokens", None) is not None:
        raise VisionUsageError("an image model counts its data in images: give --dataset-samples, not --dataset-tokens")
    samples = args.dataset_samples or IMAGENET_1K_TRAIN_IMAGES
    return int(samples)


class RunOptions(NamedTuple):
    """What a run needs beyond its step: the images per epoch, the epochs and the data loader."""

    dataset_samples: int = IMAGENET_1K_TRAIN_IMAGES
    epochs: float = 1.0
    host_cores_per_gpu: float = DEFAULT_HOST_CORES_PER_GPU
    loader: DataLoader = "cpu"


def run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(dataset_images(args), args.epochs, args.host_cores_per_gpu, args.data_loader)


def vision_run(model: VisionModel, args: argparse.Namespace, gpu: GpuSpec) -> VisionRunTime:
    """The run on `gpu`: the step, the loader's ceiling and the hours."""
    return step_run(step_input(model, args), run_options(args), gpu)


def step_run(step: VisionStepInput, options: RunOptions, gpu: GpuSpec) -> VisionRunTime:
    """The run of `step` on `gpu`, each problem one line."""
    try:
        return estimate_vision_run(step, gpu, *options)
    except (VisionInputError, ValueError) as error:
        if is_cpu(gpu) and "rate" in str(error):
            raise VisionUsageError(
                f"{gpu.name} is a CPU: it trains in fp32 or amp-bf16, not {step.precision}"
            ) from None
        raise VisionUsageError(str(error)) from None


def time_result(model: VisionModel, args: argparse.Namespace) -> dict:
    """`time --json` for an image model: images/s per GPU, hours per epoch, whether input-bound."""
    gpu = find_cpu(args.gpu)  # a server CPU of data/cpus.csv trains like any device
    if gpu is None:
        try:
            gpu = find_gpu(args.gpu)
        except KeyError as error:
            raise VisionUsageError(str(error).strip("'\"")) from None
    run = vision_run(model, args, gpu)
    return _run_fields(run)


def _run_fields(run: VisionRunTime) -> dict:
    """The contract's keys first, then the whole run."""
    return {
        "model": run.model,
        "gpu": run.gpu,
        "samples_per_s_per_gpu": run.samples_per_s_per_gpu,
        "hours_per_epoch": run.hours_per_epoch,
        "hours_total": run.hours_total,
        "input_bound": run.input_bound,
        "input_ceiling_images_per_s_per_gpu": run.input_ceiling.ceiling_images_per_s_per_gpu,
    } | run.model_dump(mode="json", exclude={"model", "gpu", "samples_per_s_per_gpu", "hours_per_epoch",
                                              "hours_total", "input_bound"})  # fmt: skip


def time_text(result: dict) -> str:
    step = result["step"]
    lines = [
        f"{result['model']} at {result['image_size']} px, micro-batch {result['micro_batch']} on {result['gpus']} x "
        f"{result['gpu']}: {result['samples_per_s_per_gpu']:,.0f} images/s per GPU, step {step['step_s']:.3f} s, "
        f"{result['hours_per_epoch']:.2f} h per epoch of {result['dataset_samples']:,} images",
        *(f"    {name:<20}{seconds:>10.4f} s" for name, seconds in step["compute_by_class_s"].items()),
        f"    {'all-reduce exposed':<20}{step['comm_exposed_s']:>10.4f} s",
    ]
    return "\n".join(lines + [f"warning: {warning}" for warning in result["warnings"]])


class VisionCostRow(BaseModel):
    """One priced instance type for an image-model run."""

    gpu: str
    provider: str
    instance_type: str
    region: str
    instances: int
    fits: bool
    peak_gib: float
    samples_per_s_per_gpu: float
    hours_per_epoch: float
    hours_total: float
    input_bound: bool
    input_ceiling_images_per_s_per_gpu: float | None
    usd_per_hour: float
    usd_per_epoch: float
    usd_total: float


def cost_rows(model: VisionModel, args: argparse.Namespace, prices: list[CloudPrice]) -> list[VisionCostRow]:
    """`cost` for an image model: priced_rows of the step and run the flags describe."""
    return priced_rows(step_input(model, args), run_options(args), prices)


def priced_rows(step: VisionStepInput, options: RunOptions, prices: list[CloudPrice]) -> list[VisionCostRow]:
    """Every priced instance whose GPU the catalogue knows: the run's hours on that GPU and their
    on-demand cost, per epoch and to the end; enough whole instances for --gpus GPUs. The rows
    that fit come first, cheapest per epoch first."""
    catalogue = {gpu.name: gpu for gpu in load_gpu_catalogue()}
    runs: dict[str, VisionRunTime | None] = {}
    rows = []
    for price in prices:
        gpu = catalogue.get(price.gpu)
        if gpu is None:
            continue
        if price.gpu not in runs:
            runs[price.gpu] = _run_or_none(step, options, gpu)
        run = runs[price.gpu]
        if run is None:
            continue
        instances = math.ceil(step.gpus / price.gpu_count)
        usd_per_hour = instances * price.on_demand_usd_per_hour
        peak = _peak_gib(step)
        where = {"provider": price.provider, "instance_type": price.instance_type, "region": price.region}
        rows.append(_cost_row(gpu.name, where, instances, peak, gpu_memory_gib(gpu), run, usd_per_hour))
    rows += cpu_rows(step, options)
    return sorted(rows, key=lambda row: (not row.fits, row.usd_per_epoch))


def cpu_rows(step: VisionStepInput, options: RunOptions) -> list[VisionCostRow]:
    """The server CPUs of data/cpus.csv, one socket per data-parallel replica, priced as owned (the
    price sheet rents no bare CPU): purchase over 3 years plus facility power
    (calculators.cost.options.owned_usd_per_gpu_hour). A CPU without the precision (fp16) is left out."""
    rows = []
    for cpu in load_cpus():
        run = _run_or_none(step, options, cpu)
        usd_per_socket_hour = owned_usd_per_gpu_hour(cpu, OwnershipSettings())
        if run is None or usd_per_socket_hour is None:
            continue
        usd_per_hour = step.gpus * usd_per_socket_hour
        peak = _peak_gib(step)
        rows.append(_cost_row(cpu.name, OWNED_CPU, step.gpus, peak, cpu.memory_gb, run, usd_per_hour))
    return rows


# Where an owned CPU socket "runs": the price sheet rents no bare CPU.
OWNED_CPU = {"provider": "owned", "instance_type": "CPU socket, 3 years + power", "region": "your facility"}


def _cost_row(device: str, where: dict[str, str], instances: int, peak_gib: float, memory_gib: float,
              run: VisionRunTime, usd_per_hour: float) -> VisionCostRow:  # fmt: skip
    """One priced row: the run's rates and hours on `device`, their cost at `usd_per_hour`."""
    return VisionCostRow(
        gpu=device,
        **where,
        instances=instances,
        fits=peak_gib <= memory_gib,
        peak_gib=peak_gib,
        samples_per_s_per_gpu=run.samples_per_s_per_gpu,
        hours_per_epoch=run.hours_per_epoch,
        hours_total=run.hours_total,
        input_bound=run.input_bound,
        input_ceiling_images_per_s_per_gpu=run.input_ceiling.ceiling_images_per_s_per_gpu,
        usd_per_hour=usd_per_hour,
        usd_per_epoch=run.hours_per_epoch * usd_per_hour,
        usd_total=run.hours_total * usd_per_hour,
    )


def _run_or_none(step: VisionStepInput, options: RunOptions, gpu: GpuSpec) -> VisionRunTime | None:
    """The run on `gpu`, or None where the GPU has no rate for the precision (a V100 in bf16)."""
    try:
        return step_run(step, options, gpu)
    except VisionUsageError:
        return None


def _peak_gib(step: VisionStepInput) -> float:
    """Peak memory per GPU of the step (calculators.memory.vision_training)."""
    return estimate_vision_memory(step.memory_input()).peak_gib


def cost_text(model: VisionModel, rows: list[VisionCostRow], top: int) -> str:
    lines = [f"{model.key}: {len(rows)} priced options, those that fit first, each cheapest per epoch first"]
    for row in rows[:top]:
        lines.append(
            f"  {row.gpu:<24}{row.provider:<11}{row.instance_type:<26}{row.samples_per_s_per_gpu:>9,.0f} images/s/GPU"
            f"{row.hours_per_epoch:>9.2f} h/epoch  ${row.usd_per_epoch:>10,.2f}/epoch  ${row.usd_total:>12,.2f} total"
            + ("  input-bound" if row.input_bound else "")
            + ("" if row.fits else f"  does not fit ({row.peak_gib:.1f} GiB)")
        )
    return "\n".join(lines)


def cpu_gpu_precision_rows(
    model: VisionModel, args: argparse.Namespace, prices: list[CloudPrice]
) -> list[ComparisonRow]:
    """`cost --cpu-vs-gpu CPU GPU`: the Time and cost page's table for the image model, micro-batch,
    image size and dataset of the flags: the CPU in fp32 and bf16, the GPU in fp32 and mixed precision,
    images/s, hours and cost per epoch (calculators.cost.vision_comparison), from the estimates."""
    cpu_name, gpu_name = args.cpu_vs_gpu
    cpu = find_cpu(cpu_name)
    if cpu is None:
        known = ", ".join(device.name for device in load_cpus())
        raise VisionUsageError(f"--cpu-vs-gpu: {cpu_name!r} is not a CPU of data/cpus.csv ({known})")
    if find_cpu(gpu_name) is not None:
        raise VisionUsageError(f"--cpu-vs-gpu: {gpu_name} is a CPU; name a GPU second")
    try:
        gpu = find_gpu(gpu_name)
    except KeyError as error:
        unknown = str(error).strip("'\"")  # KeyError quotes its message
        raise VisionUsageError(f"--cpu-vs-gpu: {unknown}") from None
    step = step_input(model, args)
    try:
        return cpu_gpu_precision_table(
            model,
            cpu,
            gpu,
            step.micro_batch,
            prices,
            image_size=step.image_size,
            dataset_samples=dataset_images(args),
            optimizer=step.optimizer,
        )
    except (VisionInputError, ValueError) as error:
        raise VisionUsageError(str(error)) from None


def cpu_gpu_precision_text(model: VisionModel, rows: list[ComparisonRow]) -> str:
    """The table of cpu_gpu_precision_rows, one device and precision per line."""
    lines = [f"{model.key}: CPU vs GPU vs mixed precision, per epoch (estimates; data loader left out)"]
    for row in rows:
        owned = "-" if row.owned_usd_per_epoch is None else f"${row.owned_usd_per_epoch:,.2f}"
        cloud = "-" if row.cloud_usd_per_epoch is None else f"${row.cloud_usd_per_epoch:,.2f}"
        lines.append(
            f"  {row.device:<24}{row.precision:<10}{row.samples_per_s:>9,.0f} images/s"
            f"{row.hours_per_epoch:>9.2f} h/epoch"
            f"  owned {owned:>10}/epoch  cloud on demand {cloud:>10}/epoch"
        )
    return "\n".join(lines)


def plan_result(
    model: VisionModel, args: argparse.Namespace, catalogue: list[GpuSpec], prices: list[CloudPrice]
) -> VisionPlanResult:
    """`plan` for an image model: GPU x count x ZeRO stage x provider x pricing (calculators.plan.vision)."""
    known = {price.provider.casefold() for price in prices}
    unknown = [name for name in args.providers or () if name.casefold() not in known]
    if unknown:
        raise VisionUsageError(
            f"unknown provider {', '.join(unknown)}; the price sheet has: {', '.join(sorted(known))}"
        )
    step = step_input(model, args)
    with one_line_validation():
        request = VisionPlanRequest(
            dataset_samples=dataset_images(args),
            epochs=args.epochs,
            deadline_hours=args.deadline_hours,
            budget_usd=args.budget_usd,
            max_gpus=args.max_gpus,
            providers=tuple(args.providers) if args.providers else None,
            allow_spot=not args.no_spot,
            checkpoint_write_h=args.checkpoint_write_min / 60,
            restart_h=args.restart_min / 60,
            host_cores_per_gpu=args.host_cores_per_gpu,
            loader=args.data_loader,
        )
    return plan_vision_run(step, request, catalogue, prices)


def _plan_line(plan: VisionPlan) -> str:
    return (
        f"{plan.gpus:>5} x {plan.gpu:<24}{plan.provider:<14}{plan.pricing:<10}ZeRO-{plan.zero}"
        f"{plan.samples_per_s_per_gpu:>9,.0f} images/s/GPU{plan.hours:>10,.2f} h  ${plan.usd:>11,.2f}"
        + ("  input-bound" if plan.input_bound else "")
    )


def plan_text(result: VisionPlanResult) -> str:
    lines = [
        f"{result.model} at {result.image_size} px on {result.dataset_samples:,} images x {result.epochs:g} "
        f"epoch(s): {len(result.plans)} plans on the time-cost front ({result.candidates:,} priced)"
    ]
    lines += [f"problem: {problem}" for problem in result.problems]
    for label, plan in (("cheapest within the limits", result.best_under_deadline),
                        ("fastest within the limits", result.best_under_budget)):  # fmt: skip
        if plan is not None:
            lines.append(f"{label}: {_plan_line(plan).strip()}")
    lines += [f"  {_plan_line(plan)}" for plan in result.plans]
    return "\n".join(lines)
