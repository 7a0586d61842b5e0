"""Model input: Hugging Face config.json parsing and the assumed shape of a bare count."""

import json

import pytest

from calculators.model_input import MAX_CONFIG_BYTES, ModelInputError, spec_from_hf_config, spec_from_parameter_count
from calculators.model_spec import parameter_count
from calculators.presets import get_preset

LLAMA2_7B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}

GPT2_CONFIG = {
    "model_type": "gpt2",
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "vocab_size": 50257,
}


def test_llama_config_gives_the_published_parameter_count():
    spec = spec_from_hf_config(json.dumps(LLAMA2_7B_CONFIG))
    assert (spec.activation, spec.norm, spec.position_embedding) == ("swiglu", "rmsnorm", "rope")
    assert parameter_count(spec).total == 6_738_415_616


def test_gpt2_config_matches_the_gpt2_preset():
    """GPT-2 small: 124,439,808 parameters with tied embeddings (HF model card)."""
    spec = spec_from_hf_config(json.dumps(GPT2_CONFIG))
    assert spec.tied_embeddings and spec.norm == "layernorm" and spec.ffn_hidden_size == 4 * 768
    assert parameter_count(spec).total == parameter_count(get_preset("gpt2")).total == 124_439_808


def test_grouped_query_attention_is_read_from_num_key_value_heads():
    config = LLAMA2_7B_CONFIG | {"num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    spec = spec_from_hf_config(json.dumps(config))
    assert spec.n_kv_heads == 8
    assert parameter_count(spec).total == 8_030_261_248  # Llama-3.1-8B


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"model_type": "llama", "hidden_size": 4096}), "lacks num_attention_heads, num_hidden_layers"),
        (json.dumps(LLAMA2_7B_CONFIG | {"num_attention_heads": 30}), "divide"),
        (json.dumps(LLAMA2_7B_CONFIG | {"num_hidden_layers": -2}), "n_layers"),
        (json.dumps(LLAMA2_7B_CONFIG | {"hidden_size": "big"}), "hidden_size"),
        (b"\xff\xfe\x00", "not valid JSON"),
        ("x" * (MAX_CONFIG_BYTES + 1), "under 1 MB"),
    ],
)
def test_bad_config_files_raise_one_clear_message(text, message):
    with pytest.raises(ModelInputError, match=message):
        spec_from_hf_config(text)


def test_bare_parameter_count_assumes_a_llama_shape():
    """7e9 solves N = 12 h^2 L + 2 V h with L = h/128 to h = 4096, L = 32, FFN 11008 (Llama-2 7B)."""
    spec = spec_from_parameter_count(7e9)
    assert (spec.n_layers, spec.hidden_size, spec.ffn_hidden_size) == (32, 4096, 11008)
    assert "assumed" in spec.name


@pytest.mark.parametrize("count", [0, -5, 1e3, float("nan"), float("inf"), 1e15])
def test_absurd_parameter_counts_are_refused(count):
    with pytest.raises(ModelInputError, match="between 1 million and 100 trillion"):
        spec_from_parameter_count(count)
