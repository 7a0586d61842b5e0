"""Training time: FLOPs per token, achieved throughput, data-parallel communication, hours.

The estimate for one optimizer step on `gpus` data-parallel GPUs is

    compute_s = flops_per_token * tokens_per_gpu_per_step / achieved_flops_per_gpu
    step_s    = compute_s + exposed communication

Sources, cited in each function's docstring:

- FLOPs per token: 6N (Kaplan et al. 2020, arXiv 2001.08361, Sec. 2.1) plus PaLM's attention
  term 12*L*s*(heads*head_dim) (Chowdhery et al. 2022, arXiv 2204.02311, Appendix B);
  recomputation as in Korthikanti et al. 2022 (arXiv 2205.05198).
- Achievable matmul fraction per GPU family: shared/reference README (mamf-finder).
- Ring all-reduce volume 2(n-1)/n (nccl-tests doc/PERFORMANCE.md, "bus bandwidth");
  ZeRO-3's 1.5x volume (Rajbhandari et al. 2020, arXiv 1910.02054, Sec. 7).
- NVLink reaches about 88% of its spec (shared/reference README).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calculators.geometry import active_matmul_parameters, parameter_count
from calculators.gpu_catalogue import GpuSpec
from calculators.model_spec import ModelSpec
from calculators.training import TrainingSettings, gradient_bytes, weight_bytes

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
    selective recomputation reruns the attention core only (its forward: a third of PaLM's term)."""
    attention_forward = attention_flops_per_token(spec, settings.seq_len) / 3
    if settings.checkpointing == "full":
        return 2.0 * active_matmul_parameters(spec) + attention_forward
    if settings.checkpointing == "selective":
        return attention_forward
    return 0.0


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


def pipeline_bubble_factor(settings: TrainingSettings) -> float:
    """1F1B pipeline schedule: idle time is (p - 1) / m of the ideal time for m micro-batches
    per step (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2)."""
    return 1.0 + (settings.pipeline_parallel - 1) / settings.grad_accum


# --- throughput ------------------------------------------------------------------

# Achievable BF16 matmul, fraction of dense peak (mamf-finder; shared/reference README).
MATMUL_FRACTION: dict[str, float] = {"A100": 0.869, "H100": 0.803, "B200": 0.776, "MI300X": 0.514, "Gaudi2": 0.969}
# Name prefixes that share a measured family (same SM / compute die and software stack); AMD
# Instinct chips without a measurement of their own (MI250X, MI325X, MI355X) take MI300X's.
FAMILY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("A100", "A100"),
    ("H100", "H100"),
    ("H200", "H100"),
    ("GH200", "H100"),
    ("B200", "B200"),
    ("GB200", "B200"),
    ("B300", "B200"),
    ("MI", "MI300X"),
    ("Gaudi2", "Gaudi2"),
)
DEFAULT_MATMUL_FRACTION = 0.80  # no measurement: near the NVIDIA datacenter figures (0.78-0.87)
END_TO_END_FACTOR = 0.6  # share of matmul speed a whole training step sustains (see default_utilisation)


def gpu_family(gpu: GpuSpec) -> str | None:
    """The measured family a GPU belongs to ('A100', 'H100', ...), or None."""
    for prefix, family in FAMILY_PREFIXES:
        if gpu.name.startswith(prefix):
            return family
    return None


def matmul_fraction(gpu: GpuSpec) -> float:
    """Achievable fraction of dense peak on large BF16 matmuls: the family's mamf-finder
    figure (shared/reference README), else DEFAULT_MATMUL_FRACTION (an assumption)."""
    family = gpu_family(gpu)
    return MATMUL_FRACTION[family] if family else DEFAULT_MATMUL_FRACTION


def default_utilisation(gpu: GpuSpec) -> float:
    """Default utilisation (fraction of dense peak a step sustains): matmul fraction x END_TO_END_FACTOR.

    The 0.6 is a stated assumption covering what a full step adds to pure matmuls (attention,
    norms and elementwise kernels, launch gaps, sustained clocks 15-20% below burst per the
    reference README). It gives A100 0.869 x 0.6 = 0.52, the 52% of peak Narayanan et al. 2021
    (arXiv 2104.04473) sustained on A100, and H100 0.803 x 0.6 = 0.48, near the 38-43% BF16 MFU
    Llama 3 reports at 16k-GPU scale (Dubey et al. 2024, arXiv 2407.21783, Table 4). Override it
    with a measured figure when you have one.
    """
    return matmul_fraction(gpu) * END_TO_END_FACTOR


