"""Cost of serving: USD per million output and input tokens, per hour and per month, on every priced
instance and provider, on demand and spot.

One rents whole instances, never a share of one: a replica of tensor_parallel GPUs runs inside one
instance (its per-layer all-reduces on the instance's own links), so an instance of G GPUs holds
G // tensor_parallel replicas, and R replicas take ceil(R / that) instances, billed whole
(cost.pricing.instances_needed, as the training planner bills them). Where a provider sells single
GPUs (an instance of one GPU) that is the price of one. A rented instance's spare GPUs may run extra
replicas, so the USD per million tokens divides the instances' price by the tokens of every replica
they hold: the price of tokens at full load.

A replica's GPU time splits between the requests' prefills and their decode steps; each is charged to
the tokens it makes: the decode steps to the output tokens, the prefills to the input tokens, as API
price sheets quote them (the two add up to the whole bill).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel, Field

from calculators.cost.prices import CloudPrice, instance_usd_per_hour
from calculators.cost.pricing import instances_needed
from calculators.hardware.catalogue import GpuSpec
from calculators.models.spec import ModelSpec
from calculators.timing.serving import (
    LatencyLimits,
    ServingRequest,
    ServingSpeed,
    best_speed,
    latency_miss,
    prefill,
    serving_speeds,
)
from calculators.workload.serving import ServingSettings

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


class TokenPrices(BaseModel):
    """USD per million tokens of one deployment at its steady state."""

    usd_per_million_output_tokens: float
    usd_per_million_input_tokens: float


class RentedInstances(BaseModel):
    """Whole instances of one price row holding the replicas of one deployment."""

    instances: int = Field(ge=1)
    gpus_per_instance: int = Field(ge=1)
    replicas_per_instance: int = Field(ge=1, description="tensor-parallel groups one instance holds")
    usd_per_hour: float = Field(ge=0, description="every instance rented")

    @property
    def replicas_held(self) -> int:
        """Replicas the rented instances hold: those asked for and any spare GPUs' extra ones."""
        return self.instances * self.replicas_per_instance

    @property
    def gpus(self) -> int:
        """GPUs rented (and billed), spare ones included."""
        return self.instances * self.gpus_per_instance

    @property
    def usd_per_replica_hour(self) -> float:
        """The bill shared by every replica the instances hold."""
        return self.usd_per_hour / self.replicas_held


def replicas_per_instance(gpus_per_instance: int, tensor_parallel: int) -> int:
    """Tensor-parallel groups one instance of `gpus_per_instance` GPUs holds: a group stays inside one
    instance: vLLM's guide puts tensor parallel inside one node and pipeline parallel across nodes
    (docs.vllm.ai/en/v0.8.3/serving/distributed_serving.html); 0 when a group is larger than the instance."""
    return gpus_per_instance // tensor_parallel


def rent_instances(
    usd_per_instance_hour: float, gpus_per_instance: int, tensor_parallel: int, replicas: int = 1
) -> RentedInstances | None:
    """The whole instances that hold `replicas` groups of `tensor_parallel` GPUs and their price per
    hour; None when one group does not fit in one instance."""
    per_instance = replicas_per_instance(gpus_per_instance, tensor_parallel)
    if per_instance == 0:
        return None
    # an instance gives per_instance x tensor_parallel of its GPUs to whole replicas
    instances = instances_needed(replicas * tensor_parallel, per_instance * tensor_parallel)
    return RentedInstances(
        instances=instances,
        gpus_per_instance=gpus_per_instance,
        replicas_per_instance=per_instance,
        usd_per_hour=instances * usd_per_instance_hour,
    )


def group_too_large(price: CloudPrice, tensor_parallel: int) -> str:
    """Why a tensor-parallel group cannot be served on `price`'s instances, in words."""
    return (
        f"tensor parallel {tensor_parallel} needs {tensor_parallel} GPUs in one instance; {price.instance_type} "
        f"has {price.gpu_count}"
    )


