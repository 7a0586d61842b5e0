"""Training time: a step built from its operations and every parallel dimension's traffic.

The estimate for one optimizer step on one GPU of the busiest pipeline stage is

    step_s = compute (GEMMs, attention, bandwidth-bound ops, recomputation, optimizer)
             + exposed tensor-parallel, pipeline point-to-point and data-parallel traffic
             + the pipeline bubble

computed in calculators.timing.operations (per-operation roofline) and calculators.timing.communication
(bytes per dimension, placement). With a given `utilisation` the compute is instead the
FLOPs at that flat fraction of dense peak (a measured MFU, e.g. from calibration).

One FLOP convention everywhere: model FLOPs per token = 6N (Kaplan et al. 2020, arXiv
2001.08361, Sec. 2.1; 4N with a frozen base) + PaLM's attention term 12*L*s*(heads*head_dim)
(Chowdhery et al. 2022, arXiv 2204.02311, Appendix B); recomputation is counted apart
(Korthikanti et al. 2022, arXiv 2205.05198). MFU divides the model FLOPs by the dense peak of
the matmuls' format, HFU adds the recomputed ones.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.mllama import layers_skipped_without_images
from calculators.models.geometry import active_matmul_parameters, layer_matmul_elements, vocab_matrix_elements
from calculators.models.spec import ModelSpec, extension
from calculators.timing import communication
from calculators.timing.communication import NVLINK_EFFICIENCY, allreduce_bytes, bubble_fraction, ring_factor  # noqa: F401
from calculators.timing.operations import (
    ATTENTION_KERNEL_NAMES,
    DEFAULT_MATMUL_FRACTION,
    LOSS_KERNEL_NAMES,
    SUSTAINED_CLOCK_FACTOR,
    AttentionKernel,
    Kernels,
    LossKernel,
    curve_family,
    expert_parallel_of,
    flash_attention_fraction,
    kernels_fused,
    loss_kernel_in_use,
    matmul_fraction,
    measured_part,
    op_selective_recomputed_linears,
    step_compute,
    step_kernels,
)
from calculators.workload.training import TrainingSettings, decoder_settings, language_model_settings
from calculators.workload.vision import tower_forward_flops_per_image, tower_trains, vision_tower

# --- FLOPs per token -------------------------------------------------------------


def attention_flops_per_token(spec: ModelSpec, seq_len: int) -> float:
    """Forward + backward FLOPs of the attention scores and their weighted sum, per token:
    12 * n_layers * seq_len * (heads * head_dim) (PaLM, Chowdhery et al. 2022, Appendix B).

    Forward: Q@K^T and P@V, each 2 * seq_len * (heads*head_dim) FLOPs per token and layer;
    backward is twice the forward. PaLM's figure is kept for causal attention too: fused kernels
    that skip the masked half would halve it, which we do not assume.
    """
    return 12.0 * spec.n_layers * seq_len * spec.q_dim


def recompute_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Extra forward work of activation recomputation, per token (Korthikanti et al. 2022):
    full checkpointing reruns the whole forward (2N + the attention forward, i.e. 8N instead of 6N);
    selective recomputation reruns the attention core only (its forward: a third of PaLM's term);
    per-op selective reruns every second matmul of each layer (torchtitan's policy)."""
    return rerun_flops_per_token(
        settings.checkpointing,
        active_matmul_parameters(spec),
        attention_flops_per_token(spec, settings.seq_len),
        spec.n_layers * op_selective_recomputed_weights_per_token(spec),
    )


def rerun_flops_per_token(
    checkpointing: str, matmul_weights: float, attention_flops: float, op_selective_weights: float = 0.0
) -> float:
    """FLOPs per token that `checkpointing` reruns of work with `matmul_weights` matmul weights
    per token and `attention_flops` of PaLM's attention term (forward and backward; the forward
    is a third): full, the whole forward (2 x weights + the attention forward); selective, the
    attention forward; per-op selective, 2 x `op_selective_weights` (every second matmul)."""
    if checkpointing == "full":
        return 2.0 * matmul_weights + attention_flops / 3
    if checkpointing == "selective":
        return attention_flops / 3
    if checkpointing == "op-selective":
        return 2.0 * op_selective_weights
    return 0.0


