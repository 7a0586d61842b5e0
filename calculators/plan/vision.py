"""Plan an image-model run: the cheapest or fastest way to train a model of the vision library for
some epochs over a dataset of images, by a deadline, within a budget.

The search mirrors the text planner's (calculators.plan.search) on the vision engines:

    GPU type x GPU count (gpu_counts: 1, 2, 4 inside a node, then whole nodes)
      x ZeRO/FSDP stage (0, 1, 2: the lowest that fits is kept, it only adds communication)
      x price row (provider, instance) x pricing (on demand, spot expected cost)

What fits comes from calculators.memory.vision_fit.device_peak_gib (the Memory and Compare pages'
peak), time from calculators.timing.vision_step.estimate_vision_run (the step, the data loader's
ceiling, hours per epoch), cost from calculators.cost.pricing.price_run and the front from
calculators.cost.pareto.time_cost_front, as for transformers. Each GPU keeps the user's
micro-batch (images per GPU), so the global batch grows with the data-parallel count.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from calculators.cost.pareto import time_cost_front
from calculators.cost.prices import CloudPrice
from calculators.cost.pricing import RunPrice, price_run
from calculators.cost.spot import DEFAULT_CHECKPOINT_WRITE_H, DEFAULT_RESTART_H
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.memory.vision_fit import device_peak_gib
from calculators.memory.vision_training import VisionTrainingInput
from calculators.plan.search import DEFAULT_MAX_GPUS, Placement, Pricing, fallback_precision, gpu_counts
from calculators.timing.data_loading import DataLoader
from calculators.timing.settings import DEFAULT_HOST_CORES_PER_GPU
from calculators.timing.vision_step import IMAGENET_1K_TRAIN_IMAGES, VisionRunTime, VisionStepInput, estimate_vision_run

# ZeRO-1 and ZeRO-2 move the same bytes as data parallel's all-reduce (reduce-scatter + all-gather),
# ZeRO-3 1.5 times as much (Rajbhandari et al. 2020, arXiv 1910.02054, Sec. 7.2-7.3). The step time
# (timing.vision_step) counts one all-reduce, so only the stages it times truly are searched.
SEARCHED_ZERO_STAGES = (0, 1, 2)


class VisionPlanRequest(BaseModel):
    """What to plan: the images and epochs, the limits, and what the search may use."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dataset_samples: int = Field(default=IMAGENET_1K_TRAIN_IMAGES, ge=1, le=10**13, description="images per epoch")
    epochs: float = Field(default=1.0, ge=0.001, le=100_000)
    deadline_hours: float | None = Field(default=None, gt=0, le=1e7)
    budget_usd: float | None = Field(default=None, gt=0, le=1e12)
    max_gpus: int = Field(default=DEFAULT_MAX_GPUS, ge=1, le=65_536)
    providers: tuple[str, ...] | None = None
    allow_spot: bool = True
    checkpoint_write_h: float = Field(default=DEFAULT_CHECKPOINT_WRITE_H, ge=0, le=168)
    restart_h: float = Field(default=DEFAULT_RESTART_H, ge=0, le=168)
    host_cores_per_gpu: float = Field(default=DEFAULT_HOST_CORES_PER_GPU, gt=0, le=1024)
    loader: DataLoader = "cpu"


class VisionPlan(Placement):
    """One way to run the image job: hardware, sharding, time and cost."""

    micro_batch: int = Field(description="images per GPU per step")
    global_batch_images: int
    peak_gib: float
    gpu_memory_gib: float
    samples_per_s_per_gpu: float = Field(description="images/s per GPU, the loader's ceiling applied")
    input_bound: bool
    hours_per_epoch: float
    hours: float = Field(description="wall hours of this pricing: expected hours on spot")
    hours_on_demand: float
    usd_per_epoch: float
    usd: float = Field(description="cost of this pricing: expected cost on spot")
    usd_per_hour: float = Field(description="for the whole job under this pricing")
    source: str


class VisionPlanResult(BaseModel):
    """The image planner's answer."""

    model: str
    image_size: int
    dataset_samples: int
    epochs: float
    plans: list[VisionPlan] = Field(description="the Pareto front of hours against USD, fastest first")
    candidates: int
    best_under_deadline: VisionPlan | None
    best_under_budget: VisionPlan | None
    fastest: VisionPlan | None
    cheapest: VisionPlan | None
    problems: list[str]
    searched: int = Field(description="GPU x count x node size runs timed")
    seconds: float
    assumptions: list[str]


