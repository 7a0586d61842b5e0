"""Plan a run: the cheapest or fastest way to train a model on N tokens, by a deadline, within a budget.

The search, for one model, mode and token budget:

    GPU type (catalogue and the user's)
      x GPU count (1, 2, 4 inside a node, then whole nodes: 1, 2, 4, ... nodes)
      x layout (ZeRO stage, tensor and pipeline parallel, checkpointing, micro-batch and
                gradient accumulation giving the global batch, offload when nothing else fits)
      x price row (provider, instance) x pricing (on demand, spot expected cost, owned)

Only layouts whose peak fits the GPU by the memory engine (calculators.memory.engine.estimate_memory)
and whose software stack runs on the GPU (calculators.workload.compatibility.training_stack_problem)
are kept. Time comes from calculators.timing.estimate.estimate_time, cost from the price rows
(calculators.cost.prices) by calculators.cost.pricing.price_run, as on the Cost page (calculators.cost.spot
for the expected spot hours).

Pruning, each step exact for the engine's monotonic quantities (the layout search is
calculators.plan.layouts.best_layout):

- The peak does not depend on the GPU type, only on the layout: one estimate per layout is
  compared with every GPU's capacity (cached).
- The peak grows with the micro-batch: the largest micro-batch that fits is found by bisection
  over the powers of two that divide each replica's share of the global batch.
- Cost = GPUs x price per GPU-hour x hours for a fixed GPU type, count and price row, so the
  fastest layout for (GPU, count, node size) is also the cheapest: one layout per group is priced.
- Recomputation only adds work: of the checkpointing policies, the least recomputation that
  fits is kept for each ZeRO stage (none, then selective, then full).
- Tensor and pipeline parallelism, then offload, are only tried when plain data parallelism
  (ZeRO 0-3) fits nowhere at that count: they cost communication or host bandwidth.

Host RAM: a layout whose engine estimate puts states or activations in host memory
(`MemoryEstimate.host_memory_gib`, per GPU) is kept on a price row only when the job's GPUs on one
instance (min(job GPUs, row.gpu_count)) x that figure fit the row's `host_ram_gib` (the whole
instance's RAM, from a public document). A row without `host_ram_gib`, and owned servers, fall back
to `PlanRequest.host_memory_gib_per_gpu` (256 GiB per GPU by default). Each plan says which it used.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from calculators.cost.energy import EnergySettings
from calculators.cost.options import OwnershipSettings, owned_usd_per_gpu_hour
from calculators.cost.pareto import time_cost_front
from calculators.cost.prices import CloudPrice
from calculators.cost.pricing import RunPrice, price_owned_run, price_run
from calculators.cost.ranges import NO_BAND, BandFor, TimeBand, scaled_range, spot_hours_range, spot_usd_range
from calculators.cost.spot import DEFAULT_CHECKPOINT_WRITE_H, DEFAULT_INTERRUPTIONS_PER_HOUR, DEFAULT_RESTART_H
from calculators.cost.spot_spread import SpotSaving, load_spot_savings, spot_price_range
from calculators.cost.unpriced import unpriced_gpus
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.models.spec import ModelSpec
from calculators.plan.figures import figure_text, hours_text, usd_text
from calculators.plan.layouts import (
    DEFAULT_HOST_MEMORY_GIB_PER_GPU,
    Layout,
    LayoutCache,
    LayoutSearch,
    cached_best_layout,
)
from calculators.timing.settings import TimeSettings
from calculators.workload.compatibility import software_platform, training_stack_problem
from calculators.workload.modes import METHOD_OF_MODE
from calculators.workload.training import TrainingSettings

Pricing = Literal["on-demand", "spot", "owned"]
RankOn = Literal["estimate", "pessimistic"]
TRAINING_MODES: tuple[str, ...] = ("train", "finetune-lora", "finetune-qlora")
DEFAULT_NODE_GPUS = 8  # an HGX-style server when no price row says how many GPUs an instance holds
DEFAULT_MAX_GPUS = 256
OWNED_PROVIDER = "owned"
# The longest run the planner takes as plausible: a year of 365.25 days. A plan longer than this is
# named in `problems` with what would shorten it (cost.options amortises over 8,760 h years instead).
PLAUSIBLE_RUN_HOURS = 24 * 365.25
# The layout a plan sets: Plan field -> the TrainingSettings field it holds.
PLAN_LAYOUT_FIELDS: dict[str, str] = {
    "data_parallel": "gpus",
    "zero": "zero",
    "tensor_parallel": "tensor_parallel",
    "pipeline_parallel": "pipeline_parallel",
    "checkpointing": "checkpointing",
    "offload_optimizer": "offload_optimizer",
    "offload_parameters": "offload_parameters",
    "micro_batch": "micro_batch",
    "grad_accum": "grad_accum",
    "precision": "precision",
}

# Global batch defaults, in tokens per optimizer step.
PRETRAIN_GLOBAL_BATCH_TOKENS = 4 * 1024 * 1024
FINETUNE_GLOBAL_BATCH_SEQUENCES = 128


def default_global_batch_tokens(mode: str, seq_len: int) -> int:
    """Tokens per optimizer step when none is given.

    Training: 4M tokens, Llama 2's global batch (Touvron et al. 2023, arXiv 2307.09288, Sec. 2.2:
    "a global batch-size of 4M tokens"). Fine-tuning: 128 sequences of the training length, the
    batch of Stanford Alpaca's fine-tune (https://github.com/tatsu-lab/stanford_alpaca, README,
    "Fine-tuning": batch size 128)."""
    if mode == "train":
        return PRETRAIN_GLOBAL_BATCH_TOKENS
    return FINETUNE_GLOBAL_BATCH_SEQUENCES * seq_len


def global_batch_source(mode: str) -> str:
    """Where the default global batch comes from, in words."""
    if mode == "train":
        return "4M tokens per step: Llama 2 (Touvron et al. 2023, arXiv 2307.09288, Sec. 2.2)"
    return "128 sequences per step: Stanford Alpaca's fine-tune (github.com/tatsu-lab/stanford_alpaca README)"


class PlanRequest(BaseModel):
    """What to plan: the tokens to train on, the limits, and what the search may use."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: Literal["train", "finetune-lora", "finetune-qlora"] = "train"
    dataset_tokens: float = Field(ge=1, le=1e16, description="tokens per epoch")
    epochs: float = Field(default=1.0, ge=0.001, le=100_000)
    global_batch_tokens: int | None = Field(
        default=None, ge=1, le=1 << 32, description="tokens per optimizer step; None: the mode's default"
    )
    deadline_hours: float | None = Field(default=None, gt=0, le=1e7)
    budget_usd: float | None = Field(default=None, gt=0, le=1e12)
    max_gpus: int = Field(default=DEFAULT_MAX_GPUS, ge=1, le=65_536)
    providers: tuple[str, ...] | None = Field(default=None, description="None: every provider of the price sheet")
    allow_spot: bool = True
    include_owned: bool = Field(default=False, description="also price owning the GPUs (amortised + power)")
    gpus: tuple[str, ...] | None = Field(default=None, description="None: every GPU of the catalogue given")
    checkpoint_write_h: float = Field(default=DEFAULT_CHECKPOINT_WRITE_H, ge=0, le=168)
    restart_h: float = Field(default=DEFAULT_RESTART_H, ge=0, le=168)
    utilisation_of_owned: float = Field(
        default=1.0, gt=0, le=1, description="share of TDP an owned GPU draws while training"
    )
    host_memory_gib_per_gpu: float = Field(
        default=DEFAULT_HOST_MEMORY_GIB_PER_GPU,
        gt=0,
        le=100_000,
        description="host RAM an offloaded layout may use per GPU where the price row gives no host_ram_gib "
        "(and on owned servers)",
    )
    rank_on: RankOn = Field(
        default="estimate",
        description="judge the deadline, the budget and the front on the estimate or on the high end of each "
        "plan's range (calculators.cost.ranges)",
    )


