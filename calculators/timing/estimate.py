"""Training time: a step built from its operations and every parallel dimension's traffic.

The estimate for one optimizer step on one GPU of the busiest pipeline stage is

    step_s = compute (GEMMs, attention, bandwidth-bound ops, recomputation, optimizer)
             + exposed tensor-parallel, pipeline point-to-point and data-parallel traffic
             + the pipeline bubble
             + host traffic and the CPU optimizer step of CPU offload not hidden under compute

computed in calculators.timing.operations (per-operation roofline), calculators.timing.communication
(bytes per dimension, placement) and calculators.timing.host_link (the host link and the CPU step).
With a given `utilisation` the compute is instead the FLOPs at that flat fraction of dense peak (a
measured MFU, e.g. from calibration).

One FLOP convention everywhere: model FLOPs per token = 6N (Kaplan et al. 2020, arXiv
2001.08361, Sec. 2.1; 4N with a frozen base) + PaLM's attention term 12*L*s*(heads*head_dim)
(Chowdhery et al. 2022, arXiv 2204.02311, Appendix B); recomputation is counted apart
(Korthikanti et al. 2022, arXiv 2205.05198). MFU divides the model FLOPs by the dense peak of
the matmuls' format, HFU adds the recomputed ones.
"""

from __future__ import annotations

import functools
import math

from pydantic import BaseModel, Field

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.mllama import layers_skipped_without_images
from calculators.models.spec import ModelSpec, extension
from calculators.timing import collectives, communication, context_parallel, host_link
from calculators.timing.communication import bubble_fraction
from calculators.timing.flops import (
    matmul_flops_factor,
    model_flops_per_token,
    training_flops_per_token,
    unlike_layers_flops_per_token,
    vision_flops_per_token,
)
from calculators.timing.memo import Workload, cached_on_key, workload_of
from calculators.timing.operations import (
    DEFAULT_MATMUL_FRACTION,
    LOSS_KERNEL_NAMES,
    StepCompute,
    StepKernels,
    attention_assumption,
    curve_family,
    expert_parallel_of,
    host_issue_seconds,
    host_seconds_per_kernel,
    kernels_fused,
    loss_kernel_in_use,
    matmul_fraction,
    measured_part,
    stage_layers,
    step_compute,
    step_kernels,
)
from calculators.timing.rates import rate_and_format
from calculators.timing.settings import AttentionKernel, TimeSettings
from calculators.workload.compatibility import settings_offload
from calculators.workload.precision import gradient_bytes, weight_bytes
from calculators.workload.training import TrainingSettings, decoder_settings, language_model_settings

# --- the result -----------------------------------------------------------------------------


class TimeEstimate(BaseModel):
    """Step time and run length of one workload on one GPU type."""

    gpu: str
    compute_format: str
    peak_tflops: float = Field(description="dense peak per GPU in compute_format")
    utilisation: float = Field(description="model FLOPs / (step time x dense peak): the MFU")
    achieved_tflops: float = Field(description="model TFLOPS per GPU")
    flops_per_token: float = Field(description="executed FLOPs per token, recomputation included")
    model_flops_per_token: float = Field(description="6N + attention, recomputation excluded")
    mfu: float
    hfu: float
    tokens_per_step: int = Field(description="micro_batch x seq_len x grad_accum x data-parallel GPUs")
    compute_s: float
    compute_by_class_s: dict[str, float]
    comm_bytes_per_gpu: float = Field(description="data-parallel bytes each GPU sends per step")
    comm_gbytes_per_s: float = Field(description="GB/s per GPU per direction of the data-parallel group")
    comm_s: float = Field(description="data-parallel communication time of one step")
    comm_exposed_s: float = Field(description="the data-parallel part not hidden under compute")
    comm_by_dimension_s: dict[str, float]
    comm_exposed_by_dimension_s: dict[str, float]
    link_gbytes_per_s: dict[str, float]
    crosses_nodes: dict[str, bool]
    bubble_s: float
    step_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    dataset_tokens: float
    epochs: float
    steps_per_epoch: int
    hours_per_epoch: float
    hours_total: float
    assumptions: list[str]
    host_link_gbytes_per_s: float | None = Field(
        default=None, description="GB/s host to device of the GPU's host link; None: no host link figure"
    )
    host_transfer_s: float = Field(default=0.0, description="seconds of offload traffic on the host link per step")
    cpu_optimizer_s: float = Field(default=0.0, description="the CPU's optimizer step with optimizer offload")
    host_exposed_s: float = Field(
        default=0.0, description="host traffic and CPU step not hidden under compute, part of step_s"
    )
    overlap_contention_s: float = Field(
        default=0.0,
        description="compute lost to the SMs collectives take while they run hidden under it, part of step_s",
    )


