"""A small Llama-style decoder in plain torch.nn, built from a `ModelSpec`.

The calibration trains it for a few steps and compares the measured peak memory with
`estimate_memory()` for the same spec, so the modules follow what the memory engine
assumes about Hugging Face's LlamaForCausalLM (transformers modeling_llama.py):

- RMSNorm upcasts to fp32, multiplies by rsqrt(mean(x^2) + eps) and casts back before
  the weight multiply (Zhang & Sennrich 2019, arXiv 1910.07467).
- Attention: separate q/k/v/o projections without bias, rotary embeddings (Su et al.
  2021, arXiv 2104.09864), grouped k/v repeated to every head (repeat_kv), then fused
  `scaled_dot_product_attention` with a causal mask.
- MLP: SwiGLU, down(silu(gate(x)) * up(x)) (Shazeer 2020, arXiv 2002.05202).
- Untied LM head; cross-entropy on fp32 logits.

This module imports torch at import time: only `benchmarks` imports it, inside functions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from calculators.model_spec import ModelSpec
from measure.trace.models import RMSNorm  # the same HF-style fp32-upcast norm the trace uses


def reference_spec(n_layers: int, hidden_size: int, vocab_size: int, seq_len: int, n_heads: int = 0) -> ModelSpec:
    """A Llama-style ModelSpec: head_dim 64 (or fewer heads when small), 2 kv-head groups,
    SwiGLU width 8/3 x hidden rounded up to a multiple of 64."""
    heads = n_heads or max(1, hidden_size // 64)
    kv_heads = heads // 2 if heads % 2 == 0 else heads
    ffn = -(-(8 * hidden_size // 3) // 64) * 64
    return ModelSpec(
        name=f"reference-{n_layers}x{hidden_size}",
        family="llama",
        n_layers=n_layers,
        hidden_size=hidden_size,
        n_heads=heads,
        n_kv_heads=kv_heads,
        ffn_hidden_size=ffn,
        vocab_size=vocab_size,
        max_position_embeddings=seq_len,
        source="calibration reference model",
    )


def rotary_tables(seq_len: int, head_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of shape (seq_len, head_dim), as HF's LlamaRotaryEmbedding."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (batch, heads, seq, head_dim)."""
    return x * cos.to(x.dtype) + _rotate_half(x) * sin.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, d = spec.hidden_size, spec.attention_head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = spec.n_heads, spec.n_kv_heads, d
        self.q_proj = nn.Linear(h, spec.q_dim, bias=False)
        self.k_proj = nn.Linear(h, spec.kv_dim, bias=False)
        self.v_proj = nn.Linear(h, spec.kv_dim, bias=False)
        self.o_proj = nn.Linear(spec.q_dim, h, bias=False)

    def _heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, n_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = apply_rotary(self._heads(self.q_proj(x), self.n_heads), cos, sin)
        k = apply_rotary(self._heads(self.k_proj(x), self.n_kv_heads), cos, sin)
        v = self._heads(self.v_proj(x), self.n_kv_heads)
        groups = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))


class SwiGLU(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h, f = spec.hidden_size, spec.ffn_hidden_size
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.input_norm = RMSNorm(spec.hidden_size)
        self.attention = Attention(spec)
        self.post_attention_norm = RMSNorm(spec.hidden_size)
        self.mlp = SwiGLU(spec)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.input_norm(x), cos, sin)
        return x + self.mlp(self.post_attention_norm(x))


class ReferenceDecoder(nn.Module):
    """Llama-style causal LM; forward(tokens, labels) returns the mean cross-entropy."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        if spec.activation != "swiglu" or spec.norm != "rmsnorm" or spec.position_embedding != "rope":
            raise ValueError("the reference model is Llama-style: swiglu, rmsnorm, rope")
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.n_layers))
        self.norm = RMSNorm(spec.hidden_size)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        cos, sin = rotary_tables(spec.max_position_embeddings, spec.attention_head_dim)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        cos, sin = self.cos[:seq], self.sin[:seq]
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def build_reference_model(spec: ModelSpec) -> ReferenceDecoder:
    """The model for `spec` (fp32 parameters on the CPU; move it with .to())."""
    return ReferenceDecoder(spec)