class Placement(BaseModel):
    """Where and how a planned job runs, shared by the text and image planners: the GPU and how many,
    the price row it is rented on, the precision and the ZeRO stage."""

    model_config = ConfigDict(allow_inf_nan=False)

    gpu: str
    gpus: int = Field(description="GPUs of the job: data x tensor x pipeline parallel (data parallel for images)")
    provider: str
    instance_type: str
    region: str
    instances: int
    gpus_per_instance: int
    pricing: Pricing
    precision: str
    zero: int


class Plan(Placement):
    """One way to run the job: hardware, layout, time and cost, and why it was chosen."""

    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    checkpointing: str
    offload_optimizer: bool
    offload_parameters: bool
    micro_batch: int
    grad_accum: int
    seq_len: int
    global_batch_tokens: int
    peak_gib: float
    gpu_memory_gib: float
    headroom_gib: float
    host_memory_gib: float = Field(default=0.0, description="host RAM the layout needs per GPU (the engine's)")
    host_ram_gib: float | None = Field(default=None, description="host RAM of one instance from its price row")
    host_ram_basis: str = Field(default="", description="which host RAM the offload check used, in words")
    step_s: float
    tokens_per_s: float
    mfu: float
    hours: float = Field(description="wall hours of this pricing: expected hours on spot")
    hours_on_demand: float
    usd: float = Field(description="cost of this pricing: expected cost on spot")
    usd_on_demand: float | None
    usd_spot_expected: float | None
    usd_per_hour: float = Field(description="for the whole job under this pricing")
    price_as_of: dt.date | None
    source: str
    reason: str = ""
    hours_range: tuple[float, float] | None = Field(
        default=None, description="[low, high] of hours: the time model's measured error (and interruptions on spot)"
    )
    usd_range: tuple[float, float] | None = Field(
        default=None, description="[low, high] of usd: as hours_range, and spot prices across regions"
    )
    range_notes: list[str] = Field(default_factory=list, description="what the ranges rest on, in words")
    software_platform: str = Field(
        default="",
        description="the accelerator's non-CUDA, non-ROCm training stack (Google TPU, AWS Neuron, Intel Gaudi), "
        "'' for CUDA and ROCm GPUs: which launch files apply",
    )
    host_link_s_per_step: float = Field(
        default=0.0, description="host link traffic and CPU optimizer step the step waits for (offload), seconds"
    )

    def training_settings(self, base: TrainingSettings) -> TrainingSettings:
        """The engine's settings of this plan over the workload it was planned for."""
        return base.model_copy(update=layout_update(self))


