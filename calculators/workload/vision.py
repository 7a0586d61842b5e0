"""A vision-language model's image encoder inside a training step.

The language model sees each image as tokens of its sequence (LLaVA, Gemma 3, Qwen2.5-VL:
calculators.workload.training.language_model_settings) or as keys and values of its cross-attention
layers (Llama 3.2 Vision). The encoder itself is a stack of ViT layers run on each image's
patches before the language model; this module describes that run as the memory and time
engines describe a language model's layers: a ModelSpec of the encoder's layers and the
TrainingSettings of one micro-batch's images, so the same per-layer formulas apply to both.
"""

from __future__ import annotations

from calculators.models.geometry import layer_matmul_elements
from calculators.models.spec import ModelSpec, VisionTower, extension
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings, image_tokens_per_image


def vision_tower(spec: ModelSpec) -> VisionTower | None:
    """The model's image encoder, None for a text-only model or an encoder we do not read."""
    return extension(spec, "vision")


def tower_trains(settings: TrainingSettings) -> bool:
    """Whether the encoder's weights train: in full training unless frozen. HF Trainer trains every
    parameter that requires grad, all of them by default. LLaVA freezes its CLIP tower and runs it
    under no_grad (haotian-liu/LLaVA llava/model/multimodal_encoder/clip_encoder.py @380436b5:
    `self.vision_tower.requires_grad_(False)`); Qwen2.5-VL's fine-tuning script freezes
    `model.visual` unless `tune_mm_vision`, its merger unless `tune_mm_mlp` (QwenLM/Qwen2.5-VL
    qwen-vl-finetune/qwenvl/train/train_qwen.py @14f9083a, set_model). LoRA and QLoRA freeze the
    whole base, the encoder with it."""
    return settings.method == "full" and not settings.freeze_vision_tower


def tower_tokens_per_image(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Patches the encoder runs for one image: its fixed count (577 for LLaVA-1.5's CLIP at
    336 px, 4096 for Gemma 3's SigLIP at 896 px, 4 x 1608 for Llama 3.2 Vision's padded tiles),
    or, at dynamic resolution, the image's tokens in the language model x the patches merged
    into each (Qwen2.5-VL: 2 x 2)."""
    tower = vision_tower(spec)
    if tower is None:
        return 0
    if tower.tokens_per_image:
        return tower.tokens_per_image
    return image_tokens_per_image(spec, settings) * tower.patches_per_image_token


def tower_model_spec(spec: ModelSpec) -> ModelSpec:
    """The encoder's layers as a ModelSpec: full multi-head attention over the patches, learned
    (or no) positions, no vocabulary. Only the per-layer shapes are read from it."""
    tower = vision_tower(spec)
    if tower is None:
        raise ValueError(f"{spec.name} has no vision tower")
    return ModelSpec(
        name=f"{spec.name} vision tower",
        family="vision",
        n_layers=tower.n_layers,
        hidden_size=tower.hidden_size,
        n_heads=tower.n_heads,
        n_kv_heads=tower.n_heads,
        ffn_hidden_size=tower.ffn_hidden_size,
        vocab_size=1,
        activation=tower.activation,
        norm=tower.norm,
        position_embedding="learned",
        linear_bias=True,
        qkv_bias=True,
        head="classifier",
        source=spec.source,
    )


def tower_settings(spec: ModelSpec, settings: TrainingSettings) -> TrainingSettings:
    """One micro-batch's images as the encoder runs them: micro_batch x images_per_sample
    sequences of its patches; the step's precision, attention and checkpointing (HF's
    gradient_checkpointing_enable reaches every submodule that supports it, the encoders here
    included); never split by tensor parallelism (the encoder is replicated); without Liger's
    kernels, which replace the language model's norms, SwiGLU and loss (linkedin/Liger-Kernel
    apply_liger_kernel_to_qwen2_5_vl leaves the encoder's MLP alone)."""
    return settings.model_copy(
        update={
            "micro_batch": settings.micro_batch * settings.images_per_sample,
            "seq_len": tower_tokens_per_image(spec, settings),
            "images_per_sample": 0,
            "image_tokens": None,
            "tensor_parallel": 1,
            "method": "full",
            "frozen_layers": 0,
            "liger": False,
        }
    )


def frozen_tower_parameters(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Encoder parameters that do not train: all of them when frozen (full training with the
    encoder frozen; LoRA/QLoRA freeze everything but the adapters), none otherwise. The
    projector (and Mllama's cross-attention gates) trains with the language model in full
    training either way."""
    tower = vision_tower(spec)
    if tower is None or is_adapter_method(settings.method):
        return 0  # the adapter layout keeps the whole base frozen already
    return 0 if tower_trains(settings) else tower.parameters


def trained_vision_parameters(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Parameters outside the language model's layers that train in full training: the encoder
    and projector (and Mllama's cross-attention gates), less a frozen encoder."""
    return spec.extra_params - frozen_tower_parameters(spec, settings)


def vision_cast_elements(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Trained vision weights whose autocast casts stay cached from their use in forward until
    the encoder's backward, last in the step (autocast caches the half cast of a leaf weight that
    requires grad; a frozen weight's cast is made and dropped at each use): the projector's, when
    images run in full training, and the encoder layers' matmul weights when they train too,
    except under full checkpointing, whose layers run their forward without autocast's cache
    surviving them. Left out: the patch embedding's convolution weight (0.6M parameters on CLIP
    ViT-L, 1.5M on Qwen2.5-VL's encoder, whose shape the engine does not read), and fp8 runs,
    whose float8 casts cover the language model's linears only."""
    tower = vision_tower(spec)
    if tower is None or not settings.images_per_sample or settings.method != "full":
        return 0.0
    cast = float(spec.extra_params - tower.parameters)  # the projector (and Mllama's gates)
    if tower_trains(settings) and settings.checkpointing != "full":
        cast += tower.n_layers * layer_matmul_elements(tower_model_spec(spec))
    return cast


def cross_attention_image_tokens(spec: ModelSpec, settings: TrainingSettings) -> int:
    """Keys and values each cross-attention layer reads per sample: images x tiles x 1601 for
    Llama 3.2 Vision at 560 px (modeling_mllama.py: the padding is sliced off before the
    projector); 0 for models that splice image tokens into the sequence."""
    tower = vision_tower(spec)
    if tower is None or not tower.cross_attention_layers:
        return 0
    return settings.images_per_sample * tower.cross_attention_tokens_per_image


def tower_forward_flops_per_image(spec: ModelSpec, settings: TrainingSettings) -> float:
    """Forward FLOPs of the encoder on one image: 2 per matmul weight and patch (Kaplan et al.
    2020, Sec. 2.1) over its layers, plus bidirectional attention, 4 x patches^2 x width per
    layer (Q@K^T and P@V over the whole square: no causal half; within windows in windowed
    layers, VisionTower.attention_share). Patch embedding and positions are left out (under 0.2%
    of the encoder's parameters)."""
    tower = vision_tower(spec)
    if tower is None:
        return 0.0
    patches = tower_tokens_per_image(spec, settings)
    h, f = tower.hidden_size, tower.ffn_hidden_size
    mlp_weights = (3 if tower.activation in ("swiglu", "geglu") else 2) * h * f
    per_layer = 2 * patches * (4 * h * h + mlp_weights) + 4 * patches * patches * h * tower.attention_share(patches)
    return tower.n_layers * per_layer
