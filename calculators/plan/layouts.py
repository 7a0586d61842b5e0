"""The fastest layout of N GPUs of one type that fits: the planner's layout search.

A layout is the ZeRO stage, tensor and pipeline parallel degrees, checkpointing, micro-batch and
gradient accumulation giving the global batch, and offload when nothing else fits and the accelerator's
stack can offload (calculators.workload.compatibility.cpu_offload_problem: not on TPUs or Trainium); an
offloaded layout's time includes its host link (calculators.timing.host_link). Only layouts whose
peak fits the GPU by the memory engine (calculators.memory.engine.estimate_memory) and whose host RAM
per GPU fits the limit are kept; the fastest by calculators.timing.estimate.estimate_time wins.
calculators.plan.search prices it on every row; the pruning is described there.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.engine import estimate_memory
from calculators.memory.fit import largest_passing
from calculators.memory.fit_matrix import gpu_memory_gib
from calculators.models.spec import ModelSpec
from calculators.timing.estimate import TimeEstimate, estimate_time
from calculators.timing.host_link import host_link, parameter_stream_bytes_per_micro
from calculators.timing.settings import TimeSettings
from calculators.workload.compatibility import cpu_offload_problem
from calculators.workload.support import check_supported
from calculators.workload.training import TrainingSettings

CHECKPOINTING_ORDER: tuple[str, ...] = ("none", "selective", "full")  # least recomputation first
MODEL_PARALLEL_DEGREES: tuple[int, ...] = (2, 4, 8)
# Host RAM per GPU for offload where the price row gives no host_ram_gib (and for owned servers):
# an 8-GPU p5.48xlarge has 2 TiB (https://aws.amazon.com/ec2/instance-types/p5/), 256 GiB per GPU.
# Only a fallback: rows with host_ram_gib are checked against their own instance's RAM.
DEFAULT_HOST_MEMORY_GIB_PER_GPU = 256.0


class Layout(BaseModel):
    """A layout the search kept for one GPU type and count, with its memory and time."""

    model_config = ConfigDict(frozen=True)

    settings: TrainingSettings
    peak_gib: float
    estimate: TimeEstimate
    note: str
    host_gib: float = 0.0  # host RAM per GPU (offloaded states and activations)


# (GPUs, GPUs per node, host RAM limit per GPU) -> (best layout or None, most host RAM per GPU looked at)
LayoutCache = dict[tuple[int, int, float], tuple[Layout | None, float]]


def micro_batch_choices(sequences_per_replica: int) -> list[int]:
    """Powers of two dividing each replica's sequences per step (the global batch stays exact)."""
    choices = []
    micro_batch = 1
    while micro_batch <= sequences_per_replica and sequences_per_replica % micro_batch == 0:
        choices.append(micro_batch)
        micro_batch *= 2
    return choices


