"""Training settings: the workload knobs that change memory, and what each precision means.

Precision modes follow what the common frameworks really keep in memory:
- `fp32`: everything in fp32.
- `amp-fp16` / `amp-bf16`: fp32 weights, gradients and optimizer states; matmuls run in
  half precision under `torch.autocast` (PyTorch AMP, HF Trainer `fp16=True`/`bf16=True`).
- `fp16-mixed` / `bf16-mixed`: half-precision weights and gradients plus an fp32 master
  copy and fp32 optimizer states (DeepSpeed, Megatron-LM; ZeRO paper Sec. 3.1, K=12).
- `bf16`: pure bf16, optimizer states included (e.g. torchtune full fine-tuning).

Fine-tuning methods (`method`): `full` trains every weight; `lora` freezes the base and
trains low-rank adapters (Hu et al. 2021, arXiv 2106.09685); `qlora` also stores the base's
linear weights in 4-bit NormalFloat (Dettmers et al. 2023, arXiv 2305.14314).
Parallelism: `gpus` is the data-parallel degree (ZeRO shards over it); `tensor_parallel`
and `pipeline_parallel` are Megatron-LM's (arXiv 1909.08053, 2104.04473); the job uses
`total_gpus` = gpus x tensor_parallel x pipeline_parallel.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from calculators.models.spec import ModelSpec, extension
from calculators.workload.frameworks import framework_defaults
from calculators.workload.precision import (
    PrecisionFacts,
    precision_facts,
)

Precision = Literal["fp32", "amp-fp16", "amp-bf16", "fp16-mixed", "bf16-mixed", "bf16", "fp8"]
# lamb: sized for the vision library's image models only (memory.vision_training); a transformer refuses it
# (workload.support.check_supported)
Optimizer = Literal["adamw", "sgd", "adafactor", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "none", "lamb"]
OptimizerImpl = Literal["foreach", "fused", "for-loop"]
Checkpointing = Literal["none", "selective", "op-selective", "full"]
Loss = Literal["full", "chunked", "fused-linear"]
QuantBackend = Literal["bitsandbytes", "torchao"]
QkvProjection = Literal["model", "fused"]
Nf4Scales = Literal["double-quant", "fp32"]
QuantisedLinears = Literal["layers", "all"]
Framework = Literal["hf-trainer", "torchtune", "torchtitan", "deepspeed", "megatron", "litgpt", "axolotl", "automodel"]
CheckpointUnit = Literal["layer", "submodule"]
LogitsInBackward = Literal["freed", "kept"]
ShardingImpl = Literal["zero", "fsdp1", "fsdp2"]
Attention = Literal["eager", "fused"]
Method = Literal["full", "lora", "qlora"]
LoraTargets = Literal["qv", "attention", "qvo-mlp", "all-linear"]

PRECISIONS: tuple[str, ...] = Precision.__args__
OPTIMIZERS: tuple[str, ...] = Optimizer.__args__
CHECKPOINTING: tuple[str, ...] = Checkpointing.__args__
LOSSES: tuple[str, ...] = Loss.__args__
FRAMEWORKS: tuple[str, ...] = Framework.__args__
PAGED_OPTIMIZERS: tuple[str, ...] = ("paged-adamw", "paged-adamw-8bit")
ATTENTION: tuple[str, ...] = Attention.__args__
OPTIMIZER_IMPLS: tuple[str, ...] = OptimizerImpl.__args__
ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)
METHODS: tuple[str, ...] = Method.__args__
LORA_TARGETS: tuple[str, ...] = LoraTargets.__args__

LORA_TARGET_LABEL = {
    "qv": "q and v projections (PEFT's default for Llama; Hu et al. Sec. 7.1)",
    "attention": "q, k, v and o projections",
    "qvo-mlp": "q, v, o and the MLP (torchtune's Llama 3.2 LoRA configs)",
    "all-linear": "every linear of the layers: q, k, v, o and the MLP (per expert)",
}

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
    "fp8": "FP8 linears (torchao Float8Linear, tensorwise: bf16 weights + fp32 master; fp8 casts saved)",
}


class Overheads(BaseModel):
    """Memory outside the tensors of the step. Defaults are stated assumptions,
    replaceable by a calibration measured on the user's host."""

    cuda_context_gib: float = Field(
        default=0.5,
        ge=0,
        le=16,
        description="CUDA context + loaded kernels, invisible to torch (the kernels alone take 1-2 GB: "
        "huggingface/transformers docs/source/en/model_memory_anatomy.md @7d5e65fe)",
    )
    cublas_workspace_gib: float = Field(
        default=0.03, ge=0, le=4, description="cuBLAS workspace (a few 4-32 MiB buffers)"
    )
    allocator_reserve_fraction: float = Field(
        default=0.10,
        ge=0,
        le=1,
        description="caching allocator: reserved exceeds allocated by about 5-15% "
        "(PyTorch CUDA semantics, memory management: https://pytorch.org/docs/stable/notes/cuda.html); "
        "10% assumed",
    )
    nccl_gib: float = Field(default=1.5, ge=0, le=16, description="NCCL buffers when more than one GPU (about 1.5 GiB)")


