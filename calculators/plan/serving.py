"""Plan for serving: the cheapest GPU x tensor parallel x weight precision x replicas x provider that
serves R requests/s of given lengths within TTFT and TPOT targets, and the front of cost against
latency.

Each GPU of the catalogue that has a price, each tensor-parallel size that shards the model and
each weight precision the GPU runs (timing.serving.weight_kernel) is estimated once at every searched
concurrency (timing.serving.serving_speeds); a concurrency within the targets needs
replicas = ceil(R / its requests/s) groups, priced on every instance of that GPU, on demand and
spot (cost.serving). Lower concurrency means lower latency and more replicas: the front keeps the
plans no other plan beats on both USD per hour and TPOT.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, Field

from calculators.cost.prices import CloudPrice, usd_per_gpu_hour
from calculators.cost.serving import replicas_for, token_prices
from calculators.hardware.catalogue import GpuSpec
from calculators.memory.serving import TENSOR_PARALLEL_SIZES
from calculators.models.spec import ModelSpec
from calculators.timing.serving import (
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
    replicas: int
    gpus: int
    concurrency: int = Field(description="sequences in flight per replica")
    usd_per_hour: float
    usd_per_month: float
    usd_per_million_output_tokens: float
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
    searched: int
    seconds: float


Offer = tuple[CloudPrice, str, float]  # a price, 'on demand' or 'spot', USD per GPU-hour


def _priced(prices: Iterable[CloudPrice], request: ServingPlanRequest) -> dict[str, list[Offer]]:
    """(price, 'on demand' or 'spot', USD per GPU-hour) by GPU name, for the providers asked."""
    wanted = {name.casefold() for name in request.providers} if request.providers else None
    by_gpu: dict[str, list[Offer]] = {}
    for price in prices:
        if wanted is not None and price.provider.casefold() not in wanted:
            continue
        for pricing, spot in (("on demand", False), ("spot", True)):
            per_gpu = usd_per_gpu_hour(price, spot)
            if per_gpu is not None and (request.allow_spot or not spot):
                by_gpu.setdefault(price.gpu, []).append((price, pricing, per_gpu))
    return by_gpu


def _plan(speed: ServingSpeed, prefill_s: float, replicas: int, price: CloudPrice, pricing: str, per_gpu: float):
    group_usd_per_hour = per_gpu * speed.tensor_parallel
    tokens = token_prices(speed, prefill_s, group_usd_per_hour)
    return ServingPlan(
        gpu=speed.gpu,
        provider=price.provider,
        instance_type=price.instance_type,
        pricing=pricing,
        tensor_parallel=speed.tensor_parallel,
        weight_precision=speed.weight_precision,
        replicas=replicas,
        gpus=replicas * speed.tensor_parallel,
        concurrency=speed.concurrency,
        usd_per_hour=replicas * group_usd_per_hour,
        usd_per_month=replicas * group_usd_per_hour * 730.0,
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
    priced = _priced(prices, request)
    served = ServingRequest(input_len=request.input_len, output_len=request.output_len, concurrency=0)
    within: list[ServingPlan] = []
    fastest: list[ServingPlan] = []
    searched = 0
    for gpu in catalogue:
        offers = priced.get(gpu.name)
        if not offers:
            continue
        cheapest = min(offers, key=lambda offer: offer[2])
        for tp in request.tensor_parallel_sizes:
            if tensor_parallel_problem(spec, tp):
                continue
            for precision in request.precisions:
                settings = base.model_copy(update={"tensor_parallel": tp, "weight_precision": precision})
                try:
                    speeds = serving_speeds(spec, settings, gpu, served)
                except ValueError:  # does not fit, or the GPU runs no kernel for these weights
                    continue
                searched += len(speeds)
                prefill_s = prefill(spec, settings, gpu, request.input_len).flops_s
                for speed in speeds:  # the same GPUs cost least on the cheapest offer
                    plan = _plan(speed, prefill_s, replicas_for(request.requests_per_s, speed), *cheapest)
                    (within if request.limits.met_by(speed) else fastest).append(plan)
    return _result(spec, request, within, fastest, searched, time.perf_counter() - started)


def closest_to_targets(plans: Iterable[ServingPlan], limits: LatencyLimits) -> ServingPlan:
    """The plan nearest the targets it misses: the smallest of its worst latency / target ratio (TTFT and
    TPOT each against its own target, so a missed TTFT target ranks by TTFT), the cheaper on a tie;
    by TPOT where no target is given."""

    def shortfall(plan: ServingPlan) -> tuple[float, float]:
        ratios = [plan.ttft_s / limits.ttft_s] if limits.ttft_s else []
        ratios += [plan.tpot_s / limits.tpot_s] if limits.tpot_s else []
        return max(ratios, default=plan.tpot_s), plan.usd_per_hour

    return min(plans, key=shortfall)


def _result(spec: ModelSpec, request: ServingPlanRequest, within, missed, searched: int, seconds: float):
    front = cost_latency_front(within)
    problems: list[str] = []
    best_latency = None
    if not within:
        if missed:
            best_latency = closest_to_targets(missed, request.limits)
            problems.append(
                f"no layout meets the targets; the nearest reachable is TTFT {best_latency.ttft_s * 1e3:,.0f} ms and "
                f"TPOT {best_latency.tpot_s * 1e3:,.2f} ms on {best_latency.gpus} x {best_latency.gpu}, tensor "
                f"parallel {best_latency.tensor_parallel}, {best_latency.weight_precision} weights, at "
                f"${best_latency.usd_per_hour:,.2f} per hour"
            )
        else:  # lengths past the model's positions fit nowhere: say that rather than blame the GPUs
            lengths = ServingRequest(input_len=request.input_len, output_len=request.output_len)
            problems.append(context_problem(spec, lengths) or f"{spec.name} fits on no priced GPU at these lengths")
    return ServingPlanResult(
        model=spec.name,
        requests_per_s=request.requests_per_s,
        input_len=request.input_len,
        output_len=request.output_len,
        cheapest=front[0] if front else None,
        plans=front,
        best_latency=best_latency,
        problems=problems,
        searched=searched,
        seconds=seconds,
    )