class PlanResult(BaseModel):
    """The planner's answer."""

    model_config = ConfigDict(allow_inf_nan=False)

    model: str
    mode: str
    dataset_tokens: float
    epochs: float
    global_batch_tokens: int
    global_batch_source: str
    plans: list[Plan] = Field(description="the Pareto front of hours against USD, fastest first")
    candidates: int = Field(description="priced plans before the front was taken")
    best_under_deadline: Plan | None = Field(description="cheapest plan within the deadline (and budget if given)")
    best_under_budget: Plan | None = Field(description="fastest plan within the budget (and deadline if given)")
    fastest: Plan | None
    cheapest: Plan | None
    problems: list[str] = Field(description="why an ask is impossible and what would make it possible")
    unpriced: list[str] = Field(
        default_factory=list, description="GPUs searched that get no cost, why, and what would price them"
    )
    searched: int = Field(description="configurations examined (layouts whose memory or time was estimated)")
    seconds: float
    assumptions: list[str]


# --- small formulas -------------------------------------------------------------------


def gpu_counts(max_gpus: int, node_gpus: int) -> list[int]:
    """1, 2, 4, ... inside one node, then whole nodes 1, 2, 4, 8, ... up to `max_gpus`: a job
    past one node rents or fills whole nodes (idle GPUs of a node are paid for anyway)."""
    counts = []
    count = 1
    while count < node_gpus and count <= max_gpus:
        counts.append(count)
        count *= 2
    nodes = 1
    while nodes * node_gpus <= max_gpus:
        counts.append(nodes * node_gpus)
        nodes *= 2
    return counts


def fallback_precision(precision: str) -> str | None:
    """The fp16 counterpart of a bf16 precision, for GPUs without bf16 (V100, T4): bf16-mixed ->
    fp16-mixed, amp-bf16 -> amp-fp16; None when there is none (pure bf16 keeps its states in bf16)."""
    return {"bf16-mixed": "fp16-mixed", "amp-bf16": "amp-fp16"}.get(precision)


def layout_update(plan: Plan) -> dict:
    """The TrainingSettings fields a plan sets."""
    return {setting: getattr(plan, field) for field, setting in PLAN_LAYOUT_FIELDS.items()}


def job_gpus_per_instance(total: int, gpus_per_instance: int) -> int:
    """GPUs of a `total`-GPU job on one instance of `gpus_per_instance` (a job smaller than the
    instance uses only its own GPUs; a larger one fills whole instances)."""
    return min(total, gpus_per_instance)


def host_limit_per_gpu(row: CloudPrice | None, total: int, fallback_gib_per_gpu: float) -> float:
    """Host RAM one GPU of a `total`-GPU job may use on `row`'s instance: the instance's published
    `host_ram_gib` shared by the job's GPUs on it, or `fallback_gib_per_gpu` where the row gives
    none (and for owned servers, `row` None)."""
    if row is None or row.host_ram_gib is None:
        return fallback_gib_per_gpu
    return row.host_ram_gib / job_gpus_per_instance(total, row.gpu_count)


def host_ram_fits(host_gib_per_gpu: float, total: int, row: CloudPrice | None, fallback_gib_per_gpu: float) -> bool:
    """Whether a layout needing `host_gib_per_gpu` of host RAM per GPU runs on `row`'s instance:
    (job GPUs on the instance) x need <= host_ram_gib, or need <= the per-GPU fallback without one."""
    if row is None or row.host_ram_gib is None:
        return host_gib_per_gpu <= fallback_gib_per_gpu
    return host_gib_per_gpu * job_gpus_per_instance(total, row.gpu_count) <= row.host_ram_gib


