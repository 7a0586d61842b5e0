"""Other ways to name a model: a Hugging Face config.json, or a bare parameter count."""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass

from pydantic import ValidationError

from calculators.models.geometry import (
    clip_vision_params,
    mllama_vision_params,
    parameter_count,
    qwen25_merger_params,
    qwen25_vision_params,
    siglip_vision_params,
)
from calculators.models.spec import EXTENSION_DEFAULTS, ArchitectureSpec, ModelSpec, VisionTower

MAX_CONFIG_BYTES = 1_000_000  # real config.json files are a few KB
MAX_NESTING_DEPTH = 64  # real ones nest three or four levels (text_config, rope_scaling)
MAX_INTEGER = 2**53  # the largest integer a float holds exactly; the estimates mix both

# A JSON string, or an unterminated one up to the end: removing them leaves only the brackets
# that nest. The closing quote is optional so every match succeeds and the scan stays linear.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_GATED_MODEL_TYPES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
    "gpt_oss", "gemma", "gemma2", "gemma3", "gemma3_text", "phi3", "olmo", "olmo2", "qwen2_5_vl", "qwen2_5_vl_text",
    "mllama_text_model",
)  # fmt: skip


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


def json_nesting_depth(text: str) -> int:
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
    depth = json_nesting_depth(text)
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


# model types whose config class defaults to "gelu_new" (GPT2Config.activation_function,
# PhiConfig.hidden_act, GPTJConfig, GPTNeoConfig, CodeGenConfig in huggingface/transformers)
_GELU_NEW_BY_DEFAULT = ("gpt2", "phi", "gptj", "gpt_neo", "codegen")


def _gelu_written_out(fields: _Fields, model_type: str) -> bool:
    """transformers' "gelu_new" (NewGELUActivation, src/transformers/activations.py) is the tanh
    GELU written out in Python, each pointwise op its own autograd node; "gelu_pytorch_tanh" and
    "gelu" are one kernel."""
    default = "gelu_new" if model_type in _GELU_NEW_BY_DEFAULT else "gelu"
    return fields.string("hidden_act", "activation_function", "hidden_activation", default=default) == "gelu_new"


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


# Hugging Face model_types of image models (transformers/models/<type>/configuration_*.py): convolutional
# networks and vision transformers without a language model, which this reader cannot describe as one.
VISION_MODEL_TYPES = frozenset(
    {"resnet", "convnext", "convnextv2", "efficientnet", "mobilenet_v1", "mobilenet_v2", "mobilevit", "regnet",
     "vit", "deit", "beit", "swin", "swinv2", "dinov2", "levit", "poolformer", "segformer", "van", "bit",
     "upernet", "mask2former", "detr", "yolos", "dpt", "vit_mae", "vit_msn", "cvt", "focalnet", "hiera"}
)  # fmt: skip
NOT_A_LANGUAGE_MODEL = (
    "this app sizes transformer language models (and vision-language models with a language model) and the image "
    "models of its vision library (ResNet, ResNeXt, EfficientNet, MobileNet, RegNet, ConvNeXt, ViT, DeiT, Swin, "
    "U-Net: give the library's name, e.g. --model resnet50, or list them with `models --search`); this one is "
    "neither, and no stand-in transformer is built for it"
)


def _require(name: str, model_type: str = "", **sizes: int | None) -> None:
    """Refuse a config lacking the sizes that have no sensible default, naming them all."""
    missing = [key for key, value in sizes.items() if value is None]
    if not missing:
        return
    if model_type in VISION_MODEL_TYPES:
        raise ModelInputError(f"{name}: model_type {model_type!r} is an image model: {NOT_A_LANGUAGE_MODEL}")
    if model_type and model_type not in KNOWN_MODEL_TYPES:
        raise ModelInputError(
            f"{name}: model_type {model_type!r} is not one this app reads; it lacks {', '.join(missing)}. "
            "Describe the architecture by hand (the Custom fields) or upload a config that has them; "
            "image models are read from the vision library by name (e.g. resnet50, vit_base_patch16_224)."
        )
    raise ModelInputError(f"{name} lacks {', '.join(missing)}")


# Configuration classes whose tie_word_embeddings defaults to true (GemmaConfig, Starcoder2Config, ...).
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3", "gemma3_text", "starcoder2", "falcon", "gpt_bigcode", "t5")

# model_type values whose configuration classes in transformers this reader follows.
KNOWN_MODEL_TYPES = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
     "gpt_oss", "gemma", "gemma2", "gemma3", "gemma3_text", "phi3", "olmo", "olmo2", "falcon", "gpt_neox",
     "gpt2", "gpt_bigcode", "starcoder2", "bert", "roberta", "t5", "modernbert", "phimoe", "qwen2_5_vl",
     "qwen2_5_vl_text", "mllama", "mllama_text_model"}
)  # fmt: skip
# Decoders whose q/k/v projections have biases and o none (Qwen2Attention, Qwen2_5_VLAttention).
_QKV_BIAS_BY_DEFAULT = ("qwen2", "qwen2_moe", "qwen2_5_vl", "qwen2_5_vl_text")


