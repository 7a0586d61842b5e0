"""How long the run is and the throughput assumptions of the time model: TimeSettings, each default a
stated assumption with its source, and which of its fields describe the step itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calculators.timing.collectives import CurvePoint
from calculators.timing.communication import NVLINK_EFFICIENCY

# The kernels a run uses, named apart from the precision (each described in calculators.timing.operations).
AttentionKernel = Literal["flash2", "flash1", "flash3", "cudnn"]
# How the host issues a step's kernels: eager PyTorch (a dispatch and a launch per op), compiled
# (torch.compile's inductor: a launch per fused kernel), CUDA graphs (one replay per step); auto =
# compiled with torch.compile, else eager (calculators.timing.operations.host_seconds_per_kernel).
Launch = Literal["auto", "eager", "compiled", "cuda-graphs"]
Kernels = Literal["auto", "eager", "fused"]
LossKernel = Literal["auto", "fused", "eager", "vocab-parallel"]
Fp8Recipe = Literal["dynamic", "delayed"]


# Host cores per GPU by default: an AWS p5.48xlarge has 192 vCPUs (2 per physical core) for 8 H100s
# (https://aws.amazon.com/ec2/instance-types/p5/): 12 cores per GPU.
DEFAULT_HOST_CORES_PER_GPU = 12.0
# Sustained over burst matmul rate: an ASSUMPTION, not a measurement. mamf-finder reports the
# fastest of 100 timed iterations per shape, not their mean (github.com/stas00/ml-engineering
# compute/accelerator/benchmarks/README.md @744d01e), and a GPU holds a lower clock under a whole
# step's heat and power than in its best iteration (ibid. compute/accelerator/README.md, "the
# cooler you keep the GPU, the higher the sustained clock"), but neither gives a figure. 0.825
# stands until a measured training-step GEMM rate replaces it (calibrate --device cuda, applied
# as the matmul fraction, or --sustained-clock); it used to cite a "15-20% below burst" line the README does not have.
SUSTAINED_CLOCK_FACTOR = 0.825
# The SMs NCCL holds while overlapped: an FSDP-style all-gather beside a GEMM on an H100 ran 24 blocks,
# one SM each, of its 132 (NVIDIA developer forum, "Compute-Communication Overlap Causes Severe GEMM
# Performance Degradation because of Tail Effect", https://forums.developer.nvidia.com/t/337991):
# 24/132; other GPUs take the same share, an assumption.
NCCL_SM_SHARE = 24 / 132
DEFAULT_INTER_NODE_GBPS = 400.0  # Gb/s network per GPU (one 400G NIC per GPU, as HGX H100 nodes)


# TimeSettings fields that describe the step (placement, overlap, schedule, compiler): every
# command takes them, the rest (dataset, epochs, utilisation) only the commands that time a run.
STEP_SETTING_FIELDS: tuple[str, ...] = (
    "gpus_per_node", "inter_node_gbps", "overlap_fraction", "tp_overlap_fraction", "pp_overlap_fraction",
    "nccl_sm_share",
    "virtual_stages", "compile", "kernels", "loss_kernel", "attention_kernel", "launch", "fp32_uses_tf32",
    "matmul_fraction",
    "expert_parallel", "context_parallel", "host_cores_per_gpu", "host_link_gbytes_per_s", "sustained_clock_factor",
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
    intra_node_efficiency: float = Field(
        default=NVLINK_EFFICIENCY,
        ge=0.01,
        le=1,
        description="achieved / one-way link rate of interconnects with no measured collective curve (PCIe, bridges)",
    )
    collective_curves: dict[str, list[CurvePoint]] | None = Field(
        default=None,
        description="a calibration's measured curves ('all_reduce', 'all_gather', 'reduce_scatter': bytes and "
        "bus GB/s per payload), which replace the published intra-node ones; None = data/collective_curves.csv",
    )
    sustained_clock_factor: float = Field(
        default=SUSTAINED_CLOCK_FACTOR,
        ge=0.3,
        le=1,
        description="sustained over burst matmul rate under a whole step's heat and power: an ASSUMPTION "
        "(SUSTAINED_CLOCK_FACTOR), shown with the estimate",
    )
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
    nccl_sm_share: float = Field(
        default=NCCL_SM_SHARE,
        ge=0,
        le=0.9,
        description="share of the SMs collectives hold while they run hidden under compute (NCCL's blocks), "
        "which that compute loses",
    )
    expert_parallel: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="expert-parallel degree inside data parallel (mixture of experts; ignored for dense models)",
    )
    context_parallel: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="context-parallel degree inside data parallel: each sequence split over this many ranks, "
        "attention as a ring exchanging K and V chunks (calculators.timing.context_parallel); 1 = none",
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
        description="fused attention kernel, each at its published TFLOPS per head dim, sequence length and "
        "causal mask: FlashAttention-2 (and PyTorch SDPA's flash backend), FlashAttention-1 / its Triton port "
        "(MPT in llm-foundry), FlashAttention-3 (Hopper only; FlashAttention-2 elsewhere), or cuDNN's fused "
        "attention (SDPA's cuDNN backend on H100 and newer; FlashAttention-2 elsewhere)",
    )
    launch: Launch = Field(
        default="auto",
        description="how the host issues kernels: eager PyTorch, compiled (torch.compile) or CUDA graphs; a step "
        "is never faster than the host issues its kernels; auto = compiled with torch.compile, else eager",
    )
    fp8_recipe: Fp8Recipe = Field(
        default="dynamic",
        description="how fp8 linears scale and cast (calculators.timing.operations.fp8_cast_bytes): dynamic "
        "(torchao Float8Linear: an amax pass, then the cast, weights every micro-batch) or delayed (Transformer "
        "Engine, as NeMo and Megatron run it: scales from the amax history, cast and transpose in one kernel, "
        "weights cast on a step's first micro-batch only)",
    )
    fp32_uses_tf32: bool = Field(
        default=False, description="fp32 matmuls on TF32 tensor cores (PyTorch's default: off since 1.12)"
    )
    host_cores_per_gpu: float = Field(
        default=DEFAULT_HOST_CORES_PER_GPU,
        ge=0.5,
        le=1024,
        description="host CPU cores that step one GPU's offloaded optimizer (a CPU Adam); 12 = an AWS "
        "p5.48xlarge's 96 physical cores over its 8 GPUs",
    )
    host_link_gbytes_per_s: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="GB/s each way between a GPU and its host for CPU offload (a measured pinned copy); None = "
        "PCIe x16 of the catalogue's generation at 88% of its payload rate, or NVLink-C2C on Grace superchips",
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

    def with_measured_collectives(self, curves: dict[str, list] | None) -> TimeSettings:
        """These settings with a calibration's measured collective curves ({'all_reduce':
        [{bytes, bus_gbytes_per_s}, ...], 'all_gather': ..., 'reduce_scatter': ...}) in place of
        the published intra-node ones, unless the settings already carry curves; no curves, no
        change. Raises pydantic's ValidationError for a point that is not a positive number."""
        if not curves or self.collective_curves:
            return self
        return self.model_validate(self.model_dump() | {"collective_curves": curves})

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