# --- the estimate -------------------------------------------------------------------------


def exposed_comm_s(comm_s: float, hideable_under_s: float, overlap_fraction: float) -> float:
    """Communication left on the critical path: overlap_fraction of it hides under compute,
    but never more than the compute it can overlap with."""
    hidden = min(overlap_fraction * comm_s, hideable_under_s)
    return comm_s - hidden


def dimension_links(
    gpu: GpuSpec,
    settings: TrainingSettings,
    time_settings: TimeSettings,
    groups: dict[str, communication.DimensionCollective] | None = None,
) -> dict[str, float]:
    """GB/s per GPU per direction each dimension's traffic runs at (placement in
    calculators.timing.communication.dimension_crossings). With each dimension's collective at its
    message size (`groups`, communication.dimension_collectives), on the measured curves
    (curve_links); without, the flat link of communication.link_gbytes_per_s."""
    if groups is not None:
        return curve_links(gpu, time_settings, groups)
    crossings = communication.dimension_crossings(settings, time_settings.gpus_per_node, time_settings.expert_parallel)
    nics = communication.ring_nics_in_flight(settings, time_settings.gpus_per_node)
    return {
        dim: communication.link_gbytes_per_s(
            gpu.interconnect_gbps,
            crosses,
            time_settings.inter_node_gbps,
            time_settings.intra_node_efficiency,
            nics[dim],
        )
        for dim, crosses in crossings.items()
    }


def curve_links(
    gpu: GpuSpec, time_settings: TimeSettings, groups: dict[str, communication.DimensionCollective]
) -> dict[str, float]:
    """Effective GB/s of each dimension's traffic: one call of its collective at its message size
    (`groups`) timed on the measured curves (calculators.timing.collectives), latency included, as
    bytes sent / seconds."""
    measured = collectives.measured_intra_curves(time_settings.collective_curves)
    # a dimension of one rank sends nothing: its rate, never used, is the flat link's
    idle = communication.link_gbytes_per_s(
        gpu.interconnect_gbps, False, time_settings.inter_node_gbps, time_settings.intra_node_efficiency
    )
    links = {}
    for dim, group in groups.items():
        if group.ranks <= 1 or group.size_bytes <= 0:
            links[dim] = idle
            continue
        bus = collectives.bus_gbytes_per_s(
            gpu, group.collective, group.size_bytes, group.ranks, group.nodes, time_settings.inter_node_gbps,
            time_settings.intra_node_efficiency, measured,
        )  # fmt: skip
        seconds = collectives.collective_seconds(
            group.collective, group.size_bytes, group.ranks, bus, collectives.curve_ranks(gpu, group.nodes)
        )
        links[dim] = group.size_bytes * collectives.volume_factor(group.collective, group.ranks) / seconds / 1e9
    return links


# The backward's share of a step's compute, the window gradient traffic can hide under: 4 of the 6
# FLOPs per parameter and token (Kaplan et al. 2020, arXiv 2001.08361, Sec. 2.1).
BACKWARD_SHARE = 2 / 3


