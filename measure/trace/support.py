"""What a one-process CPU trace can reproduce faithfully (no torch import).

Checked in the caller before a worker starts and again in the worker, so an unsupported
configuration fails fast with a clear reason.
"""

from __future__ import annotations

from calculators.models.spec import ModelSpec, extension
from calculators.workload.precision import is_autocast
from calculators.workload.training import TrainingSettings
from measure.trace.result import UnsupportedConfiguration


def check_spec(spec: ModelSpec) -> None:
    """Raise UnsupportedConfiguration for specs the reference models cannot build exactly."""
    for present, reason in _unbuilt_features(spec):
        if present:
            raise UnsupportedConfiguration(f"{reason} (the reference models cannot build it; the estimate models it)")
    if spec.parallel_residual and spec.norms_per_layer == 4:
        raise UnsupportedConfiguration("sandwich norms with a parallel residual")
    norm_counts = (1, 2) if spec.parallel_residual else (2, 4)
    if spec.norms_per_layer not in norm_counts:
        raise UnsupportedConfiguration(
            f"{spec.norms_per_layer} norms per layer (the reference models have 2 or 4, or 1 or 2 side by side)"
        )
    if spec.norm == "rmsnorm" and spec.position_embedding == "learned":
        raise UnsupportedConfiguration("RMSNorm with learned positions (the Llama-style model uses rotary positions)")
    if spec.head == "classifier" and spec.norm != "layernorm":
        raise UnsupportedConfiguration("a classifier head on a Llama-style model")
    if spec.n_experts > 1 and not spec.is_gated_mlp:
        raise UnsupportedConfiguration("a mixture of GELU experts (the MoE reference is Mixtral-style SwiGLU)")


def _unbuilt_features(spec: ModelSpec) -> list[tuple[bool, str]]:
    """Architecture features the reference transformers (Llama-, GPT/BERT- and Mixtral-style)
    have no module for, each with the reason the trace gives."""
    encoder_decoder = extension(spec, "cross_attention_layers") > 0
    return [
        (spec.position_embedding == "relative" and not encoder_decoder, "relative position biases outside T5"),
        (encoder_decoder and spec.position_embedding != "relative", "an encoder-decoder other than T5"),
    ]


def _setting(settings: TrainingSettings, name: str, default):
    """A settings field, or its default when this version of TrainingSettings lacks it."""
    return getattr(settings, name, default)


def check_settings(settings: TrainingSettings) -> None:
    """Raise UnsupportedConfiguration for settings a one-process CPU trace cannot reproduce."""
    if settings.gpus > 1:
        raise UnsupportedConfiguration("sharding over several GPUs (DDP/ZeRO/FSDP) is not traced; use gpus=1")
    if _setting(settings, "tensor_parallel", 1) > 1 or _setting(settings, "pipeline_parallel", 1) > 1:
        raise UnsupportedConfiguration("tensor or pipeline parallelism is not traced; use one GPU")
    if _setting(settings, "method", "full") == "qlora":
        raise UnsupportedConfiguration(
            "QLoRA's NF4 weights and bitsandbytes kernels have no CPU fake-tensor equivalent"
        )
    if _setting(settings, "qkv_projection", "model") == "fused":
        raise UnsupportedConfiguration(
            "litgpt's model code (one fused q/k/v linear for every model, its LoRA zero-padding) is not traced; "
            "use --qkv-projection model (the engine's litgpt terms are checked against lit-gpt's own code in "
            "tests/test_memory_stack.py)"
        )
    if _setting(settings, "frozen_layers", 0) > 0:
        raise UnsupportedConfiguration("frozen layers are not traced")
    if _setting(settings, "offload_optimizer", False) or _setting(settings, "offload_parameters", False):
        raise UnsupportedConfiguration("CPU offload (ZeRO-Offload/Infinity) is not traced")
    if settings.optimizer in ("adamw-8bit", "paged-adamw", "paged-adamw-8bit"):
        raise UnsupportedConfiguration(
            "8-bit AdamW and paged AdamW (bitsandbytes CUDA kernels, paged memory) cannot be traced on the CPU"
        )
    if settings.optimizer == "none":
        raise UnsupportedConfiguration("the traced step always runs an optimizer; choose one")
    if _setting(settings, "loss", "full") == "chunked" and _setting(settings, "compile", False):
        raise UnsupportedConfiguration("torch.compile's partitioner is not traced; trace the chunked loss without it")
    if _setting(settings, "optimizer_in_backward", False) and settings.precision in ("fp16-mixed", "bf16-mixed"):
        raise UnsupportedConfiguration("the optimizer step in backward with an fp32 master copy is not traced")
    if _setting(settings, "liger", False) and is_autocast(settings.precision):
        raise UnsupportedConfiguration("Liger kernels under autocast are not traced; use a bf16 or fp32 precision")
    if _setting(settings, "compile", False):
        _check_compile(settings)
    if settings.optimizer == "adafactor":
        raise UnsupportedConfiguration(
            "Adafactor: torch.optim.Adafactor reads a tensor value (.item()) that fake tensors do not have"
        )