def op_selective_recomputed_weights_per_token(spec: ModelSpec) -> float:
    """Matmul weights per layer that per-op selective checkpointing reruns for each token (the
    recomputed linears of calculators.timing.operations; an expert linear counts for the experts a
    token is routed to, k of E)."""
    weights = 0.0
    for linear in op_selective_recomputed_linears(spec):
        share = 1.0 if linear.copies == 1 else spec.experts_per_token
        weights += share * linear.in_features * linear.out_features
    return weights


def training_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """FLOPs executed per trained token: 6N (Kaplan et al. 2020; PaLM Appendix B) + attention
    12*L*s*(heads*head_dim) (PaLM Appendix B) + recomputation (Korthikanti et al. 2022).

    N counts matmul weights including the LM head (embedding lookups are not matmuls). Norms,
    activations and the optimizer step are left out: they are a few percent of the total.
    """
    matmul = matmul_flops_factor(settings) * active_matmul_parameters(spec)
    return matmul + attention_flops_per_token(spec, settings.seq_len) + recompute_flops_per_token(spec, settings)


def matmul_flops_factor(settings: TrainingSettings) -> float:
    """FLOPs per matmul weight and token: 2 forward + 2 for the input gradient + 2 for the
    weight gradient (Kaplan et al. 2020, Sec. 2.1). A frozen base (LoRA/QLoRA) skips the
    weight gradient: 4 (Hu et al. 2021 report the same saving); the adapters' own work,
    r x (in + out) per linear, is under 1% at the ranks used and is left out."""
    return 4.0 if settings.method in ("lora", "qlora") else 6.0


def vision_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """The image encoder's FLOPs per token of the language model's sequence (text and image
    tokens): images per sample x the encoder's forward FLOPs per image, x 3 when it trains
    (forward + 2x backward, Kaplan et al. 2020) and x 1 when frozen (no backward reaches it), over
    the sequence. `settings` are the workload's, images in."""
    if not settings.images_per_sample or vision_tower(spec) is None:
        return 0.0
    passes = 3.0 if tower_trains(settings) else 1.0
    per_sample = settings.images_per_sample * tower_forward_flops_per_image(spec, settings) * passes
    return per_sample / language_model_settings(spec, settings).seq_len