def unhidden_dp_seconds(
    spec: ModelSpec, settings: TrainingSettings, time_settings: TimeSettings, dp_gbytes_per_s: float
) -> tuple[float, float]:
    """(per micro-batch, once per step) data-parallel seconds no framework can hide, whatever
    the overlap setting:

    - FSDP / ZeRO-3 gathers the first unit's weights before any compute and reduce-scatters the
      last unit's gradients after the last backward: prefetching overlaps every other unit's
      gather with its neighbour's compute (Zhao et al. 2023, PyTorch FSDP, arXiv 2304.11277,
      Sec. 3.3.2, backward and forward prefetch; FSDP2 prefetches one unit ahead);
    - DDP and ZeRO 1/2 launch each gradient bucket as backward fills it, so the last bucket
      (the first layers' gradients) starts after backward ends (Li et al. 2020, PyTorch
      Distributed, arXiv 2006.15704, Sec. 3.2.3)."""
    n = settings.gpus
    if n == 1:
        return 0.0, 0.0
    collective, size = communication.dp_message(spec, settings, expert_parallel_of(spec, time_settings))
    rate = dp_gbytes_per_s * 1e9
    if settings.zero >= 3:
        gathered = size * collectives.volume_factor("all_gather", n)
        reduced = gathered * gradient_bytes(settings.precision) / weight_bytes(settings.precision)
        return (gathered + reduced) / rate, 0.0
    return 0.0, size * collectives.volume_factor(collective, n) / rate


def comm_seconds(
    spec: ModelSpec, settings: TrainingSettings, time_settings: TimeSettings, dp_gbytes_per_s: float, compute_s: float
) -> tuple[float, float, float]:
    """(total, exposed) data-parallel seconds of one step over a `dp_gbytes_per_s` link
    (dimension_links) and the bytes sent per GPU.

    Traffic every micro-batch (ZeRO 2/3) overlaps with that micro-batch's compute; traffic
    once per step (the ZeRO 0/1 all-reduce, ZeRO 2's weight all-gather) only with the last
    micro-batch's backward (BACKWARD_SHARE of its compute), so gradient accumulation does not
    hide it further. The last micro-batch is one window for its own traffic and the once-per-step
    traffic. What no framework hides (unhidden_dp_seconds: FSDP's first gather and last
    reduce-scatter, DDP's last bucket) stays exposed; of the rest `overlap_fraction` hides, never
    more than the window's compute.
    """
    per_micro_b, per_step_b = communication.dp_bytes(spec, settings, expert_parallel_of(spec, time_settings))
    micro_compute_s = compute_s / settings.grad_accum
    per_micro_s = per_micro_b / (dp_gbytes_per_s * 1e9)
    per_step_s = per_step_b / (dp_gbytes_per_s * 1e9)
    unhidden_micro, unhidden_step = unhidden_dp_seconds(spec, settings, time_settings, dp_gbytes_per_s)
    unhidden_micro, unhidden_step = min(unhidden_micro, per_micro_s), min(unhidden_step, per_step_s)
    overlap = time_settings.overlap_fraction
    hideable_micro = per_micro_s - unhidden_micro
    exposed = (settings.grad_accum - 1) * (unhidden_micro + exposed_comm_s(hideable_micro, micro_compute_s, overlap))
    last_window_s = micro_compute_s * BACKWARD_SHARE if per_step_s else micro_compute_s
    hideable_last = hideable_micro + per_step_s - unhidden_step
    exposed += unhidden_micro + unhidden_step + exposed_comm_s(hideable_last, last_window_s, overlap)
    total_bytes = settings.grad_accum * per_micro_b + per_step_b
    return settings.grad_accum * per_micro_s + per_step_s, exposed, total_bytes


def _flat_compute_s(
    settings: TrainingSettings, executed_flops_per_token: float, peak: float, utilisation: float
) -> float:
    """Compute seconds at a flat utilisation of dense peak: executed FLOPs of one replica's
    tokens over its t x p GPUs (a measured utilisation already includes what the stack does)."""
    tokens_per_replica = settings.micro_batch * settings.seq_len * settings.grad_accum
    gpus_per_replica = settings.tensor_parallel * settings.pipeline_parallel
    return executed_flops_per_token * tokens_per_replica / (peak * 1e12 * utilisation * gpus_per_replica)


