"""Llama 3.2 Vision's images in the trace: the encoder as MllamaVisionModel runs it and the
language model's cross-attention layers that read it.

Follows transformers' src/transformers/models/mllama/modeling_mllama.py (@befb7955 for the
vision model, the gates and both masks; the attention-interface versions for the
cross-attention core: k normalised per key-value head, then repeated to every head by the
attention function) op for op where it changes what autograd saves:

- the encoder's patches, images x tiles x 1601 (the class patch included), plus the gated tile
  positions (a gathered row times tanh(gate)), through ln_pre; each tile padded to a multiple of
  8 patches (1608), all tiles of an image one sequence through the local layers, then ln_post
  and the gated global layers (attention and MLP outputs scaled by tanh of their gates); every
  encoder layer reads one aspect-ratio mask, (images, 1, T, T) made by a matmul in the model's
  dtype (autocast's half under autocast);
- the inputs of some local layers stacked as intermediate outputs, the padding sliced off, the
  final output and the intermediates concatenated (vision_output_dim wide) into the projector, a
  linear with a bias to the language model's width: the cross-attention states;
- each cross-attention layer: RMSNorm, q from the text normalised per head, k and v from the
  states (k normalised per key-value head), repeated to every head, attention with the
  cross-attention mask, (batch, 1, text, image tokens) in the model's dtype, o, then
  `residual + tanh(attn_gate) * out`; the MLP output times the full-text-row mask, then
  `residual + tanh(mlp_gate) * that`. Without images the layer is skipped, as
  MllamaTextModel.forward skips it.

SDPA with a mask runs CUDA's memory-efficient kernel (its flash kernel takes no mask), called
here by name under fake tensors as CUDA's dispatcher would reach it (memory_efficient_attention).
Left out: the patch convolution (its output is the traced patches), the position embedding's
gate and the aspect-ratio embeddings before and after the local layers (tiles x width per image).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from calculators.models.spec import ModelSpec, VisionTower
from calculators.workload.vision import tower_model_spec
from measure.trace.blocks import (
    Block,
    LayerContext,
    eager_attention,
    make_mlp,
    make_norm,
    memory_efficient_attention,
    projection,
    repeat_kv,
    rmsnorm_class,
)

# the local layers whose inputs are kept as intermediate outputs (MllamaVisionConfig's default
# intermediate_layers_indices); a model with other counts takes its last ones
DEFAULT_INTERMEDIATE_LAYERS = (3, 7, 15, 23, 30)


class CrossInputs(NamedTuple):
    """What every cross-attention layer reads: the projected image states, the additive mask
    (batch, 1, text, image tokens) and the full-text-row mask (batch, 1, text, 1)."""

    states: torch.Tensor
    bias: torch.Tensor
    row_mask: torch.Tensor


def cross_attention_positions(n_layers: int, cross_layers: int) -> set[int]:
    """Where the cross-attention layers sit: every (n_layers / cross_layers)-th layer from the
    fourth (3, 8, ..., 38 of Llama 3.2 Vision's 40, its config's cross_attention_layers)."""
    if not cross_layers:
        return set()
    step = n_layers // cross_layers
    first = min(3, step - 1)
    return {first + step * index for index in range(cross_layers)}


class GatedBlock(Block):
    """MllamaVisionEncoderLayer with is_gated: pre-norm, attention and MLP outputs each scaled
    by tanh of a learned scalar gate before the residual add."""

    def __init__(self, spec: ModelSpec, attention: str, checkpointing: str) -> None:
        super().__init__(spec, attention, checkpointing)
        self.gate_attn = nn.Parameter(torch.ones(1))
        self.gate_ffn = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        x = x + self.gate_attn.tanh() * self.attn(self.norms[0](x), context)
        return x + self.gate_ffn.tanh() * self.mlp(self.norms[1](x))


class CrossAttentionBlock(nn.Module):
    """MllamaCrossAttentionDecoderLayer: a Llama layer's shapes, its attention reading the image
    states for k and v, per-head q and k RMSNorms, two tanh gates."""

    def __init__(self, spec: ModelSpec, attention: str, checkpointing: str) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = spec.n_heads, spec.n_kv_heads, spec.attention_head_dim
        self.q_proj, self.k_proj = projection(spec, "q", False), projection(spec, "k", False)
        self.v_proj, self.o_proj = projection(spec, "v", False), projection(spec, "o", False)
        norm = rmsnorm_class(spec)
        self.q_norm, self.k_norm = norm(self.head_dim), norm(self.head_dim)
        self.mlp = make_mlp(spec)
        self.norms = nn.ModuleList(make_norm(spec) for _ in range(2))
        self.attn_gate = nn.Parameter(torch.zeros(1))
        self.mlp_gate = nn.Parameter(torch.zeros(1))
        self.attention, self.recompute_core = attention, checkpointing == "selective"

    def _heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], heads, self.head_dim).transpose(1, 2)

    def _core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if self.attention == "eager":
            return eager_attention(q, k, v, None, softmax_fp32=True, dropout_p=0.0, bias=bias)
        return memory_efficient_attention(q, k, v, bias=bias, causal=False)

    def forward(self, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        cross = context.cross
        batch, seq, _ = x.shape
        q = self.q_norm(self._heads(self.q_proj(self.norms[0](x)), self.n_heads))
        k = self.k_norm(self._heads(self.k_proj(cross.states), self.n_kv_heads))
        v = self._heads(self.v_proj(cross.states), self.n_kv_heads)
        groups = self.n_heads // self.n_kv_heads
        args = (q, repeat_kv(k, groups), repeat_kv(v, groups), cross.bias)
        out = checkpoint(self._core, *args, use_reentrant=False) if self.recompute_core else self._core(*args)
        out = self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))
        x = x + self.attn_gate.tanh() * out
        mlp_out = cross.row_mask[:, 0] * self.mlp(self.norms[1](x))
        return x + self.mlp_gate.tanh() * mlp_out


def aspect_ratio_bias(images: int, patches: int, dtype: torch.dtype, device) -> torch.Tensor:
    """_prepare_aspect_ratio_attention_mask: a (images, T, 1) column in the model's dtype times
    its transpose (a matmul: autocast's half under autocast) times the dtype's minimum, (images,
    1, T, T). Its values do not change what is saved; all patches are visible here."""
    column = torch.zeros(images, patches, 1, dtype=dtype, device=device)
    return ((column @ column.transpose(-1, -2)) * torch.finfo(dtype).min).unsqueeze(1)


def cross_attention_inputs(states: torch.Tensor, seq: int, dtype: torch.dtype) -> CrossInputs:
    """_prepare_cross_attention_mask for text that sees every image token: the additive mask
    (batch, 1, text, image tokens) and the full-text-row mask (batch, 1, text, 1), both in the
    model's dtype."""
    batch, image_tokens, _ = states.shape
    bias = torch.zeros(batch, 1, seq, image_tokens, dtype=dtype, device=states.device)
    row_mask = torch.ones(batch, 1, seq, 1, dtype=dtype, device=states.device)
    return CrossInputs(states, bias, row_mask)


class MllamaVision(nn.Module):
    """MllamaVisionModel's layers, norms and gated tile positions, and the projector; the rest of
    its parameters (patch embedding, positions, aspect-ratio tables) stay in the model's flat
    vision parameter."""

    def __init__(self, spec: ModelSpec, tower: VisionTower, attention: str, checkpointing: str) -> None:
        super().__init__()
        vit = tower_model_spec(spec)
        local = tower.n_layers - tower.gated_layers
        self.layers = nn.ModuleList(
            [Block(vit, attention, checkpointing) for _ in range(local)]
            + [GatedBlock(vit, attention, checkpointing) for _ in range(tower.gated_layers)]
        )
        self.local_layers = local
        width = tower.hidden_size
        self.ln_pre, self.ln_post = nn.LayerNorm(width), nn.LayerNorm(width)
        self.tiles = tower.tiles_per_image
        self.patches_per_tile = tower.cross_attention_tokens_per_image // self.tiles
        self.padded_per_tile = tower.tokens_per_image // self.tiles
        self.tile_positions = nn.Parameter(torch.zeros(1, tower.cross_attention_tokens_per_image * width))
        self.position_gate = nn.Parameter(torch.zeros(1))
        projector_width = tower.projector_input_width or width
        intermediates = projector_width // width - 1
        default = [i for i in DEFAULT_INTERMEDIATE_LAYERS if i < local]
        last = range(local - intermediates, local)
        self.intermediate_layers = set(default if len(default) == intermediates else last)
        self.projector = nn.Linear(projector_width, spec.hidden_size, bias=True)

    def forward(self, patches: torch.Tensor, batch: int, run_layer) -> torch.Tensor:
        """`patches` (images, tiles x 1601, width) -> the cross-attention states (batch, images x
        tiles x 1601, hidden); run_layer(layer, x, context) runs one layer as the step checkpoints."""
        images, _, width = patches.shape
        rows = torch.zeros(images, dtype=torch.long, device=patches.device)
        tile_positions = F.embedding(rows, self.tile_positions).view(images, -1, width)
        x = self.ln_pre(patches + self.position_gate.tanh() * tile_positions)
        pad = self.padded_per_tile - self.patches_per_tile
        x = F.pad(x.view(images, self.tiles, self.patches_per_tile, width), (0, 0, 0, pad))
        x = x.view(images, self.tiles * self.padded_per_tile, width)
        bias = aspect_ratio_bias(images, x.shape[1], patches.dtype, x.device)  # in the model's dtype
        context = LayerContext(None, None, None, attention_bias=bias)
        kept = []
        for index, layer in enumerate(self.layers):
            if index == self.local_layers:
                x = self.ln_post(x)
            if index in self.intermediate_layers:
                kept.append(x)
            x = run_layer(layer, x, context)
        stacked = torch.stack(kept, dim=-1).reshape(images, self.tiles, self.padded_per_tile, -1)
        x = x.view(images, self.tiles, self.padded_per_tile, width)
        features = torch.cat((x[:, :, : self.patches_per_tile], stacked[:, :, : self.patches_per_tile]), dim=-1)
        return self.projector(features).reshape(batch, -1, self.projector.out_features)