def host_ram_basis(host_gib_per_gpu: float, total: int, row: CloudPrice | None, fallback_gib_per_gpu: float) -> str:
    """Which host RAM a plan was checked against, and what its layout needs, in words."""
    if row is None or row.host_ram_gib is None:
        where = "owned server" if row is None else f"no host_ram_gib in the {row.provider} {row.instance_type} row"
        return (
            f"assumed {fallback_gib_per_gpu:g} GiB of host RAM per GPU ({where}); "
            f"the layout needs {host_gib_per_gpu:,.1f} GiB per GPU"
        )
    on_instance = job_gpus_per_instance(total, row.gpu_count)
    return (
        f"{row.instance_type} host RAM {row.host_ram_gib:g} GiB (price row) for {on_instance} GPU(s) of the job; "
        f"the layout needs {host_gib_per_gpu:,.1f} GiB per GPU, {host_gib_per_gpu * on_instance:,.1f} GiB per instance"
    )


def _node_sizes(rows: Sequence[CloudPrice], include_owned: bool) -> list[int]:
    """GPUs per node to time: each instance size of the GPU's price rows, and 8 for owned servers."""
    sizes = {row.gpu_count for row in rows}
    if include_owned:
        sizes.add(DEFAULT_NODE_GPUS)
    return sorted(sizes)


def _precision_for(gpu: GpuSpec, precision: str) -> str | None:
    """The workload's precision, or its fp16 counterpart on a GPU without a bf16 rate."""
    if "bf16" in precision and gpu.dense_tflops("bf16") is None:
        return fallback_precision(precision)
    return precision


def _row_plans(gpu: GpuSpec, layout: Layout, row: CloudPrice, request: PlanRequest, ranges: PlanRanges) -> list[Plan]:
    """One layout priced on one row (calculators.cost.pricing.price_run), on demand and, when
    allowed and worth it, on spot."""
    hours = layout.estimate.hours_total
    run = price_run(row, layout.settings.total_gpus, hours, request.checkpoint_write_h, request.restart_h)
    pricings: tuple[Pricing, ...] = ("on-demand", "spot") if request.allow_spot else ("on-demand",)
    plans = [_plan(gpu, layout, pricing, row, run, request, ranges) for pricing in pricings]
    return [plan for plan in plans if plan is not None]


def _plan(
    gpu: GpuSpec,
    layout: Layout,
    pricing: Pricing,
    row: CloudPrice | None,
    run: RunPrice,
    request: PlanRequest,
    ranges: PlanRanges,
) -> Plan | None:
    """One priced layout on one row (or owned servers, `row` None) under one pricing; None when spot
    is not worth it."""
    hours = layout.estimate.hours_total
    if pricing == "spot":
        if run.usd_spot_expected is None:
            return None
        usd, run_hours, usd_per_hour = run.usd_spot_expected, run.spot_hours_expected, run.spot_usd_per_hour
    else:
        usd, run_hours, usd_per_hour = run.usd, hours, run.usd_per_hour
    return Plan(
        gpu=gpu.name,
        gpus=layout.settings.total_gpus,
        provider=OWNED_PROVIDER if row is None else row.provider,
        instance_type=f"{DEFAULT_NODE_GPUS}-GPU server" if row is None else row.instance_type,
        region="-" if row is None else row.region,
        instances=run.instances,
        gpus_per_instance=DEFAULT_NODE_GPUS if row is None else row.gpu_count,
        pricing=pricing,
        **_layout_fields(gpu, layout, row, request),
        hours=run_hours,
        hours_on_demand=hours,
        usd=usd,
        usd_on_demand=None if row is None else run.usd,
        usd_spot_expected=run.usd_spot_expected,
        usd_per_hour=usd_per_hour,
        price_as_of=None if row is None else row.as_of,
        source="catalogue purchase price and TDP" if row is None else row.source,
        reason=layout.note,
        **_plan_ranges(pricing, row, run, hours, ranges),
    )


class PlanRanges(NamedTuple):
    """What a GPU's plans' ranges rest on: the time band and the regional spot prices."""

    band: TimeBand
    spot_savings: Sequence[SpotSaving]


def _plan_ranges(pricing: Pricing, row: CloudPrice | None, run: RunPrice, hours: float, ranges: PlanRanges) -> dict:
    """A plan's hours and USD ranges (calculators.cost.ranges) and what they rest on."""
    band = ranges.band
    if pricing != "spot" or row is None or run.spot is None:
        return {
            "hours_range": scaled_range(hours, band),
            "usd_range": scaled_range(run.usd, band),
            "range_notes": [band.assumption],
        }
    prices = spot_price_range(row, ranges.spot_savings)
    spot = run.spot
    return {
        "hours_range": spot_hours_range(spot.expected_hours, spot.low_hours, spot.high_hours, band),
        "usd_range": spot_usd_range(
            run.usd_spot_expected, run.usd_spot_low, run.usd_spot_high, band, row.spot_usd_per_hour, prices
        ),
        "range_notes": [band.assumption] + ([prices.note] if prices is not None and prices.note else []),
    }


