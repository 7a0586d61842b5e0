"""What normalisation layers (LayerNorm, RMSNorm, T5's norm) save for backward, in which dtype."""

from __future__ import annotations

from calculators.memory.activations.linears import fuses_qkv, input_saving_linears, per_rank
from calculators.memory.layout import embedding_trainable
from calculators.models.geometry import norm_parameters
from calculators.models.spec import ModelSpec
from calculators.workload.finetune import is_adapted
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings


def norm_saved_bytes(
    spec: ModelSpec,
    settings: TrainingSettings,
    tokens: int,
    weight_trainable: bool = True,
    width: int | None = None,
    input_bytes: int | None = None,
) -> float:
    """Bytes one norm saves for backward.

    LayerNorm (native op) saves its input plus fp32 mean and rstd per token.
    RMSNorm as written in HF Llama upcasts to fp32 (saved), keeps fp32 rstd, and
    saves the normalised tensor cast back to the input dtype for the weight multiply,
    which only a trainable weight needs (LoRA freezes it).
    Liger's fused RMSNorm saves only its input, in its own dtype, and the fp32 rstd per
    token (linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py @00eba634,
    LigerRMSNormFunction.forward: ctx.save_for_backward(X, W, RSTD)). torch.compile saves the
    same: AOT autograd's min-cut partitioner (torch/_functorch/partitioners.py,
    min_cut_rematerialization_partition) recomputes the upcast and the normalised tensor, which
    are pointwise functions of the saved input and rstd.
    Gemma's RMSNorm multiplies by (1 + weight) before casting back, so that copy is fp32
    (rmsnorm_weight_operand_bytes).
    `width` is the normalised width when it is not the hidden size, and `input_bytes` the input's
    element size when it is not the residual stream's (MLA's latent norms).
    """
    h = spec.hidden_size if width is None else width
    r = settings.precision_facts.residual_bytes if input_bytes is None else input_bytes
    if spec.norm == "layernorm":
        # CUDA autocast runs layer_norm in fp32 (its fp32 op list): a half input is cast, and
        # the fp32 cast is what the norm saves
        saved_input = 4 if settings.precision_facts.autocast else r
        return saved_input * tokens * h + 8 * tokens + layernorm_parameter_casts_bytes(spec, settings, h)
    if settings.liger or settings.compile:
        return r * tokens * h + 4 * tokens
    normalised_for_weight = rmsnorm_weight_operand_bytes(spec, r) * tokens * h if weight_trainable else 0
    return 4 * tokens * h + normalised_for_weight + 4 * tokens + t5_norm_input_bytes(spec, r) * tokens * h


def layer_norms_saved_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """The layer's 'norms' term: what each of its norms saves (norm_saved_bytes; the weights train
    in full training only), less what a parallel block's norms share (parallel_residual_shared_bytes)."""
    norm = norm_saved_bytes(spec, settings, tokens, weight_trainable=settings.method == "full")
    return spec.norms_per_layer * norm - parallel_residual_shared_bytes(spec, settings, tokens)


def layernorm_parameter_casts_bytes(spec: ModelSpec, settings: TrainingSettings, width: int) -> float:
    """The fp32 copies of a frozen half LayerNorm's weight and bias under autocast: layer_norm is
    on CUDA autocast's fp32 list, which casts every floating input, parameters too, and
    native_layer_norm keeps its weight and bias for backward. Only a LoRA/QLoRA base is half
    under autocast (full training keeps fp32 weights, which need no cast). Traced:
    tests/test_trace_lora_autocast.py (1,024 B for a 64-wide layer's two norms)."""
    if not (settings.precision_facts.autocast and is_adapter_method(settings.method)):
        return 0.0
    return 4.0 * norm_parameters(spec, width)


def t5_norm_input_bytes(spec: ModelSpec, input_bytes: int) -> int:
    """T5LayerNorm multiplies its input itself, not its fp32 copy, by rsqrt(variance)
    (`hidden_states * torch.rsqrt(variance + eps)`, transformers models/t5/modeling_t5.py
    @6b8b757d), so a half input is kept besides the fp32 copy the variance keeps; an fp32 input
    is that copy. Traced (tests/test_trace_t5.py)."""
    return input_bytes if spec.position_embedding == "relative" and input_bytes < 4 else 0


def rmsnorm_weight_operand_bytes(spec: ModelSpec, input_bytes: int) -> int:
    """Bytes per element of the normalised tensor an HF RMSNorm saves for its weight's gradient:
    Llama's casts to the input dtype and then multiplies (`self.weight * x.to(input_dtype)`,
    transformers models/llama/modeling_llama.py), Gemma's multiplies the fp32 tensor by
    (1 + weight) and casts the product (ModelSpec.scales_norm_in_fp32), so it saves 4 bytes even
    when the input is half. Traced (tests/test_trace_softcap.py)."""
    return 4 if spec.scales_norm_in_fp32 else input_bytes


