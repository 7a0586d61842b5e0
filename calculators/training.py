"""Training settings: the workload knobs that change memory, and what each precision means.

Precision modes follow what the common frameworks really keep in memory:
- `fp32`: everything in fp32.
- `amp-fp16` / `amp-bf16`: fp32 weights, gradients and optimizer states; matmuls run in
  half precision under `torch.autocast` (PyTorch AMP, HF Trainer `fp16=True`/`bf16=True`).
- `fp16-mixed` / `bf16-mixed`: half-precision weights and gradients plus an fp32 master
  copy and fp32 optimizer states (DeepSpeed, Megatron-LM; ZeRO paper Sec. 3.1, K=12).
- `bf16`: pure bf16, optimizer states included (e.g. torchtune full fine-tuning).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Precision = Literal["fp32", "amp-fp16", "amp-bf16", "fp16-mixed", "bf16-mixed", "bf16"]
Optimizer = Literal["adamw", "sgd", "adafactor", "adamw-8bit"]
OptimizerImpl = Literal["foreach", "fused", "for-loop"]
Checkpointing = Literal["none", "selective", "full"]
Attention = Literal["eager", "fused"]

PRECISIONS: tuple[str, ...] = Precision.__args__
OPTIMIZERS: tuple[str, ...] = Optimizer.__args__
CHECKPOINTING: tuple[str, ...] = Checkpointing.__args__
ATTENTION: tuple[str, ...] = Attention.__args__
OPTIMIZER_IMPLS: tuple[str, ...] = OptimizerImpl.__args__
ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)

# FSDP's names for the same sharding (PyTorch FSDP ShardingStrategy). ZeRO-1 has
# no FSDP strategy; torch's ZeroRedundancyOptimizer shards optimizer state only.
FSDP_NAME = {0: "NO_SHARD (DDP)", 1: "optimizer only (ZeroRedundancyOptimizer)", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}

PRECISION_LABEL = {
    "fp32": "FP32",
    "amp-fp16": "AMP FP16 (fp32 weights + autocast)",
    "amp-bf16": "AMP BF16 (fp32 weights + autocast)",
    "fp16-mixed": "FP16 mixed (fp16 weights + fp32 master)",
    "bf16-mixed": "BF16 mixed (bf16 weights + fp32 master)",
    "bf16": "Pure BF16 (incl. optimizer states)",
}


class Overheads(BaseModel):
    """Memory outside the tensors of the step. Defaults are stated assumptions,
    replaceable by a calibration measured on the user's host."""

    cuda_context_gib: float = Field(
        default=0.5,
        ge=0,
        le=16,
        description="CUDA context + loaded kernels, invisible to torch (0.3-2 GiB reported; shared/reference README)",
    )
    cublas_workspace_gib: float = Field(
        default=0.03, ge=0, le=4, description="cuBLAS workspace (a few 4-32 MiB buffers)"
    )
    allocator_reserve_fraction: float = Field(
        default=0.10,
        ge=0,
        le=1,
        description="caching allocator: reserved exceeds allocated by about 5-15% "
        "(shared/reference README); 10% assumed",
    )
    nccl_gib: float = Field(default=1.5, ge=0, le=16, description="NCCL buffers when more than one GPU (about 1.5 GiB)")


class TrainingSettings(BaseModel):
    """One training step's workload on each data-parallel GPU."""

    micro_batch: int = Field(default=1, gt=0, le=1_000_000)
    seq_len: int = Field(default=2048, gt=0, le=10_000_000)
    grad_accum: int = Field(default=1, gt=0, le=1_000_000)
    gpus: int = Field(default=1, gt=0, le=1_000_000)
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    optimizer_impl: OptimizerImpl = "foreach"
    zero: int = Field(default=0, ge=0, le=3)
    checkpointing: Checkpointing = "none"
    attention: Attention = "fused"
    grads_freed_after_step: bool = Field(
        default=True,
        description="optimizer.zero_grad(set_to_none=True), the default since torch 2.0",
    )
    overheads: Overheads = Field(default_factory=Overheads)


# The settings a user chooses (the rest are modelling assumptions with defaults).
USER_SETTING_FIELDS: tuple[str, ...] = (
    "micro_batch", "seq_len", "grad_accum", "gpus", "precision",
    "optimizer", "optimizer_impl", "zero", "checkpointing", "attention",
)  # fmt: skip


def weight_bytes(precision: str) -> int:
    """Bytes per stored model weight: fp32 under fp32/AMP, half otherwise."""
    return 4 if precision in ("fp32", "amp-fp16", "amp-bf16") else 2


def master_weight_bytes(precision: str) -> int:
    """fp32 master copy kept by mixed-precision training (ZeRO paper Sec. 3.1)."""
    return 4 if precision in ("fp16-mixed", "bf16-mixed") else 0


def gradient_bytes(precision: str) -> int:
    """Gradients take the dtype of the weights they belong to."""
    return weight_bytes(precision)


def optimizer_state_element_bytes(precision: str) -> int:
    """Optimizer state dtype: fp32 except in pure bf16, where torch keeps states in
    the parameter dtype (torch.optim initialises them with zeros_like(param))."""
    return 2 if precision == "bf16" else 4


def compute_bytes(precision: str) -> int:
    """Bytes of a matmul output: fp32, or half precision under any other mode."""
    return 4 if precision == "fp32" else 2


def is_autocast(precision: str) -> bool:
    return precision in ("amp-fp16", "amp-bf16")


def residual_bytes(precision: str) -> int:
    """The residual stream stays fp32 under autocast: embeddings are fp32 and the
    adds promote half + fp32 to fp32 (PyTorch autocast op reference)."""
    return 4 if precision == "fp32" or is_autocast(precision) else 2
