"""What the user asks to serve: the serving settings (weights' and KV cache's precision, context,
concurrency, tensor parallel, images) and why a model cannot be served so (tensor parallel that does
not shard its heads, images on a model that does not read them by cross-attention).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from calculators.models.spec import ModelSpec
from calculators.workload.training import Overheads
from calculators.workload.vision import vision_tower

WeightPrecision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "nf4", "fp4"]
Fp4Format = Literal["nvfp4", "mxfp4"]
KvPrecision = Literal["fp16", "bf16", "fp8", "int8", "fp32"]
WEIGHT_PRECISIONS: tuple[str, ...] = WeightPrecision.__args__
KV_PRECISIONS: tuple[str, ...] = KvPrecision.__args__
MAX_SEQUENCES_SEARCHED = 1 << 24


class ServingSettings(BaseModel):
    """One serving workload on each of `tensor_parallel` GPUs."""

    weight_precision: WeightPrecision = "bf16"
    quant_group_size: int = Field(
        default=128,
        gt=0,
        le=1_000_000,
        description="int4/int8: input channels sharing one fp16 scale (and zero point); GPTQ/AWQ use 128",
    )
    quant_zero_points: bool = Field(
        default=True,
        description="int4/int8: one zero point per group, packed at the weight's bit width "
        "(AWQ and GPTQ checkpoints both store a `qzeros` tensor)",
    )
    fp4_format: Fp4Format = Field(
        default="nvfp4",
        description="fp4 weights: NVFP4 (one fp8 scale per 16 weights, NVIDIA ModelOpt checkpoints) or MXFP4 "
        "(one 8-bit power-of-two scale per 32, OCP MX v1.0, as gpt-oss ships its experts)",
    )
    kv_cache_precision: KvPrecision = "bf16"
    context_len: int = Field(default=8192, gt=0, le=100_000_000, description="tokens per sequence: prompt + generated")
    concurrent_sequences: int = Field(default=1, gt=0, le=MAX_SEQUENCES_SEARCHED)
    images_per_sequence: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="images each sequence reads by cross-attention (Llama 3.2 Vision); models that read images "
        "as tokens count them in the context",
    )
    tensor_parallel: int = Field(default=1, gt=0, le=1024)
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="vLLM's cap on the fraction of GPU memory used (its default is 0.9); None = all of it",
    )
    max_batched_tokens: int = Field(
        default=2048, gt=0, le=10_000_000, description="tokens in one prefill chunk (vLLM max_num_batched_tokens)"
    )
    kv_block_tokens: int = Field(default=16, gt=0, le=65_536, description="tokens per paged KV block (vLLM: 16)")
    cuda_graphs_gib: float = Field(
        default=0.5,
        ge=0,
        le=64,
        description="decode CUDA graphs; vLLM logs 0.13-0.21 GiB for 1B models, 0.5 GiB assumed",
    )
    memory_bandwidth_efficiency: float = Field(
        default=0.8, ge=0.01, le=1, description="achieved fraction of datasheet memory bandwidth"
    )
    compute_efficiency: float = Field(default=0.8, ge=0.01, le=1, description="achieved fraction of dense tensor peak")
    overheads: Overheads = Field(default_factory=Overheads)


def tensor_parallel_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why `tp` cannot shard this model, or None. vLLM requires tp to divide the attention
    heads, and the kv-heads to be a multiple or a divisor of tp (Megatron-LM head split)."""
    if spec.n_heads % tp:
        return f"tensor parallel {tp} does not divide the {spec.n_heads} attention heads"
    if spec.n_kv_heads % tp and tp % spec.n_kv_heads:
        return f"tensor parallel {tp} and the {spec.n_kv_heads} kv-heads do not divide one another"
    return None


def check_tensor_parallel(spec: ModelSpec, tp: int) -> None:
    """Raise ValueError when `tp` cannot shard this model (see tensor_parallel_problem)."""
    problem = tensor_parallel_problem(spec, tp)
    if problem:
        raise ValueError(problem)


def serving_problem(spec: ModelSpec, settings: ServingSettings) -> str | None:
    """Why these serving settings cannot run this model (tensor parallel that does not shard it,
    images on a model that does not read them by cross-attention), or None."""
    problem = tensor_parallel_problem(spec, settings.tensor_parallel)
    tower = vision_tower(spec)
    if problem is None and settings.images_per_sequence and (tower is None or not tower.cross_attention_layers):
        problem = (
            f"{spec.name} does not read images by cross-attention: set images per sequence to 0 and count each "
            "image's tokens in the context (LLaVA-1.5: 576, Gemma 3: 256, Qwen2.5-VL: (height/28) x (width/28))"
        )
    return problem


def context_beyond_training(spec: ModelSpec, settings: ServingSettings) -> str | None:
    """A warning when the context asked for is longer than the positions the model was trained on:
    vLLM refuses a --max-model-len above the config's max_position_embeddings unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set (vllm/config, "max_model_len" check), and the model's
    quality past them is not assured."""
    trained = spec.max_position_embeddings
    if settings.context_len <= trained:
        return None
    return (
        f"{settings.context_len:,} tokens is beyond the {trained:,} positions {spec.name} was trained on: vLLM "
        "refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set, and answers past them may degrade"
    )
