"""Transformer architecture description.

A `ModelSpec` holds the architecture numbers that memory depends on; the shapes and
parameter counts derived from them are in calculators/models/geometry.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Activation = Literal["gelu", "relu", "swiglu", "geglu", "clamped-swiglu"]
Norm = Literal["layernorm", "rmsnorm"]
PositionEmbedding = Literal["learned", "rope", "relative"]
Head = Literal["lm", "classifier"]
QkNorm = Literal["none", "head", "full"]


class ModelSpec(BaseModel):
    """Architecture numbers of a decoder or encoder transformer."""

    name: str = "custom"
    family: str = "custom"
    n_layers: int = Field(gt=0, le=1000)
    hidden_size: int = Field(gt=0, le=1_000_000)
    n_heads: int = Field(gt=0, le=10_000)
    n_kv_heads: int = Field(gt=0, le=10_000)
    head_dim: int | None = Field(default=None, gt=0, le=100_000)
    ffn_hidden_size: int = Field(gt=0, le=10_000_000)
    vocab_size: int = Field(gt=0, le=10_000_000)
    max_position_embeddings: int = Field(default=2048, gt=0, le=100_000_000)
    activation: Activation = "swiglu"
    gelu_written_out: bool = Field(
        default=False,
        description="the tanh GELU written out op by op (transformers NewGELUActivation, 'gelu_new')",
    )
    norm: Norm = "rmsnorm"
    position_embedding: PositionEmbedding = "rope"
    tied_embeddings: bool = False
    fused_qkv: bool = False
    fused_gate_up: bool = False
    linear_bias: bool = False
    qkv_bias: bool = False
    norms_per_layer: int = Field(default=2, ge=0, le=8)
    final_norm: bool = True
    embedding_norm: bool = False
    token_type_vocab: int = Field(default=0, ge=0)
    has_pooler: bool = False
    head: Head = "lm"
    num_labels: int = Field(default=2, gt=0)
    n_experts: int = Field(default=1, gt=0, le=100_000)
    experts_per_token: int = Field(default=1, gt=0)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    # Mixture of experts beyond Mixtral: ffn_hidden_size is then one routed expert's width.
    n_dense_layers: int = Field(default=0, ge=0, description="layers with a dense MLP in a MoE")
    dense_ffn_hidden_size: int | None = Field(default=None, gt=0, le=10_000_000)
    shared_expert_ffn_size: int = Field(default=0, ge=0, le=10_000_000, description="width of the shared experts")
    shared_expert_gate: bool = False
    router_bias: bool = False
    # Multi-head latent attention (DeepSeek-V2/V3): head_dim is then the q/k head (nope + rope).
    q_lora_rank: int | None = Field(default=None, gt=0, le=1_000_000)
    kv_lora_rank: int | None = Field(default=None, gt=0, le=1_000_000)
    qk_rope_head_dim: int = Field(default=0, ge=0, le=100_000)
    v_head_dim: int | None = Field(default=None, gt=0, le=100_000)
    qk_norm: QkNorm = "none"
    attention_sinks: bool = False
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int = Field(default=0, ge=0, description="layers attending only within the window")
    extra_params: int = Field(default=0, ge=0, description="parameters outside the transformer (vision tower)")
    image_tokens: int = Field(default=0, ge=0, description="context tokens one image takes (a VLM)")
    rotary_fraction: float = Field(default=1.0, gt=0.0, le=1.0, description="share of head_dim rotated (RoPE)")
    parallel_residual: bool = False
    attention_softcap: float | None = Field(default=None, gt=0.0)
    logit_softcap: float | None = Field(default=None, gt=0.0)
    reported_active_params: int | None = None
    reported_params: int | None = None
    source: str = "user input"
    as_of: str = ""

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelSpec:
        if self.head_dim is None and self.hidden_size % self.n_heads:
            raise ValueError(
                f"attention heads ({self.n_heads}) must divide the hidden size "
                f"({self.hidden_size}) unless head_dim is given"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"kv-heads ({self.n_kv_heads}) must divide attention heads ({self.n_heads})")
        if self.experts_per_token > self.n_experts:
            raise ValueError("experts per token cannot exceed the number of experts")
        if self.n_dense_layers > self.n_layers or self.sliding_window_layers > self.n_layers:
            raise ValueError("dense and sliding-window layers cannot outnumber the layers")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding-window layers need a sliding_window")
        return self

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: k and v come from a compressed latent (DeepSeek-V2)."""
        return self.kv_lora_rank is not None

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers if self.n_experts > 1 else 0

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.attention_head_dim

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.n_heads

    @property
    def rotary_dim(self) -> int:
        """Channels of each head that RoPE turns: latent attention's rope part, or the head times
        rotary_fraction (int() as GPT-NeoX's rotary_ndims and Phi's rotary_ndims)."""
        if self.is_mla:
            return self.qk_rope_head_dim
        return int(self.attention_head_dim * self.rotary_fraction)

    @property
    def q_dim(self) -> int:
        """Width of the query projection output (heads x head_dim)."""
        return self.n_heads * self.attention_head_dim

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projections (kv-heads x head_dim)."""
        return self.n_kv_heads * self.attention_head_dim

    @property
    def is_gated_mlp(self) -> bool:
        """gate and up projections multiplied: SwiGLU, GeGLU, or gpt-oss's clamped SwiGLU
        (GptOssExperts: gate * sigmoid(1.702 gate), gate clamped at 7, times (up + 1), up in [-7, 7])."""
        return self.activation in ("swiglu", "geglu", "clamped-swiglu")

    @property
    def scales_norm_in_fp32(self) -> bool:
        """Gemma's RMSNorm multiplies the fp32 normalised tensor by (1 + weight) in fp32 and casts
        after, where Llama's casts first (huggingface/transformers src/transformers/models/gemma2/
        modeling_gemma2.py @006e8693, Gemma2RMSNorm.forward; GemmaRMSNorm and Gemma3RMSNorm alike)."""
        return self.norm == "rmsnorm" and self.family.startswith("gemma")


class VisionTower(BaseModel):
    """A vision-language model's image encoder as a step runs it: a stack of pre-norm ViT layers
    (Dosovitskiy et al. 2020, arXiv 2010.11929) over each image's patches. Its parameters are in
    ModelSpec.extra_params; these are the shapes its activations and FLOPs follow."""

    model_config = ConfigDict(extra="forbid")

    n_layers: int = Field(gt=0, le=1000)
    hidden_size: int = Field(gt=0, le=1_000_000)
    n_heads: int = Field(gt=0, le=10_000)
    ffn_hidden_size: int = Field(gt=0, le=10_000_000)
    parameters: int = Field(ge=0, description="the encoder's own parameters, projector excluded")
    activation: Activation = "gelu"
    norm: Norm = "layernorm"
    tokens_per_image: int = Field(
        default=0, ge=0, le=10_000_000, description="patches the tower runs per image; 0 = set by the image's size"
    )
    patches_per_image_token: int = Field(
        default=1, gt=0, le=1024, description="tower patches behind each image token of the language model"
    )
    window_patches: int = Field(default=0, ge=0, description="patches per attention window; 0 = full attention")
    full_attention_layers: int = Field(default=0, ge=0, description="layers attending over the whole image")
    cross_attention_layers: int = Field(
        default=0, ge=0, description="language-model layers that read the images by cross-attention (Mllama)"
    )
    cross_attention_tokens_per_image: int = Field(
        default=0, ge=0, description="keys and values one image gives each cross-attention layer"
    )
    tiles_per_image: int = Field(
        default=1, gt=0, le=1024, description="tiles each image is cut into, each its own patches (Mllama)"
    )
    gated_layers: int = Field(
        default=0, ge=0, description="layers whose attention and MLP outputs a tanh gate scales (Mllama's global)"
    )
    projector_input_width: int = Field(
        default=0, ge=0, le=10_000_000, description="width of each patch the projector reads; 0 = hidden_size"
    )

    @model_validator(mode="after")
    def _check_heads(self) -> VisionTower:
        if self.hidden_size % self.n_heads:
            raise ValueError(f"vision heads ({self.n_heads}) must divide the vision width ({self.hidden_size})")
        if self.full_attention_layers > self.n_layers:
            raise ValueError("full-attention layers cannot outnumber the vision layers")
        if self.gated_layers > self.n_layers:
            raise ValueError("gated layers cannot outnumber the vision layers")
        return self

    def attention_share(self, patches: int) -> float:
        """The encoder's attention work over `patches` as a share of full attention in every
        layer: windowed layers attend within windows of window_patches (each patch's query meets
        window_patches keys instead of all)."""
        if not self.window_patches or patches <= 0:
            return 1.0
        windowed = self.n_layers - self.full_attention_layers
        return (self.full_attention_layers + windowed * min(1.0, self.window_patches / patches)) / self.n_layers


class ArchitectureSpec(ModelSpec):
    """A ModelSpec with the architecture features few models have, read from their config.json:
    T5's decoder layers with cross-attention (the last `cross_attention_layers` of n_layers, each
    adding a cross-attention block and its norm) and relative position biases (buckets x heads per
    stack), ModernBERT's LayerNorms without bias, Phi-3.5-MoE's biases on the attention output
    and the LM head, and a vision-language model's image encoder. Kept apart from ModelSpec, whose
    fields are the columns of data/models.csv; `extension` reads them from either, with the plain
    transformer's values by default."""

    norm_bias: bool = Field(default=True, description="LayerNorm has a bias (ModernBERT's has none)")
    out_bias: bool = Field(default=False, description="the attention output projection has a bias")
    lm_head_bias: bool = False
    cross_attention_layers: int = Field(default=0, ge=0, description="decoder layers with cross-attention")
    relative_attention_buckets: int = Field(default=0, ge=0, le=100_000)
    vision: VisionTower | None = Field(default=None, description="the image encoder of a vision-language model")

    @model_validator(mode="after")
    def _check_decoder(self) -> ArchitectureSpec:
        if self.cross_attention_layers >= self.n_layers:
            raise ValueError("an encoder-decoder needs at least one encoder layer besides its decoder layers")
        return self


EXTENSION_DEFAULTS: dict[str, bool | int | None] = {
    name: field.default for name, field in ArchitectureSpec.model_fields.items() if name not in ModelSpec.model_fields
}


def extension(spec: ModelSpec, name: str):
    """An ArchitectureSpec feature of `spec`, or its default for a plain ModelSpec. Read from the
    instance's field values: getattr on a pydantic model without the field raises and catches an
    AttributeError each time, and the planner asks about 180,000 times per search."""
    return spec.__dict__.get(name, EXTENSION_DEFAULTS[name])