OVERHEAD_FLAGS: tuple[str, ...] = ("cuda_context_gib", "cublas_workspace_gib", "allocator_reserve_fraction", "nccl_gib")


class TrainingSettings(BaseModel):
    """One training step's workload on each data-parallel GPU."""

    micro_batch: int = Field(default=1, gt=0, le=1_000_000)
    seq_len: int = Field(default=2048, gt=0, le=10_000_000)
    target_len: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="an encoder-decoder model's (T5's) target tokens, which its decoder and LM head run on; "
        "none given = as long as the input; decoder-only models ignore it",
    )
    images_per_sample: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="images in each sample of a vision-language model; each adds its image tokens to the sequence",
    )
    image_tokens: int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description="context tokens one image takes; none given = the model's own count (fixed-resolution models)",
    )
    freeze_vision_tower: bool = Field(
        default=False,
        description="a vision-language model's image encoder stays frozen in full training (its projector trains)",
    )
    grad_accum: int = Field(default=1, gt=0, le=1_000_000)
    gpus: int = Field(default=1, gt=0, le=1_000_000)
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    optimizer_impl: OptimizerImpl | None = Field(
        default=None, description="AdamW implementation; none given = the framework's (torch's foreach otherwise)"
    )
    zero: int = Field(default=0, ge=0, le=3)
    checkpointing: Checkpointing = Field(
        default="none",
        description="none; selective (recompute the attention core); op-selective (torchtitan's per-op policy: "
        "keep matmul and attention outputs, recompute every second matmul); full (keep each layer's input)",
    )
    checkpoint_unit: CheckpointUnit | None = Field(
        default=None,
        description="what full checkpointing wraps: each layer (HF, torchtune, torchtitan: its input kept) or each "
        "submodule on its own (NeMo Automodel: the norms, attention and MLP each keep their input); none given = "
        "the framework's, else layer",
    )
    logits_in_backward: LogitsInBackward | None = Field(
        default=None,
        description="the model's output (its logits) while backward runs: freed (HF Trainer, torchtune, torchtitan) "
        "or kept referenced by the training loop (NeMo Automodel); none given = the framework's, else freed",
    )
    sharding_impl: ShardingImpl | None = Field(
        default=None,
        description="ZeRO-3 as DeepSpeed does it (every unit resharded after use); FSDP1 FullyShardedDataParallel "
        "(the same, but a wrapped layer is one flat parameter: with LoRA adapters wrapped in it rather than in "
        "their own units, as PEFT's fsdp_auto_wrap_policy does, the frozen weights get gradients too); or FSDP2 "
        "fully_shard (the root unit - embeddings, final norm, head - stays gathered from forward to the end of "
        "backward, and each unit's reduce-scatter input waits for the next); none given = the framework's, "
        "else zero",
    )
    attention: Attention = "fused"
    framework: Framework | None = Field(
        default=None, description="the training stack whose defaults fill the settings not given (explicit wins)"
    )
    loss: Loss | None = Field(
        default=None,
        description="cross-entropy: full fp32 logits; chunked (torchtune, litgpt); fused-linear (Liger, Cut "
        "Cross-Entropy: logits never whole); none given = the framework's",
    )
    loss_chunks: int = Field(default=8, ge=1, le=4096, description="chunks of the chunked cross-entropy")
    liger: bool = Field(
        default=False, description="Liger-Kernel: fused RMSNorm, RoPE, SwiGLU and fused-linear cross-entropy"
    )
    optimizer_in_backward: bool = Field(
        default=False, description="optimizer step per parameter in backward; each gradient freed at once"
    )
    activation_offload: bool = Field(
        default=False, description="saved activations moved to pinned host memory (torchtune, Megatron)"
    )
    quant_backend: QuantBackend | None = Field(
        default=None,
        description="QLoRA's NF4 kernels: bitsandbytes (PEFT, litgpt, axolotl) saves each quantised linear's "
        "input; torchao (torchtune) does not. None given = the framework's, else bitsandbytes",
    )
    nf4_scales: Nf4Scales | None = Field(
        default=None,
        description="QLoRA's NF4 block scales: double-quant (QLoRA paper Sec. 3: 8-bit scales per 64, 4.127 bits "
        "a weight) or fp32 (one fp32 absmax per 64 weights, 4.5 bits: bitsandbytes without compress_statistics, "
        "litgpt --quantize bnb.nf4); none given = double-quant",
    )
    quantised_linears: QuantisedLinears | None = Field(
        default=None,
        description="which linears QLoRA stores in NF4: the layers' (transformers' bitsandbytes integration keeps "
        "lm_head in half precision) or all, the LM head included (Lightning's BitsandbytesPrecision replaces every "
        "nn.Linear: litgpt); none given = the framework's, else layers",
    )
    lora_dropout: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="dropout on each adapter's input; above 0 it saves a 1-byte mask and its own output; none "
        "given = the framework's (litgpt 0.05), else 0 as PEFT's LoraConfig and torchtune's recipes",
    )
    qkv_projection: QkvProjection | None = Field(
        default=None,
        description="q, k and v as the model's code has them, or fused into one linear whatever the model "
        "(litgpt builds every model that way); none given = the framework's, else model",
    )
    load_whole_model: bool = Field(
        default=False,
        description="the whole model is moved to each GPU in its weight dtype before sharding (DeepSpeed "
        "ZeRO-3 without zero.Init)",
    )
    compile: bool = Field(
        default=False,
        description="torch.compile the layers and the chunked loss: AOT autograd recomputes pointwise ops "
        "instead of saving their outputs",
    )
    grads_freed_after_step: bool = Field(
        default=True,
        description="optimizer.zero_grad(set_to_none=True), the default since torch 2.0",
    )
    keep_gradients: bool = Field(
        default=False,
        description="gradients stay allocated between steps: zero_grad(set_to_none=False), torch < 2.0's default",
    )
    method: Method = Field(default="full", description="full training, or LoRA/QLoRA adapters on a frozen base")
    lora_rank: int = Field(default=16, ge=1, le=4096, description="rank r of each LoRA adapter")
    lora_targets: LoraTargets = Field(default="all-linear", description="which linears of each layer get an adapter")
    frozen_layers: int = Field(
        default=0, ge=0, le=1000, description="first k transformer layers (and the embeddings) frozen"
    )
    offload_optimizer: bool = Field(
        default=False, description="ZeRO-Offload: fp32 master, optimizer states and the step on the CPU"
    )
    offload_parameters: bool = Field(
        default=False, description="ZeRO-Infinity: parameters on the CPU, only layers in flight on the GPU (ZeRO-3)"
    )
    tensor_parallel: int = Field(default=1, ge=1, le=1024, description="Megatron tensor-parallel degree")
    pipeline_parallel: int = Field(default=1, ge=1, le=1000, description="pipeline stages (1F1B schedule)")
    overheads: Overheads = Field(default_factory=Overheads)
    # The stack's own overheads as flags (a measured CUDA context, say); given, they replace
    # the matching field of `overheads`.
    cuda_context_gib: float | None = Field(
        default=None, ge=0, le=16, description="CUDA context + kernels, invisible to torch (default 0.5 GiB)"
    )
    cublas_workspace_gib: float | None = Field(default=None, ge=0, le=4, description="cuBLAS workspace (0.03 GiB)")
    allocator_reserve_fraction: float | None = Field(
        default=None, ge=0, le=1, description="reserved above allocated, as a fraction of allocated (0.10)"
    )
    nccl_gib: float | None = Field(default=None, ge=0, le=16, description="NCCL buffers with more than one GPU (1.5)")

    @model_validator(mode="before")
    @classmethod
    def _framework_defaults(cls, data: object) -> object:
        """Settings not given (absent or None) take the framework's default, then the plain one."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        defaults = framework_defaults(data.get("framework"))
        if data.get("liger") and data.get("loss") is None:
            data["loss"] = "fused-linear"  # Liger replaces the model's loss, whatever the framework's
        plain = {
            "loss": "full",
            "optimizer_impl": "foreach",
            "quant_backend": "bitsandbytes",
            "checkpoint_unit": "layer",
            "logits_in_backward": "freed",
            "sharding_impl": "zero",
            "nf4_scales": "double-quant",
            "quantised_linears": "layers",
            "lora_dropout": 0.0,
            "qkv_projection": "model",
        }
        for name, value in plain.items():
            if data.get(name) is None:
                data[name] = defaults.get(name, value)
        if data.get("keep_gradients"):
            data["grads_freed_after_step"] = False
        given = {name: data[name] for name in OVERHEAD_FLAGS if data.get(name) is not None}
        if given:
            overheads = data.get("overheads") or Overheads()
            overheads = overheads.model_dump() if isinstance(overheads, Overheads) else dict(overheads)
            data["overheads"] = Overheads(**(overheads | given))
        return data

    @model_validator(mode="after")
    def _check_offload(self) -> TrainingSettings:
        if self.offload_parameters and self.zero != 3:
            raise ValueError(
                f"offloading parameters to the CPU needs ZeRO stage 3 (parameters sharded), not stage {self.zero}"
            )
        if self.liger and self.loss == "chunked":
            raise ValueError(
                "--liger computes the loss with Liger's fused linear cross-entropy; it cannot be combined with "
                "--loss chunked (use --loss fused-linear, or --loss full for Liger without its loss)"
            )
        if self.optimizer_in_backward and self.grad_accum > 1:
            raise ValueError(
                "--optimizer-in-backward steps each parameter as its gradient appears, so it cannot accumulate "
                f"gradients over {self.grad_accum} micro-batches (torchtune raises the same error)"
            )
        if self.optimizer_in_backward and (self.offload_optimizer or self.optimizer == "none"):
            reason = "the optimizer runs on the CPU (--offload-optimizer)" if self.offload_optimizer else "no optimizer"
            raise ValueError(f"--optimizer-in-backward needs an optimizer on the GPU; here {reason}")
        return self

    @property
    def total_gpus(self) -> int:
        """GPUs of the whole job: data x tensor x pipeline parallel (Narayanan et al. 2021, Sec. 3)."""
        return self.gpus * self.tensor_parallel * self.pipeline_parallel

    @property
    def tokens(self) -> int:
        """Tokens of one micro-batch on each data-parallel GPU: micro_batch x seq_len."""
        return self.micro_batch * self.seq_len

    @property
    def precision_facts(self) -> PrecisionFacts:
        """Bytes of weights, gradients, compute, hidden states and optimizer states under this
        precision and method, and whether autocast runs (calculators.workload.precision). The
        record is made once per (precision, method) and shared by every settings object with that
        pair; a property rather than a cached one, since model_copy copies a cached value into a
        copy whose precision or method may differ (tower_settings trains the encoder in full)."""
        return precision_facts(self.precision, self.method)


def hidden_states_fp32(settings: TrainingSettings) -> bool:
    """Whether the hidden states between layers are fp32 (precision.hidden_states_are_fp32)."""
    return settings.precision_facts.hidden_states_fp32


def autocast_casts_hidden_states(settings: TrainingSettings) -> bool:
    """Whether autocast casts the hidden states down to half for each matmul that reads them:
    under autocast when they are fp32 (hidden_states_fp32)."""
    return settings.precision_facts.autocast_casts_hidden_states


def residual_bytes(settings: TrainingSettings) -> int:
    """Bytes per element of the hidden states (hidden_states_fp32)."""
    return settings.precision_facts.residual_bytes


def model_dtype_bytes(settings: TrainingSettings) -> int:
    """Bytes per element of what a model builds in its own dtype (`self.dtype`, its parameters'):
    attention masks, position biases, gathered embedding rows. fp32 where the parameters are
    (full training under fp32 or autocast), half otherwise (pure half training; LoRA loads the
    base in half): the hidden states' rule (hidden_states_fp32)."""
    return settings.precision_facts.model_dtype_bytes


def image_tokens_per_image(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Tokens one image adds to the language model's sequence: the user's figure, else the
    model's own (a fixed-resolution tower: LLaVA-1.5's 576 = (336/14)^2 CLIP patches, Gemma 3's
    256 pooled SigLIP tokens, read from the config by calculators/models/hf_config.py); 0 for a model
    that reads images by cross-attention (Llama 3.2 Vision: calculators.workload.vision). Raises
    ValueError when images are given for a model whose count depends on the image's size."""
    tower = extension(spec, "vision")
    if tower is not None and tower.cross_attention_layers:
        if settings.image_tokens:
            raise ValueError(
                f"{spec.name} reads each image by cross-attention as {tower.cross_attention_tokens_per_image} keys "
                "and values (its tiles), not as tokens of its sequence; leave tokens per image at 0"
            )
        return 0
    if not spec.extra_params and not spec.image_tokens:
        raise ValueError(f"{spec.name} has no vision tower: set images per sample to 0")
    if settings.image_tokens:
        return settings.image_tokens
    if spec.image_tokens:
        return spec.image_tokens
    raise ValueError(
        f"{spec.name} takes a number of tokens per image that depends on the image's size (dynamic resolution, "
        "e.g. Qwen2.5-VL: (height/28) x (width/28)); give it with --image-tokens"
    )


def decoder_settings(spec: ModelSpec, settings: TrainingSettings) -> TrainingSettings:
    """The settings as an encoder-decoder model's decoder and LM head see them: target_len tokens
    per sample (T5's labels; the encoder runs on seq_len). Unchanged for a decoder-only model or
    without a target length."""
    if not extension(spec, "cross_attention_layers") or settings.target_len is None:
        return settings
    return settings.model_copy(update={"seq_len": settings.target_len, "target_len": None})


def language_model_settings(spec: ModelSpec, settings: TrainingSettings) -> TrainingSettings:
    """The settings as the language model sees them: each sample's sequence is its text tokens
    plus images_per_sample x image_tokens_per_image (the image tokens are spliced into the
    sequence, e.g. transformers' LlavaForConditionalGeneration merges the projected patches in
    place of its image tokens). The image encoder's own work is calculators.workload.vision's."""
    if not settings.images_per_sample:
        return settings
    image_tokens = settings.images_per_sample * image_tokens_per_image(spec, settings)
    return settings.model_copy(update={"seq_len": settings.seq_len + image_tokens, "images_per_sample": 0})
