"""The reference transformer's layers and their pieces in plain torch.nn, built from a
`ModelSpec`: norms, rotary positions, attention, MLPs, experts and `Block`, one layer. The models
built of them (measure.trace.models, measure.trace.mllama, measure.trace.t5) import them here.

- GPT-2 / BERT style (transformers modeling_gpt2.py, modeling_bert.py): LayerNorm, GELU,
  learned positions (plus token types for BERT), fused or separate q/k/v projections
  (`spec.fused_qkv`), biases per `spec.linear_bias`, dropout per `spec.dropout`
  (embeddings, attention probabilities, after the attention output and the MLP). Pre-norm
  decoder with a tied or untied LM head, or post-norm encoder (BERT: embedding LayerNorm, no
  final norm) with a pooler and a classifier head.
- Llama style (modeling_llama.py): RMSNorm upcasting to fp32 as HF writes it, SwiGLU or
  GeGLU (fused gate/up per `spec.fused_gate_up`, as Phi-3), rotary embeddings (Su et al.
  2021, arXiv 2104.09864), grouped-query attention with k/v repeated to every head
  (`repeat_kv`), 4 norms per layer as Gemma-2's sandwich norms, tied or untied LM head.
- GPT-NeoX / Phi-2 / Falcon style: LayerNorm with rotary positions on all or the first
  rotary_fraction of each head's channels, and attention and MLP side by side on the layer's
  input (`spec.parallel_residual`), each with its own norm (GPT-NeoX) or one shared (Phi-2,
  Falcon-7B); biases on the attention output and LM head alone where the model has them
  (Phi-2, Phi-3.5-MoE).
- Gemma: RMSNorm scaling by (1 + weight) in fp32, soft-capped attention scores and logits.
- ModernBERT: a pre-norm encoder with LayerNorms without bias, rotary positions, a fused q/k/v
  and a fused GeGLU input, and a classifier head.
- gpt-oss: attention sinks (a learned logit per head joining each row of scores; eager only),
  experts with biases and the clamped SwiGLU, a router with a bias (routing itself as Mixtral's:
  top-k of a softmax, where gpt-oss softmaxes the top-k logits, a few bytes per token apart).
- Mixture of experts (modeling_mixtral.py, Jiang et al. 2024, arXiv 2401.04088): a router
  and `n_experts` gated MLPs, top-k routing. Fake tensors cannot run data-dependent routing,
  so tokens are spread evenly: expert e receives every E-th of the (token, choice) pairs,
  which keeps each token's k experts distinct. Memory is that of perfectly balanced routing.

Attention is "eager" (softmax(QK^T/sqrt(d))V written out, softmax in fp32 with rotary
positions as HF calls softmax(dtype=torch.float32)) or "fused"
(`torch.nn.functional.scaled_dot_product_attention`). Fused attention is called with
dropout_p=0: CUDA's flash and memory-efficient kernels draw the dropout mask in the kernel
and save no mask, while the CPU flash kernel has no dropout and would fall back to the math
path, which materialises the score matrix. Under "selective" checkpointing the attention
checkpoints its core itself (measure.trace.models describes the checkpointing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils.checkpoint import checkpoint

from calculators.models.geometry import layer_linears
from calculators.models.spec import ModelSpec, extension
from measure.trace.result import UnsupportedConfiguration

BoundaryHook = Callable[[int, torch.Tensor], None]
Tensor = torch.Tensor
MaybeTensor = torch.Tensor | None


class LayerContext(NamedTuple):
    """Tensors every layer shares, built once per forward: rotary cos/sin, the boolean mask of
    the positions causal attention must not see (HF builds one mask per forward), an additive
    attention mask (Llama 3.2 Vision's encoder) and what cross-attention layers read
    (measure.trace.mllama.CrossInputs)."""

    cos: torch.Tensor | None
    sin: torch.Tensor | None
    hidden_future: torch.Tensor | None
    attention_bias: torch.Tensor | None = None
    cross: tuple | None = None


def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Training-mode dropout as CUDA runs it: `at::dropout` takes the fused `native_dropout`
    kernel (a 1-byte bool mask saved for backward) for CUDA tensors, but on the CPU builds the
    mask with `empty_like(input)` in the input's dtype (aten/src/ATen/native/Dropout.cpp,
    is_fused_kernel_acceptable); calling native_dropout keeps the CUDA behaviour on CPU tensors."""
    return torch.native_dropout(x, p, True)[0] if p > 0 else x


def is_post_norm(spec: ModelSpec) -> bool:
    """BERT normalises after each residual add and has an embedding norm but no final norm."""
    return spec.embedding_norm and not spec.final_norm


# --- Norms and positions -------------------------------------------------------------


class RMSNorm(nn.Module):
    """HF LlamaRMSNorm: upcast to fp32, x * rsqrt(mean(x^2) + eps), cast back, times the weight
    (Zhang & Sennrich 2019, arXiv 1910.07467)."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.to(torch.float32)
        variance = x32.pow(2).mean(-1, keepdim=True)
        x32 = x32 * torch.rsqrt(variance + self.eps)
        return self.weight * x32.to(dtype)


class GemmaRMSNorm(RMSNorm):
    """HF Gemma2RMSNorm (GemmaRMSNorm, Gemma3RMSNorm alike): normalise in fp32, multiply by
    (1 + weight) in fp32, then cast (transformers models/gemma2/modeling_gemma2.py @006e8693);
    the weight starts at zero."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__(size, eps)
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).type_as(x)


