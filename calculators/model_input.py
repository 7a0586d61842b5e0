"""Other ways to name a model: a Hugging Face config.json, or a bare parameter count."""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass

from pydantic import ValidationError

from calculators.model_spec import ModelSpec

MAX_CONFIG_BYTES = 1_000_000  # real config.json files are a few KB
MAX_NESTING_DEPTH = 64  # real ones nest three or four levels (text_config, rope_scaling)
MAX_INTEGER = 2**53  # the largest integer a float holds exactly; the estimates mix both

# A JSON string, or an unterminated one up to the end: removing them leaves only the brackets
# that nest. The closing quote is optional so every match succeeds and the scan stays linear.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_GATED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma", "gemma2", "phi3")


class ModelInputError(ValueError):
    """A model description the app cannot use, with a message for the user."""


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem, naming the field, for pages and the CLI."""
    parts = []
    for problem in error.errors():
        field = ".".join(str(p) for p in problem["loc"]) or "model"
        parts.append(f"{field}: {problem['msg']}")
    return "; ".join(parts)


def _show(value: object) -> str:
    """The value as the file spells it (true, null, NaN, "text"), cut short and escaped, so a
    message quotes what the user wrote and stays on one line."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite_float(value: object) -> float | None:
    """The value as a float when it is a finite JSON number; None for anything else.

    bool is excluded because Python counts True as 1; huge integers overflow float()."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class _Fields:
    """One JSON object of a config.json, read field by field with strict types.

    Python's own conversions accept wrong values silently (bool("false") is True, int(2.7) is 2,
    True counts as 1) or raise errors a page cannot show, so each reader accepts only the JSON
    type the field means and otherwise raises a ModelInputError naming the field. A null number
    or string counts as absent, as transformers' configuration classes treat it.
    """

    values: dict
    prefix: str  # "config.json: " or "config.json: text_config.", put before every field name

    def has(self, key: str) -> bool:
        return key in self.values

    def _first(self, keys: tuple[str, ...]) -> tuple[str, object]:
        """The first synonym that is set (GPT-2 writes n_embd for hidden_size), with its key."""
        for key in keys:
            if self.values.get(key) is not None:
                return key, self.values[key]
        return keys[0], None

    def _refuse(self, key: str, expected: str, value: object) -> ModelInputError:
        return ModelInputError(f"{self.prefix}{key}: expected {expected}, got {_show(value)}")

    def integer(self, *keys: str, default: int | None = None) -> int | None:
        """A count; 32.0 is accepted as some writers spell 32 that way, 2.7 or true are not."""
        key, value = self._first(keys)
        if value is None:
            return default
        number = _finite_float(value)
        if number is None or not number.is_integer():
            raise self._refuse(key, "an integer", value)
        if abs(value) > MAX_INTEGER:
            raise self._refuse(key, "an integer between -2**53 and 2**53", value)
        return int(value)

    def number(self, *keys: str, default: float) -> float:
        """A rate such as dropout; NaN and Infinity are refused here because range checks pass them."""
        key, value = self._first(keys)
        if value is None:
            return default
        number = _finite_float(value)
        if number is None:
            raise self._refuse(key, "a finite number", value)
        return number

    def boolean(self, key: str, default: bool) -> bool:
        """A switch: only true or false, since "false" is a true value to Python.

        An explicit null is false, not the default: transformers tests these fields for truth."""
        if key not in self.values:
            return default
        value = self.values[key]
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._refuse(key, "true or false", value)
        return value

    def string(self, *keys: str, default: str) -> str:
        key, value = self._first(keys)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._refuse(key, "a string", value)
        return value

    def section(self, key: str) -> _Fields | None:
        """A nested object such as a multimodal model's text_config; None when absent or null."""
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._refuse(key, "an object", value)
        return _Fields(value, f"{self.prefix}{key}.")


def _nesting_depth(text: str) -> int:
    """How deep arrays and objects nest, counted without parsing.

    json.loads recurses once per level, so a few KB of brackets would exhaust the stack; the
    count runs first so such a file is refused before the parser sees it. Brackets inside
    strings are text, so strings are removed before counting."""
    steps = map(_DEPTH_STEP.__getitem__, _BRACKET.findall(_JSON_STRING.sub("", text)))
    return max(itertools.accumulate(steps), default=0)


def _decode(text: str | bytes, name: str) -> str:
    """Bytes as text in the encoding json.loads would detect (UTF-8, -16 or -32)."""
    if isinstance(text, str):
        return text
    try:
        return text.decode(json.detect_encoding(text), "surrogatepass")
    except UnicodeDecodeError as error:
        raise ModelInputError(f"{name} is not valid JSON: {error}") from None