def _assumptions(
    gpu: GpuSpec, settings: TrainingSettings, time_settings: TimeSettings, fmt: str, links: dict[str, float]
) -> list[str]:
    """Plain-language list of what the estimate assumes."""
    compute = _compute_assumption(
        gpu,
        fmt,
        time_settings.utilisation,
        time_settings.matmul_fraction,
        time_settings.sustained_clock_factor,
        time_settings.attention_kernel,
    )
    crossings = communication.dimension_crossings(settings, time_settings.gpus_per_node)
    issue_us = host_seconds_per_kernel(time_settings.launch, time_settings.compile) * 1e6
    fused = kernels_fused(settings, time_settings.compile, time_settings.kernels)
    placement = ", ".join(
        f"{dim} {'across nodes' if crossings[dim] else 'in a node'} {links[dim]:.0f} GB/s" for dim in ("tp", "dp", "pp")
    )
    return [
        f"model FLOPs/token = {matmul_flops_factor(settings):g}N + 12*L*s*heads*head_dim attention (PaLM App. B); "
        f"recomputation ({settings.checkpointing}) counted apart",
        f"matmuls in {fmt} at the dense peak from the GPU catalogue; {compute}",
        f"data parallel over {settings.gpus} GPU(s), ZeRO-{settings.zero}, trainable parameters per rank only; "
        f"tensor parallel {settings.tensor_parallel} (4 all-reduces per layer), pipeline "
        f"{settings.pipeline_parallel} x {time_settings.virtual_stages} virtual stage(s); each collective at its "
        "message size on measured nccl-tests curves (data/collective_curves.csv"
        + (", this host's calibrated curves inside a node" if time_settings.collective_curves else "")
        + "), across nodes hierarchical on every NIC of the node; "
        f"{time_settings.gpus_per_node} GPUs per node: {placement}",
        f"overlap (each bounded by the compute it runs beside): data parallel {time_settings.overlap_fraction:.0%} "
        + (
            "less FSDP's first gather and last reduce-scatter of each micro-batch"
            if settings.zero >= 3
            else "of the last micro-batch's backward, less the last gradient bucket"
        )
        + f", tensor parallel {time_settings.tp_overlap_fraction:.0%} (plain TP 0%, async TP or Megatron's "
        f"--tp-comm-overlap more), pipeline p2p {time_settings.pp_overlap_fraction:.0%}",
        "norms, rotary embeddings and activation as "
        + ("fused kernels" if fused else "eager PyTorch ops")
        + (" (torch.compile)" if time_settings.compile else "")
        + "; the loss as "
        + LOSS_KERNEL_NAMES[loss_kernel_in_use(settings, fused, time_settings.loss_kernel)]
        + f"; the host issues each kernel in {issue_us:g} us (eager: dispatch 2 + launch 4, compiled: launch 4, "
        "CUDA graphs: 0) and no step runs faster",
        "no data loading or evaluation time; checkpoint writes not included",
    ]


# The same few sentences for every estimate on a GPU: built once per GPU and setting (the
# arguments are all it reads; the GPU is frozen, hashed and compared by every field).
@functools.lru_cache(maxsize=4096)
def _compute_assumption(
    gpu: GpuSpec,
    fmt: str,
    utilisation: float | None,
    matmul_fraction_given: float | None,
    sustained_clock_factor: float,
    attention_kernel: AttentionKernel,
) -> str:
    """How the step's compute is timed on `gpu`, in words."""
    if utilisation is not None:
        return f"utilisation {utilisation:.3f} (given) of dense peak for all executed FLOPs"
    part = measured_part(gpu)
    basis = f"{part} mamf-finder {matmul_fraction(gpu, fmt):.3f}" if part else f"assumed {DEFAULT_MATMUL_FRACTION}"
    if matmul_fraction_given is not None:
        basis = f"measured {matmul_fraction_given:.3f}"
    return (
        f"each GEMM at dense peak x achievable fraction ({basis}) x the measured {curve_family(gpu)} shape "
        "curve x "
        f"{sustained_clock_factor:g} sustained clocks (an assumption, --sustained-clock), "
        "or memory-bound; " + attention_assumption(gpu, attention_kernel) + "; norms, activations, "
        "loss and optimizer "
        "bandwidth-bound"
    )