def _dense_layer_count(fields: _Fields, model_type: str, layers: int, experts: int) -> int:
    """Layers of a mixture of experts that keep a dense MLP: DeepSeek's first
    `first_k_dense_replace` (deepseek-ai/DeepSeek-V3 modeling_deepseek.py DeepseekV3DecoderLayer), and
    Qwen-MoE's `mlp_only_layers` plus every layer i where (i + 1) % decoder_sparse_step != 0
    (transformers models/qwen3_moe/modeling_qwen3_moe.py Qwen3MoeDecoderLayer)."""
    if experts == 1:
        return 0
    if model_type.startswith("deepseek"):
        return min(layers, fields.integer("first_k_dense_replace", default=0))
    step = fields.integer("decoder_sparse_step", default=1) or 1
    only = fields.values.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise fields._refuse("mlp_only_layers", "a list of layer numbers", only)
    return sum(1 for i in range(layers) if i in only or (i + 1) % step)


def _sliding_layer_count(fields: _Fields, model_type: str, layers: int) -> tuple[int | None, int]:
    """(window, layers attending only within it). `layer_types` names each layer's attention when the
    config has it (gpt-oss, newer Gemma/Qwen configs); otherwise Mistral v0.1 and Starcoder2 window
    every layer, Gemma 2 every other layer (from the first), Gemma 3 five layers in six
    (`sliding_window_pattern`), and Qwen2/3 layers from `max_window_layers` on when
    `use_sliding_window` is true (transformers configuration_*.py of each)."""
    if model_type == "modernbert":  # ModernBertConfig: local_attention, global_attn_every_n_layers
        every = fields.integer("global_attn_every_n_layers", default=3) or 1
        return fields.integer("local_attention", default=128), sum(1 for i in range(layers) if i % every)
    window = fields.integer("sliding_window")
    if window is None:
        return None, 0
    types = fields.values.get("layer_types")
    if isinstance(types, list) and types:
        return window, sum(1 for kind in types if kind == "sliding_attention")
    if model_type == "gemma2":
        return window, (layers + 1) // 2
    if model_type.startswith("gemma3"):
        pattern = fields.integer("sliding_window_pattern", default=6)
        return window, sum(1 for i in range(layers) if (i + 1) % pattern)
    if model_type.startswith("qwen"):
        if not fields.boolean("use_sliding_window", default=False):
            return None, 0
        return window, max(0, layers - fields.integer("max_window_layers", default=layers))
    if model_type in ("mistral", "mixtral", "starcoder2"):
        return window, layers
    return None, 0


def _family_fields(fields: _Fields, model_type: str, hidden: int, heads: int, layers: int) -> dict:
    """What differs from a Llama-style decoder, family by family (transformers' modeling files)."""
    experts = fields.integer("num_local_experts", "num_experts", "n_routed_experts", default=1)
    extra = _expert_and_latent_fields(fields, model_type, heads, experts)
    extra["n_experts"] = experts
    extra["n_dense_layers"] = _dense_layer_count(fields, model_type, layers, experts)
    extra.update(_layer_fields(fields, model_type, hidden, heads, layers))
    window, sliding = _sliding_layer_count(fields, model_type, layers)
    extra.update(sliding_window=window, sliding_window_layers=sliding)
    extra.update(
        rotary_fraction=fields.number("partial_rotary_factor", "rotary_pct", default=1.0),
        parallel_residual=fields.boolean("use_parallel_residual", default=model_type in ("gpt_neox", "phi"))
        or (model_type == "falcon" and fields.boolean("parallel_attn", default=True)),
        attention_softcap=_softcap(fields, "attn_logit_softcapping", model_type),
        logit_softcap=_softcap(fields, "final_logit_softcapping", model_type),
    )
    return extra


def _expert_and_latent_fields(fields: _Fields, model_type: str, heads: int, experts: int) -> dict:
    """The expert widths of Qwen's and DeepSeek's mixtures of experts (a routed expert's, the dense
    layers', the shared experts') and DeepSeek's multi-head latent attention."""
    extra: dict = {}
    if model_type in ("qwen2_moe", "qwen3_moe") and experts > 1:
        extra["ffn_hidden_size"] = fields.integer("moe_intermediate_size")
        extra["dense_ffn_hidden_size"] = fields.integer("intermediate_size")
        extra["shared_expert_ffn_size"] = fields.integer("shared_expert_intermediate_size", default=0)
        extra["shared_expert_gate"] = extra["shared_expert_ffn_size"] > 0
    if model_type.startswith("deepseek"):
        moe_width = fields.integer("moe_intermediate_size")
        if experts > 1:
            extra["ffn_hidden_size"] = moe_width
            extra["dense_ffn_hidden_size"] = fields.integer("intermediate_size")
            extra["shared_expert_ffn_size"] = fields.integer("n_shared_experts", default=0) * moe_width
            extra["router_bias"] = fields.string("topk_method", default="") == "noaux_tc"
        rope = fields.integer("qk_rope_head_dim", default=0)
        extra.update(
            q_lora_rank=fields.integer("q_lora_rank"),
            kv_lora_rank=fields.integer("kv_lora_rank"),
            qk_rope_head_dim=rope,
            head_dim=fields.integer("qk_nope_head_dim", default=0) + rope,
            v_head_dim=fields.integer("v_head_dim"),
            n_kv_heads=heads,
        )
    return extra