def skipped_layer_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per token of the layers a step without images skips (Llama
    3.2 Vision's cross-attention layers, calculators.memory.mllama.layers_skipped_without_images): each
    layer's 6N (4N) and attention share over the language model's sequence, and what
    checkpointing would have rerun of it. `settings`: the workload's, images in."""
    skipped = layers_skipped_without_images(spec, settings)
    if not skipped:
        return 0.0, 0.0
    weights = layer_matmul_elements(spec)
    attention = attention_flops_per_token(spec, language_model_settings(spec, settings).seq_len) / spec.n_layers
    recomputed = rerun_flops_per_token(
        settings.checkpointing, weights, attention, op_selective_recomputed_weights_per_token(spec)
    )
    return skipped * (matmul_flops_factor(settings) * weights + attention), skipped * recomputed


def target_length_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per input token that an encoder-decoder's decoder does not
    do because its target is shorter than the input (T5 with target_len t < seq_len s; negative
    when longer). Its layers (their cross-attention blocks included) and the LM head run on t
    tokens per sample, not s: their matmul weights on t / s of the tokens (the cross-attention
    blocks' q and o; k and v read the encoder's s), and its self-attention (PaLM's term, Appendix
    B) over t instead of s."""
    decoder = decoder_settings(spec, settings)
    if decoder is settings:
        return 0.0, 0.0
    source, target = settings.seq_len, decoder.seq_len
    decoder_layers = extension(spec, "cross_attention_layers")
    head = vocab_matrix_elements(spec) if spec.head == "lm" else 0
    # the cross-attention block's q and o read the target; its k and v read the encoder's output
    cross_q_o = 2 * spec.hidden_size * spec.q_dim
    weights = decoder_layers * (layer_matmul_elements(spec) + cross_q_o) + head
    matmul_weights = weights * (1 - target / source)
    attention = 12.0 * decoder_layers * spec.q_dim * (source - target**2 / source)
    recomputed = rerun_flops_per_token(settings.checkpointing, matmul_weights, attention)  # per-op selective: none
    return matmul_flops_factor(settings) * matmul_weights + attention, recomputed


def cross_attention_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per input token of an encoder-decoder's cross-attention
    cores, which PaLM's self-attention term leaves out: each of the t target tokens attends to all
    s input tokens in every decoder layer, Q@K^T and P@V 4 s q_dim forward, backward twice that
    (PaLM Appendix B's accounting), over the s input tokens per sample: 12 x layers x q_dim x t.
    Full or selective checkpointing reruns the forward."""
    decoder_layers = extension(spec, "cross_attention_layers")
    if not decoder_layers:
        return 0.0, 0.0
    target = decoder_settings(spec, settings).seq_len
    flops = 12.0 * decoder_layers * spec.q_dim * target
    return flops, rerun_flops_per_token(settings.checkpointing, 0.0, flops)


def unlike_layers_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(model FLOPs, recomputed FLOPs) per token to add to the count that takes every layer as
    alike (model_flops_per_token, training_flops_per_token): less the layers a step without
    images skips and what a decoder shorter than the input does not run, plus an encoder-decoder's
    cross-attention cores. `settings`: the workload's, images in; the last two count on the
    language model's (language_model_settings)."""
    language = language_model_settings(spec, settings)
    skipped = skipped_layer_flops_per_token(spec, settings)
    shorter = target_length_flops_per_token(spec, language)
    cross = cross_attention_flops_per_token(spec, language)
    return tuple(c - s - t for c, s, t in zip(cross, skipped, shorter, strict=True))


def model_flops_per_token(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Model FLOPs per token, the MFU numerator: 6N (4N with a frozen base) + PaLM's attention
    term; recomputation excluded."""
    return matmul_flops_factor(settings) * active_matmul_parameters(spec) + attention_flops_per_token(
        spec, settings.seq_len
    )


# --- throughput ------------------------------------------------------------------


def compute_format(precision: str, fp32_uses_tf32: bool = False) -> str:
    """Format the matmuls run in: fp8 for fp8, bf16 for amp-bf16 / bf16-mixed / bf16, fp16 for
    amp-fp16 / fp16-mixed, and for fp32 either plain fp32 (PyTorch's default since 1.12:
    torch.backends.cuda.matmul.allow_tf32 = False) or tf32 when allowed."""
    if precision == "fp8":
        return "fp8"
    if "bf16" in precision:
        return "bf16"
    if "fp16" in precision:
        return "fp16"
    return "tf32" if fp32_uses_tf32 else "fp32"


def rate_and_format(gpu: GpuSpec, precision: str, fp32_uses_tf32: bool = False) -> tuple[float, str]:
    """(dense peak TFLOPS, format) that `precision`'s matmuls run at on `gpu`.

    fp32 uses the TF32 rate when `fp32_uses_tf32` and the GPU has one, else the FP32 rate.
    Raises ValueError when the catalogue has no figure for that format on this GPU.
    """
    fmt = compute_format(precision, fp32_uses_tf32)
    rate = gpu.dense_tflops(fmt)
    if rate is None and fmt == "tf32":
        fmt, rate = "fp32", gpu.dense_tflops("fp32")
    if rate is None:
        raise ValueError(f"{gpu.name} has no {fmt} rate in the GPU catalogue; choose another precision for it")
    return rate, fmt


def peak_tflops(gpu: GpuSpec, precision: str, fp32_uses_tf32: bool = False) -> float:
    """Dense peak TFLOPS of `gpu` in the format `precision` computes in (see rate_and_format)."""
    return rate_and_format(gpu, precision, fp32_uses_tf32)[0]


def achieved_tflops(gpu: GpuSpec, precision: str, utilisation: float, fp32_uses_tf32: bool = False) -> float:
    """Sustained TFLOPS per GPU: dense peak for the precision's format x utilisation."""
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return peak_tflops(gpu, precision, fp32_uses_tf32) * utilisation


# --- communication -----------------------------------------------------------------

DEFAULT_INTER_NODE_GBPS = 400.0  # Gb/s network per GPU (one 400G NIC per GPU, as HGX H100 nodes)


def allreduce_bytes_per_gpu(grad_bytes: float, gpus: int) -> float:
    """Bytes each GPU sends (and receives) to all-reduce `grad_bytes` over `gpus` in a ring."""
    return allreduce_bytes(grad_bytes, gpus)


def comm_bytes_per_gpu(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(bytes per micro-batch, bytes once per step) each GPU sends for data parallelism: the
    trainable per-rank parameters' ZeRO traffic (calculators.timing.communication.dp_bytes)."""
    return communication.dp_bytes(spec, settings)


# --- settings and result ---------------------------------------------------------------

# TimeSettings fields that describe the step (placement, overlap, schedule, compiler): every
# command takes them, the rest (dataset, epochs, utilisation) only the commands that time a run.
STEP_SETTING_FIELDS: tuple[str, ...] = (
    "gpus_per_node", "inter_node_gbps", "overlap_fraction", "tp_overlap_fraction", "pp_overlap_fraction",
    "virtual_stages", "compile", "kernels", "loss_kernel", "attention_kernel", "fp32_uses_tf32", "matmul_fraction",
    "expert_parallel",
)  # fmt: skip


class TimeSettings(BaseModel):
    """How long the run is and the throughput assumptions (each default is a stated assumption)."""

    model_config = ConfigDict(extra="forbid")

    utilisation: float | None = Field(
        default=None,
        ge=0.001,  # a tenth of a per cent at least: below it the run time is no useful number
        le=1,
        description="flat fraction of dense peak a step sustains (a measured MFU); None = the step built from "
        "its operations",
    )
    matmul_fraction: float | None = Field(
        default=None,
        ge=0.01,
        le=1,
        description="achievable fraction of dense peak on large matmuls, measured (calibration); None = the "
        "GPU family's mamf-finder figure",
    )
    gpus_per_node: int = Field(default=8, ge=1, le=1024, description="GPUs sharing the fast intra-node link")
    inter_node_gbps: float = Field(
        default=DEFAULT_INTER_NODE_GBPS, ge=0.1, le=100_000, description="network Gb/s per GPU between nodes"
    )
    intra_node_efficiency: float = Field(default=NVLINK_EFFICIENCY, ge=0.01, le=1)
    overlap_fraction: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="share of data-parallel traffic hidden under compute (at most the compute it runs beside): "
        "DDP buckets and FSDP prefetch overlap it",
    )
    tp_overlap_fraction: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="share of tensor-parallel traffic hidden (0: plain TP; async TP hides some)",
    )
    pp_overlap_fraction: float = Field(
        default=0.0, ge=0, le=1, description="share of pipeline point-to-point traffic hidden under compute"
    )
    expert_parallel: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="expert-parallel degree inside data parallel (mixture of experts; ignored for dense models)",
    )
    virtual_stages: int = Field(
        default=1, ge=1, le=128, description="model chunks per pipeline rank (interleaved 1F1B; 1 = plain 1F1B)"
    )
    compile: bool = Field(
        default=False, description="torch.compile the model: its norms, rotary embeddings, activation and loss fused"
    )
    kernels: Kernels = Field(
        default="auto",
        description="norms, rotary embeddings, gated activation and loss: fused kernels or eager PyTorch's op "
        "sequence; auto = fused with torch.compile, Liger or Megatron, eager otherwise",
    )
    loss_kernel: LossKernel = Field(
        default="auto",
        description="cross-entropy kernel: fused (one read of the logits: Megatron with --cross-entropy-loss-fusion, "
        "NeMo and Megatron-Bridge, llm.c, Liger, torch.compile), eager (F.cross_entropy on fp32 logits: HF) or "
        "vocab-parallel (Megatron-LM's default, one pass per step of the softmax); auto = as the kernels setting",
    )
    attention_kernel: AttentionKernel = Field(
        default="flash2",
        description="fused attention kernel: FlashAttention-2 (and PyTorch SDPA's flash backend), "
        "FlashAttention-1 / its Triton port (MPT in llm-foundry), half as fast, or FlashAttention-3, 1.75x on "
        "Hopper (FlashAttention-2 elsewhere)",
    )
    fp32_uses_tf32: bool = Field(
        default=False, description="fp32 matmuls on TF32 tensor cores (PyTorch's default: off since 1.12)"
    )
    dataset_tokens: float | None = Field(default=None, ge=1, le=1e16, description="tokens per epoch (at least one)")
    dataset_samples: int | None = Field(
        default=None, gt=0, le=10**13, description="sequences of the training seq_len (packed or padded)"
    )
    epochs: float = Field(default=1.0, ge=0.001, le=100_000, description="passes over the data (a thousandth at least)")

    def takes_measured_matmul_fraction(self) -> bool:
        """A calibrated matmul fraction applies unless the user gave a flat utilisation or a
        matmul fraction for every GPU."""
        return self.utilisation is None and self.matmul_fraction is None

    def with_measured_matmul_fraction(self, gpu_name: str, measured: dict[str, float] | None) -> TimeSettings:
        """These settings with `gpu_name`'s calibrated matmul fraction (GPU name -> fraction of
        dense peak) in its GEMMs' roofline, where one was measured and the user gave none."""
        if not measured or gpu_name not in measured or not self.takes_measured_matmul_fraction():
            return self
        return self.model_copy(update={"matmul_fraction": measured[gpu_name]})

    @model_validator(mode="after")
    def _one_dataset_size(self) -> TimeSettings:
        if (self.dataset_tokens is None) == (self.dataset_samples is None):
            raise ValueError("give exactly one of dataset_tokens or dataset_samples")
        return self

    def tokens_per_epoch(self, seq_len: int) -> float:
        """Tokens in one pass over the data; a sample counts `seq_len` tokens."""
        if self.dataset_tokens is not None:
            return self.dataset_tokens
        return float(self.dataset_samples) * seq_len


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