class _FusedRMSNormFunction(torch.autograd.Function):
    """Liger-Kernel's RMSNorm as autograd sees it (src/liger_kernel/ops/rms_norm.py @00eba634,
    LigerRMSNormFunction): computed in fp32, saving only the input and the fp32 rstd per row.
    Its backward here makes fp32 temporaries that the Triton kernel keeps in registers, so the
    traced backward phases are an upper bound; what is saved is exact."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return weight * (x.float() * rstd).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        normed = x.float() * rstd
        scaled = grad.float() * weight.float()
        grad_x = rstd * (scaled - normed * (scaled * normed).mean(-1, keepdim=True))
        grad_weight = (grad.float() * normed).flatten(0, -2).sum(0)
        return grad_x.to(x.dtype), grad_weight.to(weight.dtype), None


class FusedRMSNorm(RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FusedRMSNormFunction.apply(x, self.weight, self.eps)


def rmsnorm_class(spec: ModelSpec, liger: bool = False) -> type[RMSNorm]:
    """Liger's fused RMSNorm (it patches Gemma's too, with its offset), Gemma's or Llama's."""
    if liger:
        return FusedRMSNorm
    return GemmaRMSNorm if spec.scales_norm_in_fp32 else RMSNorm


def make_norm(spec: ModelSpec, liger: bool = False) -> nn.Module:
    if spec.norm == "layernorm":
        # ModernBERT's LayerNorms have no bias (ModernBertConfig.norm_bias = False)
        return nn.LayerNorm(spec.hidden_size, bias=bool(extension(spec, "norm_bias")))
    return rmsnorm_class(spec, liger)(spec.hidden_size)


def rotary_cos_sin(
    seq_len: int, head_dim: int, dtype: torch.dtype, device: torch.device | None = None, theta: float = 10000.0
):
    """cos and sin tables (1, 1, seq, head_dim) computed per forward in fp32 and cast to the
    hidden-state dtype, as HF LlamaRotaryEmbedding (fp32 under autocast, whose residual is fp32)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32, device=device), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype)[None, None], angles.sin().to(dtype)[None, None]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF apply_rotary_pos_emb for one of q or k, shaped (batch, heads, seq, head_dim); with
    tables narrower than the head (partial rotary: GPT-NeoX's rotary_pct, Phi's
    partial_rotary_factor) only the first channels turn and the rest are concatenated back
    (transformers models/gpt_neox/modeling_gpt_neox.py apply_rotary_pos_emb: q_rot, q_pass, cat)."""
    rotary_dim = cos.shape[-1]
    if rotary_dim == x.shape[-1]:
        return x * cos + _rotate_half(x) * sin
    turned, kept = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((turned * cos + _rotate_half(turned) * sin, kept), dim=-1)


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """HF repeat_kv: expand grouped k/v heads to every query head (a copy when groups > 1)."""
    if groups == 1:
        return x
    batch, kv_heads, seq, head_dim = x.shape
    x = x[:, :, None].expand(batch, kv_heads, groups, seq, head_dim)
    return x.reshape(batch, kv_heads * groups, seq, head_dim)


# --- Attention -----------------------------------------------------------------------


def attention_scores(
    q: torch.Tensor, k: torch.Tensor, hidden_future: torch.Tensor | None, softcap: float | None = None
) -> torch.Tensor:
    """q k^T scaled by 1/sqrt(q's head size), soft-capped when asked, the future masked."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if hidden_future is not None:
        scores = scores.masked_fill(hidden_future, torch.finfo(scores.dtype).min)
    return scores


def eager_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    hidden_future: torch.Tensor | None,
    softmax_fp32: bool,
    dropout_p: float,
    softcap: float | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """HF eager_attention_forward / GPT2Attention._attn / BertSelfAttention: scores scaled by
    1/sqrt(q's head size), soft-capped as Gemma 2 (cap * tanh(scores / cap)), the future masked,
    an additive mask added, softmax (in fp32 in Llama-style code), dropout, then the weighted sum
    of v (whose head size may differ, as latent attention's does)."""
    scores = attention_scores(q, k, hidden_future, softcap)
    if bias is not None:
        scores = scores + bias
    if softmax_fp32:
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    else:
        probs = F.softmax(scores, dim=-1).type(v.dtype)
    return torch.matmul(dropout(probs, dropout_p), v)


def sink_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hidden_future: torch.Tensor | None, sinks: torch.Tensor
) -> torch.Tensor:
    """gpt-oss's eager attention with sinks (transformers models/gpt_oss/modeling_gpt_oss.py
    @6edf5b31, eager_attention_forward): each head's learned sink logit joins every row of the
    scores as a last column, the row max is subtracted, the softmax runs in the logits' own dtype,
    and the sink column is dropped before the weighted sum of v."""
    scores = attention_scores(q, k, hidden_future)
    batch, heads, rows, _ = scores.shape
    sink_column = sinks.reshape(1, -1, 1, 1).expand(batch, heads, rows, 1)
    logits = torch.cat([scores, sink_column], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = F.softmax(logits, dim=-1, dtype=logits.dtype)
    return torch.matmul(probs[..., :-1], v)


def projection(spec: ModelSpec, name: str, bias: bool, dense: bool = False) -> nn.Linear:
    """The layer's linear `name` with the shape calculators.models.geometry gives it (one expert's,
    for a mixture of experts; a dense layer's with `dense`), so the trace and the estimates
    build the same layers."""
    shape = next(linear for linear in layer_linears(spec, dense=dense) if linear.name == name)
    return nn.Linear(int(shape.in_features), int(shape.out_features), bias=bias)


class Attention(nn.Module):
    """q/k/v projections (fused or separate), rotary positions for Llama style, the attention
    core (eager or fused, optionally recomputed), the output projection and its dropout."""

    def __init__(self, spec: ModelSpec, attention: str, recompute_core: bool, liger: bool = False) -> None:
        super().__init__()
        self.head_dim = spec.attention_head_dim
        self.n_heads, self.n_kv_heads = spec.n_heads, spec.n_kv_heads
        self.q_dim, self.kv_dim = spec.q_dim, spec.kv_dim
        qkv_bias = spec.linear_bias or spec.qkv_bias
        if spec.fused_qkv:
            self.qkv_proj = projection(spec, "qkv", qkv_bias)
        else:
            self.q_proj = projection(spec, "q", qkv_bias)
            self.k_proj = projection(spec, "k", qkv_bias)
            self.v_proj = projection(spec, "v", qkv_bias)
        self.o_proj = projection(spec, "o", spec.linear_bias or extension(spec, "out_bias"))
        # q/k RMSNorms: per head (Qwen3Attention, Gemma 3) or over the whole projection (Olmo2Attention);
        # Liger replaces the model's RMSNorm class, these included (apply_liger_kernel_to_qwen3)
        self.qk_norm = spec.qk_norm
        q_width, k_width = (self.head_dim, self.head_dim) if spec.qk_norm == "head" else (self.q_dim, self.kv_dim)
        norm = rmsnorm_class(spec, liger)
        self.q_norm = norm(q_width) if spec.qk_norm != "none" else None
        self.k_norm = norm(k_width) if spec.qk_norm != "none" else None
        self.fused_qkv, self.rope = spec.fused_qkv, spec.position_embedding == "rope"
        self.causal, self.dropout = spec.head == "lm", spec.dropout
        # rotary models' eager attention upcasts the softmax (transformers eager_attention_forward,
        # GPT-NeoX's included), as calculators.memory.activations.attention.softmax_in_fp32 counts
        self.softmax_fp32 = self.rope
        self.softcap = spec.attention_softcap
        # gpt-oss: one learned sink logit per head (GptOssAttention.sinks)
        self.sinks = nn.Parameter(torch.zeros(spec.n_heads)) if spec.attention_sinks else None
        self.attention, self.recompute_core = attention, recompute_core

    def _heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, n_heads, self.head_dim).transpose(1, 2)

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.fused_qkv:
            q, k, v = self.qkv_proj(x).split((self.q_dim, self.kv_dim, self.kv_dim), dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = self._heads(q, self.n_heads), self._heads(k, self.n_kv_heads), self._heads(v, self.n_kv_heads)
        if self.qk_norm == "head":  # on (batch, seq, heads, head_dim), before the transpose, as Qwen3
            q = self.q_norm(q.transpose(1, 2)).transpose(1, 2)
            k = self.k_norm(k.transpose(1, 2)).transpose(1, 2)
        return q, k, v

    def _eager_core(self, q: Tensor, k: Tensor, v: Tensor, future: MaybeTensor, bias: MaybeTensor = None) -> Tensor:
        if self.sinks is not None:
            return sink_attention(q, k, v, future, self.sinks)
        return eager_attention(q, k, v, future, self.softmax_fp32, self.dropout, self.softcap, bias)

    def _fused_core(self, q: Tensor, k: Tensor, v: Tensor, future: MaybeTensor, bias: MaybeTensor = None) -> Tensor:
        if bias is not None:  # CUDA's flash kernel takes no mask: the memory-efficient one runs
            return memory_efficient_attention(q, k, v, bias=bias, causal=False)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, dropout_p=0.0)

    def forward(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = self._project(x)
        if self.rope:
            q, k = apply_rotary(q, context.cos, context.sin), apply_rotary(k, context.cos, context.sin)
        groups = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, groups), repeat_kv(v, groups)
        core = self._eager_core if self.attention == "eager" else self._fused_core
        args = (q, k, v, context.hidden_future, context.attention_bias)
        out = checkpoint(core, *args, use_reentrant=False) if self.recompute_core else core(*args)
        out = self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.q_dim))
        return dropout(out, self.dropout)