def parallel_residual_shared_bytes(spec: ModelSpec, settings: TrainingSettings, tokens: int) -> float:
    """What a parallel block saves once that the per-part terms count twice.

    Attention and MLP side by side on the layer's input x (GPT-J; GPT-NeoX's use_parallel_residual,
    transformers models/gpt_neox/modeling_gpt_neox.py @203bf6f1 GPTNeoXLayer: mlp(ln2(x)) +
    attn(ln1(x)) + x; Phi-2 and Falcon-7B with one norm for both):
    - two norms read the same x: a LayerNorm (or a fused RMSNorm) saves its input itself, so
      once, r t h; HF's RMSNorm saves its fp32 upcast, the same tensor only when x is fp32;
    - one norm feeds q/k/v and the MLP's input linear: they save the same normed tensor, c t h,
      unless autocast or float8 gives each linear its own cast (linear_inputs_saved_bytes).
    Traced: tests/test_trace_parallel_residual.py."""
    if not spec.parallel_residual:
        return 0.0
    h, r = spec.hidden_size, settings.precision_facts.residual_bytes
    if spec.norms_per_layer == 2:
        if spec.norm == "layernorm" and settings.precision_facts.autocast and r < 4:
            return 0.0  # each LayerNorm saves its own fp32 cast of the half input
        if spec.norm == "layernorm" or settings.liger or settings.compile:
            return float(r * tokens * h)
        return float(4 * tokens * h) if r == 4 else 0.0
    if spec.norms_per_layer != 1 or autocast_casts_norm_output(spec, settings) or settings.precision == "fp8":
        return 0.0
    trained = input_saving_linears(settings)
    attention_in = trained.intersection(("qkv", "q", "k", "v"))
    mlp_in = trained.intersection(("fc1", "gate", "up", "gate_up"))
    return float(settings.precision_facts.compute_bytes * tokens * h) if attention_in and mlp_in else 0.0


def norm_output_fp32(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Whether a layer norm's output, the input of the linears after it, is fp32: when the hidden
    states are (hidden_states_fp32), and under autocast after torch's LayerNorm, which CUDA
    autocast runs in fp32 whatever its input (autocast's fp32 op list). An HF RMSNorm casts its
    result back to the input's dtype. The trace emulates CUDA autocast's layer_norm
    (measure/trace/cuda_emulation.py)."""
    if settings.precision_facts.hidden_states_fp32:
        return True
    return settings.precision_facts.autocast and spec.norm == "layernorm"


def autocast_casts_norm_output(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """Whether autocast gives each linear after a layer norm its own half cast of the norm's
    output: under autocast when that output is fp32 (norm_output_fp32)."""
    return settings.precision_facts.autocast and norm_output_fp32(spec, settings)


def first_norm_unrecorded_bytes(spec: ModelSpec, settings: TrainingSettings) -> float:
    """What the first layer's input norm does not keep when nothing before it trains: with a
    frozen embedding (LoRA, QLoRA, or frozen first layers) the layer's input needs no gradient,
    and neither does the frozen norm weight, so autograd records nothing for the norm (the
    embedding's own rule, embedding_activation_bytes); the linears after it, whose adapters train,
    keep its output as every layer's do. Pre-norm layers only (a post-norm layer's norms read the
    residual sum, which the attention's adapters make require grad), and not under full or per-op
    checkpointing, which keep the layer's input instead. Traced: a tiny Llama under LoRA, 4h + 4
    bytes per token less (tests/test_trace_lora_autocast.py). Under LoRA dropout the q/k/v
    adapters' dropouts of that output record no 1-byte mask either, as it needs no gradient
    (bench/accuracy.py's Llama LoRA dropout rows were 0.11-0.14% high by exactly those masks)."""
    if embedding_trainable(settings) or not spec.final_norm:
        return 0.0
    if settings.checkpointing in ("full", "op-selective"):
        return 0.0
    tokens = settings.tokens
    masks = 0.0
    if is_adapter_method(settings.method) and settings.lora_dropout:
        adapted = [name for name in ("q", "k", "v") if is_adapted(name, settings.lora_targets)]
        dropouts = min(len(adapted), 1) if fuses_qkv(spec, settings) else len(adapted)
        masks = dropouts * tokens * spec.hidden_size
    return per_rank(norm_saved_bytes(spec, settings, tokens, weight_trainable=False) + masks, settings)