def _load_object(text: str | bytes, name: str) -> dict:
    """The top-level JSON object, refusing what is too large or too deep before parsing it."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ModelInputError(f"{name} is {len(text):,} bytes; a config.json is expected to be under 1 MB")
    text = _decode(text, name)
    depth = _nesting_depth(text)
    if depth > MAX_NESTING_DEPTH:
        raise ModelInputError(f"{name} nests arrays and objects {depth:,} deep; the limit is {MAX_NESTING_DEPTH}")
    try:
        document = json.loads(text)
    except RecursionError:  # only when the caller's own stack is already nearly full
        raise ModelInputError(f"{name} nests arrays and objects too deeply to parse") from None
    except ValueError as error:  # malformed JSON, or an integer literal over Python's 4,300 digits
        raise ModelInputError(f"{name} is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise ModelInputError(f"{name} must hold a JSON object")
    return document


def _activation(fields: _Fields, model_type: str) -> str:
    act = fields.string("hidden_act", "activation_function", "hidden_activation", default="gelu")
    if model_type in _GATED_MODEL_TYPES or act in ("silu", "swish"):
        return "geglu" if "gelu" in act else "swiglu"
    return "gelu"


def _explicit_head_dim(fields: _Fields, hidden: int, heads: int) -> int | None:
    """head_dim only when the config sets one that differs from hidden / heads (Gemma)."""
    head_dim = fields.integer("head_dim")
    if heads > 0 and head_dim == hidden // heads:
        return None
    return head_dim


def _require(name: str, **sizes: int | None) -> None:
    """Refuse a config lacking the sizes that have no sensible default."""
    missing = [key for key, value in sizes.items() if value is None]
    if missing:
        raise ModelInputError(f"{name} lacks {', '.join(missing)}")


def _spec_fields(fields: _Fields, name: str) -> dict:
    """ModelSpec's fields from the config's keys, which follow transformers' configuration
    classes (LlamaConfig, GPT2Config, BertConfig, MixtralConfig, ...)."""
    model_type = fields.string("model_type", default="custom")
    hidden = fields.integer("hidden_size", "n_embd", "d_model")
    heads = fields.integer("num_attention_heads", "n_head")
    layers = fields.integer("num_hidden_layers", "n_layer", "num_layers")
    _require(name, hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=layers)
    is_gpt2 = model_type == "gpt2" or fields.has("n_embd")
    is_bert = model_type in ("bert", "roberta")
    has_layer_norm_eps = fields.has("layer_norm_eps") or fields.has("layer_norm_epsilon")
    return dict(
        name=fields.string("_name_or_path", default="") or model_type,
        family=model_type,
        n_layers=layers,
        hidden_size=hidden,
        n_heads=heads,
        n_kv_heads=fields.integer("num_key_value_heads", default=heads),
        head_dim=_explicit_head_dim(fields, hidden, heads),
        ffn_hidden_size=fields.integer("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden),
        vocab_size=fields.integer("vocab_size"),
        max_position_embeddings=fields.integer("max_position_embeddings", "n_positions", default=2048),
        activation=_activation(fields, model_type),
        norm="layernorm" if (is_gpt2 or is_bert or has_layer_norm_eps) else "rmsnorm",
        position_embedding="learned" if (is_gpt2 or is_bert) else "rope",
        tied_embeddings=fields.boolean("tie_word_embeddings", default=is_gpt2),
        fused_qkv=is_gpt2 or model_type == "phi3",
        fused_gate_up=model_type == "phi3",
        linear_bias=is_gpt2 or is_bert,
        qkv_bias=fields.boolean("attention_bias", default=model_type == "qwen2"),
        norms_per_layer=4 if model_type == "gemma2" else 2,
        final_norm=not is_bert,
        embedding_norm=is_bert,
        token_type_vocab=fields.integer("type_vocab_size", default=0),
        has_pooler=is_bert,
        head="classifier" if is_bert else "lm",
        n_experts=fields.integer("num_local_experts", "num_experts", default=1),
        experts_per_token=fields.integer("num_experts_per_tok", default=1),
        dropout=fields.number("resid_pdrop", "hidden_dropout_prob", "attention_dropout", default=0.0),
        source=f"uploaded {name}",
    )


def spec_from_hf_config(text: str | bytes, name: str = "config.json") -> ModelSpec:
    """Parse a Hugging Face `config.json` (never downloaded) into a ModelSpec.

    Anything wrong with the file, from malformed JSON to a field of the wrong type, raises
    ModelInputError with a one-line message, the only error the pages and the CLI catch.
    A multimodal config's text_config, when present, describes the language model.
    """
    fields = _Fields(_load_object(text, name), f"{name}: ")
    fields = fields.section("text_config") or fields
    try:
        return ModelSpec(**_spec_fields(fields, name))
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