def memory_efficient_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None, causal: bool = True
) -> torch.Tensor:
    """Fused attention as CUDA runs it when its flash kernel cannot: values narrower than queries
    and keys (latent attention), or an additive mask (`bias`).

    CUDA's SDPA dispatcher refuses the flash kernel unless q, k and v share one head size
    (pytorch aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, check_head_dim_size_flash) or
    when given a mask, and picks the memory-efficient kernel, which saves q, k, v, the mask, its
    output in (b, s, heads, d) layout and a log-sum-exp. The CPU kernel would fall back to the
    math path and save the scores, so the memory-efficient op is called by name; its fake-tensor
    (meta) kernel gives CUDA's shapes and layout. Autocast puts SDPA on its lower-precision list,
    so its inputs, the mask among them, are cast here as autocast would cast them. A mask whose
    rows are not a multiple of 8 elements apart is padded into a new tensor first
    (aten/src/ATen/native/transformers/attention.cpp, preprocess_mask and pad_bias), then expanded
    to every head."""
    if torch.is_autocast_enabled("cpu"):
        half = torch.get_autocast_dtype("cpu")
        q, k, v = (t.to(half) for t in (q, k, v))
        bias = bias.to(half) if bias is not None else None
    if not isinstance(q, FakeTensor):
        raise UnsupportedConfiguration(
            "fused attention with a mask or with values narrower than keys runs CUDA's memory-efficient kernel, which "
            "has no CPU kernel for real tensors; trace it with fake tensors, or with --attention eager"
        )
    if bias is not None:
        if bias.stride(-1) != 1 or any(stride % 8 for stride in bias.stride()[:-1]):
            last = bias.shape[-1]
            bias = F.pad(bias, (0, 8 - last % 8))[..., :last]
        bias = bias.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    output, *_ = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, causal)
    return output