def _layer_fields(fields: _Fields, model_type: str, hidden: int, heads: int, layers: int) -> dict:
    """A layer's norms, biases and attention where the family departs from Llama's."""
    extra: dict = {}
    if model_type == "gpt_oss":
        # GptOssExperts' clamped SwiGLU (transformers models/gpt_oss/modeling_gpt_oss.py @6edf5b31)
        extra.update(linear_bias=True, router_bias=True, attention_sinks=True, activation="clamped-swiglu")
    if model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
        extra["qk_norm"] = "head"
    if model_type == "olmo2":
        extra["qk_norm"] = "full"
    if model_type in ("gemma2", "gemma3", "gemma3_text", "olmo2"):
        extra["norms_per_layer"] = 4 if model_type != "olmo2" else 2
    if model_type == "olmo":  # non-parametric LayerNorm (OLMo 1, arXiv 2402.00838 Sec. 2.1)
        extra.update(norms_per_layer=0, final_norm=False)
    if model_type == "gpt_bigcode" and fields.boolean("multi_query", default=True):
        extra["n_kv_heads"] = 1
    if model_type == "mpt":
        # MptConfig (transformers src/transformers/models/mpt/configuration_mpt.py): LayerNorm
        # (norm_type low_precision_layernorm), biases only without no_bias (default True), learned
        # positions of max_seq_len with learned_pos_emb (default True), as llm-foundry builds MPT
        bias = not fields.boolean("no_bias", default=True)
        extra.update(norm="layernorm", norm_bias=bias, linear_bias=bias)
        if fields.boolean("learned_pos_emb", default=True):
            positions = fields.integer("max_seq_len", "max_position_embeddings", default=2048)
            extra.update(position_embedding="learned", max_position_embeddings=positions)
    if model_type == "gpt_neox":
        # GPTNeoXLayer's input_layernorm and post_attention_layernorm are nn.LayerNorm whether or not
        # the config names layer_norm_eps (transformers src/transformers/models/gpt_neox/modeling_gpt_neox.py)
        extra.update(fused_qkv=True, linear_bias=fields.boolean("attention_bias", default=True), norm="layernorm")
    if model_type == "phi":
        # Phi-1, Phi-1.5, Phi-2 (PhiConfig; huggingface/transformers src/transformers/models/phi/modeling_phi.py):
        # one input_layernorm (nn.LayerNorm, whether or not the config names layer_norm_eps) feeding
        # attention and MLP in parallel, biases on q/k/v, dense, fc1, fc2 and lm_head, partial rotary
        # (partial_rotary_factor)
        extra.update(
            norms_per_layer=1, linear_bias=True, qkv_bias=True, out_bias=True, lm_head_bias=True, norm="layernorm"
        )
    if model_type == "starcoder2":
        extra.update(linear_bias=fields.boolean("use_bias", default=True), norm="layernorm")
    if model_type == "falcon":
        extra.update(_falcon_fields(fields, hidden, heads))
    if model_type == "t5":
        extra.update(_t5_fields(fields, hidden, heads, layers))
    if model_type == "modernbert":
        extra.update(_modernbert_fields(fields))
    if model_type == "phimoe":
        # Phi-3.5-MoE (PhimoeConfig; huggingface/transformers src/transformers/models/phimoe/
        # modeling_phimoe.py @008f5c8c): q/k/v/o with biases (attention_bias), bias-free experts and
        # router, nn.LayerNorm (weight and bias) for every norm, and an LM head with a bias.
        attention_bias = fields.boolean("attention_bias", default=False)
        extra.update(
            norm="layernorm",
            qkv_bias=attention_bias,
            out_bias=attention_bias,
            lm_head_bias=fields.boolean("lm_head_bias", default=False),
        )
    return extra


# Gemma2Config's defaults when a config leaves the caps out (huggingface/transformers
# src/transformers/models/gemma2/configuration_gemma2.py @008e5743: attn_logit_softcapping 50.0,
# final_logit_softcapping 30.0); an explicit null turns capping off, as transformers tests `is not None`.
_SOFTCAP_DEFAULTS = {"gemma2": {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}}


def _softcap(fields: _Fields, key: str, model_type: str) -> float | None:
    """A soft-capping value (Gemma 2), or None for none; 0 is read as none."""
    if key not in fields.values:
        return _SOFTCAP_DEFAULTS.get(model_type, {}).get(key)
    return fields.number(key, default=0.0) or None