def compute_format(precision: str, fp32_uses_tf32: bool = True) -> str:
    """Format the matmuls run in: bf16 for amp-bf16 / bf16-mixed / bf16, fp16 for amp-fp16 /
    fp16-mixed, and for fp32 either tf32 (torch.set_float32_matmul_precision('high'); PyTorch's
    default since 1.12 is full fp32 matmuls) or fp32."""
    if "bf16" in precision:
        return "bf16"
    if "fp16" in precision:
        return "fp16"
    return "tf32" if fp32_uses_tf32 else "fp32"


def rate_and_format(gpu: GpuSpec, precision: str, fp32_uses_tf32: bool = True) -> tuple[float, str]:
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


def peak_tflops(gpu: GpuSpec, precision: str, fp32_uses_tf32: bool = True) -> float:
    """Dense peak TFLOPS of `gpu` in the format `precision` computes in (see rate_and_format)."""
    return rate_and_format(gpu, precision, fp32_uses_tf32)[0]


def achieved_tflops(gpu: GpuSpec, precision: str, utilisation: float, fp32_uses_tf32: bool = True) -> float:
    """Sustained TFLOPS per GPU: dense peak for the precision's format x utilisation."""
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return peak_tflops(gpu, precision, fp32_uses_tf32) * utilisation


# --- communication -----------------------------------------------------------------

NVLINK_EFFICIENCY = 0.88  # achieved / spec NVLink bandwidth (shared/reference README)
DEFAULT_INTER_NODE_GBPS = 400.0  # Gb/s network per GPU (one 400G NIC per GPU, as HGX H100 nodes)


def ring_factor(gpus: int) -> float:
    """Bytes each GPU sends in a ring all-reduce per byte reduced: 2(n-1)/n (nccl-tests
    doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n). A reduce-scatter or all-gather sends half."""
    return 2.0 * (gpus - 1) / gpus


def allreduce_bytes_per_gpu(grad_bytes: float, gpus: int) -> float:
    """Bytes each GPU sends (and receives) to all-reduce `grad_bytes` over `gpus` in a ring."""
    return ring_factor(gpus) * grad_bytes


def comm_bytes_per_gpu(spec: ModelSpec, settings: TrainingSettings) -> tuple[float, float]:
    """(bytes per micro-batch, bytes once per step) each GPU sends for data parallelism.

    With P parameters, g gradient bytes and w weight bytes per element, h = (n-1)/n:
    - ZeRO 0/1: one gradient all-reduce per step, 2h*P*g (DDP skips it while accumulating).
    - ZeRO 2: a gradient reduce-scatter every micro-batch (h*P*g, gradients are sharded) and
      one all-gather of the updated weights per step (h*P*w).
    - ZeRO 3: per micro-batch, weight all-gathers in forward and backward plus the gradient
      reduce-scatter, h*P*(2w + g): 1.5x the plain data-parallel volume (ZeRO paper Sec. 7.2).
    With grad_accum = 1 this gives ZeRO 0-2 the all-reduce volume and ZeRO 3 1.5x it.
    """
    if settings.gpus == 1:
        return 0.0, 0.0
    params = parameter_count(spec).total
    half_ring = ring_factor(settings.gpus) / 2
    grad_b, weight_b = gradient_bytes(settings.precision), weight_bytes(settings.precision)
    if settings.zero <= 1:
        return 0.0, allreduce_bytes_per_gpu(params * grad_b, settings.gpus)
    if settings.zero == 2:
        return half_ring * params * grad_b, half_ring * params * weight_b
    return half_ring * params * (2 * weight_b + grad_b), 0.0


# --- settings and result ---------------------------------------------------------------