class LatentAttention(nn.Module):
    """DeepSeek-V2/V3 multi-head latent attention as transformers writes it
    (models/deepseek_v3/modeling_deepseek_v3.py DeepseekV3Attention.forward): q through q_a, an
    RMSNorm and q_b (or one q projection without q_lora_rank); k and v from one compressed latent,
    kv_a to kv_lora_rank plus a shared rope key, an RMSNorm, then kv_b to heads x (nope + v);
    RoPE on the rope parts only, the shared rope key broadcast to every head, q and k made whole
    by cat, the core over q/k of nope + rope and v of v_head_dim, and o from heads x v_head_dim."""

    def __init__(self, spec: ModelSpec, attention: str, recompute_core: bool, liger: bool = False) -> None:
        super().__init__()
        self.n_heads, self.head_dim = spec.n_heads, spec.attention_head_dim
        self.rope_dim, self.v_dim = spec.qk_rope_head_dim, spec.value_head_dim
        self.kv_rank = spec.kv_lora_rank
        norm = rmsnorm_class(spec, liger)
        if spec.q_lora_rank:
            self.q_a_proj = projection(spec, "q_a", False)
            self.q_a_layernorm = norm(spec.q_lora_rank)
            self.q_b_proj = projection(spec, "q_b", False)
        else:
            self.q_proj = projection(spec, "q", False)
        self.kv_a_proj_with_mqa = projection(spec, "kv_a", False)
        self.kv_a_layernorm = norm(spec.kv_lora_rank)
        self.kv_b_proj = projection(spec, "kv_b", False)
        self.o_proj = projection(spec, "o", False)
        self.attention, self.recompute_core = attention, recompute_core

    def _query(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "q_proj"):
            return self.q_proj(x)
        return self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))

    def _core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, future: torch.Tensor | None) -> torch.Tensor:
        if self.attention == "eager":
            return eager_attention(q, k, v, future, softmax_fp32=True, dropout_p=0.0)
        if v.shape[-1] != q.shape[-1]:
            return memory_efficient_attention(q, k, v)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        batch, seq, _ = x.shape
        nope = self.head_dim - self.rope_dim
        q = self._query(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        q_pass, q_rot = q.split((nope, self.rope_dim), dim=-1)
        k_pass, k_rot = self.kv_a_proj_with_mqa(x).split((self.kv_rank, self.rope_dim), dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(k_pass)).view(batch, seq, self.n_heads, nope + self.v_dim)
        k_pass, v = kv.transpose(1, 2).split((nope, self.v_dim), dim=-1)
        k_rot = k_rot.view(batch, 1, seq, self.rope_dim)
        q_rot, k_rot = apply_rotary(q_rot, context.cos, context.sin), apply_rotary(k_rot, context.cos, context.sin)
        k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
        q, k = torch.cat((q_pass, q_rot), dim=-1), torch.cat((k_pass, k_rot), dim=-1)
        args = (q, k, v, context.hidden_future)
        out = checkpoint(self._core, *args, use_reentrant=False) if self.recompute_core else self._core(*args)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.v_dim))


