"""Peak GPU memory of one training step of an image model of the vision library.

One step is forward, cross-entropy, backward and the optimizer step, then
`zero_grad(set_to_none=True)` (PyTorch's default since 2.0, torch/optim/optimizer.py), so no
gradient is alive during forward. The step passes through three phases and its peak is the
largest:

- end of forward: weights, BatchNorm buffers, optimizer states, the images and labels, the
  autocast weight copies, the activations autograd keeps for backward, and cuDNN's workspace;
- backward: the same plus the backward's transient above what forward kept (the gradients of the
  largest feature maps, measured by the trace);
- optimizer step: weights, buffers, states, inputs, every gradient, and the step's temporaries.

The per-image activation figures come from data/vision_library.json (calculators.models.vision_library),
which traced the real torchvision/timm modules; everything else is counted from the parameter
count. `bench/vision_library.py --check` compares this engine with fresh traces. Pure: no torch.

Activation checkpointing (`checkpointing="full"`) wraps every block (timm's `set_grad_checkpointing`,
torch.utils.checkpoint per block): forward keeps only each block's input and what lies outside the
blocks, and backward recomputes one block at a time (shares from data/vision_layers.json,
vision_library.checkpoint_shares). ZeRO/FSDP shards the optimizer states (stage 1), the gradients
(2) and the weights (3) over the data-parallel GPUs (Rajbhandari et al. 2020, arXiv:1910.02054 Sec. 5).
`device_peak_gib` adds what torch does not allocate: the caching allocator's reserve, the CUDA
context, NCCL's buffers with more than one GPU (the text engine's Overheads defaults).

Left out, and said in the result's assumptions: the weights ZeRO-3 gathers per block, and the
backward's gradients of early layers at micro-batches so small that gradients outweigh activations.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from calculators.memory.states import shard_divisor
from calculators.models.vision_library import VisionModel, VisionVariant, checkpoint_shares
from calculators.units import GIB
from calculators.workload.training import Overheads

Precision = Literal["fp32", "amp-bf16", "amp-fp16"]
Optimizer = Literal["sgd", "adamw", "lamb"]
Checkpointing = Literal["none", "full"]
VISION_PRECISIONS: tuple[str, ...] = Precision.__args__
VISION_OPTIMIZERS: tuple[str, ...] = Optimizer.__args__
VISION_CHECKPOINTING: tuple[str, ...] = Checkpointing.__args__

FP32_BYTES = 4
LABEL_BYTES = 8  # int64 class indices, what torch.nn.functional.cross_entropy takes
# Optimizer states per parameter, in fp32 values.
STATES_PER_PARAMETER = {"sgd": 1, "adamw": 2, "lamb": 2}
# 512 MiB: PaddlePaddle's default cap on a cuDNN convolution's workspace
# (FLAGS_conv_workspace_size_limit, https://www.paddlepaddle.org.cn/documentation/docs/en/guides/flags/cudnn_en.html).
# PyTorch sets no cap (cuDNN's algorithm search takes what is free), so this is an assumption a user can change.
DEFAULT_CUDNN_WORKSPACE_GIB = 0.5
MAX_IMAGE_SIZE = 4096
MAX_MICRO_BATCH = 1_000_000


class VisionInputError(ValueError):
    """A vision workload the engine cannot take; the message names the bound."""


class VisionTrainingInput(BaseModel):
    """One training step of a library image model."""

    model: VisionModel
    micro_batch: int = Field(gt=0, le=MAX_MICRO_BATCH)  # images per GPU per step
    image_size: int | None = Field(
        default=None, gt=0, le=MAX_IMAGE_SIZE, description="pixels per side, square; none = the model's own"
    )
    precision: Precision = "fp32"
    channels_last: bool = Field(default=False, description="NHWC memory format (torch.channels_last)")
    optimizer: Optimizer = "sgd"
    checkpointing: Checkpointing = "none"
    gpus: int = Field(default=1, gt=0, le=1_000_000)  # data-parallel GPUs
    zero: int = Field(default=0, ge=0, le=3)
    cudnn_workspace_gib: float = Field(
        default=DEFAULT_CUDNN_WORKSPACE_GIB, ge=0, le=64, description="cuDNN convolution workspace (GiB)"
    )
    overheads: Overheads = Overheads()

    @property
    def resolution(self) -> int:
        return self.image_size or self.model.reference_resolution


class VisionMemoryResult(BaseModel):
    """GiB by component, the phases and the peak."""

    weights_gib: float
    buffers_gib: float
    gradients_gib: float
    optimizer_states_gib: float
    optimizer_step_temporaries_gib: float
    autocast_weight_copies_gib: float
    activations_gib: float
    backward_transient_gib: float
    inputs_gib: float
    cudnn_workspace_gib: float
    recompute_gib: float
    phases_gib: dict[str, float]
    peak_phase: str
    peak_gib: float
    device_peak_gib: float
    parameters: int
    assumptions: list[str]


def image_size_bound(model: VisionModel) -> int:
    """What a side must be a multiple of: the patch for a ViT (its patch embedding is a
    convolution of that stride), 224 for Swin (four stages halving a 56-token side, each split into
    7 x 7 windows: timm's SwinTransformer, swin_transformer.py), 16 for the U-Net (four 2 x 2 poolings,
    arXiv:1505.04597 Fig. 1); a convolutional network takes any size of at least its stride."""
    if model.kind == "vit":
        return model.patch_size
    if model.kind == "swin":
        return 224
    if model.kind == "unet":
        return model.stride
    return 1


def check_image_size(model: VisionModel, image_size: int) -> None:
    """Refuse a size the model cannot take, naming the bound."""
    multiple = image_size_bound(model)
    if not model.stride <= image_size <= MAX_IMAGE_SIZE and model.kind == "cnn":
        raise VisionInputError(f"image size must be {model.stride} to {MAX_IMAGE_SIZE} pixels for {model.key}")
    if not 0 < image_size <= MAX_IMAGE_SIZE or image_size % multiple:
        raise VisionInputError(
            f"image size for {model.key} must be a multiple of {multiple} pixels, up to {MAX_IMAGE_SIZE}"
        )


def parameters_at(model: VisionModel, image_size: int) -> int:
    """Parameters at `image_size`: the table's exact count, plus a ViT's position embedding,
    which holds one vector per token (timm vision_transformer.py `pos_embed`), grown by the traced
    parameters per token."""
    grown = model.parameters_per_unit * (model.size_unit(image_size) - model.size_unit(model.reference_resolution))
    return model.parameters + round(grown)


def weight_bytes(parameters: int) -> float:
    """fp32 weights: torch.autocast keeps the parameters in fp32 and casts them per op
    (https://pytorch.org/docs/stable/amp.html; Micikevicius et al. 2018, arXiv:1710.03740 Sec. 3.1,
    the fp32 master copy)."""
    return FP32_BYTES * parameters


def gradient_bytes(parameters: int) -> float:
    """One gradient per parameter, in the parameter's dtype (fp32 under autocast: the backward of
    the cast accumulates into the fp32 leaf)."""
    return FP32_BYTES * parameters


def optimizer_state_bytes(parameters: int, optimizer: str) -> float:
    """fp32 states per parameter: SGD with momentum keeps `momentum_buffer` (torch/optim/sgd.py);
    AdamW keeps `exp_avg` and `exp_avg_sq` (torch/optim/adamw.py, Loshchilov and Hutter 2019,
    arXiv:1711.05101 Algorithm 2); LAMB the same two moments (You et al. 2020, arXiv:1904.00962
    Algorithm 2). AdamW's per-tensor `step` scalars (4 bytes per tensor) are left out."""
    return FP32_BYTES * STATES_PER_PARAMETER[optimizer] * parameters


