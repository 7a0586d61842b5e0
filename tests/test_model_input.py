"""Model input: Hugging Face config.json parsing and the assumed shape of a bare count."""

import json

import pytest

from calculators.models.geometry import parameter_count
from calculators.models.hf_config import (
    MAX_CONFIG_BYTES,
    ModelInputError,
    spec_from_hf_config,
    spec_from_parameter_count,
)
from calculators.models.presets import get_preset

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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"resid_pdrop": "abc"}, 'config.json: resid_pdrop: expected a finite number, got "abc"'),
        ({"resid_pdrop": [0.1]}, "config.json: resid_pdrop: expected a finite number, got [0.1]"),
        (
            {"hidden_dropout_prob": {"p": 0.1}},
            'config.json: hidden_dropout_prob: expected a finite number, got {"p": 0.1}',
        ),
        ({"resid_pdrop": float("nan")}, "config.json: resid_pdrop: expected a finite number, got NaN"),
        ({"attention_dropout": True}, "config.json: attention_dropout: expected a finite number, got true"),
        ({"type_vocab_size": "x"}, 'config.json: type_vocab_size: expected an integer, got "x"'),
        ({"type_vocab_size": [2]}, "config.json: type_vocab_size: expected an integer, got [2]"),
        ({"type_vocab_size": 2.7}, "config.json: type_vocab_size: expected an integer, got 2.7"),
        ({"type_vocab_size": float("nan")}, "config.json: type_vocab_size: expected an integer, got NaN"),
        ({"num_hidden_layers": True}, "config.json: num_hidden_layers: expected an integer, got true"),
        (
            {"vocab_size": 10**20},
            "config.json: vocab_size: expected an integer between -2**53 and 2**53, got 100000000000000000000",
        ),
        ({"tie_word_embeddings": "false"}, 'config.json: tie_word_embeddings: expected true or false, got "false"'),
        ({"attention_bias": 0}, "config.json: attention_bias: expected true or false, got 0"),
        ({"model_type": 7}, "config.json: model_type: expected a string, got 7"),
        ({"hidden_act": ["silu"]}, 'config.json: hidden_act: expected a string, got ["silu"]'),
        ({"text_config": "llama"}, 'config.json: text_config: expected an object, got "llama"'),
        ({"text_config": [1]}, "config.json: text_config: expected an object, got [1]"),
        (
            {"text_config": LLAMA2_7B_CONFIG | {"num_hidden_layers": True}},
            "config.json: text_config.num_hidden_layers: expected an integer, got true",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_by_name(change, message):
    """Python's bool("false"), int(2.7) and True-as-1 would read these silently; float("abc")
    and int([2]) would raise errors the pages do not catch."""
    with pytest.raises(ModelInputError) as caught:
        spec_from_hf_config(json.dumps(LLAMA2_7B_CONFIG | change))
    assert str(caught.value) == message


def test_long_values_are_quoted_short():
    with pytest.raises(ModelInputError) as caught:
        spec_from_hf_config(json.dumps(LLAMA2_7B_CONFIG | {"num_hidden_layers": "y" * 100}))
    assert str(caught.value) == 'config.json: num_hidden_layers: expected an integer, got "' + "y" * 36 + "..."


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("1e400", "config.json: num_hidden_layers: expected an integer, got Infinity"),
        ("-Infinity", "config.json: num_hidden_layers: expected an integer, got -Infinity"),
        ("NaN", "config.json: num_hidden_layers: expected an integer, got NaN"),
        ("1" + "0" * 5000, "config.json is not valid JSON: Exceeds the limit (4300 digits)"),
    ],
)
def test_non_finite_and_huge_literals_are_refused(literal, message):
    text = json.dumps(LLAMA2_7B_CONFIG).replace('"num_hidden_layers": 32', f'"num_hidden_layers": {literal}')
    with pytest.raises(ModelInputError) as caught:
        spec_from_hf_config(text)
    assert str(caught.value).startswith(message)