class TimeSettings(BaseModel):
    """How long the run is and the throughput assumptions (each default is a stated assumption)."""

    model_config = ConfigDict(extra="forbid")

    utilisation: float | None = Field(
        default=None, gt=0, le=1, description="fraction of dense peak sustained; None = default_utilisation(gpu)"
    )
    gpus_per_node: int = Field(default=8, ge=1, le=1024, description="GPUs sharing the fast intra-node link")
    inter_node_gbps: float = Field(
        default=DEFAULT_INTER_NODE_GBPS, gt=0, le=100_000, description="network Gb/s per GPU between nodes"
    )
    intra_node_efficiency: float = Field(default=NVLINK_EFFICIENCY, gt=0, le=1)
    overlap_fraction: float = Field(
        default=0.5, ge=0, le=1, description="share of communication hidden under compute when there is compute"
    )
    fp32_uses_tf32: bool = True
    dataset_tokens: float | None = Field(default=None, gt=0, le=1e16)
    dataset_samples: int | None = Field(
        default=None, gt=0, le=10**13, description="sequences of the training seq_len (packed or padded)"
    )
    epochs: float = Field(default=1.0, gt=0, le=100_000)

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
    utilisation: float
    achieved_tflops: float = Field(description="per GPU")
    flops_per_token: float
    tokens_per_step: int = Field(description="micro_batch x seq_len x grad_accum x gpus")
    compute_s: float
    comm_bytes_per_gpu: float = Field(description="bytes each GPU sends per step")
    comm_gbytes_per_s: float = Field(description="GB/s per GPU per direction used for communication")
    comm_s: float = Field(description="all data-parallel communication time of one step")
    comm_exposed_s: float = Field(description="the part not hidden under compute")
    step_s: float
    tokens_per_s: float
    dataset_tokens: float
    epochs: float
    steps_per_epoch: int
    hours_per_epoch: float
    hours_total: float
    assumptions: list[str]


# --- the estimate -------------------------------------------------------------------------


def link_gbytes_per_s(gpu: GpuSpec, gpus: int, time_settings: TimeSettings) -> tuple[float, str]:
    """GB/s per GPU per direction for data-parallel traffic, and where it comes from.

    Within a node: the GPU's bidirectional interconnect figure / 2 x efficiency (0.88, the
    NVLink figure of the reference README). Across nodes, or when the catalogue has no
    interconnect figure: the network, inter_node_gbps / 8 (bits to bytes) per GPU.
    """
    network = time_settings.inter_node_gbps / 8
    if gpus <= time_settings.gpus_per_node and gpu.interconnect_gbps:
        per_direction = gpu.interconnect_gbps / 2 * time_settings.intra_node_efficiency
        return per_direction, f"intra-node {gpu.interconnect or 'link'}: {per_direction:.1f} GB/s per direction"
    where = "inter-node" if gpus > time_settings.gpus_per_node else "no interconnect figure, network"
    return network, f"{where}: {time_settings.inter_node_gbps:g} Gb/s = {network:.1f} GB/s per GPU"


def exposed_comm_s(comm_s: float, hideable_under_s: float, overlap_fraction: float) -> float:
    """Communication left on the critical path: overlap_fraction of it hides under compute,
    but never more than the compute it can overlap with."""
    hidden = min(overlap_fraction * comm_s, hideable_under_s)
    return comm_s - hidden


def comm_seconds(
    spec: ModelSpec, settings: TrainingSettings, gpu: GpuSpec, time_settings: TimeSettings, compute_s: float
) -> tuple[float, float, float]:
    """(total, exposed) communication seconds of one step and the bytes sent per GPU.

    Traffic every micro-batch (ZeRO 2/3) overlaps with that micro-batch's compute; traffic
    once per step (the ZeRO 0/1 all-reduce, ZeRO 2's weight all-gather) only with the last
    micro-batch's backward, so gradient accumulation does not hide it further.
    """
    per_micro_b, per_step_b = comm_bytes_per_gpu(spec, settings)
    bandwidth, _ = link_gbytes_per_s(gpu, settings.gpus, time_settings)
    micro_compute_s = compute_s / settings.grad_accum
    per_micro_s = per_micro_b / (bandwidth * 1e9)
    per_step_s = per_step_b / (bandwidth * 1e9)
    overlap = time_settings.overlap_fraction
    exposed = settings.grad_accum * exposed_comm_s(per_micro_s, micro_compute_s, overlap)
    exposed += exposed_comm_s(per_step_s, micro_compute_s, overlap)
    total_bytes = settings.grad_accum * per_micro_b + per_step_b
    return settings.grad_accum * per_micro_s + per_step_s, exposed, total_bytes


