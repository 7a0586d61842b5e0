"""T5's encoder-decoder in plain torch.nn, built from a `ModelSpec`, for the trace.

Follows transformers' T5ForConditionalGeneration (src/transformers/models/t5/modeling_t5.py
@6b8b757d) op for op where it changes what autograd saves, with exactly
`parameter_count(spec).total` parameters:

- T5LayerNorm: the variance in fp32, the input (not its fp32 copy) times rsqrt, cast back to the
  weight's half dtype, times the weight; no bias, no mean.
- T5Attention: q/k/v/o without biases; scores = q k^T without 1/sqrt(d) scaling; the position
  bias added in place; softmax of the scores upcast to fp32, cast back, dropout, times v. Always
  eager: T5 has no SDPA or flash path.
- Relative position biases (Raffel et al. 2020, arXiv 1910.10683, Sec. 2.1): one embedding of
  buckets x heads in each stack's first layer; the bias (1, heads, q, k) plus the attention mask
  is made once per stack and given to every layer. Buckets: half for each direction in the
  encoder, exact below a quarter of the buckets, then log-spaced up to 128 tokens.
- The decoder's cross-attention reads the encoder's output for k and v in every decoder layer,
  with a zero bias plus the encoder's mask.
- T5LayerFF: wi, ReLU (T5 1.0) or wi_0 through GELU times wi_1 (Flan-T5's gated GELU, written
  out as "gelu_new"), dropout, wo; dropout after each block and on each stack's embedding and
  final norm. With a tied head the decoder output is scaled by d_model^-0.5.

The decoder runs on target_len tokens (as many as the input when not given). Full
checkpointing wraps each block and gives it the stack's position bias as an input, as
transformers' gradient checkpointing does, so the bias is kept until backward.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from calculators.models.spec import ModelSpec, extension
from measure.trace.blocks import BoundaryHook, dropout, mlp_activation_function, projection

MAX_DISTANCE = 128  # T5Config.relative_attention_max_distance's default


class T5Norm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(self.weight.dtype)
        return self.weight * x


def relative_buckets(queries: int, keys: int, buckets: int, bidirectional: bool, device) -> torch.Tensor:
    """The bucket of each (query, key) distance: small distances each their own bucket, larger
    ones log-spaced up to MAX_DISTANCE, beyond it the last; the encoder splits the buckets
    between keys before and after the query, the decoder sees only keys before."""
    distance = torch.arange(keys, device=device)[None, :] - torch.arange(queries, device=device)[:, None]
    offset = torch.zeros_like(distance)
    if bidirectional:
        buckets //= 2
        offset = (distance > 0).long() * buckets
        distance = distance.abs()
    else:
        distance = (-distance).clamp(min=0)
    exact = buckets // 2
    log_scale = torch.log(distance.float().clamp(min=1) / exact) / math.log(MAX_DISTANCE / exact)
    far = (exact + (log_scale * (buckets - exact)).long()).clamp(max=buckets - 1)
    return offset + torch.where(distance < exact, distance, far)


class T5Attention(nn.Module):
    def __init__(self, spec: ModelSpec, relative_bias: bool) -> None:
        super().__init__()
        self.q_proj, self.k_proj = projection(spec, "q", False), projection(spec, "k", False)
        self.v_proj, self.o_proj = projection(spec, "v", False), projection(spec, "o", False)
        self.n_heads, self.head_dim, self.dropout = spec.n_heads, spec.attention_head_dim, spec.dropout
        buckets = extension(spec, "relative_attention_buckets")
        self.relative_bias = nn.Embedding(buckets, spec.n_heads) if relative_bias else None

    def position_bias(self, queries: int, keys: int, bidirectional: bool, device) -> torch.Tensor:
        """(1, heads, queries, keys) from the bucket embedding (T5Attention.compute_bias)."""
        buckets = relative_buckets(queries, keys, self.relative_bias.num_embeddings, bidirectional, device)
        return self.relative_bias(buckets).permute(2, 0, 1).unsqueeze(0)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], -1, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, keys_from: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = self._heads(self.q_proj(x)), self._heads(self.k_proj(keys_from)), self._heads(self.v_proj(keys_from))
        scores = torch.matmul(q, k.transpose(3, 2))
        scores += bias
        probs = F.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.matmul(dropout(probs, self.dropout), v)
        return self.o_proj(out.transpose(1, 2).contiguous().view(batch, seq, -1))


class T5FeedForward(nn.Module):
    """T5DenseActDense (wi, ReLU, dropout, wo) or T5DenseGatedActDense (act(wi_0) * wi_1)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.gated = spec.is_gated_mlp
        if self.gated:
            self.gate_proj, self.up_proj = projection(spec, "gate", False), projection(spec, "up", False)
            self.down_proj = projection(spec, "down", False)
        else:
            self.fc, self.proj = projection(spec, "fc1", False), projection(spec, "fc2", False)
        self.act = mlp_activation_function(spec, approximate="tanh")
        self.dropout = spec.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.down_proj(dropout(self.act(self.gate_proj(x)) * self.up_proj(x), self.dropout))
        return self.proj(dropout(self.act(self.fc(x)), self.dropout))


