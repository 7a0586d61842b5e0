"""Plan for serving: the cheapest GPU x tensor parallel x weight precision x replicas x instance that
serves R requests/s of given lengths within TTFT and TPOT targets, and the front of cost against
latency.

Each GPU of the catalogue that has a price, each tensor-parallel size that shards the model and fits in
one of the GPU's priced instances, and each weight precision the GPU runs (timing.serving.weight_kernel)
is estimated once at every searched concurrency (timing.serving.serving_speeds); a concurrency within
the targets needs replicas = ceil(R / its requests/s) groups, packed into whole instances
(cost.serving.rent_instances) of the offer that bills least for them, on demand or spot. Lower
concurrency means lower latency and more replicas: the front keeps the plans no other plan beats on both
USD per hour and TPOT. A precision that fits on no tensor-parallel size within one instance is named:
serving across nodes needs pipeline parallel, which is not modelled.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, Field

from calculators.cost.prices import CloudPrice, instance_usd_per_hour
from calculators.cost.serving import HOURS_PER_MONTH, RentedInstances, rent_instances, replicas_for, token_prices
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.serving import TENSOR_PARALLEL_SIZES
from calculators.models.spec import ModelSpec
from calculators.timing.serving import (
    DoesNotFit,
    LatencyLimits,
    ServingRequest,
    ServingSpeed,
    context_problem,
    prefill,
    serving_speeds,
)
from calculators.workload.serving import ServingSettings, tensor_parallel_problem

PLANNED_PRECISIONS: tuple[str, ...] = ("bf16", "fp8", "int4", "fp4")


class ServingPlanRequest(BaseModel):
    """What to serve and the targets."""

    requests_per_s: float = Field(gt=0, le=1e7, description="requests arriving per second")
    input_len: int = Field(gt=0, le=10_000_000)
    output_len: int = Field(gt=0, le=10_000_000)
    limits: LatencyLimits = Field(default_factory=LatencyLimits)
    precisions: tuple[str, ...] = PLANNED_PRECISIONS
    tensor_parallel_sizes: tuple[int, ...] = TENSOR_PARALLEL_SIZES
    providers: tuple[str, ...] | None = None
    allow_spot: bool = True


class ServingPlan(BaseModel):
    """One way to serve the requests."""

    gpu: str
    provider: str
    instance_type: str
    pricing: str
    tensor_parallel: int
    weight_precision: str
    replicas: int = Field(description="replicas the request rate needs")
    instances: int = Field(default=1, description="whole instances rented")
    gpus_per_instance: int = 1
    replicas_held: int = Field(default=1, description="replicas the instances hold: spare GPUs run extra ones")
    gpus: int = Field(description="GPUs rented, spare ones included")
    concurrency: int = Field(description="sequences in flight per replica")
    usd_per_hour: float = Field(description="every instance rented")
    usd_per_month: float
    usd_per_million_output_tokens: float = Field(description="every replica the instances hold at full load")
    usd_per_million_input_tokens: float
    ttft_s: float
    tpot_s: float
    output_tokens_per_s_per_gpu: float


class ServingPlanResult(BaseModel):
    model: str
    requests_per_s: float
    input_len: int
    output_len: int
    cheapest: ServingPlan | None
    plans: list[ServingPlan] = Field(description="the front of USD per hour against TPOT, cheapest first")
    best_latency: ServingPlan | None = Field(
        default=None, description="when no plan meets the targets: the plan nearest them (closest_to_targets)"
    )
    problems: list[str]
    left_out: list[str] = Field(
        default_factory=list, description="weight precisions that fit in no single instance of a GPU, in words"
    )
    searched: int
    seconds: float


Offer = tuple[CloudPrice, str, float]  # a price, 'on demand' or 'spot', USD per instance-hour


def _offers_by_size(prices: Iterable[CloudPrice], request: ServingPlanRequest) -> dict[str, dict[int, Offer]]:
    """The cheapest offer of each instance size (GPUs per instance), by GPU name, for the providers asked:
    instances of the same size hold the same replicas, so the cheaper one always wins."""
    wanted = {name.casefold() for name in request.providers} if request.providers else None
    by_gpu: dict[str, dict[int, Offer]] = {}
    for price in prices:
        if wanted is not None and price.provider.casefold() not in wanted:
            continue
        for pricing, spot in (("on demand", False), ("spot", True)):
            whole = instance_usd_per_hour(price, spot)
            if whole is None or (spot and not request.allow_spot):
                continue
            sizes = by_gpu.setdefault(price.gpu, {})
            kept = sizes.get(price.gpu_count)
            if kept is None or whole < kept[2]:
                sizes[price.gpu_count] = (price, pricing, whole)
    return by_gpu


def cheapest_rental(offers: dict[int, Offer], tensor_parallel: int, replicas: int) -> tuple[Offer, RentedInstances]:
    """The offer whose whole instances hold `replicas` groups of `tensor_parallel` GPUs for the fewest USD per
    hour (the one with fewer GPUs on a tie), and those instances."""
    rentals = []
    for offer in offers.values():
        rented = rent_instances(offer[2], offer[0].gpu_count, tensor_parallel, replicas)
        if rented is not None:
            rentals.append((offer, rented))
    return min(rentals, key=lambda rental: (rental[1].usd_per_hour, rental[1].gpus))


def _plan(speed: ServingSpeed, prefill_s: float, replicas: int, offer: Offer, rented: RentedInstances) -> ServingPlan:
    price, pricing, _ = offer
    tokens = token_prices(speed, prefill_s, rented.usd_per_replica_hour)
    return ServingPlan(
        gpu=speed.gpu,
        provider=price.provider,
        instance_type=price.instance_type,
        pricing=pricing,
        tensor_parallel=speed.tensor_parallel,
        weight_precision=speed.weight_precision,
        replicas=replicas,
        instances=rented.instances,
        gpus_per_instance=rented.gpus_per_instance,
        replicas_held=rented.replicas_held,
        gpus=rented.gpus,
        concurrency=speed.concurrency,
        usd_per_hour=rented.usd_per_hour,
        usd_per_month=rented.usd_per_hour * HOURS_PER_MONTH,
        usd_per_million_output_tokens=tokens.usd_per_million_output_tokens,
        usd_per_million_input_tokens=tokens.usd_per_million_input_tokens,
        ttft_s=speed.ttft_s,
        tpot_s=speed.tpot_s,
        output_tokens_per_s_per_gpu=speed.output_tokens_per_s_per_gpu,
    )


def cost_latency_front(plans: Iterable[ServingPlan]) -> list[ServingPlan]:
    """Plans no other plan beats on both USD per hour and TPOT, cheapest first."""
    front: list[ServingPlan] = []
    for plan in sorted(plans, key=lambda p: (p.usd_per_hour, p.tpot_s)):
        if not front or plan.tpot_s < front[-1].tpot_s:
            front.append(plan)
    return front


def plan_serving(
    spec: ModelSpec,
    base: ServingSettings,
    request: ServingPlanRequest,
    catalogue: Iterable[GpuSpec],
    prices: Iterable[CloudPrice],
) -> ServingPlanResult:
    """The cheapest plan within the targets and the cost-latency front; when none meets the targets,
    the plan nearest the targets, and a problem line saying so."""
    started = time.perf_counter()
    offers_of = _offers_by_size(prices, request)
    served = ServingRequest(input_len=request.input_len, output_len=request.output_len, concurrency=0)
    within: list[ServingPlan] = []
    fastest: list[ServingPlan] = []
    too_large: dict[str, list[str]] = {}  # precision -> GPUs on which no group within one instance holds it
    searched = 0
    for gpu in catalogue:
        offers = offers_of.get(gpu.name)
        if not offers:
            continue
        node_gpus = max(offers)  # a group stays inside one instance (cost.serving.replicas_per_instance)
        sizes = [tp for tp in request.tensor_parallel_sizes if tp <= node_gpus
                 and not tensor_parallel_problem(spec, tp)]  # fmt: skip
        for precision in request.precisions:
            layouts, too_large_here = _fitting_layouts(spec, base, gpu, precision, sizes, served)
            if too_large_here:
                too_large.setdefault(precision, []).append(gpu.name)
            for settings, speeds in layouts:
                searched += len(speeds)
                prefill_s = prefill(spec, settings, gpu, request.input_len).flops_s
                for speed in speeds:
                    replicas = replicas_for(request.requests_per_s, speed)
                    plan = _plan(speed, prefill_s, replicas, *cheapest_rental(offers, speed.tensor_parallel, replicas))
                    (within if request.limits.met_by(speed) else fastest).append(plan)
    left_out = [_too_large_words(spec, precision, gpus) for precision, gpus in too_large.items()]
    return _result(spec, request, within, fastest, left_out, searched, time.perf_counter() - started)


def _fitting_layouts(
    spec: ModelSpec, base: ServingSettings, gpu: GpuSpec, precision: str, sizes: list[int], served: ServingRequest
) -> tuple[list[tuple[ServingSettings, list[ServingSpeed]]], bool]:
    """The speeds of each tensor-parallel size in `sizes` on which `precision` fits, and whether it fits on
    none of them (rather than the GPU running no kernel for it, or the lengths being too long)."""
    layouts = []
    for tp in sizes:
        settings = base.model_copy(update={"tensor_parallel": tp, "weight_precision": precision})
        try:
            layouts.append((settings, serving_speeds(spec, settings, gpu, served)))
        except DoesNotFit:
            continue
        except ValueError:  # the GPU runs no kernel for these weights, or the lengths are too long
            return [], False
    return layouts, bool(sizes) and not layouts


def rented_words(plan: ServingPlan) -> str:
    """'2 x g6e.48xlarge (16 x L40S-48GB)': the whole instances rented, in words."""
    return f"{plan.instances} x {plan.instance_type} ({plan.gpus} x {plan.gpu})"


def _too_large_words(spec: ModelSpec, precision: str, gpus: list[str]) -> str:
    """'bf16 weights of X fit in no single priced instance of L40S-48GB, ...: ...', every GPU named."""
    return (
        f"{precision} weights of {spec.name} fit in no single priced instance of {', '.join(gpus)}: serving them "
        "needs more than one node, and pipeline parallel serving is not modelled"
    )


def closest_to_targets(plans: Iterable[ServingPlan], limits: LatencyLimits) -> ServingPlan:
    """The plan nearest the targets it misses: the smallest of its worst latency / target ratio (TTFT and
    TPOT each against its own target, so a missed TTFT target ranks by TTFT), the cheaper on a tie;
    by TPOT where no target is given."""

    def shortfall(plan: ServingPlan) -> tuple[float, float]:
        ratios = [plan.ttft_s / limits.ttft_s] if limits.ttft_s else []
        ratios += [plan.tpot_s / limits.tpot_s] if limits.tpot_s else []
        return max(ratios, default=plan.tpot_s), plan.usd_per_hour

    return min(plans, key=shortfall)


def _result(
    spec: ModelSpec, request: ServingPlanRequest, within, missed, left_out: list[str], searched: int, seconds: float
) -> ServingPlanResult:  # fmt: skip
    front = cost_latency_front(within)
    problems: list[str] = []
    best_latency = None
    if not within:
        if missed:
            best_latency = closest_to_targets(missed, request.limits)
            problems.append(
                f"no layout meets the targets; the nearest reachable is TTFT {best_latency.ttft_s * 1e3:,.0f} ms and "
                f"TPOT {best_latency.tpot_s * 1e3:,.2f} ms on {rented_words(best_latency)}, tensor "
                f"parallel {best_latency.tensor_parallel}, {best_latency.weight_precision} weights, at "
                f"${best_latency.usd_per_hour:,.2f} per hour"
            )
        else:  # lengths past the model's positions fit nowhere: say that rather than blame the GPUs
            lengths = ServingRequest(input_len=request.input_len, output_len=request.output_len)
            fits_nowhere = f"{spec.name} fits on no priced GPU at these lengths"
            problems.append(context_problem(spec, lengths) or (left_out[0] if left_out else fits_nowhere))
    return ServingPlanResult(
        model=spec.name,
        requests_per_s=request.requests_per_s,
        input_len=request.input_len,
        output_len=request.output_len,
        cheapest=front[0] if front else None,
        plans=front,
        best_latency=best_latency,
        problems=problems,
        left_out=left_out,
        searched=searched,
        seconds=seconds,
    )