def _assumptions(gpu: GpuSpec, settings: TrainingSettings, time_settings: TimeSettings, fmt: str) -> list[str]:
    """Plain-language list of what the estimate assumes."""
    family = gpu_family(gpu)
    basis = f"{family} mamf-finder {matmul_fraction(gpu):.3f}" if family else f"assumed {DEFAULT_MATMUL_FRACTION}"
    utilisation = (
        f"utilisation {time_settings.utilisation:.3f} (given)"
        if time_settings.utilisation is not None
        else f"utilisation {default_utilisation(gpu):.3f} = achievable matmul ({basis}) x {END_TO_END_FACTOR} "
        "end-to-end factor"
    )
    _, link = link_gbytes_per_s(gpu, settings.gpus, time_settings)
    return [
        f"FLOPs/token = {matmul_flops_factor(settings):g}N (N = matmul weights incl. LM head; 4N with a frozen "
        f"LoRA/QLoRA base) + 12*L*s*heads*head_dim attention (PaLM App. B), recomputation: {settings.checkpointing}",
        f"matmuls in {fmt} at the dense peak from the GPU catalogue",
        utilisation + "; it applies to all executed FLOPs, recomputation included",
        f"data parallel over {settings.gpus} GPU(s), ZeRO-{settings.zero}; ring collectives 2(n-1)/n; {link}",
        f"{time_settings.overlap_fraction:.0%} of communication overlaps compute",
        f"tensor parallel {settings.tensor_parallel} x pipeline parallel {settings.pipeline_parallel} per replica: "
        f"work split evenly, pipeline bubble (p-1)/m = {pipeline_bubble_factor(settings) - 1:.2f} (Narayanan et al. "
        "2021); tensor-parallel all-reduces not modelled",
        "no data loading or evaluation time; checkpoint writes not included",
    ]


def estimate_time(
    spec: ModelSpec, settings: TrainingSettings, gpu: GpuSpec, time_settings: TimeSettings
) -> TimeEstimate:
    """Step time, throughput and hours for `settings` on `settings.gpus` GPUs of type `gpu`.

    Raises ValueError when the GPU has no rate for the precision's compute format.
    """
    utilisation = time_settings.utilisation if time_settings.utilisation is not None else default_utilisation(gpu)
    peak, fmt = rate_and_format(gpu, settings.precision, time_settings.fp32_uses_tf32)
    achieved = peak * utilisation
    flops_per_token = training_flops_per_token(spec, settings)
    # One data-parallel replica spans tensor_parallel x pipeline_parallel GPUs that share its
    # tokens' work (tensor-parallel communication is not modelled; stated in the assumptions).
    tokens_per_replica = settings.micro_batch * settings.seq_len * settings.grad_accum
    tokens_per_step = tokens_per_replica * settings.gpus
    gpus_per_replica = settings.tensor_parallel * settings.pipeline_parallel
    compute_s = flops_per_token * tokens_per_replica / (achieved * 1e12 * gpus_per_replica)
    compute_s *= pipeline_bubble_factor(settings)
    comm_s, exposed_s, comm_bytes = comm_seconds(spec, settings, gpu, time_settings, compute_s)
    step_s = compute_s + exposed_s
    dataset_tokens = time_settings.tokens_per_epoch(settings.seq_len)
    steps_per_epoch = math.ceil(dataset_tokens / tokens_per_step)
    hours_per_epoch = steps_per_epoch * step_s / 3600
    bandwidth, _ = link_gbytes_per_s(gpu, settings.total_gpus, time_settings)
    return TimeEstimate(
        gpu=gpu.name,
        compute_format=fmt,
        peak_tflops=peak,
        utilisation=utilisation,
        achieved_tflops=achieved,
        flops_per_token=flops_per_token,
        tokens_per_step=tokens_per_step,
        compute_s=compute_s,
        comm_bytes_per_gpu=comm_bytes,
        comm_gbytes_per_s=bandwidth,
        comm_s=comm_s,
        comm_exposed_s=exposed_s,
        step_s=step_s,
        tokens_per_s=tokens_per_step / step_s,
        dataset_tokens=dataset_tokens,
        epochs=time_settings.epochs,
        steps_per_epoch=steps_per_epoch,
        hours_per_epoch=hours_per_epoch,
        hours_total=hours_per_epoch * time_settings.epochs,
        assumptions=_assumptions(gpu, settings, time_settings, fmt),
    )
