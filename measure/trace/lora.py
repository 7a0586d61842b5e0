"""LoRA in the traced model: a frozen base and low-rank adapters on the targeted linears.

y = W x + B (A dropout(x)), A: in -> r, B: r -> out (Hu et al. 2021, arXiv 2106.09685), as PEFT's
`lora.Linear` computes it, one dropout per adapted linear (none at dropout 0). The base weights
are frozen in the half compute
dtype (fp32 under fp32); the adapters take the precision's weight dtype, as the engine
assumes (calculators.workload.precision.frozen_weight_bytes / weight_bytes). QLoRA's NF4 storage and
bitsandbytes kernels have no CPU fake-tensor equivalent, so only LoRA is traced.
"""

from __future__ import annotations

import torch
from torch import nn

from calculators.workload.finetune import is_adapted
from measure.trace.blocks import dropout as cuda_dropout

# Reference-model attribute name -> the engine's linear name.
ENGINE_NAME = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "qkv_proj": "qkv",
    "o_proj": "o",
    "fc": "fc1",
    "proj": "fc2",
    "gate_proj": "gate",
    "up_proj": "up",
    "gate_up_proj": "gate_up",
    "down_proj": "down",
    "q_a_proj": "q_a",
    "q_b_proj": "q_b",
    "kv_a_proj_with_mqa": "kv_a",
    "kv_b_proj": "kv_b",
}


class LoraLinear(nn.Module):
    """A frozen linear plus a trainable low-rank update."""

    def __init__(self, base: nn.Linear, rank: int, adapter_dtype: torch.dtype, dropout: float = 0.0) -> None:
        super().__init__()
        self.base = base
        self.dropout_p = dropout
        self.lora_a = nn.Linear(base.in_features, rank, bias=False, dtype=adapter_dtype)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False, dtype=adapter_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Base and adapters share a dtype except under autocast, which casts both matmuls.
        # the fused CUDA dropout (a 1-byte mask), as blocks.dropout runs it on CPU tensors
        return self.base(x) + self.lora_b(self.lora_a(cuda_dropout(x, self.dropout_p)))


def add_adapters(
    model: nn.Module, targets: str, rank: int, adapter_dtype: torch.dtype, dropout: float = 0.0
) -> list[nn.Parameter]:
    """Freeze every parameter, wrap the targeted linears of the language model's layers (not a
    vision encoder's: the engine adapts the language model alone), return the adapters."""
    for param in model.parameters():
        param.requires_grad_(False)
    vision = getattr(model, "vision_layers", None)
    skipped = {id(module) for module in vision.modules()} if vision is not None else set()
    adapters: list[nn.Parameter] = []
    for module in list(model.modules()):
        if id(module) in skipped:
            continue
        for attribute, child in list(module.named_children()):
            engine_name = ENGINE_NAME.get(attribute)
            if isinstance(child, nn.Linear) and engine_name and is_adapted(engine_name, targets):
                wrapped = LoraLinear(child, rank, adapter_dtype, dropout)
                setattr(module, attribute, wrapped)
                adapters += [wrapped.lora_a.weight, wrapped.lora_b.weight]
    return adapters