class ServingCostOption(BaseModel):
    """One provider's instance, on demand or spot, serving the request."""

    gpu: str
    provider: str
    instance_type: str
    region: str
    pricing: str = Field(description="'on demand' or 'spot'")
    tensor_parallel: int
    gpus_per_instance: int
    usd_per_gpu_hour: float = Field(description="the instance's price over its GPUs, for comparison only")
    instances: int | None = Field(
        default=None, description="whole instances rented: one, or those the request rate's replicas need"
    )
    replicas_per_instance: int | None = Field(default=None, description="replicas one instance holds")
    usd_per_hour: float | None = Field(default=None, description="every instance rented")
    concurrency: int | None = None
    output_tokens_per_s_per_gpu: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    usd_per_million_output_tokens: float | None = Field(
        default=None, description="every replica the instances hold at full load"
    )
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
    """(speed, prefill seconds, why it is left out). A speed that misses the latency targets is kept with
    the reason, so its cost is still shown: the best reachable where no concurrency meets them."""
    try:
        speeds = serving_speeds(spec, settings, gpu, request)
    except ValueError as error:
        return None, 0.0, str(error)
    prefill_s = prefill(spec, settings, gpu, request.input_len).flops_s
    if request.concurrency:  # the concurrency the user fixed
        speed = speeds[0]
        if limits is not None and not limits.met_by(speed):
            return speed, prefill_s, (
                f"at concurrency {speed.concurrency} TTFT is {speed.ttft_s * 1e3:,.0f} ms and TPOT "
                f"{speed.tpot_s * 1e3:,.1f} ms, beyond the targets"
            )  # fmt: skip
        return speed, prefill_s, None
    speed = best_speed(speeds, limits)
    if speed is None:  # no concurrency meets the targets: the fastest one's figures
        return min(speeds, key=lambda one: one.concurrency), prefill_s, latency_miss(speeds, limits)
    return speed, prefill_s, None


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
    output tokens first; then those that miss the latency limits, with their figures and the reason; those
    that cannot serve last, with the reason."""
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
            whole = instance_usd_per_hour(price, spot)
            if whole is not None:
                options.append(_option(price, pricing, whole, settings, speed, prefill_s, reason, requests_per_s))
    unpriced = math.inf
    return sorted(
        options,
        key=lambda o: (
            o.excluded_reason is not None,
            o.usd_per_million_output_tokens is None,
            o.usd_per_million_output_tokens or unpriced,
        ),
    )


def _option(
    price: CloudPrice, pricing: str, usd_per_instance_hour: float, settings: ServingSettings,
    speed: ServingSpeed | None, prefill_s: float, reason: str | None, requests_per_s: float | None,
) -> ServingCostOption:  # fmt: skip
    tp = settings.tensor_parallel
    option = ServingCostOption(
        gpu=price.gpu,
        provider=price.provider,
        instance_type=price.instance_type,
        region=price.region,
        pricing=pricing,
        tensor_parallel=tp,
        gpus_per_instance=price.gpu_count,
        usd_per_gpu_hour=usd_per_instance_hour / price.gpu_count,
        excluded_reason=reason,
    )
    if tp > price.gpu_count:
        return option.model_copy(update={"excluded_reason": group_too_large(price, tp)})
    if speed is None:
        return option
    replicas = replicas_for(requests_per_s, speed) if requests_per_s else 1
    rented = rent_instances(usd_per_instance_hour, price.gpu_count, tp, replicas)
    update = {
        "instances": rented.instances,
        "replicas_per_instance": rented.replicas_per_instance,
        "usd_per_hour": rented.usd_per_hour,
        "concurrency": speed.concurrency,
        "output_tokens_per_s_per_gpu": speed.output_tokens_per_s_per_gpu,
        "ttft_s": speed.ttft_s,
        "tpot_s": speed.tpot_s,
    } | token_prices(speed, prefill_s, rented.usd_per_replica_hour).model_dump()
    if requests_per_s:
        update |= {"replicas": replicas, "usd_per_month": rented.usd_per_hour * HOURS_PER_MONTH}
    return option.model_copy(update=update)