def _refuse_first(unsupported: list[tuple[bool, str]], message: str) -> None:
    """Raise UnsupportedConfiguration with `message` (its {reason} filled in) for the first
    (present, reason) pair that is present."""
    for present, reason in unsupported:
        if present:
            raise UnsupportedConfiguration(message.format(reason=reason))


def _check_compile(settings: TrainingSettings) -> None:
    """torch.compile is traced for the layers (AOT autograd's partitioner, measure.trace.
    compile_partition) without autocast, checkpointing, adapters, Liger or offloading."""
    unsupported = [
        (is_autocast(settings.precision), "under autocast"),
        (settings.checkpointing != "none", "with activation checkpointing"),
        (_setting(settings, "method", "full") != "full", "with adapters"),
        (_setting(settings, "liger", False), "with Liger kernels"),
        (_setting(settings, "activation_offload", False), "with activation offloading"),
    ]
    _refuse_first(unsupported, "torch.compile {reason} is not traced; the estimate models it")


def _check_attention_sinks(spec: ModelSpec, settings: TrainingSettings) -> None:
    """gpt-oss's sinks are traced with eager attention, the path transformers trains them with:
    it has no SDPA path for them (GptOssPreTrainedModel._supports_sdpa = False), and the
    flash-attention-3 kernel that takes them had no backward for them when gpt-oss came out."""
    if spec.attention_sinks and settings.attention != "eager":
        raise UnsupportedConfiguration(
            "fused attention with attention sinks (transformers trains gpt-oss with eager attention); "
            "trace it with --attention eager"
        )


def _check_encoder_decoder(spec: ModelSpec, settings: TrainingSettings) -> None:
    """T5 is traced (measure.trace.t5) without checkpointing or with each block checkpointed,
    as transformers' gradient checkpointing does, and without torch.compile or Liger."""
    if not extension(spec, "cross_attention_layers"):
        return
    unsupported = [
        (settings.checkpointing not in ("none", "full"), f"{settings.checkpointing} checkpointing"),
        (_setting(settings, "checkpoint_unit", "layer") != "layer", "per-submodule checkpointing"),
        (_setting(settings, "compile", False), "torch.compile"),
        (_setting(settings, "liger", False), "Liger kernels"),
        (_setting(settings, "activation_offload", False), "activation offloading"),
    ]
    _refuse_first(unsupported, "T5 with {reason} is not traced; the estimate models it")


def _check_images(spec: ModelSpec, settings: TrainingSettings) -> None:
    """Images are traced through the encoder's layers into the language model's sequence, or
    into Llama 3.2 Vision's cross-attention layers (measure.trace.mllama); not for an encoder whose
    shapes are not read."""
    if not _setting(settings, "images_per_sample", 0):
        return
    tower = extension(spec, "vision")
    if tower is None:
        raise UnsupportedConfiguration(
            "images of a model whose vision encoder's shapes are not read; trace with images per sample 0 and the "
            "image tokens in the sequence length"
        )
    if tower.cross_attention_layers:
        unsupported = [
            (_setting(settings, "liger", False), "Liger kernels"),
            (_setting(settings, "checkpoint_unit", "layer") != "layer", "per-submodule checkpointing"),
            (settings.checkpointing == "op-selective", "per-op checkpointing"),
            (_setting(settings, "activation_offload", False), "activation offloading"),
        ]
        _refuse_first(unsupported, "Llama 3.2 Vision's images with {reason} are not traced; the estimate models them")
    if _setting(settings, "compile", False):
        raise UnsupportedConfiguration("torch.compile with images is not traced; the estimate models it")


def check_traceable(spec: ModelSpec, settings: TrainingSettings) -> None:
    """Raise UnsupportedConfiguration where the trace cannot reproduce the step faithfully (the
    memory engine's own refusals are calculators.workload.support.check_supported)."""
    check_spec(spec)
    check_settings(settings)
    _check_images(spec, settings)
    _check_encoder_decoder(spec, settings)
    _check_attention_sinks(spec, settings)
    if _setting(settings, "compile", False) and spec.n_experts > 1:
        raise UnsupportedConfiguration("torch.compile of a mixture of experts is not traced; the estimate models it")