def lowest_fitting_zero(run: VisionTrainingInput, gpus: int, capacity_gib: float) -> tuple[int, float] | None:
    """The lowest searched ZeRO stage whose device peak fits `capacity_gib` on `gpus` GPUs, with
    that peak; None when none fits. One GPU shards nothing, so it tries stage 0 only."""
    for stage in SEARCHED_ZERO_STAGES if gpus > 1 else (0,):
        peak = device_peak_gib(run, gpus=gpus, zero=stage)
        if peak <= capacity_gib:
            return stage, peak
    return None


def _precision_on(gpu: GpuSpec, precision: str) -> str | None:
    """The run's precision, or amp-fp16 for amp-bf16 on a GPU without a bf16 rate (V100, T4)."""
    if "bf16" in precision and gpu.dense_tflops("bf16") is None:
        return fallback_precision(precision)
    return precision


def _provider_allowed(row: CloudPrice, request: VisionPlanRequest) -> bool:
    return request.providers is None or row.provider.casefold() in {p.casefold() for p in request.providers}


def _timed_run(step: VisionStepInput, gpu: GpuSpec, request: VisionPlanRequest) -> VisionRunTime | None:
    """The run on `gpu`, or None where the GPU has no rate for the precision."""
    try:
        return estimate_vision_run(
            step, gpu, request.dataset_samples, request.epochs, request.host_cores_per_gpu, request.loader
        )
    except ValueError:
        return None


def _priced(
    run: VisionRunTime, row: CloudPrice, zero: int, peak_gib: float, price: RunPrice, pricing: Pricing, gpu: GpuSpec
) -> VisionPlan | None:
    """One plan of `run` on `row` under `pricing`; None for spot where the row has none or it is not worth it."""
    if pricing == "spot":
        hours, usd, usd_per_hour = price.spot_hours_expected, price.usd_spot_expected, price.spot_usd_per_hour
        if hours is None or usd is None or usd_per_hour is None:
            return None
    else:
        hours, usd, usd_per_hour = run.hours_total, price.usd, price.usd_per_hour
    return VisionPlan(
        gpu=gpu.name,
        gpus=run.gpus,
        provider=row.provider,
        instance_type=row.instance_type,
        region=row.region,
        instances=price.instances,
        gpus_per_instance=row.gpu_count,
        pricing=pricing,
        precision=run.precision,
        zero=zero,
        micro_batch=run.micro_batch,
        global_batch_images=run.micro_batch * run.gpus,
        peak_gib=peak_gib,
        gpu_memory_gib=gpu_memory_gib(gpu),
        samples_per_s_per_gpu=run.samples_per_s_per_gpu,
        input_bound=run.input_bound,
        hours_per_epoch=run.hours_per_epoch * hours / run.hours_total,
        hours=hours,
        hours_on_demand=run.hours_total,
        usd_per_epoch=usd / run.epochs,
        usd=usd,
        usd_per_hour=usd_per_hour,
        source=row.source,
    )


def _plans_on_row(
    step: VisionStepInput, gpu: GpuSpec, row: CloudPrice, request: VisionPlanRequest, runs: dict
) -> list[VisionPlan]:
    """Every GPU count of one price row that fits (at its lowest ZeRO stage), timed and priced."""
    precision = _precision_on(gpu, step.precision)
    if precision is None:
        return []
    memory = step.memory_input(precision)
    pricings: tuple[Pricing, ...] = ("on-demand", "spot") if request.allow_spot else ("on-demand",)
    plans: list[VisionPlan] = []
    for count in gpu_counts(request.max_gpus, row.gpu_count):
        fit = lowest_fitting_zero(memory, count, gpu_memory_gib(gpu))
        if fit is None:
            continue
        key = (gpu.name, count, row.gpu_count, precision)
        if key not in runs:
            update = {"gpus": count, "gpus_per_node": row.gpu_count, "precision": precision}
            runs[key] = _timed_run(step.model_copy(update=update), gpu, request)
        run = runs[key]
        if run is None:
            continue
        price = price_run(row, count, run.hours_total, request.checkpoint_write_h, request.restart_h)
        priced = (_priced(run, row, *fit, price, pricing, gpu) for pricing in pricings)
        plans += [plan for plan in priced if plan is not None]
    return plans


