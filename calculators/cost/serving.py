"""Cost of serving: USD per million output and input tokens, per hour and per month, on every priced
GPU and provider, on demand and spot.

A group of tensor_parallel GPUs serving at the steady state of calculators.timing.serving costs
tensor_parallel x the GPU-hour price (prices.usd_per_gpu_hour: an instance's price over its GPUs, its
other GPUs serving other replicas). Its GPU time splits between the requests' prefills and their decode
steps; each is charged to the tokens it makes: the decode steps to the output tokens, the prefills
to the input tokens, as API price sheets quote them (the two add up to the whole bill).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel, Field

from calculators.cost.prices import CloudPrice, usd_per_gpu_hour
from calculators.hardware.catalogue import GpuSpec
from calculators.models.spec import ModelSpec
from calculators.timing.serving import (
    LatencyLimits,
    ServingRequest,
    ServingSpeed,
    estimate_serving_speed,
    prefill,
)
from calculators.workload.serving import ServingSettings

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


class TokenPrices(BaseModel):
    """USD per million tokens of one deployment at its steady state."""

    usd_per_million_output_tokens: float
    usd_per_million_input_tokens: float


class ServingCostOption(BaseModel):
    """One GPU on one provider's instance, on demand or spot, serving the request."""

    gpu: str
    provider: str
    instance_type: str
    region: str
    pricing: str = Field(description="'on demand' or 'spot'")
    tensor_parallel: int
    usd_per_gpu_hour: float
    usd_per_hour: float = Field(description="one replica: tensor_parallel GPUs")
    concurrency: int | None = None
    output_tokens_per_s_per_gpu: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_million_input_tokens: float | None = None
    replicas: int | None = Field(default=None, description="replicas for the request rate, when one is given")
    usd_per_month: float | None = None
    excluded_reason: str | None = None


def token_prices(speed: ServingSpeed, prefill_s: float, usd_per_hour: float) -> TokenPrices:
    """Per request the group spends output_len x TPOT / concurrency seconds, of which prefill_s (its
    prompt's FLOPs mixed into the decode steps) makes the input tokens and the rest the output
    tokens: USD per million = usd_per_s x seconds / tokens x 1e6."""
    usd_per_s = usd_per_hour / 3600
    request_s = speed.output_len * speed.tpot_s / speed.concurrency
    decode_s = request_s - prefill_s
    return TokenPrices(
        usd_per_million_output_tokens=usd_per_s * decode_s / speed.output_len * 1e6,
        usd_per_million_input_tokens=usd_per_s * prefill_s / speed.input_len * 1e6,
    )


def replicas_for(requests_per_s: float, speed: ServingSpeed) -> int:
    """Replicas that serve `requests_per_s`: each completes output tokens/s / output_len requests."""
    per_replica = speed.output_tokens_per_s / speed.output_len
    return max(1, math.ceil(requests_per_s / per_replica - 1e-9))


def _speed_or_reason(
    spec: ModelSpec, settings: ServingSettings, gpu: GpuSpec, request: ServingRequest, limits: LatencyLimits | None
) -> tuple[ServingSpeed | None, float, str | None]:
    try:
        speed = estimate_serving_speed(spec, settings, gpu, request, limits)
    except ValueError as error:
        return None, 0.0, str(error)
    if limits is not None and not limits.met_by(speed):  # a concurrency the user fixed
        return (
            None,
            0.0,
            (
                f"at concurrency {speed.concurrency} TTFT is {speed.ttft_s * 1e3:,.0f} ms and TPOT "
                f"{speed.tpot_s * 1e3:,.1f} ms, beyond the targets"
            ),
        )
    return speed, prefill(spec, settings, gpu, request.input_len).flops_s, None


def serving_cost_options(
    spec: ModelSpec,
    settings: ServingSettings,
    request: ServingRequest,
    prices: Iterable[CloudPrice],
    catalogue: Iterable[GpuSpec],
    limits: LatencyLimits | None = None,
    requests_per_s: float | None = None,
) -> list[ServingCostOption]:
    """Every priced instance, on demand and spot, the ones that serve first, cheapest per million
    output tokens first; those that cannot serve (or meet the limits) last with the reason."""
    gpus = {gpu.name: gpu for gpu in catalogue}
    speeds: dict[str, tuple[ServingSpeed | None, float, str | None]] = {}
    options = []
    for price in prices:
        gpu = gpus.get(price.gpu)
        if gpu is None:
            continue
        if gpu.name not in speeds:
            speeds[gpu.name] = _speed_or_reason(spec, settings, gpu, request, limits)
        speed, prefill_s, reason = speeds[gpu.name]
        for pricing, spot in (("on demand", False), ("spot", True)):
            per_gpu = usd_per_gpu_hour(price, spot)
            if per_gpu is not None:
                options.append(_option(price, pricing, per_gpu, settings, speed, prefill_s, reason, requests_per_s))
    return sorted(options, key=lambda o: (o.excluded_reason is not None, o.usd_per_million_output_tokens or 0.0))


def _option(
    price: CloudPrice, pricing: str, per_gpu: float, settings: ServingSettings, speed: ServingSpeed | None,
    prefill_s: float, reason: str | None, requests_per_s: float | None,
) -> ServingCostOption:  # fmt: skip
    tp = settings.tensor_parallel
    option = ServingCostOption(
        gpu=price.gpu,
        provider=price.provider,
        instance_type=price.instance_type,
        region=price.region,
        pricing=pricing,
        tensor_parallel=tp,
        usd_per_gpu_hour=per_gpu,
        usd_per_hour=per_gpu * tp,
        excluded_reason=reason,
    )
    if speed is None:
        return option
    update = {
        "concurrency": speed.concurrency,
        "output_tokens_per_s_per_gpu": speed.output_tokens_per_s_per_gpu,
        "ttft_s": speed.ttft_s,
        "tpot_s": speed.tpot_s,
    } | token_prices(speed, prefill_s, per_gpu * tp).model_dump()
    if requests_per_s:
        replicas = replicas_for(requests_per_s, speed)
        update |= {"replicas": replicas, "usd_per_month": replicas * per_gpu * tp * HOURS_PER_MONTH}
    return option.model_copy(update=update)
