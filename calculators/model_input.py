"""Other ways to name a model: a Hugging Face config.json, or a bare parameter count."""

from __future__ import annotations

import json
import math

from pydantic import ValidationError

from calculators.model_spec import ModelSpec

MAX_CONFIG_BYTES = 1_000_000  # real config.json files are a few KB


class ModelInputError(ValueError):
    """A model description the app cannot use, with a message for the user."""


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem, naming the field, for pages and the CLI."""
    parts = []
    for problem in error.errors():
        field = ".".join(str(p) for p in problem["loc"]) or "model"
        parts.append(f"{field}: {problem['msg']}")
    return "; ".join(parts)


def _first(config: dict, *keys: str, default=None):
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def _activation(config: dict) -> str:
    act = str(_first(config, "hidden_act", "activation_function", "hidden_activation", default="gelu"))
    model_type = str(config.get("model_type", ""))
    gated_types = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma", "gemma2", "phi3")
    if model_type in gated_types or act in ("silu", "swish"):
        return "geglu" if "gelu" in act else "swiglu"
    return "gelu"


def _explicit_head_dim(config: dict, hidden, heads) -> int | None:
    """head_dim only when the config sets one that differs from hidden / heads (Gemma)."""
    head_dim = config.get("head_dim")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and head_dim == hidden // heads:
        return None
    return head_dim


def spec_from_hf_config(text: str | bytes, name: str = "config.json") -> ModelSpec:
    """Parse a Hugging Face `config.json` (never downloaded) into a ModelSpec.

    Key names follow transformers' configuration classes (LlamaConfig, GPT2Config,
    BertConfig, MixtralConfig, ...).
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise ModelInputError(f"{name} is {len(text):,} bytes; a config.json is expected to be under 1 MB")
    try:
        config = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ModelInputError(f"{name} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ModelInputError(f"{name} must hold a JSON object")
    config = config.get("text_config", config) if "text_config" in config else config
    model_type = str(config.get("model_type", "custom"))
    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    heads = _first(config, "num_attention_heads", "n_head")
    layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    missing = [
        k
        for k, v in (("hidden_size", hidden), ("num_attention_heads", heads), ("num_hidden_layers", layers))
        if v is None
    ]
    if missing:
        raise ModelInputError(f"{name} lacks {', '.join(missing)}")
    is_gpt2 = model_type == "gpt2" or "n_embd" in config
    is_bert = model_type in ("bert", "roberta")
    activation = _activation(config)
    ffn_default = 4 * hidden if isinstance(hidden, int) else None
    fields = dict(
        name=str(config.get("_name_or_path") or model_type),
        family=model_type,
        n_layers=layers,
        hidden_size=hidden,
        n_heads=heads,
        n_kv_heads=_first(config, "num_key_value_heads", default=heads),
        head_dim=_explicit_head_dim(config, hidden, heads),
        ffn_hidden_size=_first(config, "intermediate_size", "n_inner", "ffn_dim", default=ffn_default),
        vocab_size=config.get("vocab_size"),
        max_position_embeddings=_first(config, "max_position_embeddings", "n_positions", default=2048),
        activation=activation,
        norm="layernorm"
        if (is_gpt2 or is_bert or "layer_norm_eps" in config or "layer_norm_epsilon" in config)
        else "rmsnorm",
        position_embedding="learned" if (is_gpt2 or is_bert) else "rope",
        tied_embeddings=bool(config.get("tie_word_embeddings", is_gpt2)),
        fused_qkv=is_gpt2 or model_type == "phi3",
        fused_gate_up=model_type == "phi3",
        linear_bias=is_gpt2 or is_bert,
        qkv_bias=bool(config.get("attention_bias", model_type == "qwen2")),
        norms_per_layer=4 if model_type == "gemma2" else 2,
        final_norm=not is_bert,
        embedding_norm=is_bert,
        token_type_vocab=int(config.get("type_vocab_size", 0) or 0),
        has_pooler=is_bert,
        head="classifier" if is_bert else "lm",
        n_experts=_first(config, "num_local_experts", "num_experts", default=1),
        experts_per_token=_first(config, "num_experts_per_tok", default=1),
        dropout=float(_first(config, "resid_pdrop", "hidden_dropout_prob", "attention_dropout", default=0.0) or 0.0),
        source=f"uploaded {name}",
    )
    try:
        return ModelSpec(**fields)
    except ValidationError as error:
        raise ModelInputError(f"{name}: {describe_validation_error(error)}") from None


def spec_from_parameter_count(parameters: float, vocab_size: int = 32000) -> ModelSpec:
    """A Llama-style shape for a bare parameter count.

    Assumes head_dim 128, hidden = 128 x layers (Llama-2 7B: 4096 = 128 x 32), SwiGLU
    with FFN = 8/3 x hidden, so each layer holds about 12 x hidden^2 parameters
    (Touvron et al. 2023, arXiv 2307.09288). Hidden is solved from
    N = 12 h^2 L + 2 V h and rounded to a multiple of 128.
    """
    if not math.isfinite(parameters) or parameters < 1e6 or parameters > 1e14:
        raise ModelInputError("parameter count must be between 1 million and 100 trillion")
    hidden = 128.0
    for _ in range(50):  # fixed-point iteration on h with L = h / 128
        layer_params = parameters - 2 * vocab_size * hidden
        hidden = max(128.0, (max(layer_params, 1.0) * 128 / 12) ** (1 / 3))
    hidden_size = max(128, int(round(hidden / 128)) * 128)
    layers = max(1, round(hidden_size / 128))
    ffn = int(round(8 * hidden_size / 3 / 256)) * 256 or 256
    return ModelSpec(
        name=f"{parameters / 1e9:g}B (assumed Llama-style shape)",
        family="assumed",
        n_layers=layers,
        hidden_size=hidden_size,
        n_heads=hidden_size // 128,
        n_kv_heads=hidden_size // 128,
        ffn_hidden_size=ffn,
        vocab_size=vocab_size,
        source="shape assumed from the parameter count (Llama-style)",
    )