def step_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, executed FLOPs) per token of the language model's sequence (images as tokens,
    language_model_settings) for the workload `settings`, images in: model_flops_per_token and
    training_flops_per_token, each with the image encoder's FLOPs (vision_flops_per_token) and the
    correction for layers that are not all alike (unlike_layers_flops_per_token)."""
    language = language_model_settings(spec, settings)
    vision_flops = vision_flops_per_token(spec, settings)
    layers_model, layers_recomputed = unlike_layers_flops_per_token(spec, settings)
    model_flops = model_flops_per_token(spec, language) + vision_flops + layers_model
    executed_flops = training_flops_per_token(spec, language) + vision_flops + layers_model + layers_recomputed
    return model_flops, executed_flops


def comm_by_dimension(
    spec: ModelSpec, settings: TrainingSettings, time_settings: TimeSettings, links: dict[str, float], compute_s: float
) -> tuple[dict[str, float], dict[str, float], float]:
    """(seconds, exposed seconds) of one step's traffic per dimension (dp, tp, pp, ep) over
    `links` (dimension_links), and the data-parallel bytes each GPU sends; `settings` are the
    workload's, images in. Tensor-parallel all-reduces run in the layers a step runs (not those a
    step without images skips), an encoder-decoder's decoder layers on the target's activations,
    not the input's; their and the pipeline's traffic hides by its overlap fraction (at most the
    step's compute), the expert all-to-all not at all (the MoE layer waits for its tokens), data
    parallel's as comm_seconds."""
    language = language_model_settings(spec, settings)
    m = language.grad_accum
    running_layers = 1 - layers_skipped_without_images(spec, settings) / spec.n_layers
    target_share = decoder_settings(spec, language).seq_len / language.seq_len
    decoder_layer_share = extension(spec, "cross_attention_layers") / spec.n_layers
    tp_layers = running_layers - decoder_layer_share * (1 - target_share)
    tp_s = m * communication.tp_bytes_per_micro(spec, language) * tp_layers / (links["tp"] * 1e9)
    pp_s = m * communication.pp_bytes_per_micro(spec, language, time_settings.virtual_stages) / (links["pp"] * 1e9)
    ep_bytes = communication.moe_alltoall_bytes_per_micro(spec, language, expert_parallel_of(spec, time_settings))
    ep_s = m * ep_bytes / (links["ep"] * 1e9)
    dp_s, dp_exposed, dp_bytes = comm_seconds(spec, language, time_settings, links["dp"], compute_s)
    seconds = {"dp": dp_s, "tp": tp_s, "pp": pp_s, "ep": ep_s}
    exposed = {
        "dp": dp_exposed,
        "tp": exposed_comm_s(tp_s, compute_s, time_settings.tp_overlap_fraction),
        "pp": exposed_comm_s(pp_s, compute_s, time_settings.pp_overlap_fraction),
        "ep": ep_s,
    }
    return seconds, exposed, dp_bytes


# What an estimate works out from the workload alone (the model and the training settings, by their
# exact key: calculators.timing.memo) and from its kernels, cached: the Time and cost page times one
# workload on ~90 GPU and instance-size pairs a rerun, the planner on many layouts. Each key holds
# every input its function reads: the workload, the context-parallel degree that cuts a rank's
# settings from it, and the time settings or kernels used.
@cached_on_key(maxsize=256)
def _step_flops(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    return step_flops_per_token(spec, settings)


@cached_on_key(maxsize=1024)
def _step_compute(spec: ModelSpec, rank: TrainingSettings, kernels: StepKernels) -> StepCompute:
    return step_compute(spec, rank, kernels)


@cached_on_key(maxsize=256)
def _host_issue_seconds(spec: ModelSpec, rank: TrainingSettings, time_settings: TimeSettings) -> float:
    return host_issue_seconds(spec, rank, time_settings)


@cached_on_key(maxsize=256)
def _dimension_collectives(
    spec: ModelSpec, rank: TrainingSettings, gpus_per_node: int, expert_parallel: int
) -> tuple[tuple[str, communication.DimensionCollective], ...]:
    return tuple(communication.dimension_collectives(spec, rank, gpus_per_node, expert_parallel).items())


def estimate_time(
    spec: ModelSpec, settings: TrainingSettings, gpu: GpuSpec, time_settings: TimeSettings
) -> TimeEstimate:
    """Step time, throughput and hours for `settings` on `settings.total_gpus` GPUs of type `gpu`.

    Raises ValueError when the GPU has no rate for the precision's compute format. Images of a
    vision-language workload count as sequence tokens (language_model_settings); the image
    encoder's own work is its own op class, "vision" (calculators.timing.operations.vision_seconds).
    """
    return estimate_workload_time(workload_of(spec, settings), gpu, time_settings)


def estimate_workload_time(workload: Workload, gpu: GpuSpec, time_settings: TimeSettings) -> TimeEstimate:
    """estimate_time of a workload made once (calculators.timing.memo.workload_of) for the many GPUs
    and layouts that time it, so that its key is not serialised again for each."""
    spec, settings = workload.spec, workload.settings
    language = language_model_settings(spec, settings)
    cp = time_settings.context_parallel
    context_parallel.check_context_parallel(spec, settings, cp)
    # what one rank runs: under context parallel, seq_len / cp tokens of each sequence (text only)
    rank = context_parallel.rank_settings(language, cp)
    peak, fmt = rate_and_format(gpu, language.precision, time_settings.fp32_uses_tf32)
    model_flops, executed_flops = _step_flops(workload.key, spec, settings)
    kernels = step_kernels(spec, rank, gpu, time_settings, peak, fmt)
    if time_settings.utilisation is not None:
        compute_s = _flat_compute_s(rank, executed_flops, peak, time_settings.utilisation)
        by_class = {"flat utilisation": compute_s}
    else:
        parts = _step_compute((workload.key, cp, kernels), spec, context_parallel.rank_settings(settings, cp), kernels)
        compute_s, by_class = parts.total_s, parts.by_class_s
        launch = (time_settings.launch, time_settings.compile, time_settings.kernels)
        issue_s = _host_issue_seconds((workload.key, cp, launch), spec, rank, time_settings)
        if issue_s > compute_s:  # the GPU waits for the host to launch its kernels
            by_class["host launch"] = issue_s - compute_s
            compute_s = issue_s
    node_ep = (time_settings.gpus_per_node, expert_parallel_of(spec, time_settings))
    groups = _dimension_collectives((workload.key, cp, node_ep), spec, rank, *node_ep)
    links = dimension_links(gpu, rank, time_settings, dict(groups))
    comm_s, exposed_s, dp_bytes = comm_by_dimension(
        spec, context_parallel.rank_settings(settings, cp), time_settings, links, compute_s
    )
    ring = ring_seconds(spec, rank, gpu, time_settings, kernels)
    comm_s["cp"], exposed_s["cp"] = ring.total_s, ring.exposed_s
    m = language.grad_accum
    contention_s = overlap_contention_seconds(comm_s, exposed_s, time_settings)
    busy_s = compute_s + contention_s + sum(exposed_s[dim] for dim in ("tp", "pp", "ep", "cp"))
    bubble_s = bubble_fraction(language.pipeline_parallel, m, time_settings.virtual_stages) * busy_s
    link = host_link.host_link(gpu, time_settings.host_link_gbytes_per_s)
    host = offload_seconds(spec, settings, time_settings, link, compute_s)
    step_s = busy_s + bubble_s + exposed_s["dp"] + host.exposed_s

    # cp of the data-parallel ranks share each sequence
    tokens_per_step = language.micro_batch * language.seq_len * m * language.gpus // cp
    tokens_per_s = tokens_per_step / step_s
    per_gpu = tokens_per_s / language.total_gpus
    mfu = per_gpu * model_flops / (peak * 1e12)
    dataset_tokens = time_settings.tokens_per_epoch(language.seq_len)
    steps_per_epoch = math.ceil(dataset_tokens / tokens_per_step)
    hours_per_epoch = steps_per_epoch * step_s / 3600
    return TimeEstimate(
        gpu=gpu.name,
        compute_format=fmt,
        peak_tflops=peak,
        utilisation=mfu,
        achieved_tflops=per_gpu * model_flops / 1e12,
        flops_per_token=executed_flops,
        model_flops_per_token=model_flops,
        mfu=mfu,
        hfu=per_gpu * executed_flops / (peak * 1e12),
        tokens_per_step=tokens_per_step,
        compute_s=compute_s,
        compute_by_class_s=by_class,
        comm_bytes_per_gpu=dp_bytes,
        comm_gbytes_per_s=links["dp"],
        comm_s=comm_s["dp"],
        comm_exposed_s=exposed_s["dp"],
        comm_by_dimension_s=comm_s,
        comm_exposed_by_dimension_s=exposed_s,
        link_gbytes_per_s=links,
        crosses_nodes=communication.dimension_crossings(
            language, time_settings.gpus_per_node, expert_parallel_of(spec, time_settings)
        ),
        bubble_s=bubble_s,
        step_s=step_s,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=per_gpu,
        dataset_tokens=dataset_tokens,
        epochs=time_settings.epochs,
        steps_per_epoch=steps_per_epoch,
        hours_per_epoch=hours_per_epoch,
        hours_total=hours_per_epoch * time_settings.epochs,
        assumptions=_assumptions(gpu, language, time_settings, fmt, links)
        + context_parallel_assumptions(cp)
        + offload_assumptions(gpu, language, link),
        host_link_gbytes_per_s=None if link is None else link.h2d_gbytes_per_s,
        host_transfer_s=host.transfer_s,
        cpu_optimizer_s=host.cpu_optimizer_s,
        host_exposed_s=host.exposed_s,
        overlap_contention_s=contention_s,
    )


def ring_seconds(
    spec: ModelSpec, rank: TrainingSettings, gpu: GpuSpec, time_settings: TimeSettings, kernels: StepKernels
) -> context_parallel.RingSeconds:
    """One step's context-parallel ring traffic on one rank (calculators.timing.context_parallel):
    each micro-batch's K, V sends at their size on the measured send/recv curves, hidden under
    the attention steps they run beside, forward again where checkpointing recomputes attention
    (full and selective: operations.recompute_seconds); none without context parallel. `rank` are the settings
    one rank runs (rank_settings), `kernels` its step_kernels."""
    cp = time_settings.context_parallel
    if cp == 1:
        return context_parallel.RingSeconds(total_s=0.0, exposed_s=0.0)
    send_s = context_parallel.ring_send_seconds(
        gpu,
        context_parallel.kv_chunk_bytes(spec, rank),
        context_parallel.ring_crosses_nodes(rank, cp, time_settings.gpus_per_node),
        time_settings.inter_node_gbps,
        time_settings.intra_node_efficiency,
        collectives.measured_intra_curves(time_settings.collective_curves),
    )
    layers, backward_layers = stage_layers(spec, rank)
    # full and selective checkpointing rerun attention's forward in backward, its ring with it
    recomputed = backward_layers if rank.checkpointing in ("full", "selective") else 0.0
    forward_s, backward_s = kernels.attention_s(spec, rank)
    micro = context_parallel.ring_seconds(send_s, forward_s, cp, layers + recomputed, backward_layers, backward_s)
    m = rank.grad_accum
    return context_parallel.RingSeconds(total_s=m * micro.total_s, exposed_s=m * micro.exposed_s)


def context_parallel_assumptions(cp: int) -> list[str]:
    """What context parallel assumes, in words (nothing without it)."""
    if cp == 1:
        return []
    return [
        f"context parallel {cp}: each sequence split over {cp} of the data-parallel GPUs, 2 chunks each for "
        "causal load balancing; attention as Transformer Engine's ring (K, V sent to the next rank each of "
        f"{cp - 1} steps, K, V and their gradients in backward, again where checkpointing reruns attention), "
        "each send hidden under its attention step"
    ]


def overlap_contention_seconds(
    comm_s: dict[str, float], exposed_s: dict[str, float], time_settings: TimeSettings
) -> float:
    """Compute a step loses while its hidden collectives run beside it: NCCL's kernels hold
    `nccl_sm_share` of the SMs for as long as they run, so the compute they overlap runs that much
    slower (at least: waves that no longer fit add a tail)."""
    hidden_s = sum(comm_s[dim] - exposed_s[dim] for dim in comm_s)
    return hidden_s * time_settings.nccl_sm_share


def offload_seconds(
    spec: ModelSpec,
    settings: TrainingSettings,
    time_settings: TimeSettings,
    link: host_link.HostLink | None,
    compute_s: float,
) -> host_link.HostTime:
    """The step's host traffic and CPU optimizer step (calculators.timing.host_link.host_seconds)
    for the workload `settings`; none without offload or without a host link figure."""
    language = language_model_settings(spec, settings)
    if link is None or not settings_offload(language):
        return host_link.HostTime(0.0, 0.0, 0.0)
    ep = expert_parallel_of(spec, time_settings)
    activations = host_link.activation_offload_bytes_per_micro(spec, settings)
    per_micro = (host_link.parameter_stream_bytes_per_micro(spec, language, ep) + activations, activations)
    per_step = host_link.optimizer_offload_bytes(spec, language, ep)
    cpu_s = host_link.cpu_optimizer_seconds(spec, language, time_settings.host_cores_per_gpu, ep)
    return host_link.host_seconds(link, per_micro, per_step, language.grad_accum, compute_s, cpu_s)


def offload_assumptions(gpu: GpuSpec, settings: TrainingSettings, link: host_link.HostLink | None) -> list[str]:
    """What the host traffic and the CPU step assume, in words (nothing without offload)."""
    if not settings_offload(settings):
        return []
    if link is None:
        return [f"{gpu.name} has no host link figure in the catalogue: CPU offload traffic is not timed"]
    return [
        f"host link {link.name}: {link.h2d_gbytes_per_s:.0f} GB/s host to device, {link.d2h_gbytes_per_s:.0f} GB/s "
        "back (pinned copies: PCIe at 88% of the payload rate measured on an H200, NVLink-C2C as measured on "
        "GH200 by Schieffer et al. 2024); offloaded parameters stream in for forward and again for backward every "
        "micro-batch, hidden under its compute at best (ZeRO-Infinity, arXiv 2104.07857); gradients out once per "
        "step under the last backward, a CPU Adam at 257M parameters/s per core (torch's fused AdamW measured on "
        "an H200 host; DeepSpeed's CPU Adam is of the same order) on the host cores, "
        "updated parameters back, both waited for (ZeRO-Offload, arXiv 2101.06840; delayed parameter update off)"
    ]


class ScalingPoint(BaseModel):
    """The run at one data-parallel degree."""

    gpus: int = Field(description="all GPUs: data x tensor x pipeline parallel")
    step_s: float
    tokens_per_s_per_gpu: float
    hours_total: float


def scaling_points(
    spec: ModelSpec,
    settings: TrainingSettings,
    gpu: GpuSpec,
    time_settings: TimeSettings,
    data_parallel: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
) -> list[ScalingPoint]:
    """The estimate at each data-parallel degree (the tensor x pipeline replica kept as given)."""
    points = []
    for degree in data_parallel:
        estimate = estimate_time(spec, settings.model_copy(update={"gpus": degree}), gpu, time_settings)
        points.append(
            ScalingPoint(
                gpus=degree * settings.tensor_parallel * settings.pipeline_parallel,
                step_s=estimate.step_s,
                tokens_per_s_per_gpu=estimate.tokens_per_s_per_gpu,
                hours_total=estimate.hours_total,
            )
        )
    return points
