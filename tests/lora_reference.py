"""A Llama layer in plain torch, with PEFT-style LoRA adapters, to count the bytes autograd saves.

Follows Hugging Face's LlamaDecoderLayer (RMSNorm upcast to fp32, q/k/v/o projections, grouped
k/v repeated to every head, SDPA, SwiGLU) and PEFT's LoRA linear: base(x) + B(A(x)) * scale with
a frozen base and lora_dropout = 0. Used by tests/test_finetune_memory.py when torch is installed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from calculators.models.spec import ModelSpec
from calculators.workload.finetune import LORA_TARGET_MODULES


class RMSNorm(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * x32.to(dtype)


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int) -> None:
        super().__init__()
        self.base = base
        self.lora_a = nn.Linear(base.in_features, rank, bias=False)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_b(self.lora_a(x)) * 2.0


class Layer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, f = spec.hidden_size, spec.ffn_hidden_size
        self.heads, self.kv_heads, self.head_dim = spec.n_heads, spec.n_kv_heads, spec.attention_head_dim
        self.input_norm, self.post_norm = RMSNorm(h), RMSNorm(h)
        self.q = nn.Linear(h, spec.q_dim, bias=False)
        self.k = nn.Linear(h, spec.kv_dim, bias=False)
        self.v = nn.Linear(h, spec.kv_dim, bias=False)
        self.o = nn.Linear(spec.q_dim, h, bias=False)
        self.gate = nn.Linear(h, f, bias=False)
        self.up = nn.Linear(h, f, bias=False)
        self.down = nn.Linear(f, h, bias=False)

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        normed = self.input_norm(x)
        q = self._split(self.q(normed), self.heads)
        groups = self.heads // self.kv_heads
        k = self._split(self.k(normed), self.kv_heads).repeat_interleave(groups, dim=1)
        v = self._split(self.v(normed), self.kv_heads).repeat_interleave(groups, dim=1)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attention.transpose(1, 2).reshape(batch, seq, -1))
        normed = self.post_norm(x)
        return x + self.down(F.silu(self.gate(normed)) * self.up(normed))


def build_layer(spec: ModelSpec, precision: str, targets: str | None, rank: int) -> nn.Module:
    """Full training (targets None) or LoRA: frozen base in bf16 under amp-bf16, adapters in fp32."""
    torch.manual_seed(0)
    layer = Layer(spec)
    if targets is not None:
        layer.requires_grad_(False)
        for name in LORA_TARGET_MODULES[targets] & {"q", "k", "v", "o", "gate", "up", "down"}:
            setattr(layer, name, LoRALinear(getattr(layer, name), rank))
    if precision == "bf16":
        return layer.to(torch.bfloat16)
    if precision == "amp-bf16" and targets is not None:
        for parameter in layer.parameters():
            if not parameter.requires_grad:
                parameter.data = parameter.data.to(torch.bfloat16)
    return layer


def saved_bytes(spec: ModelSpec, batch: int, seq: int, precision: str, targets: str | None, rank: int) -> int:
    """Bytes of the distinct tensors autograd saves in one layer's forward, without parameters and
    autocast's weight casts (counted apart by the engine). The layer input counts when a norm keeps
    it itself (an fp32 input is its own fp32 upcast), as the engine counts that upcast per norm."""
    layer = build_layer(spec, precision, targets, rank)
    # the layer's input is the hidden state: bf16 under bf16, and under amp-bf16 LoRA too, whose
    # frozen base (embeddings included) is bf16, so the residual stream is (hidden_states_fp32)
    half_input = precision == "bf16" or (precision == "amp-bf16" and targets is not None)
    dtype = torch.bfloat16 if half_input else torch.float32
    x = torch.randn(batch, seq, spec.hidden_size, dtype=dtype, requires_grad=True)
    excluded = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        weight_cast = tensor.dim() == 2 and tensor.shape[0] != batch * seq
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded and not weight_cast:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp-bf16"):
            layer(x)
    return sum(saved.values())