def _layout_fields(gpu: GpuSpec, layout: Layout, row: CloudPrice | None, request: PlanRequest) -> dict:
    """A plan's layout, memory and speed: the fields that do not depend on the price."""
    settings, estimate = layout.settings, layout.estimate
    capacity = gpu_memory_gib(gpu)
    return {
        **{field: getattr(settings, setting) for field, setting in PLAN_LAYOUT_FIELDS.items()},
        "seq_len": settings.seq_len,
        "global_batch_tokens": estimate.tokens_per_step,
        "peak_gib": layout.peak_gib,
        "gpu_memory_gib": capacity,
        "headroom_gib": capacity - layout.peak_gib,
        "host_memory_gib": layout.host_gib,
        "host_ram_gib": None if row is None else row.host_ram_gib,
        "host_ram_basis": host_ram_basis(layout.host_gib, settings.total_gpus, row, request.host_memory_gib_per_gpu),
        "step_s": estimate.step_s,
        "tokens_per_s": estimate.tokens_per_s,
        "mfu": estimate.mfu,
        "software_platform": software_platform(gpu) or "",
        "host_link_s_per_step": estimate.host_exposed_s,
    }


def judged_hours(plan: Plan, rank_on: RankOn = "estimate") -> float:
    """The hours a plan is judged by: its estimate, or the high end of its range."""
    if rank_on == "pessimistic" and plan.hours_range is not None:
        return plan.hours_range[1]
    return plan.hours


def judged_usd(plan: Plan, rank_on: RankOn = "estimate") -> float:
    """The USD a plan is judged by: its estimate, or the high end of its range."""
    if rank_on == "pessimistic" and plan.usd_range is not None:
        return plan.usd_range[1]
    return plan.usd


def pareto_plans(plans: Iterable[Plan], rank_on: RankOn = "estimate") -> list[Plan]:
    """Plans no other plan beats on both hours and USD (as `rank_on` judges them), fastest first
    (of exact ties, the first given)."""
    return time_cost_front(plans, lambda plan: (judged_hours(plan, rank_on), judged_usd(plan, rank_on)))


def _explain_front(front: list[Plan], rank_on: RankOn = "estimate") -> list[Plan]:
    """Each front plan with why it beats its neighbours: faster than the next cheaper plan, cheaper
    than the next faster one (at the high end of their ranges when ranked on it)."""
    explained = []
    end = " at the high end of the ranges" if rank_on == "pessimistic" else ""

    def hours(plan: Plan) -> float:
        return judged_hours(plan, rank_on)

    def usd(plan: Plan) -> float:
        return judged_usd(plan, rank_on)

    for index, plan in enumerate(front):
        words = []
        if index + 1 < len(front):
            cheaper = front[index + 1]
            words.append(
                f"{hours_text(hours(cheaper) - hours(plan))} faster than the next cheaper plan "
                f"({cheaper.gpus} x {cheaper.gpu}, {cheaper.provider} {cheaper.pricing}) "
                f"for {usd_text(usd(plan) - usd(cheaper))} more{end}"
            )
        else:
            words.append("the cheapest plan found")
        if index > 0:
            faster = front[index - 1]
            words.append(
                f"{usd_text(usd(faster) - usd(plan))} cheaper than the next faster plan "
                f"({faster.gpus} x {faster.gpu}, {faster.provider} {faster.pricing}), "
                f"{hours_text(hours(plan) - hours(faster))} longer{end}"
            )
        else:
            words.append("the fastest plan found")
        explained.append(plan.model_copy(update={"reason": "; ".join(words) + ". Layout: " + plan.reason}))
    return explained


def _years(hours: float) -> str:
    return f"{figure_text(hours / PLAUSIBLE_RUN_HOURS)} years"


def _too_long(request: PlanRequest, fastest: Plan, best: Plan | None) -> list[str]:
    """A plan longer than a plausible run (a year, PLAUSIBLE_RUN_HOURS) named with what would shorten it."""
    if fastest.hours > PLAUSIBLE_RUN_HOURS:
        tokens = request.dataset_tokens * request.epochs
        within_year = tokens * PLAUSIBLE_RUN_HOURS / fastest.hours
        more_gpus = (
            f"allow more GPUs than {request.max_gpus} (max GPUs)"
            if fastest.gpus >= request.max_gpus
            else f"a larger global batch (more GPUs than {fastest.gpus} do not shorten it at this batch)"
        )
        return [
            f"even the fastest plan takes {hours_text(fastest.hours)} ({_years(fastest.hours)}; {fastest.gpus} x "
            f"{fastest.gpu}, {fastest.provider}), longer than a plausible run of a year: {more_gpus}, or fewer "
            f"tokens (about {within_year:.3g} tokens in all would end within a year at that speed)"
        ]
    if best is not None and best.hours > PLAUSIBLE_RUN_HOURS:
        return [
            f"the cheapest plan takes {hours_text(best.hours)} ({_years(best.hours)}; {best.gpus} x {best.gpu}, "
            f"{best.provider}), longer than a plausible run of a year: more GPUs shorten it (the fastest plan, "
            f"{fastest.gpus} x {fastest.gpu}, takes {hours_text(fastest.hours)} for {usd_text(fastest.usd)}); "
            f"give a deadline of at most {hours_text(PLAUSIBLE_RUN_HOURS, None)} to get the cheapest plan within a year"
        ]
    return []