def optimizer_step_temporary_bytes(parameters: int) -> float:
    """The foreach optimizer step (CUDA's default implementation) makes one parameter-sized list:
    SGD's weight decay `torch._foreach_add(grads, params, alpha=weight_decay)` returns new gradients
    (torch/optim/sgd.py `_multi_tensor_sgd`), AdamW's `torch._foreach_sqrt(exp_avg_sq)` a new
    denominator (torch/optim/adam.py `_multi_tensor_adam`); the trace measures exactly one
    parameter-sized fp32 list for both. LAMB is assumed to be the same (apex's FusedLAMB computes its
    update in place per chunk, so this is an upper bound there)."""
    return FP32_BYTES * parameters


def variant_of(model: VisionModel, precision: str, channels_last: bool) -> VisionVariant:
    """The traced variant for a precision and memory format. fp16 autocast reads the bf16 row:
    CUDA autocast casts the same ops to either half dtype (torch/csrc/autograd ... autocast_mode.h,
    one op list for both), so the bytes are the same; `--check` traces fp16 against it."""
    base = "fp32" if precision == "fp32" else "amp-bf16"
    return model.variants[f"{base}-channels-last" if channels_last else base]


def _grown(at_reference: float, per_unit: float, per_unit_squared: float, model: VisionModel, size: int) -> float:
    """A per-image value at `size` from its traced value at the reference resolution and its traced
    growth per size unit (pixel or token) and per unit squared."""
    unit, reference = model.size_unit(size), model.size_unit(model.reference_resolution)
    return at_reference + per_unit * (unit - reference) + per_unit_squared * (unit * unit - reference * reference)