def plan_vision_run(
    step: VisionStepInput,
    request: VisionPlanRequest,
    catalogue: Iterable[GpuSpec],
    prices: Iterable[CloudPrice],
) -> VisionPlanResult:
    """Search every priced GPU, count, ZeRO stage and pricing for `step`'s model (its micro-batch,
    image size, precision, optimizer and memory format); the front of hours against USD and the
    answers to the deadline and budget."""
    started = time.perf_counter()
    by_name = {gpu.name: gpu for gpu in catalogue}
    rows = [row for row in prices if row.gpu in by_name and _provider_allowed(row, request)]
    runs: dict[tuple, VisionRunTime | None] = {}  # one timing per GPU, count, node size and precision
    candidates: list[VisionPlan] = []
    for row in rows:
        candidates += _plans_on_row(step, by_name[row.gpu], row, request, runs)
    front = time_cost_front(candidates, lambda plan: (plan.hours, plan.usd))
    within = [plan for plan in front if _within_limits(plan, request)]
    return VisionPlanResult(
        model=step.model.key,
        image_size=step.resolution,
        dataset_samples=request.dataset_samples,
        epochs=request.epochs,
        plans=front,
        candidates=len(candidates),
        best_under_deadline=min(within, key=lambda plan: (plan.usd, plan.hours), default=None),
        best_under_budget=min(within, key=lambda plan: (plan.hours, plan.usd), default=None),
        fastest=front[0] if front else None,
        cheapest=front[-1] if front else None,
        problems=vision_plan_problems(request, front),
        searched=len(runs),
        seconds=time.perf_counter() - started,
        assumptions=_assumptions(step, request),
    )


def _within_limits(plan: VisionPlan, request: VisionPlanRequest) -> bool:
    deadline_ok = request.deadline_hours is None or plan.hours <= request.deadline_hours
    budget_ok = request.budget_usd is None or plan.usd <= request.budget_usd
    return deadline_ok and budget_ok


def vision_plan_problems(request: VisionPlanRequest, front: list[VisionPlan]) -> list[str]:
    """Why an ask cannot be met, and what the nearest plan gives instead, in words."""
    if not front:
        return ["no priced GPU fits the run: lower the micro-batch or the image size, or checkpoint (see `fit`)"]
    problems = []
    fastest, cheapest = front[0], front[-1]
    if request.deadline_hours is not None and fastest.hours > request.deadline_hours:
        problems.append(
            f"no plan ends within {request.deadline_hours:g} h: the fastest, {fastest.gpus} x {fastest.gpu}, takes "
            f"{fastest.hours:,.1f} h (allow more GPUs or a larger micro-batch)"
        )
    if request.budget_usd is not None and cheapest.usd > request.budget_usd:
        problems.append(
            f"no plan costs at most {request.budget_usd:,.0f} USD: the cheapest, {cheapest.gpus} x {cheapest.gpu} "
            f"({cheapest.pricing}), costs {cheapest.usd:,.0f} USD"
        )
    if not problems and request.deadline_hours is not None and request.budget_usd is not None:
        if not any(_within_limits(plan, request) for plan in front):
            problems.append(
                f"no plan meets both {request.deadline_hours:g} h and {request.budget_usd:,.0f} USD: loosen one"
            )
    return problems


def _assumptions(step: VisionStepInput, request: VisionPlanRequest) -> list[str]:
    return [
        f"{step.micro_batch} images per GPU per step at {step.resolution} px: the global batch grows with the "
        "GPU count (scale the learning rate with it: Goyal et al. 2017, arXiv 1706.02677)",
        f"{request.dataset_samples:,} images per epoch x {request.epochs:g} epochs",
        "data parallel with ZeRO-0/1/2 (FSDP NO_SHARD, optimizer-only, SHARD_GRAD_OP): the lowest stage that fits; "
        "ZeRO-3 moves 1.5x the bytes of the timed all-reduce and is not searched",
        f"data loading on {request.host_cores_per_gpu:g} host cores per GPU ({request.loader}); "
        "an input-bound plan is marked",
        "spot: expected hours with checkpoints, restarts and lost work after interruptions",
    ]