def _problems(
    request: PlanRequest,
    plans: list[Plan],
    fastest: Plan | None,
    cheapest: Plan | None,
    spec: ModelSpec,
    best: Plan | None = None,
) -> list[str]:
    """What makes the ask impossible or implausible (`best`, the cheapest plan within the limits,
    taking longer than a year), and what would make it possible. The limits are checked as
    `request.rank_on` judges a plan (its estimate, or the high end of its range)."""
    if not plans:
        return [
            f"no GPU of those searched can run {spec.name} ({request.mode}) on up to {request.max_gpus} GPUs with a "
            "price: it does not fit in memory even with ZeRO-3, full checkpointing, tensor and pipeline parallelism "
            "and offload (within each instance's host RAM), or its software stack cannot run it, or no price row is "
            "allowed; allow more GPUs (max GPUs), another provider or instance with more host RAM, owned hardware, "
            "or fine-tune with LoRA/QLoRA"
        ]
    problems = []
    rank_on = request.rank_on
    end = " at the high end of its range" if rank_on == "pessimistic" else ""

    def hours(plan: Plan) -> float:
        return judged_hours(plan, rank_on)

    def usd(plan: Plan) -> float:
        return judged_usd(plan, rank_on)

    if request.deadline_hours is not None and hours(fastest) > request.deadline_hours:
        problems.append(
            f"no plan meets the {hours_text(request.deadline_hours, None)} deadline: the fastest takes "
            f"{hours_text(hours(fastest))}{end} ({fastest.gpus} x {fastest.gpu}, {fastest.provider}); allow at "
            f"least {hours_text(hours(fastest))}, more GPUs than {request.max_gpus}, or fewer tokens"
        )
    if request.budget_usd is not None and usd(cheapest) > request.budget_usd:
        problems.append(
            f"no plan fits the {usd_text(request.budget_usd, None)} budget: the cheapest costs "
            f"{usd_text(usd(cheapest))}{end} ({cheapest.gpus} x {cheapest.gpu}, {cheapest.provider} "
            f"{cheapest.pricing}); allow at least {usd_text(usd(cheapest))} or fewer tokens"
        )
    if not problems and request.deadline_hours is not None and request.budget_usd is not None:
        both = [p for p in plans if hours(p) <= request.deadline_hours and usd(p) <= request.budget_usd]
        if not both:
            within = min((p for p in plans if hours(p) <= request.deadline_hours), key=usd)
            problems.append(
                f"no plan meets both the deadline and the budget: within {hours_text(request.deadline_hours, None)} "
                f"the cheapest costs {usd_text(usd(within))}{end}; raise the budget to that or relax the deadline"
            )
    if not problems:
        problems += _too_long(request, fastest, best)
    return problems


def _within(
    plans: list[Plan], deadline_hours: float | None, budget_usd: float | None, rank_on: RankOn = "estimate"
) -> list[Plan]:
    """The plans that end by the deadline and cost at most the budget (a limit not given holds), as
    `rank_on` judges them."""
    return [
        plan
        for plan in plans
        if (deadline_hours is None or judged_hours(plan, rank_on) <= deadline_hours)
        and (budget_usd is None or judged_usd(plan, rank_on) <= budget_usd)
    ]