# --- the estimate -------------------------------------------------------------------------


def exposed_comm_s(comm_s: float, hideable_under_s: float, overlap_fraction: float) -> float:
    """Communication left on the critical path: overlap_fraction of it hides under compute,
    but never more than the compute it can overlap with."""
    hidden = min(overlap_fraction * comm_s, hideable_under_s)
    return comm_s - hidden


def dimension_links(gpu: GpuSpec, settings: TrainingSettings, time_settings: TimeSettings) -> dict[str, float]:
    """GB/s per GPU per direction each dimension's traffic runs at (placement in
    calculators.timing.communication.dimension_crossings)."""
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


def comm_seconds(
    spec: ModelSpec, settings: TrainingSettings, time_settings: TimeSettings, dp_gbytes_per_s: float, compute_s: float
) -> tuple[float, float, float]:
    """(total, exposed) data-parallel seconds of one step over a `dp_gbytes_per_s` link
    (dimension_links) and the bytes sent per GPU.

    Traffic every micro-batch (ZeRO 2/3) overlaps with that micro-batch's compute; traffic
    once per step (the ZeRO 0/1 all-reduce, ZeRO 2's weight all-gather) only with the last
    micro-batch's backward, so gradient accumulation does not hide it further. The last
    micro-batch's compute is one window: its own traffic and the once-per-step traffic share it.
    """
    per_micro_b, per_step_b = communication.dp_bytes(spec, settings, expert_parallel_of(spec, time_settings))
    micro_compute_s = compute_s / settings.grad_accum
    per_micro_s = per_micro_b / (dp_gbytes_per_s * 1e9)
    per_step_s = per_step_b / (dp_gbytes_per_s * 1e9)
    overlap = time_settings.overlap_fraction
    exposed = (settings.grad_accum - 1) * exposed_comm_s(per_micro_s, micro_compute_s, overlap)
    exposed += exposed_comm_s(per_micro_s + per_step_s, micro_compute_s, overlap)
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
    part = measured_part(gpu)
    basis = f"{part} mamf-finder {matmul_fraction(gpu, fmt):.3f}" if part else f"assumed {DEFAULT_MATMUL_FRACTION}"
    if time_settings.matmul_fraction is not None:
        basis = f"measured {time_settings.matmul_fraction:.3f}"
    compute = (
        f"utilisation {time_settings.utilisation:.3f} (given) of dense peak for all executed FLOPs"
        if time_settings.utilisation is not None
        else f"each GEMM at dense peak x achievable fraction ({basis}) x the measured {curve_family(gpu)} shape "
        "curve x "
        f"{SUSTAINED_CLOCK_FACTOR:g} sustained clocks (assumed), "
        "or memory-bound; "
        + ATTENTION_KERNEL_NAMES[time_settings.attention_kernel]
        + f" at {flash_attention_fraction(gpu, time_settings.attention_kernel):.3f} of peak; norms, activations, "
        "loss and optimizer "
        "bandwidth-bound"
    )
    crossings = communication.dimension_crossings(settings, time_settings.gpus_per_node)
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
        f"{settings.pipeline_parallel} x {time_settings.virtual_stages} virtual stage(s); ring collectives "
        f"2(n-1)/n, across nodes on every NIC of the group in a node; {time_settings.gpus_per_node} GPUs per "
        f"node: {placement}",
        f"overlap: data parallel {time_settings.overlap_fraction:.0%}, tensor parallel "
        f"{time_settings.tp_overlap_fraction:.0%}, pipeline p2p {time_settings.pp_overlap_fraction:.0%}",
        "norms, rotary embeddings and activation as "
        + ("fused kernels" if fused else "eager PyTorch ops")
        + (" (torch.compile)" if time_settings.compile else "")
        + "; the loss as "
        + LOSS_KERNEL_NAMES[loss_kernel_in_use(settings, fused, time_settings.loss_kernel)],
        "no data loading or evaluation time; checkpoint writes not included",
    ]


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
    not the input's; their and the pipeline's traffic hides by its overlap fraction, the expert
    all-to-all not at all (the MoE layer waits for its tokens), data parallel's as comm_seconds."""
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
        "tp": tp_s * (1 - time_settings.tp_overlap_fraction),
        "pp": pp_s * (1 - time_settings.pp_overlap_fraction),
        "ep": ep_s,
    }
    return seconds, exposed, dp_bytes