def activation_bytes(model: VisionModel, variant: VisionVariant, micro_batch: int, image_size: int) -> float:
    """What autograd keeps for backward: per image from the table (grown to `image_size`) times the
    micro-batch. Convolutional features grow with pixels; a ViT's with tokens (its fused attention
    keeps the log-sum-exp per token, not the scores, so the traced squared term is about zero)."""
    per_image = _grown(
        variant.saved_bytes_per_image,
        variant.saved_bytes_per_unit,
        variant.saved_bytes_per_unit_squared,
        model,
        image_size,
    )
    return micro_batch * per_image


def backward_transient_bytes(model: VisionModel, variant: VisionVariant, micro_batch: int, image_size: int) -> float:
    """The backward's live bytes above what forward kept: per image, the gradients flowing back
    through the feature maps, and, whatever the batch, the parameter gradients made by then. Both
    from the trace (two micro-batches at the reference resolution separate them)."""
    per_image = _grown(
        variant.backward_extra_bytes_per_image,
        variant.backward_extra_bytes_per_unit,
        variant.backward_extra_bytes_per_unit_squared,
        model,
        image_size,
    )
    return max(micro_batch * per_image + variant.backward_extra_fixed_bytes, 0.0)


def input_bytes(model: VisionModel, micro_batch: int, image_size: int) -> float:
    """fp32 images (3 channels) and int64 labels: one per image, one per pixel for the U-Net."""
    images = micro_batch * 3 * image_size * image_size * FP32_BYTES
    labels = micro_batch * (image_size * image_size if model.kind == "unet" else 1) * LABEL_BYTES
    return images + labels