def plan_run(
    spec: ModelSpec,
    base: TrainingSettings,
    request: PlanRequest,
    catalogue: Iterable[GpuSpec],
    prices: Iterable[CloudPrice],
    time_settings: TimeSettings | None = None,
    ownership: OwnershipSettings | None = None,
    progress: Callable[[float, str], None] | None = None,
    measured_matmul_fraction: dict[str, float] | None = None,
    time_band: BandFor | None = None,
    spot_savings: Sequence[SpotSaving] | None = None,
) -> PlanResult:
    """Search every GPU, count, layout, price row and pricing for `spec` trained as `request.mode`
    on `request.dataset_tokens` x epochs tokens; `base` gives the settings the search does not
    choose (sequence length, precision, optimizer, stack). Returns the front and the answers.

    `time_settings` gives the step assumptions (overlap, network, compile); its dataset is
    replaced by the request's. `measured_matmul_fraction` (GPU name -> fraction of dense peak, from a
    calibration, as calculators.cost.options.cost_options takes it) replaces the per-family default for
    those GPUs when `time_settings.utilisation` is not given. `time_band(gpu, settings)`
    (calculators.validation.error_band.time_band_for from the command line and the pages) gives each
    plan's hours and USD ranges; without it a range is the estimate alone. `spot_savings` (default:
    data/aws_spot_savings.csv) spreads spot prices across regions. With `request.rank_on`
    "pessimistic" the deadline, the budget and the front judge each plan by the high end of its
    ranges. Raises ValueError when the global batch is shorter than one sequence, a measured
    matmul fraction is not in (0, 1] or the step settings ask for context parallel (the search's
    layouts split sequences over data parallel only).
    """
    if time_settings is not None and time_settings.context_parallel > 1:
        raise ValueError(
            "the planner does not search context-parallel layouts; time one with `time` or `cost` "
            "and --context-parallel"
        )
    started = time.perf_counter()
    ownership = ownership or OwnershipSettings()
    base = base.model_copy(update={"method": METHOD_OF_MODE[request.mode]})
    sequences = _sequences_per_step(request, base.seq_len)
    run_time = (time_settings or TimeSettings(dataset_tokens=1.0)).model_copy(
        update={"dataset_tokens": request.dataset_tokens, "dataset_samples": None, "epochs": request.epochs}
    )
    _check_measured_fractions(measured_matmul_fraction)
    search = LayoutSearch(spec, base, run_time, sequences, measured_matmul_fraction)
    prices = list(prices)
    savings = load_spot_savings() if spot_savings is None else spot_savings
    gpus = [gpu for gpu in catalogue if request.gpus is None or gpu.name in request.gpus]
    candidates: list[Plan] = []
    for index, gpu in enumerate(gpus):
        if progress is not None:
            progress(index / max(len(gpus), 1), gpu.name)
        candidates += _plans_for_gpu(search, gpu, prices, request, ownership, time_band, savings)
    if progress is not None:
        progress(1.0, "done")
    rank_on = request.rank_on
    front = _explain_front(pareto_plans(candidates, rank_on), rank_on)
    fastest = front[0] if front else None
    cheapest = front[-1] if front else None
    within = _within(front, request.deadline_hours, request.budget_usd, rank_on)  # the front holds both answers

    def judged(plan: Plan) -> tuple[float, float]:
        return judged_hours(plan, rank_on), judged_usd(plan, rank_on)

    best_deadline = min(within, key=lambda plan: judged(plan)[::-1], default=None)
    best_budget = min(within, key=judged, default=None)
    return PlanResult(
        model=spec.name,
        mode=request.mode,
        dataset_tokens=request.dataset_tokens,
        epochs=request.epochs,
        global_batch_tokens=sequences * base.seq_len,
        global_batch_source="given" if request.global_batch_tokens else global_batch_source(request.mode),
        plans=front,
        candidates=len(candidates),
        best_under_deadline=best_deadline,
        best_under_budget=best_budget,
        fastest=fastest,
        cheapest=cheapest,
        problems=_problems(request, front, fastest, cheapest, spec, best_deadline),
        unpriced=unpriced_gpus(gpus, prices, request.include_owned),
        searched=search.searched,
        seconds=time.perf_counter() - started,
        assumptions=_assumptions(request, ownership, sequences, base)
        + _measured_assumptions(measured_matmul_fraction, run_time)
        + _range_assumptions(front, rank_on),
    )


def _sequences_per_step(request: PlanRequest, seq_len: int) -> int:
    """Sequences in the global batch (the request's, else the mode's default); ValueError when the
    global batch is shorter than one sequence."""
    global_batch = request.global_batch_tokens or default_global_batch_tokens(request.mode, seq_len)
    sequences = global_batch // seq_len
    if sequences < 1:
        raise ValueError(
            f"the global batch of {global_batch:,} tokens is shorter than one sequence of {seq_len:,} tokens"
        )
    return sequences


def _check_measured_fractions(measured_matmul_fraction: dict[str, float] | None) -> None:
    """ValueError unless every measured matmul fraction is in (0, 1]."""
    for gpu_name, fraction in (measured_matmul_fraction or {}).items():
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"the measured matmul fraction of {gpu_name} is {fraction:g}; it must be in (0, 1]")