def test_deep_nesting_is_refused_before_parsing():
    """2 KB of brackets would otherwise make json.loads raise RecursionError."""
    text = '{"model_type": "llama", "x": ' + "[" * 1000 + "]" * 1000 + "}"
    with pytest.raises(ModelInputError) as caught:
        spec_from_hf_config(text)
    assert str(caught.value) == "config.json nests arrays and objects 1,001 deep; the limit is 64"


def test_nesting_up_to_the_limit_and_brackets_in_strings_are_accepted():
    nested = json.loads("[" * 63 + "]" * 63)  # 64 levels with the top-level object
    config = LLAMA2_7B_CONFIG | {"rope_scaling": nested, "_name_or_path": "[[[[" * 100}
    assert spec_from_hf_config(json.dumps(config)).name == "[[[[" * 100
    with pytest.raises(ModelInputError, match="65 deep"):
        spec_from_hf_config(json.dumps(config | {"rope_scaling": [nested]}))


def test_valid_spellings_keep_their_meaning():
    """32.0 is 32; a null text_config is absent; a null switch is false, as transformers reads it."""
    expected = spec_from_hf_config(json.dumps(LLAMA2_7B_CONFIG))
    as_floats = LLAMA2_7B_CONFIG | {"num_hidden_layers": 32.0, "hidden_size": 4096.0}
    assert spec_from_hf_config(json.dumps(as_floats)) == expected
    assert spec_from_hf_config(json.dumps(LLAMA2_7B_CONFIG | {"text_config": None})) == expected
    assert spec_from_hf_config(json.dumps({"text_config": LLAMA2_7B_CONFIG})) == expected
    assert spec_from_hf_config(json.dumps(LLAMA2_7B_CONFIG).encode("utf-16")) == expected
    assert not spec_from_hf_config(json.dumps(GPT2_CONFIG | {"tie_word_embeddings": None})).tied_embeddings
    assert spec_from_hf_config(json.dumps(GPT2_CONFIG | {"resid_pdrop": 0.1})).dropout == 0.1


def test_bare_parameter_count_assumes_a_llama_shape():
    """7e9 solves N = 12 h^2 L + 2 V h with L = h/128 to h = 4096, L = 32, FFN 11008 (Llama-2 7B)."""
    spec = spec_from_parameter_count(7e9)
    assert (spec.n_layers, spec.hidden_size, spec.ffn_hidden_size) == (32, 4096, 11008)
    assert "assumed" in spec.name


@pytest.mark.parametrize("count", [0, -5, 1e3, float("nan"), float("inf"), 1e15])
def test_absurd_parameter_counts_are_refused(count):
    with pytest.raises(ModelInputError, match="between 1 million and 100 trillion"):
        spec_from_parameter_count(count)


@pytest.mark.parametrize(
    ("count", "shape"),
    [
        # L layers of width 128 L: 2 layers x 256 hold 2 x 32,000 x 256 = 16.4M of embeddings and head
        # plus 2 x (4 x 256^2 + 3 x 256 x 768) = 1.7M of layers: 18.1M, the nearest to 20M
        (20e6, (2, 256)),
        (125e6, (7, 896)),
        (70e9, (71, 9088)),
    ],
)
def test_a_parameter_count_gets_the_nearest_llama_shape(count, shape):
    spec = spec_from_parameter_count(count)
    assert (spec.n_layers, spec.hidden_size) == shape


@pytest.mark.parametrize("count", [1e6, 5e6, 12e6])
def test_a_parameter_count_no_shape_comes_near_is_refused_in_words(count):
    # 12M falls between 1 layer x 128 (8.4M) and 2 layers x 256 (18.1M), both more than 25% off
    with pytest.raises(ModelInputError, match="more than 25% off") as caught:
        spec_from_parameter_count(count)
    assert "vision model" in str(caught.value) and "no stand-in transformer is built" in str(caught.value)
    assert "vision library" in str(caught.value)


def test_an_image_models_config_is_refused_in_words_not_built_as_a_transformer():
    resnet = {"model_type": "resnet", "hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 6, 3]}
    with pytest.raises(ModelInputError, match="'resnet' is an image model") as caught:
        spec_from_hf_config(json.dumps(resnet))
    assert "vision library" in str(caught.value) and "transformer language models" in str(caught.value)
