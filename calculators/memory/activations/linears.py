"""What the linears of a layer keep for backward: their inputs, by which linears train, per tensor-parallel rank."""

from __future__ import annotations

from calculators.memory.states import FP8_BYTES
from calculators.models.geometry import split
from calculators.models.spec import ModelSpec
from calculators.workload.finetune import ALL_LINEARS, LORA_TARGET_MODULES
from calculators.workload.precision import is_adapter_method
from calculators.workload.training import TrainingSettings


def trained_linear_names(settings: TrainingSettings) -> frozenset[str]:
    """Linears whose weight (full training) or adapter (LoRA) trains. Only those save their
    input: the gradient with respect to a frozen linear's input needs its weight alone
    (PyTorch saves an op's inputs only for the gradients it must compute)."""
    if is_adapter_method(settings.method):
        return LORA_TARGET_MODULES[settings.lora_targets]
    return ALL_LINEARS


def input_saving_linears(settings: TrainingSettings) -> frozenset[str]:
    """Linears that save their input for backward. A trained linear does; under QLoRA with
    bitsandbytes so does every quantised base linear, adapter or not: MatMul4Bit.forward keeps
    `ctx.tensors = (A, B)` whenever A requires grad (bitsandbytes bitsandbytes/autograd/
    _functions.py), while torchao's linear_nf4 (torchtune) saves only the NF4 weight."""
    if settings.method == "qlora" and settings.quant_backend == "bitsandbytes":
        return ALL_LINEARS
    return trained_linear_names(settings)


def linear_inputs_saved_bytes(
    settings: TrainingSettings, tokens: int, width: int, n_linears: int, input_fp32: bool | None = None
) -> float:
    """Inputs saved by `n_linears` linears (with a trainable weight or adapter) that read the same tensor.

    Under autocast each linear casts an fp32 input to half separately and saves its own copy
    (autocast caches only weight casts); a half input, or no autocast, and they share one tensor.
    `input_fp32`: whether the tensor they read is fp32; None: the hidden states' dtype
    (hidden_states_fp32). A float8 linear saves its own e4m3 cast of the input instead, one byte
    per element (torchao Float8Linear.cast_input_to_float8, saved by
    manual_float8_matmul_with_args_in_float8, pytorch/ao torchao/float8/float8_linear.py @eab345c).
    """
    if settings.precision == "fp8":
        return n_linears * FP8_BYTES * tokens * width
    c = settings.precision_facts.compute_bytes
    if input_fp32 is None:
        input_fp32 = settings.precision_facts.hidden_states_fp32
    copies = n_linears if settings.precision_facts.autocast and input_fp32 else min(n_linears, 1)
    return copies * c * tokens * width


def dropout_mask_bytes(spec: ModelSpec, tokens: int) -> float:
    """A hidden-size dropout saves its 1-byte bool mask (none without dropout)."""
    return tokens * spec.hidden_size if spec.dropout > 0 else 0.0


def fuses_qkv(spec: ModelSpec, settings: TrainingSettings) -> bool:
    """One linear for q, k and v: the model's own (GPT-2, GPT-NeoX, Phi-3) or the stack's
    (qkv_projection "fused": litgpt builds every model with one, lit_gpt/model.py @8641822
    CausalSelfAttention.attn)."""
    return spec.fused_qkv or settings.qkv_projection == "fused"


def per_rank(value: float, settings: TrainingSettings) -> float:
    """A sequence- or vocab-parallel tensor's share on one tensor-parallel rank."""
    return split(value, settings.tensor_parallel)