def _falcon_fields(fields: _Fields, hidden: int, heads: int) -> dict:
    """Falcon (tiiuae/falcon-7b, -40b, -180B; transformers models/falcon/modeling_falcon.py): fused qkv,
    a 4h GELU MLP, LayerNorm, a tied head; multi-query (7B) or grouped kv (new_decoder_architecture,
    with two input norms per layer where 7B's parallel block has one)."""
    new_arch = fields.boolean("new_decoder_architecture", default=False)
    if new_arch:
        kv = fields.integer("num_kv_heads", default=heads)
    else:
        kv = 1 if fields.boolean("multi_query", default=True) else heads
    parallel = fields.boolean("parallel_attn", default=True)
    return dict(
        n_kv_heads=kv,
        fused_qkv=True,
        linear_bias=fields.boolean("bias", default=False),
        norm="layernorm",
        activation="gelu",
        ffn_hidden_size=fields.integer("ffn_hidden_size", default=4 * hidden),
        norms_per_layer=2
        if (new_arch and fields.integer("num_ln_in_parallel_attn", default=2) == 2) or not parallel
        else 1,
        tied_embeddings=fields.boolean("tie_word_embeddings", default=True),
    )


def _t5_fields(fields: _Fields, hidden: int, heads: int, layers: int) -> dict:
    """T5 and Flan-T5 (T5Config; huggingface/transformers src/transformers/models/t5/modeling_t5.py):
    an encoder of num_layers and a decoder of num_decoder_layers (default num_layers), each decoder
    layer adding cross-attention and a third norm; q/k/v/o of heads x d_kv without biases;
    a ReLU MLP (T5 1.0) or a gated-GELU one (`feed_forward_proj` "gated-gelu": T5 1.1, Flan-T5);
    weight-only RMS-style T5LayerNorm; relative position biases instead of position embeddings;
    a head tied to the shared embedding unless tie_word_embeddings is false (T5 1.1, Flan-T5)."""
    decoder = fields.integer("num_decoder_layers", default=layers)
    d_kv = fields.integer("d_kv", default=hidden // heads)
    proj = fields.string("feed_forward_proj", default="relu")
    return dict(
        n_layers=layers + decoder,
        cross_attention_layers=decoder,
        head_dim=d_kv if d_kv * heads != hidden else None,
        activation="geglu" if proj.startswith("gated") else ("relu" if proj == "relu" else "gelu"),
        # T5Config maps "gated-gelu" to dense_act_fn "gelu_new" (kept for backward compatibility)
        gelu_written_out=proj == "gated-gelu",
        norm="rmsnorm",
        position_embedding="relative",
        relative_attention_buckets=fields.integer("relative_attention_num_buckets", default=32),
        dropout=fields.number("dropout_rate", default=0.1),
    )


def _modernbert_fields(fields: _Fields) -> dict:
    """ModernBERT (ModernBertConfig; huggingface/transformers
    src/transformers/models/modernbert/modeling_modernbert.py; Warner et al. 2024, arXiv 2412.13663):
    fused Wqkv and a fused GeGLU Wi of 2 x intermediate_size, no linear biases (attention_bias,
    mlp_bias false), LayerNorms without bias (norm_bias false), RoPE, and every
    global_attn_every_n_layers-th layer global, the others local within local_attention tokens.
    Layer 0 has no attention norm (nn.Identity) but the embeddings have one, so counting the
    embedding norm as layer 0's gives the same parameters and the same saved tensors. Counted,
    like BERT, as an encoder with a task head."""
    return dict(
        norm="layernorm",
        norm_bias=fields.boolean("norm_bias", default=False),
        position_embedding="rope",
        activation="geglu",
        fused_qkv=True,
        fused_gate_up=True,
        linear_bias=fields.boolean("mlp_bias", default=False),
        qkv_bias=fields.boolean("attention_bias", default=False),
        embedding_norm=False,
        head="classifier",
        has_pooler=False,
        tied_embeddings=True,
    )


def _upload_name(file_name: str, model_type: str) -> str:
    """What to call a model whose config has no _name_or_path: its file's name when that says
    more than config.json (qwen2.5-7b.json), else its model_type."""
    stem = file_name.split(":")[0].removesuffix(".json").strip()
    return stem if stem and stem.casefold() != "config" else model_type


def _spec_fields(fields: _Fields, name: str) -> dict:
    """ModelSpec's fields from the config's keys, which follow transformers' configuration
    classes (LlamaConfig, GPT2Config, BertConfig, MixtralConfig, Qwen3MoeConfig, DeepseekV3Config,
    GptOssConfig, Gemma3TextConfig, ...)."""
    model_type = fields.string("model_type", default="custom")
    hidden = fields.integer("hidden_size", "n_embd", "d_model")
    heads = fields.integer("num_attention_heads", "n_head", "num_heads")
    layers = fields.integer("num_hidden_layers", "n_layer", "num_layers")
    vocab = fields.integer("vocab_size")
    _require(name, model_type, hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=layers,
             vocab_size=vocab)  # fmt: skip
    is_gpt2 = model_type in ("gpt2", "gpt_bigcode") or fields.has("n_embd")
    is_bert = model_type in ("bert", "roberta")
    has_layer_norm_eps = fields.has("layer_norm_eps") or fields.has("layer_norm_epsilon")
    values = dict(
        name=fields.string("_name_or_path", default="") or _upload_name(name, model_type),
        family=model_type,
        n_layers=layers,
        hidden_size=hidden,
        n_heads=heads,
        n_kv_heads=fields.integer("num_key_value_heads", default=heads),
        head_dim=_explicit_head_dim(fields, hidden, heads),
        ffn_hidden_size=fields.integer("intermediate_size", "n_inner", "ffn_dim", "d_ff", default=4 * hidden),
        vocab_size=vocab,
        max_position_embeddings=fields.integer("max_position_embeddings", "n_positions", default=2048),
        activation=_activation(fields, model_type),
        gelu_written_out=_gelu_written_out(fields, model_type),
        norm="layernorm" if (is_gpt2 or is_bert or has_layer_norm_eps) else "rmsnorm",
        position_embedding="learned" if (is_gpt2 or is_bert) else "rope",
        tied_embeddings=fields.boolean("tie_word_embeddings", default=is_gpt2 or model_type in _TIED_BY_DEFAULT),
        fused_qkv=is_gpt2 or model_type == "phi3",
        fused_gate_up=model_type == "phi3",
        linear_bias=is_gpt2 or is_bert or fields.boolean("mlp_bias", default=False),
        qkv_bias=fields.boolean("attention_bias", default=model_type in _QKV_BIAS_BY_DEFAULT),
        norms_per_layer=2,
        final_norm=not is_bert,
        embedding_norm=is_bert,
        token_type_vocab=fields.integer("type_vocab_size", default=0),
        has_pooler=is_bert,
        head="classifier" if is_bert else "lm",
        experts_per_token=fields.integer("num_experts_per_tok", "experts_per_token", default=1),
        dropout=fields.number("resid_pdrop", "hidden_dropout_prob", "attention_dropout", default=0.0),
        source=f"uploaded {name}",
    )
    values.update(_family_fields(fields, model_type, hidden, heads, layers))
    return values


# Sizes of a vision tower that divide (image_size // patch_size, window_size // patch_size) or count
# pixels, tiles and channels; each vision config class names them (transformers models/siglip/
# configuration_siglip.py, clip/configuration_clip.py, qwen2_5_vl/configuration_qwen2_5_vl.py,
# mllama/configuration_mllama.py), and none is 0 or negative in a model that can run.
_VISION_SIZES = (
    "patch_size", "image_size", "window_size", "spatial_merge_size", "temporal_patch_size", "max_num_tiles",
    "num_channels", "in_channels", "in_chans",
)  # fmt: skip


def _check_vision_sizes(vision: _Fields) -> None:
    """Refuse a vision size of 0 or below, naming the field and value, before any of them divides.

    An image smaller than one patch has no patches, so image_size is at least patch_size."""
    for key in _VISION_SIZES:
        size = vision.integer(key)
        if size is not None and size <= 0:
            raise vision._refuse(key, "a positive integer", vision.values[key])
    patch, image = vision.integer("patch_size"), vision.integer("image_size")
    if patch is not None and image is not None and image < patch:
        raise vision._refuse("image_size", f"at least patch_size ({patch})", vision.values["image_size"])


def _vision_tower_params(top: _Fields, text_hidden: int) -> tuple[int, str, VisionTower | None]:
    """Parameters of a vision-language model's vision tower and projector (with whatever else the
    language model holds beyond its ModelSpec layers), a note for the source line, and the tower's
    shapes. Gemma 3 pairs a SigLIP encoder with a projector of one vision x text matrix and an
    RMSNorm (transformers models/gemma3/modeling_gemma3.py Gemma3MultiModalProjector); LLaVA a CLIP
    tower; Qwen2.5-VL its own window-attention ViT and patch merger; Llama 3.2 Vision (mllama) a
    two-stage tiled ViT, a linear projector, and cross-attention layers in the language model."""
    vision = top.section("vision_config")
    if vision is None:
        return 0, "", None
    _check_vision_sizes(vision)
    kind = vision.string("model_type", default="")
    top_kind = top.string("model_type", default="")
    if kind == "siglip_vision_model" and top_kind == "gemma3":
        width = vision.integer("hidden_size", default=1152)
        tower = siglip_vision_params(
            hidden=width,
            intermediate=vision.integer("intermediate_size", default=4304),
            layers=vision.integer("num_hidden_layers", default=27),
            patch=vision.integer("patch_size", default=14),
            image=vision.integer("image_size", default=896),
            channels=vision.integer("num_channels", default=3),
        )
        encoder = _vit_tower(vision, tower, width, 27, 4304, 896, class_token=False)
        return tower + width * text_hidden + width, "", encoder
    if kind == "clip_vision_model" and top_kind == "llava":
        return _llava_params(top, vision, text_hidden)
    if top_kind == "qwen2_5_vl" and kind in ("qwen2_5_vl", ""):
        return _qwen25_vl_params(vision, text_hidden)
    if top_kind == "mllama" and kind in ("mllama_vision_model", ""):
        return _mllama_params(top, vision, text_hidden)
    return 0, f"; vision tower {kind or '(unnamed)'} not counted", None


def _vit_tower(
    vision: _Fields, parameters: int, width: int, layers: int, intermediate: int, image: int, class_token: bool
) -> VisionTower:
    """A CLIP (arXiv 2103.00020) or SigLIP (arXiv 2303.15343) encoder at its fixed resolution:
    (image / patch)^2 patches, plus CLIP's class token; LayerNorm and a GELU MLP (transformers
    models/clip/modeling_clip.py CLIPEncoderLayer, models/siglip/modeling_siglip.py)."""
    side = vision.integer("image_size", default=image) // vision.integer("patch_size", default=14)
    return VisionTower(
        n_layers=vision.integer("num_hidden_layers", default=layers),
        hidden_size=vision.integer("hidden_size", default=width),
        n_heads=vision.integer("num_attention_heads", default=16),
        ffn_hidden_size=vision.integer("intermediate_size", default=intermediate),
        parameters=parameters,
        tokens_per_image=side * side + (1 if class_token else 0),
    )


def _qwen25_vl_tower(vision: _Fields, parameters: int) -> VisionTower:
    """Qwen2.5-VL's vision transformer (transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py
    Qwen2_5_VLVisionBlock): RMSNorm, a SwiGLU MLP (gate/up/down), and spatial_merge_size^2
    patches behind each image token (the PatchMerger folds each 2 x 2 group into one). Window
    attention in all blocks but fullatt_block_indexes: windows of window_size pixels, counted in
    merged units (window_size / spatial_merge_size / patch_size per side, 112 / 2 / 14 = 4), so
    (window_size / patch_size)^2 = 64 patches (Qwen2_5_VisionTransformerPretrainedModel.get_window_index)."""
    merge = vision.integer("spatial_merge_size", default=2)
    window_side = vision.integer("window_size", default=112) // vision.integer("patch_size", default=14)
    full_layers = vision.values.get("fullatt_block_indexes", [7, 15, 23, 31])
    if not isinstance(full_layers, list):
        raise vision._refuse("fullatt_block_indexes", "a list of block numbers", full_layers)
    return VisionTower(
        n_layers=vision.integer("depth", default=32),
        hidden_size=vision.integer("hidden_size", default=3584),
        n_heads=vision.integer("num_heads", default=16),
        ffn_hidden_size=vision.integer("intermediate_size", default=3420),
        parameters=parameters,
        activation="swiglu",
        norm="rmsnorm",
        patches_per_image_token=merge * merge,
        window_patches=window_side * window_side,
        full_attention_layers=len(full_layers),
    )


def _qwen25_vl_params(vision: _Fields, text_hidden: int) -> tuple[int, str, VisionTower]:
    """Qwen2.5-VL (Qwen2_5_VLVisionConfig; huggingface/transformers src/transformers/models/
    qwen2_5_vl/configuration_qwen2_5_vl.py): the vision transformer of `depth` blocks and its
    PatchMerger to out_hidden_size, the text width (the published configs write in_chans for
    in_channels). Images take a variable number of tokens (dynamic resolution), so no image_tokens.
    The merger's RMSNorm and two linears are its projector; the rest trains or freezes as the tower."""
    width = vision.integer("hidden_size", default=3584)
    out_hidden = vision.integer("out_hidden_size", default=text_hidden)
    merge = vision.integer("spatial_merge_size", default=2)
    total = qwen25_vision_params(
        hidden=width,
        intermediate=vision.integer("intermediate_size", default=3420),
        depth=vision.integer("depth", default=32),
        out_hidden=out_hidden,
        patch=vision.integer("patch_size", default=14),
        temporal_patch=vision.integer("temporal_patch_size", default=2),
        spatial_merge=merge,
        channels=vision.integer("in_channels", "in_chans", default=3),
    )
    return total, "", _qwen25_vl_tower(vision, total - qwen25_merger_params(width, out_hidden, merge))


def _layer_list(fields: _Fields, key: str, default: list[int], layers: int) -> list[int]:
    """A list of layer numbers such as mllama's cross_attention_layers, each within the model."""
    value = fields.values.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in value
    ):
        raise fields._refuse(key, f"a list of layer numbers below {layers}", value)
    return sorted(set(value))