def estimate_vision_memory(run: VisionTrainingInput) -> VisionMemoryResult:
    """The components, the three phases and the peak, in GiB. An image size the model cannot take
    raises VisionInputError, whose message names the bound."""
    model, size = run.model, run.resolution
    check_image_size(model, size)
    variant = variant_of(model, run.precision, run.channels_last)
    parameters = parameters_at(model, size)
    activations = activation_bytes(model, variant, run.micro_batch, size)
    kept, recompute = checkpointed_activation_bytes(run, activations)
    parts = {
        "weights": weight_bytes(parameters) / shard_divisor(run.zero, 3, run.gpus),
        "buffers": float(model.buffer_bytes),
        "gradients": gradient_bytes(parameters) / shard_divisor(run.zero, 2, run.gpus),
        "optimizer_states": optimizer_state_bytes(parameters, run.optimizer) / shard_divisor(run.zero, 1, run.gpus),
        "optimizer_step_temporaries": optimizer_step_temporary_bytes(parameters) / shard_divisor(run.zero, 1, run.gpus),
        "autocast_weight_copies": float(variant.autocast_copy_bytes) if run.precision != "fp32" else 0.0,
        "activations": kept,
        "recompute": recompute,
        "backward_transient": (
            backward_transient_bytes(model, variant, run.micro_batch, size)
            if run.checkpointing == "none"
            else checkpointed_gradient_bytes(run)
        ),
        "inputs": input_bytes(model, run.micro_batch, size),
        "cudnn_workspace": run.cudnn_workspace_gib * GIB,
    }
    phases = step_phases(parts)
    peak_phase = max(phases, key=phases.get)
    return VisionMemoryResult(
        **{f"{name}_gib": value / GIB for name, value in parts.items()},
        phases_gib={name: value / GIB for name, value in phases.items()},
        peak_phase=peak_phase,
        peak_gib=phases[peak_phase] / GIB,
        device_peak_gib=device_peak_bytes(phases[peak_phase], run) / GIB,
        parameters=parameters,
        assumptions=assumptions(run),
    )


def checks_checkpointing(model: VisionModel) -> str | None:
    """Why the model cannot be checkpointed block by block, or None when it can."""
    if checkpoint_shares(model.key) is None:
        return f"{model.key} has no repeated blocks to checkpoint (the U-Net's skip connections cross every level)"
    return None


def checkpointing_api(model: VisionModel) -> str:
    """How the model's own library checkpoints every block: timm models call
    `model.set_grad_checkpointing()` (timm/models/_manipulate.py `checkpoint_seq`); torchvision
    models have no such switch, so each block is wrapped in `torch.utils.checkpoint.checkpoint`
    (pytorch.org/docs/stable/checkpoint.html). The model's traced source names its library."""
    if model.source.startswith("timm"):
        return "timm set_grad_checkpointing"
    return "torch.utils.checkpoint on each block"


def checkpointed_activation_bytes(run: VisionTrainingInput, activations: float) -> tuple[float, float]:
    """(kept through forward, live above that at the backward's peak). Without checkpointing
    everything is kept. With every block checkpointed (torch.utils.checkpoint: a block's forward
    keeps nothing but its input and runs again in backward; Chen et al. 2016, arXiv:1604.06174
    Sec. 3), forward keeps what lies outside the blocks (its share of the fp32 trace, applied to this
    variant's bytes at this size) and each block's input (measured per precision: fp32 where the
    residual stream adds an fp32 parameter; grown with the size unit). Backward's extra, the block run
    again and the gradients flowing through it, is per image (grown with the size unit) and fixed (the
    autocast copies of a block's weights made again), from checkpointed steps traced at the reference
    resolution with two micro-batches."""
    if run.checkpointing == "none":
        return activations, 0.0
    shares = _checkpoint_shares(run.model)
    precision = "fp32" if run.precision == "fp32" else "amp"
    images = run.micro_batch * _unit_growth(run)
    inputs = sum(block.input_bytes_fp32 if precision == "fp32" else block.input_bytes_amp for block in shares.blocks)
    kept = activations * shares.outside_share + images * inputs
    extra = images * shares.backward_extra_bytes_per_image[precision] + shares.backward_extra_fixed_bytes[precision]
    return kept, max(extra, 0.0)


def checkpointed_gradient_bytes(run: VisionTrainingInput) -> float:
    """The parameter gradients live at a checkpointed backward's peak, which comes late, when the
    first blocks run again and almost every gradient exists (traced; sharded as ZeRO-2 shards them)."""
    shares = _checkpoint_shares(run.model)
    precision = "fp32" if run.precision == "fp32" else "amp"
    return shares.backward_gradient_bytes[precision] / shard_divisor(run.zero, 2, run.gpus)


