"""What a training precision means for the bytes of each kind of tensor, as one record.

The rules (weight_bytes, compute_bytes, ...) take the precision mode; PrecisionFacts gathers
their answers, with the two that also depend on the fine-tuning method (whether the hidden
states are fp32, and so the residual stream's and the model dtype's bytes). A record is made
once per (precision, method) pair (precision_facts caches it) and read from the settings as
`settings.precision_facts` (calculators.workload.training.TrainingSettings).

The modes themselves are described in calculators.workload.training.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

AUTOCAST_PRECISIONS: tuple[str, ...] = ("amp-fp16", "amp-bf16")
ADAPTER_METHODS: tuple[str, ...] = ("lora", "qlora")


def weight_bytes(precision: str) -> int:
    """Bytes per stored model weight: fp32 under fp32/AMP, half otherwise."""
    return 4 if precision in ("fp32", *AUTOCAST_PRECISIONS) else 2


def master_weight_bytes(precision: str) -> int:
    """fp32 master copy kept by mixed-precision training (ZeRO paper Sec. 3.1); fp8 training
    stores its weights as bf16-mixed does (Transformer Engine, torchao float8: bf16 weights,
    fp8 only inside the matmuls)."""
    return 4 if precision in ("fp16-mixed", "bf16-mixed", "fp8") else 0


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
    return precision in AUTOCAST_PRECISIONS


def frozen_weight_bytes(precision: str) -> int:
    """Bytes per frozen base weight under LoRA: the base is loaded in the half compute
    dtype (bf16/fp16) in every mode but fp32, since no optimizer reads it (HF/PEFT
    from_pretrained(torch_dtype=torch.bfloat16), torchtune `dtype: bf16`)."""
    return compute_bytes(precision)


def is_adapter_method(method: str) -> bool:
    return method in ADAPTER_METHODS


def hidden_states_are_fp32(precision: str, method: str) -> bool:
    """Whether the hidden states between layers (the embedding's output, the residual stream,
    an RMSNorm's output) are fp32: under fp32, and under autocast when the base weights are fp32,
    as in full training: the embeddings are fp32 and the adds promote half + fp32 to fp32
    (PyTorch autocast op reference). LoRA and QLoRA load the base in the half compute dtype
    (frozen_weight_bytes), so their hidden states are half, and autocast, which casts only fp32
    inputs down, casts none of them. Traced (tests/test_trace_lora_autocast.py)."""
    if precision == "fp32":
        return True
    return is_autocast(precision) and not is_adapter_method(method)


@dataclass(frozen=True)
class PrecisionFacts:
    """Bytes per element of each kind of tensor in a training step, and the autocast facts."""

    weight_bytes: int  # a stored weight (weight_bytes)
    master_weight_bytes: int  # the fp32 master copy, 0 without one (master_weight_bytes)
    gradient_bytes: int  # a gradient, in its weight's dtype (gradient_bytes)
    optimizer_state_element_bytes: int  # one optimizer state element (optimizer_state_element_bytes)
    compute_bytes: int  # a matmul output, the compute dtype (compute_bytes)
    frozen_weight_bytes: int  # a frozen LoRA/QLoRA base weight (frozen_weight_bytes)
    autocast: bool  # matmuls under torch.autocast (is_autocast)
    hidden_states_fp32: bool  # the hidden states between layers are fp32 (hidden_states_are_fp32)
    # autocast casts the hidden states down to half for each matmul that reads them
    autocast_casts_hidden_states: bool
    # the hidden states (residual stream), 4 when hidden_states_fp32, else 2
    residual_bytes: int
    # what the model builds in its own dtype (attention masks, position biases, gathered embedding
    # rows): fp32 where its parameters are, as the hidden states' rule has it
    model_dtype_bytes: int


@cache
def precision_facts(precision: str, method: str) -> PrecisionFacts:
    """The record of `precision` under fine-tuning `method`, made once per pair."""
    fp32_hidden = hidden_states_are_fp32(precision, method)
    hidden = 4 if fp32_hidden else 2
    return PrecisionFacts(
        weight_bytes=weight_bytes(precision),
        master_weight_bytes=master_weight_bytes(precision),
        gradient_bytes=gradient_bytes(precision),
        optimizer_state_element_bytes=optimizer_state_element_bytes(precision),
        compute_bytes=compute_bytes(precision),
        frozen_weight_bytes=frozen_weight_bytes(precision),
        autocast=is_autocast(precision),
        hidden_states_fp32=fp32_hidden,
        autocast_casts_hidden_states=is_autocast(precision) and fp32_hidden,
        residual_bytes=hidden,
        model_dtype_bytes=hidden,
    )