class T5Block(nn.Module):
    def __init__(self, spec: ModelSpec, relative_bias: bool, cross_attention: bool) -> None:
        super().__init__()
        self.self_norm, self.self_attn = T5Norm(spec.hidden_size), T5Attention(spec, relative_bias)
        self.cross_norm = T5Norm(spec.hidden_size) if cross_attention else None
        self.cross_attn = T5Attention(spec, False) if cross_attention else None
        self.ff_norm, self.ff = T5Norm(spec.hidden_size), T5FeedForward(spec)
        self.dropout = spec.dropout

    def forward(self, x, bias, encoder_out=None, cross_bias=None) -> torch.Tensor:
        normed = self.self_norm(x)
        x = x + dropout(self.self_attn(normed, normed, bias), self.dropout)
        if self.cross_attn is not None:
            x = x + dropout(self.cross_attn(self.cross_norm(x), encoder_out, cross_bias), self.dropout)
        return x + dropout(self.ff(self.ff_norm(x)), self.dropout)


class T5Reference(nn.Module):
    """Shared embedding, encoder, decoder and LM head; `body` returns the decoder's output as
    the head reads it, `head` the logits. Layers are numbered encoder first, then decoder."""

    def __init__(self, spec: ModelSpec, checkpointing: str = "none") -> None:
        super().__init__()
        decoder_layers = extension(spec, "cross_attention_layers")
        encoder_layers = spec.n_layers - decoder_layers
        self.spec, self.checkpointing = spec, checkpointing
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.encoder = nn.ModuleList(T5Block(spec, i == 0, False) for i in range(encoder_layers))
        self.encoder_norm = T5Norm(spec.hidden_size)
        self.decoder = nn.ModuleList(T5Block(spec, i == 0, True) for i in range(decoder_layers))
        self.decoder_norm = T5Norm(spec.hidden_size)
        self.lm_head = None if spec.tied_embeddings else nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        self.vision_encoder = None
        self.output_width = spec.vocab_size
        self.target_len: int | None = None  # the decoder's tokens when not as many as the input

    def _run(self, layer: T5Block, *args) -> torch.Tensor:
        if self.checkpointing == "full":
            return checkpoint(layer, *args, use_reentrant=False)
        return layer(*args)

    def _run_stack(self, layers: nn.ModuleList, x: torch.Tensor, make_biases, *rest, boundaries=None, hook=None):
        """A stack's blocks in order. Its first block makes the stack's position biases inside
        itself (transformers' T5Attention.compute_bias in the block with
        has_relative_attention_bias), so under full checkpointing their bucket indices are rebuilt
        in backward; the biases it returns are every later block's arguments. `rest` follows the
        hidden state (the encoder's output for the decoder); make_biases() gives (bias,) or (bias,
        cross_bias), each block taking the bias after the hidden state and the cross bias last."""

        def first(x, *rest):
            biases = make_biases()
            return layers[0](x, biases[0], *rest, *biases[1:]), *biases

        for index, layer in enumerate(layers):
            if hook is not None:
                hook(next(boundaries), x)
            if index == 0:
                run = (lambda *a: checkpoint(first, *a, use_reentrant=False)) if self.checkpointing == "full" else first
                x, *biases = run(x, *rest)
            else:
                x = self._run(layer, x, biases[0], *rest, *biases[1:])
        return x

    def _masks(self, batch: int, seq: int, target: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, ...]:
        """The encoder's padding mask (batch, 1, 1, seq), all visible, and the decoder's causal
        mask (batch, 1, target, target), in the model's dtype: 0 where visible, its minimum where not."""
        padding = torch.zeros(batch, 1, 1, seq, dtype=dtype, device=device)
        future = torch.ones(target, target, dtype=torch.bool, device=device).triu(1)
        causal = torch.zeros(batch, 1, target, target, dtype=dtype, device=device)
        return padding, causal.masked_fill(future, torch.finfo(dtype).min)

    def body(self, tokens: torch.Tensor, on_boundary: BoundaryHook | None = None, images: None = None) -> torch.Tensor:
        """The encoder over the tokens, then the decoder over the target (target_len tokens, or as
        many as the input) reading its output (T5 has no images: `images` is always None)."""
        batch, seq = tokens.shape
        target = self.target_len or seq
        dtype, device, p = self.embed_tokens.weight.dtype, tokens.device, self.spec.dropout
        padding, causal = self._masks(batch, seq, target, dtype, device)
        boundaries = iter(range(self.spec.n_layers + 1))

        def encoder_biases():
            return (self.encoder[0].self_attn.position_bias(seq, seq, True, device) + padding,)

        def decoder_biases():
            bias = self.decoder[0].self_attn.position_bias(target, target, False, device) + causal
            return bias, torch.zeros(1, self.spec.n_heads, target, seq, dtype=dtype, device=device) + padding

        x = dropout(self.embed_tokens(tokens), p)
        x = self._run_stack(self.encoder, x, encoder_biases, boundaries=boundaries, hook=on_boundary)
        encoder_out = dropout(self.encoder_norm(x), p)
        del x

        # decoder_input_ids, a new int64 tensor: transformers shifts the labels right (_shift_right)
        decoder_ids = tokens.new_zeros(batch, target)
        y = dropout(self.embed_tokens(decoder_ids), p)
        y = self._run_stack(self.decoder, y, decoder_biases, encoder_out, boundaries=boundaries, hook=on_boundary)
        if on_boundary is not None:
            on_boundary(next(boundaries), y)
        y = dropout(self.decoder_norm(y), p)
        return y * self.spec.hidden_size**-0.5 if self.spec.tied_embeddings else y

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    head_bias = None

    def head(self, hidden: torch.Tensor, softcap: bool = True) -> torch.Tensor:
        return F.linear(hidden, self.head_weight)