def _checkpoint_shares(model: VisionModel):
    problem = checks_checkpointing(model)
    if problem:
        raise VisionInputError(problem)
    return checkpoint_shares(model.key)


def _unit_growth(run: VisionTrainingInput) -> float:
    """How much a per-image figure traced at the reference resolution grows at this size (pixels or tokens)."""
    model = run.model
    return model.size_unit(run.resolution) / model.size_unit(model.reference_resolution)


def device_peak_bytes(allocated: float, run: VisionTrainingInput) -> float:
    """What nvidia-smi shows at the peak: torch's allocated bytes with the caching allocator's
    reserve, the CUDA context, and NCCL's buffers when the step all-reduces over several GPUs
    (Overheads: the same stated defaults as the transformer engine)."""
    overheads = run.overheads
    nccl = overheads.nccl_gib if run.gpus > 1 else 0.0
    return allocated * (1 + overheads.allocator_reserve_fraction) + (overheads.cuda_context_gib + nccl) * GIB


_HELD = ("weights", "buffers", "optimizer_states", "inputs")
_FORWARD = (*_HELD, "autocast_weight_copies", "activations", "cudnn_workspace")
# What is live in each phase (module docstring).
PHASE_PARTS: dict[str, tuple[str, ...]] = {
    "end of forward": _FORWARD,
    "backward": (*_FORWARD, "backward_transient", "recompute"),
    "optimizer step": (*_HELD, "gradients", "optimizer_step_temporaries"),
}
# Each part in words, for a table or a chart (the result's fields are these names with `_gib`).
PART_LABEL = {
    "weights": "weights (fp32)",
    "buffers": "BatchNorm buffers",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "optimizer_step_temporaries": "optimizer step temporaries",
    "autocast_weight_copies": "autocast weight copies",
    "activations": "activations kept for backward",
    "recompute": "blocks run again in backward (checkpointing)",
    "backward_transient": "gradients live at the backward's peak",
    "inputs": "images and labels",
    "cudnn_workspace": "cuDNN workspace",
}


def step_phases(parts: dict[str, float]) -> dict[str, float]:
    """Bytes live in each phase (PHASE_PARTS)."""
    return {phase: sum(parts[name] for name in names) for phase, names in PHASE_PARTS.items()}


def assumptions(run: VisionTrainingInput) -> list[str]:
    overheads = run.overheads
    lines = [
        "Activations from tracing the real torchvision/timm module (data/vision_library.json), "
        f"{run.model.source}, as of {run.model.as_of}.",
        f"cuDNN workspace {run.cudnn_workspace_gib:g} GiB (PaddlePaddle's default cap; PyTorch sets none).",
        f"Device peak: allocated plus {overheads.allocator_reserve_fraction:.0%} allocator reserve, "
        f"{overheads.cuda_context_gib:g} GiB CUDA context"
        + (f", {overheads.nccl_gib:g} GiB NCCL buffers." if run.gpus > 1 else "."),
    ]
    if run.checkpointing == "full":
        lines.append(
            f"Every block checkpointed ({checkpointing_api(run.model)}): block inputs kept, the blocks run again in "
            "backward; kept bytes from the fp32 trace's shares and the measured block inputs, the backward's extra "
            f"from a traced checkpointed step ({run.model.key}, data/vision_checkpointing.json)."
        )
    else:
        lines.append("No activation checkpointing.")
    if run.zero:
        sharded = ["optimizer states", "gradients", "weights"][: run.zero]
        lines.append(
            f"ZeRO-{run.zero} shards the {', '.join(sharded)} over {run.gpus} GPUs; "
            "the weights ZeRO-3 gathers for one block at a time are not counted."
        )
    if run.precision == "amp-fp16":
        lines.append("fp16 autocast reads the bf16 trace (same op lists and element size); loss scaling is a scalar.")
    return lines