def _mllama_params(top: _Fields, vision: _Fields, text_hidden: int) -> tuple[int, str, VisionTower]:
    """Llama 3.2 Vision (MllamaConfig; huggingface/transformers src/transformers/models/mllama/
    modeling_mllama.py MllamaForConditionalGeneration): the MllamaVisionModel, a
    multi_modal_projector of vision_output_dim x text width with bias, and what the language model
    holds beyond a Llama of num_hidden_layers: 8 more embedding rows for the image tokens
    (embed_tokens has vocab_size + 8 rows, lm_head vocab_size) and, in each of the
    cross_attention_layers (counted among num_hidden_layers), per-head q and k RMSNorms (2 x head_dim)
    and two scalar tanh gates in place of self-attention's nothing; their q/k/v/o, MLP and two norms
    have a self-attention layer's shapes, so the layers themselves count exactly as Llama layers.

    The tower (MllamaVisionModel.forward) runs each image as its max_num_tiles tiles of
    (image / patch)^2 patches and a class token, 1601 for 560 px tiles of 14 px patches, padded to
    a multiple of 8 (1608), all tiles of an image in one sequence through num_hidden_layers local
    and num_global_layers global layers; the padding is sliced off, so each image gives every
    cross-attention layer tiles x 1601 keys and values. Images are counted at the full max_num_tiles."""
    text = top.section("text_config") or top
    layers = text.integer("num_hidden_layers", default=40)
    heads = text.integer("num_attention_heads", default=32) or 1
    cross = _layer_list(text, "cross_attention_layers", [3, 8, 13, 18, 23, 28, 33, 38], layers)
    ratios = vision.values.get("supported_aspect_ratios")
    if ratios is not None and not isinstance(ratios, list):
        raise vision._refuse("supported_aspect_ratios", "a list of [width, height] tile counts", ratios)
    tower = mllama_vision_params(
        hidden=vision.integer("hidden_size", default=1280),
        intermediate=vision.integer("intermediate_size", default=5120),
        layers=vision.integer("num_hidden_layers", default=32),
        global_layers=vision.integer("num_global_layers", default=8),
        patch=vision.integer("patch_size", default=14),
        image=vision.integer("image_size", default=448),
        max_tiles=vision.integer("max_num_tiles", default=4),
        aspect_ratios=8 if ratios is None else len(ratios),
        channels=vision.integer("num_channels", default=3),
    )
    projector = vision.integer("vision_output_dim", default=7680) * text_hidden + text_hidden
    language_extra = 8 * text_hidden + len(cross) * (2 * (text_hidden // heads) + 2)
    tiles = vision.integer("max_num_tiles", default=4)
    per_tile = (vision.integer("image_size", default=448) // vision.integer("patch_size", default=14)) ** 2 + 1
    encoder = VisionTower(
        n_layers=vision.integer("num_hidden_layers", default=32) + vision.integer("num_global_layers", default=8),
        hidden_size=vision.integer("hidden_size", default=1280),
        n_heads=vision.integer("attention_heads", default=16),
        ffn_hidden_size=vision.integer("intermediate_size", default=5120),
        parameters=tower,
        tokens_per_image=tiles * (per_tile + (-per_tile) % 8),
        cross_attention_layers=len(cross),
        cross_attention_tokens_per_image=tiles * per_tile,
        tiles_per_image=tiles,
        gated_layers=vision.integer("num_global_layers", default=8),
        projector_input_width=vision.integer("vision_output_dim", default=7680),
    )
    note = f"; {len(cross)} of its layers read the images by cross-attention" if cross else ""
    return tower + projector + language_extra, note, encoder


def _llava_params(top: _Fields, vision: _Fields, text_hidden: int) -> tuple[int, str, VisionTower]:
    """LLaVA (LlavaConfig; huggingface/transformers src/transformers/models/llava/modeling_llava.py):
    the whole CLIP vision tower (its checkpoint keeps every layer, though features are read from
    vision_feature_layer) and LlavaMultiModalProjector, linear_1 (vision width x text width) and
    linear_2 (text x text), with biases unless multimodal_projector_bias is false."""
    width = vision.integer("hidden_size", default=1024)
    tower = clip_vision_params(
        hidden=width,
        intermediate=vision.integer("intermediate_size", default=4096),
        layers=vision.integer("num_hidden_layers", default=24),
        patch=vision.integer("patch_size", default=14),
        image=vision.integer("image_size", default=336),
        channels=vision.integer("num_channels", default=3),
    )
    feature_layers = top.values.get("vision_feature_layer", -2)
    n_layers = len(feature_layers) if isinstance(feature_layers, list) else 1
    bias = top.boolean("multimodal_projector_bias", default=True)
    projector = width * n_layers * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)
    return tower + projector, "", _vit_tower(vision, tower, width, 24, 4096, 336, class_token=True)


def _image_tokens(top: _Fields) -> int:
    """Context tokens one image takes: Gemma 3's mm_tokens_per_image; LLaVA's image_seq_length, or
    one per patch ((image / patch)^2, the class token dropped by vision_feature_select_strategy
    "default", kept by "full")."""
    if top.has("mm_tokens_per_image"):
        return top.integer("mm_tokens_per_image", default=0)
    vision = top.section("vision_config")
    if top.string("model_type", default="") != "llava" or vision is None:
        return 0
    if top.has("image_seq_length"):
        return top.integer("image_seq_length", default=0)
    patches = (vision.integer("image_size", default=336) // vision.integer("patch_size", default=14)) ** 2
    return patches + (1 if top.string("vision_feature_select_strategy", default="default") == "full" else 0)


def spec_from_config_dict(document: dict, name: str = "config.json", model_id: str | None = None) -> ModelSpec:
    """A ModelSpec from a parsed config.json object; `model_id` (a Hub id) names the model."""
    top = _Fields(document, f"{name}: ")
    fields = top.section("text_config") or top
    if fields is not top and not fields.has("tie_word_embeddings") and top.has("tie_word_embeddings"):
        # A composite config may set tying once, at the top (Qwen2.5-VL-3B's "tie_word_embeddings": true).
        fields = _Fields(fields.values | {"tie_word_embeddings": top.values["tie_word_embeddings"]}, fields.prefix)
    try:
        values = _spec_fields(fields, name)
        extra, note, tower = _vision_tower_params(top, values["hidden_size"])
        values.update(extra_params=extra, source=values["source"] + note, vision=tower)
        values["image_tokens"] = _image_tokens(top) if extra else 0
        if model_id:
            values.update(name=model_id, source=model_id + note)
        extensions = {name: values.pop(name) for name in EXTENSION_DEFAULTS if name in values}
        if any(value != EXTENSION_DEFAULTS[name] for name, value in extensions.items()):
            return ArchitectureSpec(**values, **extensions)
        return ModelSpec(**values)
    except ValidationError as error:
        raise ModelInputError(f"{name}: {describe_validation_error(error)}") from None


def spec_from_hf_config(text: str | bytes, name: str = "config.json", model_id: str | None = None) -> ModelSpec:
    """Parse a Hugging Face `config.json` (never downloaded) into a ModelSpec.

    Anything wrong with the file, from malformed JSON to a field of the wrong type, raises
    ModelInputError with a one-line message, the only error the pages and the CLI catch.
    A multimodal config's text_config, when present, describes the language model, and its
    vision_config adds the vision tower's parameters where the tower is known.
    """
    return spec_from_config_dict(_load_object(text, name), name, model_id)


def spec_from_parameter_count(parameters: float, vocab_size: int = 32000) -> ModelSpec:
    """A Llama-style shape for a bare parameter count.

    Assumes head_dim 128, hidden = 128 x layers (Llama-2 7B: 4096 = 128 x 32), SwiGLU
    with FFN = 8/3 x hidden, so each layer holds about 12 x hidden^2 parameters
    (Touvron et al. 2023, arXiv 2307.09288). Hidden is solved from
    N = 12 h^2 L + 2 V h and rounded to a multiple of 128.
    """
    if not math.isfinite(parameters) or parameters < 1e6 or parameters > 1e14:
        raise ModelInputError("parameter count must be between 1 million and 100 trillion")
    spec = _llama_shape_for(parameters, vocab_size)
    built = parameter_count(spec).total
    if not PARAMETER_COUNT_TOLERANCE[0] <= built / parameters <= PARAMETER_COUNT_TOLERANCE[1]:
        raise ModelInputError(
            f"{parameters / 1e6:,.1f}M parameters: the nearest Llama-style shape this assumes (L layers of width "
            f"128 x L, a {vocab_size:,}-token vocabulary) holds {built / 1e6:,.1f}M, more than 25% off. Describe "
            f"the architecture by hand or upload its config.json; if this is a vision model (ResNet-50 has 25.6M), "
            f"{NOT_A_LANGUAGE_MODEL}"
        )
    return spec


# Below this a bare count is as likely an image model's (ResNet-50 25.6M, ViT-B/16 86.6M, ConvNeXt-B 88.6M)
# as a small transformer's: the answer names the vision library beside the shape it assumed.
IMAGE_MODEL_SIZED_PARAMETERS = 1e9
IMAGE_MODEL_HINT = (
    "if this is an image model (ResNet-50 has 25.6M parameters), name it instead: the vision library sizes "
    "ResNet, EfficientNet, ConvNeXt, ViT, DeiT, Swin and a U-Net by name (e.g. resnet50)"
)


# A shape is only offered for a count it comes near (within 25%): below about 6.3M parameters even one layer
# of width 128 with a 32,000-token vocabulary holds too many, and small counts can fall between two shapes.
PARAMETER_COUNT_TOLERANCE = (0.75, 1.25)


def _llama_shape_for(parameters: float, vocab_size: int) -> ModelSpec:
    """The Llama-style shape whose parameters come closest to `parameters`: L layers of width
    h = 128 x L (see spec_from_parameter_count). L is first solved from 12 h^2 L + 2 V h = N by
    bisection, then the layer counts around it are counted exactly."""
    low, high = 1, 1024
    while low < high:  # the largest L whose approximate count stays within N
        middle = (low + high + 1) // 2
        hidden = 128 * middle
        if 12 * hidden**2 * middle + 2 * vocab_size * hidden <= parameters:
            low = middle
        else:
            high = middle - 1
    shapes = [_llama_shape(parameters, layers, vocab_size) for layers in range(max(1, low - 1), low + 3)]
    return min(shapes, key=lambda shape: abs(parameter_count(shape).total - parameters))


def _llama_shape(parameters: float, layers: int, vocab_size: int) -> ModelSpec:
    hidden_size = 128 * layers
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