# --- MLPs ----------------------------------------------------------------------------


def written_out_gelu(x: torch.Tensor) -> torch.Tensor:
    """transformers' "gelu_new" (NewGELUActivation, src/transformers/activations.py): the tanh
    approximation of GELU (Hendrycks and Gimpel 2016, arXiv 1606.08415) written op by op."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def mlp_activation_function(spec: ModelSpec, approximate: str = "none") -> Callable[[torch.Tensor], torch.Tensor]:
    """The model's ungated activation, or a GeGLU's gate activation: ReLU (T5 1.0), GELU written
    out for "gelu_new", else torch's one-kernel GELU."""
    if spec.activation == "relu":
        return F.relu
    return written_out_gelu if spec.gelu_written_out else lambda x: F.gelu(x, approximate=approximate)


class GeluMLP(nn.Module):
    """fc -> GELU (or ReLU) -> proj -> dropout (GPT-2 MLP, BERT intermediate + output)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.fc = projection(spec, "fc1", spec.linear_bias)
        self.proj = projection(spec, "fc2", spec.linear_bias)
        self.dropout = spec.dropout
        self.act = mlp_activation_function(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(self.proj(self.act(self.fc(x))), self.dropout)


class GatedMLP(nn.Module):
    """down(act(gate(x)) * up(x)) with SiLU (SwiGLU) or tanh-GELU (GeGLU) (Shazeer 2020,
    arXiv 2002.05202); gate and up fused into one projection as Phi-3 when asked."""

    def __init__(self, spec: ModelSpec, liger: bool = False, prefix: str = "", dense: bool = False) -> None:
        super().__init__()
        bias = spec.linear_bias
        self.liger = liger and spec.activation == "swiglu"
        self.fused = spec.fused_gate_up
        if self.fused:
            self.gate_up_proj = projection(spec, prefix + "gate_up", bias, dense)
        else:
            self.gate_proj = projection(spec, prefix + "gate", bias, dense)
            self.up_proj = projection(spec, prefix + "up", bias, dense)
        self.down_proj = projection(spec, prefix + "down", bias, dense)
        self.gelu = mlp_activation_function(spec, approximate="tanh") if spec.activation == "geglu" else None
        self.clamped = spec.activation == "clamped-swiglu"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        if self.liger:
            return self.down_proj(_SiLUMulFunction.apply(gate, up))
        if self.clamped:
            return self.down_proj(clamped_swiglu(gate, up))
        act = self.gelu(gate) if self.gelu is not None else F.silu(gate)
        return self.down_proj(act * up)


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, alpha: float = 1.702, limit: float = 7.0) -> torch.Tensor:
    """gpt-oss's expert activation (transformers models/gpt_oss/modeling_gpt_oss.py @6edf5b31,
    GptOssExperts.forward): the gate clamped from above and up on both sides at 7, then
    (up + 1) * gate * sigmoid(1.702 gate)."""
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


class _SiLUMulFunction(torch.autograd.Function):
    """Liger-Kernel's fused SwiGLU (src/liger_kernel/ops/swiglu.py @00eba634,
    LigerSiLUMulFunction): silu(a) * b, saving only a and b."""

    @staticmethod
    def forward(ctx, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        gate, up = ctx.saved_tensors
        sigmoid = torch.sigmoid(gate.float())
        silu = gate.float() * sigmoid
        grad_up = (grad.float() * silu).to(up.dtype)
        grad_gate = (grad.float() * up.float() * sigmoid * (1 + gate.float() * (1 - sigmoid))).to(gate.dtype)
        return grad_gate, grad_up


class SparseMoE(nn.Module):
    """HF MixtralSparseMoeBlock with balanced static routing (see the module docstring), and the
    shared experts every token runs beside the routed ones: Qwen2MoeSparseMoeBlock's
    shared_expert, scaled by sigmoid(shared_expert_gate(x)), or DeepseekV3MoE's shared_experts."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        # gpt-oss's router has a bias (GptOssTopKRouter.bias)
        self.gate = nn.Linear(spec.hidden_size, spec.n_experts, bias=spec.router_bias)
        self.experts = nn.ModuleList(GatedMLP(spec) for _ in range(spec.n_experts))
        self.top_k = spec.experts_per_token
        self.shared_expert = GatedMLP(spec, prefix="shared_") if spec.shared_expert_ffn_size else None
        self.shared_expert_gate = nn.Linear(spec.hidden_size, 1, bias=False) if spec.shared_expert_gate else None

    def _assignments(self, tokens: int, expert: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(token index, choice index) of the pairs routed to `expert`: every E-th pair."""
        pairs = torch.arange(tokens * self.top_k, device=self.gate.weight.device)[expert :: len(self.experts)]
        return pairs // self.top_k, pairs % self.top_k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        flat = x.view(-1, hidden)
        routing = F.softmax(self.gate(flat), dim=1, dtype=torch.float32)
        routing, _ = torch.topk(routing, self.top_k, dim=-1)
        routing = (routing / routing.sum(dim=-1, keepdim=True)).to(flat.dtype)
        out = torch.zeros_like(flat)
        for index, expert in enumerate(self.experts):
            token_index, choice = self._assignments(flat.shape[0], index)
            expert_out = expert(flat[token_index]) * routing[token_index, choice, None]
            out.index_add_(0, token_index, expert_out.to(flat.dtype))
        if self.shared_expert is not None:
            shared = self.shared_expert(flat)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(flat)) * shared
            out = out + shared
        return out.view(batch, seq, hidden)


def make_mlp(spec: ModelSpec, liger: bool = False, dense: bool = False) -> nn.Module:
    """The layer's MLP: a mixture of experts' sparse block, or (`dense`) one of its dense
    layers' single MLP of dense_ffn_hidden_size (DeepSeek-V3's first three layers)."""
    if spec.n_experts > 1 and not dense:
        return SparseMoE(spec)
    if spec.n_experts > 1:
        return GatedMLP(spec, liger, dense=True)
    return GatedMLP(spec, liger) if spec.is_gated_mlp else GeluMLP(spec)


# --- The layer -----------------------------------------------------------------------


class Block(nn.Module):
    """One transformer layer: pre-norm (GPT-2, Llama), sandwich (4 norms, Gemma-2) or
    post-norm (BERT)."""

    def __init__(
        self,
        spec: ModelSpec,
        attention: str,
        checkpointing: str,
        liger: bool = False,
        per_submodule: bool = False,
        dense: bool = False,
    ) -> None:
        super().__init__()
        attention_class = LatentAttention if spec.is_mla else Attention
        self.attn = attention_class(spec, attention, recompute_core=checkpointing == "selective", liger=liger)
        self.mlp = make_mlp(spec, liger, dense)
        self.norms = nn.ModuleList(make_norm(spec, liger) for _ in range(spec.norms_per_layer))
        self.post_norm = is_post_norm(spec)
        self.parallel = spec.parallel_residual
        self.per_submodule = per_submodule

    def forward(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        if self.per_submodule:
            return self._forward_per_submodule(x, context)
        if self.post_norm:
            x = self.norms[0](x + self.attn(x, context))
            return self.norms[1](x + self.mlp(x))
        if self.parallel:
            return self._forward_parallel(x, context)
        if len(self.norms) == 4:
            x = x + self.norms[1](self.attn(self.norms[0](x), context))
            return x + self.norms[3](self.mlp(self.norms[2](x)))
        x = x + self.attn(self.norms[0](x), context)
        return x + self.mlp(self.norms[1](x))

    def _forward_parallel(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        """Attention and MLP side by side on the layer's input (GPT-J, GPT-NeoX, Phi-2, Falcon):
        GPTNeoXLayer with use_parallel_residual, mlp(ln2(x)) + attn(ln1(x)) + x, or one norm
        feeding both (PhiDecoderLayer, Falcon-7B's parallel_attn)."""
        attn_input = self.norms[0](x)
        mlp_input = self.norms[1](x) if len(self.norms) > 1 else attn_input
        attn_out = self.attn(attn_input, context)
        return self.mlp(mlp_input) + attn_out + x

    def _forward_per_submodule(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        """Full checkpointing of each submodule on its own, as NeMo Automodel wraps them
        (NVIDIA-NeMo/Automodel nemo_automodel/components/distributed/parallelizer.py @a6f64cb2:
        checkpoint_wrapper on input_layernorm, self_attn, post_attention_layernorm and mlp)."""

        def wrapped(module: nn.Module, *args):
            return checkpoint(module, *args, use_reentrant=False)

        if self.post_norm or self.parallel or len(self.norms) != 2:
            raise ValueError("per-submodule checkpointing is traced for sequential pre-norm layers with two norms")
        x = x + wrapped(self.attn, wrapped(self.norms[0], x), context)
        return x + wrapped(self.mlp, wrapped(self.norms[1], x))
