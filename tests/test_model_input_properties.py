"""Properties of config.json parsing: whatever the upload holds, the answer is a ModelSpec or a
ModelInputError with a one-line message, because the pages and the CLI catch nothing else.

Example counts come from a settings profile: a short one for every run, a long one when
GPU_SIZING_LONG_PROPERTIES=1. Neither writes Hypothesis's example database into the checkout.
"""

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calculators.models.hf_config import ModelInputError, spec_from_hf_config
from calculators.models.spec import ModelSpec

settings.register_profile(
    "model_input_short",
    max_examples=200,
    deadline=None,  # the machine is shared; a slow example is not a failure
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("model_input_long", settings.get_profile("model_input_short"), max_examples=5000)
PROFILE = settings.get_profile(
    "model_input_long" if os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1" else "model_input_short"
)

LLAMA_CONFIG = {
    "_name_or_path": "meta-llama/Llama-3.1-8B",
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}

INTEGER_FIELDS = [
    "hidden_size",
    "n_embd",
    "num_attention_heads",
    "num_hidden_layers",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "n_inner",
    "vocab_size",
    "max_position_embeddings",
    "type_vocab_size",
    "num_local_experts",
    "num_experts_per_tok",
]
BOOLEAN_FIELDS = ["tie_word_embeddings", "attention_bias"]
NUMBER_FIELDS = ["resid_pdrop", "hidden_dropout_prob", "attention_dropout"]
STRING_FIELDS = ["model_type", "hidden_act", "activation_function", "_name_or_path"]
SECTION_FIELDS = ["text_config"]
ALL_FIELDS = INTEGER_FIELDS + BOOLEAN_FIELDS + NUMBER_FIELDS + STRING_FIELDS + SECTION_FIELDS
# GPT-2's spellings, read only when the Llama spelling (hidden_size, ...) is absent.
SHADOWED_IN_LLAMA = {"n_embd", "n_inner", "activation_function"}
READ_IN_LLAMA = [key for key in ALL_FIELDS if key not in SHADOWED_IN_LLAMA]

huge_integers = st.integers(min_value=2**53 + 1, max_value=10**400) | st.integers(max_value=-(2**53) - 1)
numbers = (
    st.integers()
    | huge_integers
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 0.5, 2.7, 32.0, 1e308, 5e-324])
)
scalars = st.none() | st.booleans() | numbers | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
not_integer = (
    st.booleans()
    | st.text(max_size=20)
    | huge_integers
    | st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not x.is_integer())
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
)
WRONG_VALUES = {
    **dict.fromkeys(INTEGER_FIELDS, not_integer),
    **dict.fromkeys(BOOLEAN_FIELDS, numbers | st.text(max_size=20) | st.lists(st.booleans(), max_size=2)),
    **dict.fromkeys(
        NUMBER_FIELDS,
        st.booleans()
        | st.text(max_size=20)
        | st.sampled_from([float("nan"), float("inf"), -float("inf"), 10**400])
        | st.lists(st.floats(), max_size=2),
    ),
    **dict.fromkeys(STRING_FIELDS, st.booleans() | numbers | st.lists(st.text(max_size=4), max_size=2)),
    **dict.fromkeys(SECTION_FIELDS, st.booleans() | numbers | st.text(max_size=20) | st.lists(scalars, max_size=2)),
}


def parse(text: str | bytes) -> ModelSpec | ModelInputError:
    """The spec, or the ModelInputError; any other exception fails the property."""
    try:
        return spec_from_hf_config(text)
    except ModelInputError as error:
        return error


def assert_spec_or_one_line_error(result: ModelSpec | ModelInputError) -> None:
    if isinstance(result, ModelInputError):
        message = str(result)
        assert message.startswith("config.json")
        assert message.splitlines() == [message]
    else:
        assert isinstance(result, ModelSpec)


@PROFILE
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_any_bytes_or_text_give_a_spec_or_one_line_error(text):
    assert_spec_or_one_line_error(parse(text))


@PROFILE
@given(json_values)
def test_any_json_document_gives_a_spec_or_one_line_error(document):
    assert_spec_or_one_line_error(parse(json.dumps(document)))


@PROFILE
@given(st.dictionaries(st.sampled_from(ALL_FIELDS), json_values, max_size=12))
def test_any_values_under_the_keys_that_are_read(fields):
    """Random documents rarely hit the keys the parser reads; these always do."""
    assert_spec_or_one_line_error(parse(json.dumps(fields)))


@PROFILE
@given(st.sampled_from(ALL_FIELDS), json_values)
def test_a_llama_config_with_any_one_field_replaced(key, value):
    assert_spec_or_one_line_error(parse(json.dumps(LLAMA_CONFIG | {key: value})))


@PROFILE
@given(st.data())
def test_a_field_of_the_wrong_type_is_refused_by_name(data):
    """A wrong type is never read as some other value (bool("false"), int(2.7)); the message
    says which field is wrong."""
    key = data.draw(st.sampled_from(READ_IN_LLAMA))
    value = data.draw(WRONG_VALUES[key])
    result = parse(json.dumps(LLAMA_CONFIG | {key: value}))
    assert isinstance(result, ModelInputError), result
    assert str(result).startswith(f"config.json: {key}: expected ")
    assert_spec_or_one_line_error(result)


@PROFILE
@given(st.sampled_from(["num_hidden_layers", "hidden_size", "vocab_size", "num_key_value_heads", "head_dim"]))
def test_an_integer_spelled_as_a_float_means_the_same(key):
    expected = spec_from_hf_config(json.dumps(LLAMA_CONFIG))
    assert spec_from_hf_config(json.dumps(LLAMA_CONFIG | {key: float(LLAMA_CONFIG[key])})) == expected


@PROFILE
@given(st.integers(min_value=0, max_value=3000), st.sampled_from(["[", '{"a":']))
def test_nesting_beyond_the_limit_is_refused_at_any_depth(depth, opener):
    closer = "]" if opener == "[" else "}"
    inner = opener * depth + "0" + closer * depth
    result = parse(json.dumps(LLAMA_CONFIG)[:-1] + f', "rope_scaling": {inner}}}')
    if depth + 1 > 64:
        assert str(result) == f"config.json nests arrays and objects {depth + 1:,} deep; the limit is 64"
    else:
        assert isinstance(result, ModelSpec)
