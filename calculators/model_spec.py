"""Transformer architecture description.

A `ModelSpec` holds the architecture numbers that memory depends on; the shapes and
parameter counts derived from them are in calculators/geometry.py.
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


def __getattr__(name: str):
    """Parameter counting moved to calculators.geometry; kept reachable here while the last
    importers are updated."""
    if name in ("ParameterCount", "parameter_count", "attention_params", "mlp_params", "active_matmul_parameters"):
        from calculators import geometry

        return getattr(geometry, name)
    raise AttributeError(name)