def estimate_time(
    spec: ModelSpec, settings: TrainingSettings, gpu: GpuSpec, time_settings: TimeSettings
) -> TimeEstimate:
    """Step time, throughput and hours for `settings` on `settings.total_gpus` GPUs of type `gpu`.

    Raises ValueError when the GPU has no rate for the precision's compute format. Images of a
    vision-language workload count as sequence tokens (language_model_settings); the image
    encoder's own work is its own op class, "vision" (calculators.timing.operations.vision_seconds).
    """
    language = language_model_settings(spec, settings)
    peak, fmt = rate_and_format(gpu, language.precision, time_settings.fp32_uses_tf32)
    model_flops, executed_flops = step_flops_per_token(spec, settings)
    if time_settings.utilisation is not None:
        compute_s = _flat_compute_s(language, executed_flops, peak, time_settings.utilisation)
        by_class = {"flat utilisation": compute_s}
    else:
        parts = step_compute(spec, settings, step_kernels(spec, language, gpu, time_settings, peak, fmt))
        compute_s, by_class = parts.total_s, parts.by_class_s
    links = dimension_links(gpu, language, time_settings)
    comm_s, exposed_s, dp_bytes = comm_by_dimension(spec, settings, time_settings, links, compute_s)
    m = language.grad_accum
    busy_s = compute_s + exposed_s["tp"] + exposed_s["pp"] + exposed_s["ep"]
    bubble_s = bubble_fraction(language.pipeline_parallel, m, time_settings.virtual_stages) * busy_s
    step_s = busy_s + bubble_s + exposed_s["dp"]

    tokens_per_step = language.micro_batch * language.seq_len * m * language.gpus
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
        assumptions=_assumptions(gpu, language, time_settings, fmt, links),
    )


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