def _plans_for_gpu(
    search: LayoutSearch,
    gpu: GpuSpec,
    prices: Sequence[CloudPrice],
    request: PlanRequest,
    ownership: OwnershipSettings,
    time_band: BandFor | None = None,
    spot_savings: Sequence[SpotSaving] = (),
) -> list[Plan]:
    """Every priced plan of one GPU type: the fastest layout per count and node size, on each row and pricing."""
    if training_stack_problem(gpu, search.base) is not None:
        return []
    precision = _precision_for(gpu, search.base.precision)
    if precision is None:
        return []
    all_rows = [row for row in prices if row.gpu == gpu.name and _provider_allowed(row, request)]
    owned_usd = owned_usd_per_gpu_hour(gpu, ownership, request.utilisation_of_owned) if request.include_owned else None
    if not all_rows and owned_usd is None:
        return []
    plans = []
    instance_types = {row.instance_type for row in all_rows}  # read the savings table once per GPU, not per plan
    savings = [saving for saving in spot_savings if saving.instance_type in instance_types]
    ranges = PlanRanges(NO_BAND if time_band is None else time_band(gpu, search.base), savings)
    fallback = request.host_memory_gib_per_gpu
    layouts: LayoutCache = {}  # rows of a size differ in host RAM
    largest_node = max([row.gpu_count for row in all_rows] + [DEFAULT_NODE_GPUS if owned_usd else 1])
    for total in gpu_counts(request.max_gpus, largest_node):
        rows = [row for row in all_rows if total <= row.gpu_count or total % row.gpu_count == 0]
        for node_gpus in _node_sizes(rows, owned_usd is not None):
            for row in rows:
                if row.gpu_count != node_gpus:
                    continue
                limit = host_limit_per_gpu(row, total, fallback)
                layout = cached_best_layout(layouts, search, gpu, total, node_gpus, precision, limit)
                if layout is not None:
                    plans += _row_plans(gpu, layout, row, request, ranges)
            if owned_usd is not None and node_gpus == DEFAULT_NODE_GPUS:
                limit = host_limit_per_gpu(None, total, fallback)
                layout = cached_best_layout(layouts, search, gpu, total, node_gpus, precision, limit)
                if layout is not None:
                    owned = price_owned_run(total, owned_usd, layout.estimate.hours_total, DEFAULT_NODE_GPUS)
                    plans.append(_plan(gpu, layout, "owned", None, owned, request, ranges))
    return plans


def _measured_assumptions(measured: dict[str, float] | None, time_settings: TimeSettings) -> list[str]:
    """The calibrated matmul fractions the search used, in words (none when the user gave a
    utilisation or a matmul fraction for all GPUs)."""
    if not measured or not time_settings.takes_measured_matmul_fraction():
        return []
    applied = ", ".join(f"{gpu} {fraction:.0%}" for gpu, fraction in sorted(measured.items()))
    return [f"calibrated matmul fraction of dense peak replaces mamf-finder's in each GEMM's roofline: {applied}"]


def _range_assumptions(front: list[Plan], rank_on: RankOn) -> list[str]:
    """What the plans' ranges rest on (each line once), and which end the limits and the front judge."""
    judged = (
        "deadline, budget and front judged at the high end of each plan's range (pessimistic)"
        if rank_on == "pessimistic"
        else "deadline, budget and front judged on the estimates; the ranges are shown beside them"
    )
    notes = dict.fromkeys(note for plan in front for note in plan.range_notes)
    return [judged, *notes]


def _provider_allowed(row: CloudPrice, request: PlanRequest) -> bool:
    return request.providers is None or row.provider.casefold() in {p.casefold() for p in request.providers}


def _assumptions(
    request: PlanRequest, ownership: OwnershipSettings, sequences: int, base: TrainingSettings
) -> list[str]:
    """What the plans assume, in words."""
    assumptions = [
        f"global batch {sequences:,} sequences of {base.seq_len:,} tokens per optimizer step "
        f"({'given' if request.global_batch_tokens else global_batch_source(request.mode)})",
        "GPU counts 1, 2, 4 in one node, then whole nodes; a job past one instance uses whole instances; "
        "data-parallel GPUs divide the global batch (each replica takes whole sequences)",
        "memory by the engine (calculators.memory), time by the time model (calculators.timing.estimate): "
        "no data loading, evaluation or checkpoint writes on demand",
        "on spot: expected hours with Young/Daly checkpoints, restarts and lost work (calculators.cost.spot), "
        f"{DEFAULT_INTERRUPTIONS_PER_HOUR} interruptions per instance-hour where the price row has no rate",
        "offload only when nothing else fits and the accelerator's stack offers it (not on TPUs or Trainium), "
        "timed over its host link (PCIe or NVLink-C2C) with the CPU optimizer step, and only where the host RAM "
        "the engine puts offloaded states and activations in (per GPU x the job's GPUs on one instance) fits the "
        "instance's host RAM from its price "
        f"row (host_ram_gib, from a public document); where the row gives none, and on owned servers, an assumed "
        f"{request.host_memory_gib_per_gpu:g} GiB per GPU; each plan's host_ram_basis says which was used",
        "bf16 precisions run as fp16 on GPUs without bf16 (V100, T4)",
    ]
    if request.include_owned:
        assumptions.append(
            f"owned: purchase price from the catalogue x (1 + {ownership.host_overhead_fraction:.0%} host) over "
            f"{ownership.years:g} years of every hour, plus (TDP x {request.utilisation_of_owned:.0%} + "
            f"{EnergySettings().host_w_per_gpu:,.0f} W host per GPU) x PUE "
            f"{ownership.pue:g} x {ownership.electricity_usd_per_kwh:g} USD/kWh, in {DEFAULT_NODE_GPUS}-GPU servers"
        )
    return assumptions