class LayoutSearch:
    """One search: memory shared by every GPU, times per GPU, counted."""

    def __init__(
        self,
        spec: ModelSpec,
        base: TrainingSettings,
        time_settings: TimeSettings,
        sequences: int,
        measured_matmul_fraction: dict[str, float] | None = None,
    ):
        self.spec, self.base, self.time_settings, self.sequences = spec, base, time_settings, sequences
        self.measured_matmul_fraction = dict(measured_matmul_fraction or {})
        self._memory: dict[tuple, tuple[float, float] | None] = {}
        self.host_seen_gib = 0.0  # the most host RAM per GPU of the layouts looked at (reset by callers)
        self._times: dict[tuple, TimeEstimate | None] = {}
        self.searched = 0

    def settings(self, **update) -> TrainingSettings | None:
        """The base settings with a layout, or None when the model cannot take it."""
        try:
            settings = TrainingSettings(**(self.base.model_dump() | update))
            check_supported(self.spec, settings)
        except ValueError:
            return None
        return settings

    def memory(self, **layout) -> tuple[float, float] | None:
        """(peak GiB, host RAM GiB) per GPU of a layout by the engine (GPU-independent, cached);
        None when the model cannot take it."""
        key = tuple(sorted(layout.items()))
        if key not in self._memory:
            settings = self.settings(**layout)
            self.searched += 1
            self._memory[key] = None
            if settings is not None:
                estimate = estimate_memory(self.spec, settings)
                self._memory[key] = (estimate.peak_gib, estimate.host_memory_gib)
        memory = self._memory[key]
        if memory is not None:
            self.host_seen_gib = max(self.host_seen_gib, memory[1])
        return memory

    def peak_gib(self, host_limit_gib: float = math.inf, **layout) -> float | None:
        """Peak per GPU of a layout; None when the model cannot take it or it needs more host RAM
        per GPU than `host_limit_gib`."""
        memory = self.memory(**layout)
        if memory is None or memory[1] > host_limit_gib:
            return None
        return memory[0]

    def largest_micro_batch(
        self, capacity_gib: float, replicas: int, host_limit_gib: float = math.inf, **layout
    ) -> int | None:
        """Largest power-of-two micro-batch dividing the replica's share that fits the GPU and the
        host RAM per GPU (bisection: both grow with the micro-batch); None when even 1 does not fit."""
        share = self.sequences // replicas
        choices = micro_batch_choices(share)

        def fits(index: int) -> bool:
            micro = choices[index]
            peak = self.peak_gib(host_limit_gib, gpus=replicas, micro_batch=micro, grad_accum=share // micro, **layout)
            return peak is not None and peak <= capacity_gib

        if not choices:
            return None
        largest = largest_passing(0, len(choices) - 1, fits)
        return None if largest is None else choices[largest]

    def estimate(self, gpu: GpuSpec, node_gpus: int, settings: TrainingSettings) -> TimeEstimate | None:
        """The time model's estimate (cached); None when the GPU lacks the precision's rate."""
        total = settings.total_gpus
        node_key = node_gpus if total > node_gpus else 0  # inside one node the node size does not matter
        key = (gpu.name, node_key, settings.model_dump_json())
        if key not in self._times:
            self.searched += 1
            node_time = self.time_settings.model_copy(update={"gpus_per_node": node_gpus})
            node_time = node_time.with_measured_matmul_fraction(gpu.name, self.measured_matmul_fraction)
            try:
                self._times[key] = estimate_time(self.spec, settings, gpu, node_time)
            except ValueError:
                self._times[key] = None
        return self._times[key]


def _layout_candidates(
    search: LayoutSearch,
    capacity_gib: float,
    total: int,
    node_gpus: int,
    precision: str,
    host_limit_gib: float,
    can_offload: bool = True,
):
    """(layout fields, data-parallel GPUs, micro-batch, note) that fit `capacity_gib` on `total`
    GPUs and `host_limit_gib` of host RAM per GPU: plain data parallel first; tensor, pipeline
    parallel and offload (where `can_offload`) only when that fits nowhere."""
    plain_dp_splits = search.sequences % total == 0
    for stage in _stages(total, node_gpus, can_offload):
        found = []
        for tp, pp, offload in stage:
            dp = total // (tp * pp)
            share = search.sequences // dp
            if search.sequences % dp:
                continue
            unbound = None  # the (layout, micro-batch) at which memory stopped binding
            for zero in _zero_stages(dp, pp, offload):
                chosen = _same_without_search(search, capacity_gib, dp, zero, unbound, host_limit_gib) or (
                    _least_recomputation(search, capacity_gib, dp, zero, tp, pp, offload, precision, host_limit_gib)
                )
                if chosen is None:
                    continue
                layout, micro = chosen
                note = _layout_note(zero, layout["checkpointing"], tp, pp, offload, micro, share, plain_dp_splits)
                found.append((layout, dp, micro, note))
                if micro > 1:
                    found.append((layout, dp, micro // 2, note))
                if zero >= 1 and layout["checkpointing"] == "none" and micro == share:
                    # memory does not bind; the higher stages are still timed (one fit check each):
                    # they send more but can hide more of it (FSDP's per-unit gathers against one
                    # bucket after backward)
                    unbound = (layout, micro)
        if found:
            return found
    return []


def _same_without_search(
    search: LayoutSearch,
    capacity_gib: float,
    dp: int,
    zero: int,
    unbound: tuple[dict, int] | None,
    host_limit_gib: float,
) -> tuple[dict, int] | None:
    """The layout memory stopped binding at, at ZeRO stage `zero`, when it fits with the same
    micro-batch and no recomputation (checked once, no search); None otherwise."""
    if unbound is None:
        return None
    layout, micro = unbound
    layout = layout | {"zero": zero}
    share = search.sequences // dp
    peak = search.peak_gib(host_limit_gib, gpus=dp, micro_batch=micro, grad_accum=share // micro, **layout)
    return (layout, micro) if peak is not None and peak <= capacity_gib else None


def _least_recomputation(
    search: LayoutSearch,
    capacity_gib: float,
    dp: int,
    zero: int,
    tp: int,
    pp: int,
    offload: str,
    precision: str,
    host_limit_gib: float = math.inf,
) -> tuple[dict, int] | None:
    """(layout, largest micro-batch) of the first checkpointing policy that fits, least
    recomputation first (more recomputation only adds work), or None."""
    for checkpointing in CHECKPOINTING_ORDER:
        layout = {
            "zero": zero,
            "tensor_parallel": tp,
            "pipeline_parallel": pp,
            "checkpointing": checkpointing,
            "offload_optimizer": offload != "none",
            "offload_parameters": offload == "parameters",
            "precision": precision,
        }
        micro = search.largest_micro_batch(capacity_gib, dp, host_limit_gib, **layout)
        if micro is not None:
            return layout, micro
    return None


def _stages(total: int, node_gpus: int, can_offload: bool = True) -> list[list[tuple[int, int, str]]]:
    """Escalating layout families: data parallel; + tensor parallel inside a node; + pipeline; + offload
    (where the stack can offload)."""
    tps = [tp for tp in MODEL_PARALLEL_DEGREES if tp <= min(total, node_gpus) and total % tp == 0]
    widest_tp = max(tps, default=1)
    pps = [pp for pp in (2, 4, 8, 16) if total % (widest_tp * pp) == 0]
    stages = [
        [(1, 1, "none")],
        [(tp, 1, "none") for tp in tps],
        [(widest_tp, pp, "none") for pp in pps],
    ]
    return stages + [[(1, 1, "optimizer"), (1, 1, "parameters")]] if can_offload else stages


def _zero_stages(dp: int, pp: int, offload: str) -> tuple[int, ...]:
    """ZeRO stages worth trying: none with one replica; at most 1 with a pipeline (DeepSpeed
    runs ZeRO-2/3 only without pipeline parallelism); 1-3 to offload the optimizer, 3 for parameters."""
    if offload == "parameters":
        return (3,)
    if offload == "optimizer":
        return (1, 2, 3) if dp > 1 else (0,)
    if dp == 1:
        return (0,)
    return (0, 1) if pp > 1 else (0, 1, 2, 3)


def _layout_note(
    zero: int, checkpointing: str, tp: int, pp: int, offload: str, micro: int, share: int, plain_dp_splits: bool
) -> str:
    """Why this layout, in words."""
    parts = [f"ZeRO-{zero}", f"checkpointing {checkpointing} (the least recomputation that fits at ZeRO-{zero})"]
    if tp > 1 or pp > 1:
        why = "data parallelism alone does not fit" if plain_dp_splits else "the global batch has too few sequences"
        parts.append(f"tensor x pipeline parallel {tp} x {pp}: {why}")
    if offload != "none":
        parts.append(f"{offload} offloaded to the CPU: nothing else fits")
    # the batch in the pages' one wording: micro-batch x accumulation = the sequences of one data-parallel replica
    accumulation = f" x {share // micro} accumulation" if share % micro == 0 else ""
    parts.append(f"micro-batch {micro}{accumulation} = {share} sequences per data-parallel replica")
    return "; ".join(parts)


def best_layout(
    search: LayoutSearch,
    gpu: GpuSpec,
    total: int,
    node_gpus: int,
    precision: str,
    host_limit_gib: float = DEFAULT_HOST_MEMORY_GIB_PER_GPU,
) -> Layout | None:
    """The fastest layout of `total` GPUs of `gpu` that fits the GPU and `host_limit_gib` of host RAM
    per GPU (and so the cheapest for any price row with that much host RAM per GPU)."""
    capacity = gpu_memory_gib(gpu)
    best: Layout | None = None
    can_offload = cpu_offload_problem(gpu) is None
    candidates = _layout_candidates(search, capacity, total, node_gpus, precision, host_limit_gib, can_offload)
    for layout, dp, micro, note in candidates:
        settings = search.settings(**layout, gpus=dp, micro_batch=micro, grad_accum=search.sequences // (dp * micro))
        if settings is None:
            continue
        memory = search.memory(gpus=dp, micro_batch=micro, grad_accum=settings.grad_accum, **layout)
        if memory is None or memory[0] > capacity or memory[1] > host_limit_gib:
            continue
        estimate = search.estimate(gpu, node_gpus, settings)
        if estimate is None:
            continue
        if best is None or estimate.step_s < best.estimate.step_s:
            note += host_link_note(search, gpu, settings, estimate)
            best = Layout(settings=settings, peak_gib=memory[0], estimate=estimate, note=note, host_gib=memory[1])
    return best


def host_link_note(search: LayoutSearch, gpu: GpuSpec, settings: TrainingSettings, estimate: TimeEstimate) -> str:
    """What an offloaded layout's host link costs, in words ('' without offload): the bytes each
    micro-batch streams in and the time, the CPU step, and what the step waits for
    (calculators.timing.host_link)."""
    if not (settings.offload_optimizer or settings.offload_parameters or settings.activation_offload):
        return ""
    link = host_link(gpu, search.time_settings.host_link_gbytes_per_s)
    if link is None:
        return f"; {gpu.name} has no host link figure: offload traffic not timed"
    words = []
    m = settings.grad_accum
    if settings.offload_parameters:
        streamed_gb = parameter_stream_bytes_per_micro(search.spec, settings) / 1e9
        words.append(
            f"the weights stream in, 2 x {streamed_gb / 2:,.1f} GB over {link.name} "
            f"(~{link.h2d_gbytes_per_s:.0f} GB/s) per micro-batch, {streamed_gb / link.h2d_gbytes_per_s:.2f} s"
        )
    if settings.offload_optimizer:
        words.append(f"the CPU steps the optimizer, {estimate.cpu_optimizer_s:.2f} s of CPU Adam per step")
    exposed_micro = estimate.host_exposed_s / m
    words.append(
        f"the host link and CPU add {estimate.host_exposed_s:.2f} s per step ({exposed_micro:.3f} s per "
        f"micro-batch over {m}) not hidden under compute"
    )
    return "; " + "; ".join(words)


def cached_best_layout(
    cache: LayoutCache,
    search: LayoutSearch,
    gpu: GpuSpec,
    total: int,
    node_gpus: int,
    precision: str,
    host_limit_gib: float,
) -> Layout | None:
    """best_layout of one GPU type at a host RAM limit per GPU, searched once per (count, node size):
    the search without a limit is also the answer for every limit at or above the most host RAM
    of the layouts it looked at (each look-up passes the limit, so the search takes the same path);
    only a smaller limit is searched again (once per limit)."""
    unlimited = (total, node_gpus, math.inf)
    if unlimited not in cache:
        search.host_seen_gib = 0.0
        layout = best_layout(search, gpu, total, node_gpus, precision, math.inf)
        cache[unlimited] = (layout, search.host_seen_gib)
    layout, host_seen = cache[unlimited]
    if host_limit_gib >= host_seen:
        return layout
    key = (total, node_gpus, host_limit_gib)
    if key not in cache:
        cache[key] = (best_layout(search, gpu, total, node_gpus, precision, host_limit_gib), 0.0)
    return cache[key][0]
