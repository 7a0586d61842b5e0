"""Transformer architecture description and its parameter count.

A `ModelSpec` holds the architecture numbers that memory depends on. The
parameter count is derived layer by layer, the way Hugging Face builds the
modules (q/k/v/o projections, MLP, norms, embeddings, head), so it can be
checked against the totals the model cards publish.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

Activation = Literal["gelu", "swiglu", "geglu"]
Norm = Literal["layernorm", "rmsnorm"]
PositionEmbedding = Literal["learned", "rope"]
Head = Literal["lm", "classifier"]


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
        return self

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.n_heads

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
        return self.activation in ("swiglu", "geglu")


class ParameterCount(BaseModel):
    """Parameters by place in the model; `matmul` counts weights used in matmuls."""

    embedding: int
    per_layer: int
    layers: int
    head: int
    total: int
    matmul_per_layer: int
    matmul_head: int
    matmul_total: int
    largest_tensor: int


def _norm_params(spec: ModelSpec) -> int:
    """LayerNorm has a weight and a bias per channel; RMSNorm only a weight."""
    return 2 * spec.hidden_size if spec.norm == "layernorm" else spec.hidden_size


def attention_params(spec: ModelSpec) -> tuple[int, int]:
    """(all, matmul-weight) parameters of one attention block.

    q: h x (heads*d), k and v: h x (kv_heads*d) each, o: (heads*d) x h, as in
    Vaswani et al. 2017 with grouped-query attention (Ainslie et al. 2023,
    arXiv 2305.13245) sharing k/v across head groups.
    """
    h = spec.hidden_size
    weights = h * spec.q_dim + 2 * h * spec.kv_dim + spec.q_dim * h
    biases = 0
    if spec.linear_bias:
        biases = spec.q_dim + 2 * spec.kv_dim + h
    elif spec.qkv_bias:
        biases = spec.q_dim + 2 * spec.kv_dim
    return weights + biases, weights


def mlp_params(spec: ModelSpec) -> tuple[int, int]:
    """(all, matmul-weight) parameters of the MLP (all experts for a MoE).

    GELU MLP: h x f and f x h. Gated MLP (SwiGLU/GeGLU, Shazeer 2020,
    arXiv 2002.05202): gate and up h x f, down f x h. A mixture of experts
    (Mixtral, arXiv 2401.04088) has n_experts such MLPs plus an h x n_experts router.
    """
    h, f = spec.hidden_size, spec.ffn_hidden_size
    n_mats = 3 if spec.is_gated_mlp else 2
    weights = n_mats * h * f
    biases = (f * (n_mats - 1) + h) if spec.linear_bias else 0
    per_expert = weights + biases
    router = h * spec.n_experts if spec.n_experts > 1 else 0
    return per_expert * spec.n_experts + router, weights * spec.n_experts + router


def parameter_count(spec: ModelSpec) -> ParameterCount:
    """Count parameters module by module, as Hugging Face models build them."""
    h = spec.hidden_size
    attn_all, attn_matmul = attention_params(spec)
    mlp_all, mlp_matmul = mlp_params(spec)
    per_layer = attn_all + mlp_all + spec.norms_per_layer * _norm_params(spec)

    embedding = spec.vocab_size * h
    if spec.position_embedding == "learned":
        embedding += spec.max_position_embeddings * h
    embedding += spec.token_type_vocab * h
    if spec.embedding_norm:
        embedding += _norm_params(spec)

    head = _norm_params(spec) if spec.final_norm else 0
    matmul_head = 0
    if spec.head == "lm":
        # A tied LM head reuses the embedding matrix: no new parameters, but it
        # is still a matmul weight (and gets an autocast copy).
        matmul_head = spec.vocab_size * h
        if not spec.tied_embeddings:
            head += matmul_head
    else:
        if spec.has_pooler:
            head += h * h + h
            matmul_head += h * h
        head += h * spec.num_labels + spec.num_labels
        matmul_head += h * spec.num_labels

    layers = spec.n_layers * per_layer
    largest = max(spec.vocab_size * h, h * spec.ffn_hidden_size * (2 if spec.fused_gate_up else 1))
    return ParameterCount(
        embedding=embedding,
        per_layer=per_layer,
        layers=layers,
        head=head,
        total=embedding + layers + head,
        matmul_per_layer=attn_matmul + mlp_matmul,
        matmul_head=matmul_head,
        largest_tensor=largest,
        matmul_total=spec.n_layers * (attn_matmul + mlp_matmul) + matmul_head,
    )


def active_matmul_parameters(spec: ModelSpec) -> int:
    """Matmul weights one token multiplies by: every layer's attention and MLP weights plus the
    LM head (Kaplan et al. 2020 count the head in N for compute); the embedding lookup is no
    matmul. In a mixture of experts only `experts_per_token` experts (and the router) run per
    token (Fedus et al. 2021, Switch Transformer, arXiv 2101.03961)."""
    params = parameter_count(spec)
    if spec.n_experts == 1:
        return params.matmul_total
    _, mlp_matmul = mlp_params(spec)
    router = spec.hidden_size * spec.n_experts
    per_expert = (mlp_matmul - router) // spec.n_experts
    unused_experts = spec.n_experts - spec.experts_per_token
    return params.matmul_total - spec.n_layers * unused_experts * per_expert
