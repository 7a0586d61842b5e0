"""Reference transformer implementations in plain torch.nn, built from a `ModelSpec`.

The repository's one reference transformer: the trace runs it under fake tensors, and the
calibration (`measure.calibration.benchmarks`) trains it for real on the host's GPU or CPU.
Tensors made inside `forward` (rotary tables, masks, positions) follow the input's device.

They follow the Hugging Face modules the memory engine describes, op for op where it
changes what is saved for backward, and have exactly `parameter_count(spec).total`
parameters. Their layers and the layers' pieces (norms, attention, MLPs, experts), with what
each architecture takes from its Hugging Face module, are measure.trace.blocks'; Llama 3.2
Vision's images are measure.trace.mllama's and T5 is measure.trace.t5's, both built on blocks.

Activation checkpointing uses `torch.utils.checkpoint.checkpoint(use_reentrant=False)`:
"full" wraps each layer (Chen et al. 2016, arXiv 1604.06174), "selective" wraps the attention
core only, from the repeated q/k/v to the attention output (Korthikanti et al. 2022,
arXiv 2205.05198, Sec. 5).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from calculators.models.spec import ModelSpec, extension
from calculators.workload.vision import tower_model_spec
from measure.trace.blocks import Block, BoundaryHook, LayerContext, dropout, make_norm, rotary_cos_sin
from measure.trace.mllama import CrossAttentionBlock, MllamaVision, cross_attention_inputs, cross_attention_positions
from measure.trace.result import UnsupportedConfiguration
from measure.trace.support import check_spec
from measure.trace.t5 import T5Reference


class ReferenceTransformer(nn.Module):
    """Embeddings, `spec.n_layers` blocks and the head. `forward(tokens, on_boundary)` returns
    the logits: (batch, seq, vocab) for an LM head, (batch, num_labels) for a classifier."""

    def __init__(
        self,
        spec: ModelSpec,
        attention: str = "fused",
        checkpointing: str = "none",
        liger: bool = False,
        checkpoint_unit: str = "layer",
    ) -> None:
        super().__init__()
        check_spec(spec)
        h = spec.hidden_size
        per_submodule = checkpointing == "full" and checkpoint_unit == "submodule"
        # each submodule checkpoints itself; the layer is not wrapped again
        checkpointing = "none" if per_submodule else checkpointing
        self.spec, self.checkpointing, self.attention = spec, checkpointing, attention
        self.embed_tokens = nn.Embedding(spec.vocab_size, h)
        self.embed_positions = nn.Embedding(spec.max_position_embeddings, h) if not self.rope else None
        self.embed_types = nn.Embedding(spec.token_type_vocab, h) if spec.token_type_vocab else None
        self.embed_norm = make_norm(spec, liger) if spec.embedding_norm else None
        cross_layers = self._cross_attention_positions(spec)
        self.layers = nn.ModuleList(
            # a mixture of experts' dense layers come first (DeepSeek-V3's first_k_dense_replace)
            self._cross_attention_block(spec, attention, checkpointing)
            if index in cross_layers
            else Block(spec, attention, checkpointing, liger, per_submodule, dense=index < spec.n_dense_layers)
            for index in range(spec.n_layers)
        )
        self.cross_layers = cross_layers
        self.final_norm = make_norm(spec, liger) if spec.final_norm else None
        self._build_head(spec)
        self._build_vision(spec, attention, checkpointing, per_submodule)

    @staticmethod
    def _cross_attention_positions(spec: ModelSpec) -> set[int]:
        """Layers that read images by cross-attention (Llama 3.2 Vision), none for other models."""
        tower = extension(spec, "vision")
        if tower is None or not tower.cross_attention_layers:
            return set()
        return cross_attention_positions(spec.n_layers, tower.cross_attention_layers)

    @staticmethod
    def _cross_attention_block(spec: ModelSpec, attention: str, checkpointing: str) -> nn.Module:
        return CrossAttentionBlock(spec, attention, checkpointing)

    def _build_vision(self, spec: ModelSpec, attention: str, checkpointing: str, per_submodule: bool) -> None:
        """A vision-language model's image encoder and projector, with their published parameter
        counts. The encoder's layers are built as calculators.workload.vision describes them
        (tower_model_spec: pre-norm ViT blocks, bidirectional attention) and run on each image's
        patches; the projector is one linear from the encoder's width to the language model's,
        applied after merging each image token's patches by their mean (a stand-in: LLaVA's two
        linears, Qwen2.5-VL's merger MLP and Gemma 3's pooling keep more or less). The rest of
        each part (patch embedding, positions, final norms, the projector's other weights) is a
        flat parameter of its size: weights, gradients and states traced, no activations. A
        model reading images by cross-attention (Mllama) builds its encoder as
        measure.trace.mllama.MllamaVision; what its cross-attention layers hold beyond Llama
        layers (q/k norms and gates) comes out of the flat rest."""
        tower = extension(spec, "vision")
        self.vision_layers = self.vision_projection = self.mllama_vision = None
        encoder = tower.parameters if tower is not None else 0
        projector = spec.extra_params - encoder
        if tower is not None and tower.cross_attention_layers:
            self.mllama_vision = MllamaVision(spec, tower, attention, checkpointing)
            self.vision_layers = self.mllama_vision.layers  # LoRA adapts the language model alone
            built = sum(param.numel() for param in self.mllama_vision.parameters())
            built_projector = sum(param.numel() for param in self.mllama_vision.projector.parameters())
            encoder -= built - built_projector
            projector -= built_projector
            projector -= sum(self._cross_extra_parameters(self.layers[index]) for index in self.cross_layers)
        elif tower is not None:
            tower_spec = tower_model_spec(spec)
            self.vision_layers = nn.ModuleList(
                Block(tower_spec, attention, checkpointing, per_submodule=per_submodule) for _ in range(tower.n_layers)
            )
            self.vision_projection = nn.Linear(tower.hidden_size, spec.hidden_size, bias=False)
            encoder -= sum(param.numel() for param in self.vision_layers.parameters())
            projector -= self.vision_projection.weight.numel()
        if encoder < 0 or projector < 0:
            raise UnsupportedConfiguration(
                "a vision encoder whose layers hold more parameters than the model has (the reference "
                "blocks do not fit its published count)"
            )
        self.vision_encoder = nn.Parameter(torch.zeros(encoder)) if encoder else None
        self.vision_projector = nn.Parameter(torch.zeros(projector)) if projector else None

    @staticmethod
    def _cross_extra_parameters(layer: nn.Module) -> int:
        """A cross-attention layer's parameters beyond a Llama layer's: its q/k norms and gates."""
        extras = (layer.q_norm, layer.k_norm)
        return (
            sum(p.numel() for module in extras for p in module.parameters())
            + layer.attn_gate.numel()
            + (layer.mlp_gate.numel())
        )

    def freeze_vision_encoder(self) -> None:
        """--freeze-vision-tower: the encoder's layers and the rest of it stop training; the
        projector trains."""
        for part in (self.vision_layers, self.vision_encoder):
            if part is not None:
                part.requires_grad_(False)
        if self.mllama_vision is not None:
            self.mllama_vision.requires_grad_(False)
            self.mllama_vision.projector.requires_grad_(True)

    def image_features(self, patches: torch.Tensor, batch: int, tokens_per_image: int) -> torch.Tensor:
        """The images' tokens for the language model: `patches` (batch x images, patches, width)
        through the encoder's layers, each image token's patches merged by their mean (the last
        tokens_per_image x group patches: a leading CLS patch is dropped, as LLaVA's default
        feature selection does), then the projector. Returns (batch, images x tokens, hidden)."""
        context = LayerContext(None, None, None)
        x = patches
        if self.vision_encoder is not None and self.vision_encoder.requires_grad:
            # the output of a trained patch embedding requires grad, so the first layer saves
            # what every other does (its norm's fp32 copy of the input, for one)
            x = x + self.vision_encoder[0] * 0
        for layer in self.vision_layers:
            x = self._run_layer(layer, x, context)
        images, count, width = x.shape
        group = count // tokens_per_image
        x = x[:, count - group * tokens_per_image :]
        if group > 1:
            x = x.reshape(images, tokens_per_image, group, width).mean(dim=2)
        return self.vision_projection(x).reshape(batch, -1, self.spec.hidden_size)

    @property
    def rope(self) -> bool:
        return self.spec.position_embedding == "rope"

    @property
    def output_width(self) -> int:
        """Last dimension of the logits: the vocabulary, or the number of labels."""
        return self.spec.vocab_size if self.spec.head == "lm" else self.spec.num_labels

    def _build_head(self, spec: ModelSpec) -> None:
        h = spec.hidden_size
        self.pooler = nn.Linear(h, h) if spec.head == "classifier" and spec.has_pooler else None
        if spec.head == "classifier":
            self.classifier = nn.Linear(h, spec.num_labels)
        elif not spec.tied_embeddings:
            self.lm_head = nn.Linear(h, spec.vocab_size, bias=extension(spec, "lm_head_bias"))

    def embed(self, tokens: torch.Tensor, images_run: bool = False) -> torch.Tensor:
        x = self.embed_tokens(tokens)
        seq = tokens.shape[1]
        if self.embed_positions is not None:
            x = x + self.embed_positions(torch.arange(seq, device=tokens.device))
        if self.embed_types is not None:
            x = x + self.embed_types(torch.zeros_like(tokens))
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        for vision in self._vision_parameters_outside_the_graph(images_run):
            # joins the graph as image features would, so backward makes its gradient last
            x = x + (vision.sum() * 0).to(x.dtype)
        return dropout(x, self.spec.dropout)

    def _vision_parameters_outside_the_graph(self, images_run: bool) -> list[nn.Parameter]:
        """Trained vision parameters no image reaches: the projector's flat rest always, the
        encoder (its layers and flat rest) and the projector's linear when no image runs."""
        parts = [self.vision_projector]
        if not images_run:  # image_features joins the encoder's flat rest to the patches
            parts.append(self.vision_encoder)
            encoder = self.mllama_vision if self.mllama_vision is not None else self.vision_layers
            for module in (encoder, self.vision_projection):
                parts += list(module.parameters()) if module is not None else []
        elif self.mllama_vision is not None:  # MllamaVision does not read the flat rest
            parts.append(self.vision_encoder)
        return [param for param in parts if param is not None and param.requires_grad]

    def _run_layer(self, layer: nn.Module, x: torch.Tensor, context: LayerContext) -> torch.Tensor:
        """One layer, checkpointed as the step's policy says."""
        if self.checkpointing == "full":
            return checkpoint(layer, x, context, use_reentrant=False)
        if self.checkpointing == "op-selective":
            return checkpoint(layer, x, context, use_reentrant=False, context_fn=op_selective_contexts)
        return layer(x, context)

    def layer_context(self, seq: int, dtype: torch.dtype, device: torch.device) -> LayerContext:
        cos, sin = rotary_cos_sin(seq, self.spec.rotary_dim, dtype, device) if self.rope else (None, None)
        eager_causal = self.spec.head == "lm" and self.attention == "eager"
        hidden_future = torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1) if eager_causal else None
        return LayerContext(cos, sin, hidden_future)

    def body(
        self,
        tokens: torch.Tensor,
        on_boundary: BoundaryHook | None = None,
        images: tuple[torch.Tensor, int] | None = None,
    ) -> torch.Tensor:
        """Embeddings and layers; `on_boundary(i, x)` sees the input of layer i (i = n_layers: the
        last layer's output). `images`: (patches, tokens per image) whose image_features join
        the text's embeddings ahead of them, as the language model's sequence."""
        cross = None
        if images is not None and self.mllama_vision is not None:
            # MllamaModel.forward runs the encoder and projector before the language model embeds
            # the text, so in backward the embedding's node runs before the encoder's
            states = self.mllama_vision(images[0], tokens.shape[0], self._run_layer)
            cross = cross_attention_inputs(states, tokens.shape[1], images[0].dtype)
        x = self.embed(tokens, images_run=images is not None)
        if images is not None and self.mllama_vision is None:
            patches, tokens_per_image = images
            features = self.image_features(patches, tokens.shape[0], tokens_per_image)
            x = torch.cat((features.to(x.dtype), x), dim=1)
        context = self.layer_context(x.shape[1], x.dtype, x.device)._replace(cross=cross)
        for index, layer in enumerate(self.layers):
            if on_boundary is not None:
                on_boundary(index, x)
            if index in self.cross_layers and cross is None:
                # MllamaTextModel.forward skips a cross-attention layer without images; its trained
                # parameters join the graph here, as image parameters join at the embedding
                trained = [param.sum() for param in layer.parameters() if param.requires_grad]
                x = x + (sum(trained) * 0).to(x.dtype) if trained else x
                continue
            x = self._run_layer(layer, x, context)
        if on_boundary is not None:
            on_boundary(len(self.layers), x)
        return self.final_norm(x) if self.final_norm is not None else x

    @property
    def head_bias(self) -> torch.Tensor | None:
        """The LM head's bias (Phi-2, Phi-3.5-MoE), or None."""
        head = getattr(self, "lm_head", None)
        return head.bias if head is not None else None

    @property
    def head_weight(self) -> torch.Tensor:
        """The LM head's (V, H) weight: the embedding's when tied."""
        return self.embed_tokens.weight if self.spec.tied_embeddings else self.lm_head.weight

    def head(self, hidden: torch.Tensor, softcap: bool = True) -> torch.Tensor:
        """The logits; Gemma 2 soft-caps them, cap * tanh(logits / cap) (Gemma2ForCausalLM.forward)
        unless `softcap` is False."""
        if self.spec.head == "lm":
            logits = F.linear(hidden, self.head_weight, self.head_bias)
            cap = self.spec.logit_softcap
            return torch.tanh(logits / cap) * cap if softcap and cap is not None else logits
        pooled = hidden[:, 0]
        if self.pooler is not None:
            pooled = torch.tanh(self.pooler(pooled))
        return self.classifier(dropout(pooled, self.spec.dropout))

    def forward(self, tokens: torch.Tensor, on_boundary: BoundaryHook | None = None) -> torch.Tensor:
        return self.head(self.body(tokens, on_boundary))


# torchtitan's per-op policy (torchtitan/parallelisms/parallelize_llama.py @004b3148, _save_list),
# with CPU's flash attention op standing in for CUDA's.
_OP_SAC_SAVE = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def op_selective_contexts():
    """Save the outputs of the ops on the list, except every second mm of the layer; recompute the rest."""
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            counts[mode] += 1
        save = func in _OP_SAC_SAVE and not (func == torch.ops.aten.mm.default and counts[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def build_model(
    spec: ModelSpec,
    attention: str = "fused",
    checkpointing: str = "none",
    liger: bool = False,
    checkpoint_unit: str = "layer",
) -> ReferenceTransformer:
    """The reference model for `spec` (parameters in the default dtype on the default device);
    `liger`: Liger-Kernel's RMSNorm and SwiGLU; `checkpoint_unit="submodule"` with full
    checkpointing: each norm, the attention and the MLP checkpointed on their own."""
    if extension(spec, "cross_attention_layers"):
        return T5Reference(spec, checkpointing)
    return ReferenceTransformer(spec, attention, checkpointing, liger, checkpoint_unit)


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on fp32 logits as HF's ForCausalLMLoss and sequence classification do."""
    return F.cross_entropy(logits.float().flatten(0, -2), labels.flatten())
