"""Tests for the preset catalogue in data/models.csv and its loader."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from calculators.models.geometry import parameter_count
from calculators.models.presets import DEFAULT_PRESETS_PATH, EXTRA_COLUMNS, PresetError, get_preset, load_presets
from calculators.models.spec import ModelSpec

REQUIRED = [
    "gpt2",
    "gpt2-medium",
    "gpt2-large",
    "gpt2-xl",
    "bert-base-uncased",
    "bert-large-uncased",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "mistral-7b-v0.1",
    "qwen2.5-0.5b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "gemma-2-2b",
    "gemma-2-9b",
    "phi-3-mini-4k",
    "mixtral-8x7b",
]

# Exact totals worked out by hand from each config.json, module by module.
EXACT_TOTALS = {
    # 50257*768 wte + 1024*768 wpe + 12*7,087,872 per block + 2*768 ln_f; tied head.
    "gpt2": 124_439_808,
    # 2*32000*4096 embed + head, 32*(4*4096^2 + 3*4096*11008 + 2*4096), + 4096 norm.
    "llama-2-7b": 6_738_415_616,
    # As Llama but GQA (k, v are 4096x1024) and ffn 14336.
    "mistral-7b-v0.1": 7_241_732_096,
    # BertModel 109,482,240 (incl. pooler) + classifier 768*2 + 2.
    "bert-base-uncased": 109_483_778,
    # 8 experts of 3*4096*14336 plus a 4096x8 router per layer.
    "mixtral-8x7b": 46_702_792_704,
    # head_dim 256 (not 2304/8) and four RMSNorms per layer; tied head.
    "gemma-2-2b": 2_614_341_888,
}


HEADER = [*ModelSpec.model_fields, *EXTRA_COLUMNS]


def write_csv(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    """Write `rows` under the real header and return the file path."""
    path = tmp_path / "models.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=HEADER)
        writer.writeheader()
        writer.writerows(rows)
    return path


def good_row(**changes: str) -> dict[str, str]:
    """A minimal valid row (a small Llama-like model) with some cells changed."""
    row = dict.fromkeys(HEADER, "")
    row.update(name="tiny", n_layers="2", hidden_size="64", n_heads="4", n_kv_heads="2")
    row.update(ffn_hidden_size="128", vocab_size="1000")
    row.update(source="https://huggingface.co/openai-community/gpt2/blob/main/config.json", as_of="2026-11-23")
    row.update(changes)
    return row


def test_header_is_every_modelspec_field_in_order_then_notes():
    with DEFAULT_PRESETS_PATH.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert header == [*ModelSpec.model_fields, "notes"]


def test_all_required_presets_exist_and_validate():
    presets = load_presets()
    assert set(REQUIRED) <= set(presets)
    for name in REQUIRED:
        spec = presets[name]
        assert isinstance(spec, ModelSpec)
        assert spec.name == name
        assert parameter_count(spec).total > 0


@pytest.mark.parametrize("name", REQUIRED)
def test_every_preset_cites_its_config_and_date(name):
    spec = load_presets()[name]
    assert re.match(r"https://huggingface\.co/\S+/blob/main/config\.json( \| |$)", spec.source)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.as_of)


def test_presets_cite_the_documents_named_by_hand():
    presets = load_presets()
    assert presets["gpt2"].source == (
        "https://huggingface.co/openai-community/gpt2/blob/main/config.json"
        " | github.com/keras-team/keras-hub keras_hub/src/models/gpt2/gpt2_presets.py @71453d08"
    )
    assert presets["llama-2-13b"].source == (
        "https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json"
        " | https://huggingface.co/api/models/meta-llama/Llama-2-13b-hf"
    )


@pytest.mark.parametrize("name", [name for name, spec in load_presets().items() if spec.reported_params])
def test_parameter_count_within_one_percent_of_reported(name):
    spec = load_presets()[name]
    total = parameter_count(spec).total
    assert abs(total - spec.reported_params) / spec.reported_params < 0.01


@pytest.mark.parametrize(("name", "total"), EXACT_TOTALS.items())
def test_hand_checked_exact_totals(name, total):
    assert parameter_count(get_preset(name)).total == total


def test_family_conventions():
    presets = load_presets()
    gpt2 = presets["gpt2"]
    assert gpt2.position_embedding == "learned" and gpt2.norm == "layernorm"
    assert gpt2.fused_qkv and gpt2.linear_bias and gpt2.tied_embeddings
    assert gpt2.activation == "gelu" and gpt2.dropout == 0.1
    assert gpt2.ffn_hidden_size == 4 * gpt2.hidden_size

    bert = presets["bert-base-uncased"]
    assert (bert.head, bert.num_labels, bert.token_type_vocab) == ("classifier", 2, 2)
    assert bert.has_pooler and bert.embedding_norm and not bert.final_norm
    assert not bert.tied_embeddings and bert.max_position_embeddings == 512

    tied = {"llama-3.2-1b", "llama-3.2-3b", "qwen2.5-0.5b", "gemma-2-2b", "gemma-2-9b"}
    for name in REQUIRED:
        if not name.startswith(("gpt2", "bert")):
            assert presets[name].tied_embeddings == (name in tied), name
        assert presets[name].qkv_bias == name.startswith("qwen2.5"), name
    assert presets["llama-3.1-405b"].n_kv_heads == 8

    gemma = presets["gemma-2-9b"]
    assert gemma.activation == "geglu"
    assert gemma.head_dim == 256 and gemma.norms_per_layer == 4
    # head_dim is only set where the config makes it differ from hidden/heads.
    assert all(spec.head_dim is None or spec.head_dim != spec.hidden_size // spec.n_heads for spec in presets.values())

    phi = presets["phi-3-mini-4k"]
    assert phi.fused_qkv and phi.fused_gate_up
    mixtral = presets["mixtral-8x7b"]
    assert mixtral.n_experts == 8 and mixtral.experts_per_token == 2
    assert mixtral.ffn_hidden_size == 14336  # per expert


def test_load_is_cached_and_get_preset_returns_a_copy():
    assert load_presets() is load_presets()
    spec = get_preset("gpt2")
    spec.n_layers = 99
    assert load_presets()["gpt2"].n_layers == 12


def test_unknown_preset_lists_close_names():
    with pytest.raises(KeyError, match="llama-2-7b"):
        get_preset("llama-2-7")


def test_empty_cells_take_defaults(tmp_path):
    spec = load_presets(write_csv(tmp_path, [good_row()]))["tiny"]
    assert spec.head_dim is None and spec.reported_params is None
    assert spec.max_position_embeddings == 2048 and spec.activation == "swiglu"


def test_bad_value_names_file_row_preset_and_field(tmp_path):
    rows = [good_row(), good_row(name="broken", n_layers="twelve")]
    path = write_csv(tmp_path, rows)
    with pytest.raises(PresetError) as info:
        load_presets(path)
    message = str(info.value)
    assert str(path) in message
    assert "row 3" in message and "'broken'" in message and "'n_layers'" in message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"tied_embeddings": "maybe"}, "tied_embeddings"),
        ({"activation": "tanh"}, "activation"),
        ({"n_kv_heads": "3"}, "(whole row)"),  # 4 heads are not divisible by 3 kv-heads
        ({"n_layers": ""}, "n_layers"),  # required field left empty
    ],
)
def test_invalid_rows_raise_preset_error(tmp_path, changes, field):
    path = write_csv(tmp_path, [good_row(**changes)])
    expected = re.escape(f"row 2 (preset 'tiny'): field '{field}'")
    with pytest.raises(PresetError, match=expected):
        load_presets(path)


def test_duplicate_name_is_rejected(tmp_path):
    path = write_csv(tmp_path, [good_row(), good_row()])
    expected = r"row 3 \(preset 'tiny'\): field 'name': duplicate"
    with pytest.raises(PresetError, match=expected):
        load_presets(path)


def test_unknown_column_and_short_row_are_rejected(tmp_path):
    path = tmp_path / "extra.csv"
    path.write_text("name,n_layerz\ntiny,2\n", encoding="utf-8")
    with pytest.raises(PresetError, match="row 1 .*'n_layerz'"):
        load_presets(path)

    path = tmp_path / "short.csv"
    path.write_text("name,n_layers,hidden_size\ntiny,2\n", encoding="utf-8")
    with pytest.raises(PresetError, match="row 2 .*'hidden_size'"):
        load_presets(path)


def test_notes_are_read_but_are_not_part_of_the_spec(tmp_path):
    spec = load_presets(write_csv(tmp_path, [good_row(notes="config.json read at revision abc1234")]))["tiny"]
    assert "notes" not in spec.model_dump()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"source": ""}, "field 'source': 'user input' is not an https:// URL or a"),
        ({"source": "config.json read via the search corpus"}, "field 'source': mentions 'search corpus'"),
        (
            {"source": "keras-team/keras-hub gpt2_presets.py"},
            "field 'source': 'keras-team/keras-hub gpt2_presets.py' is not",
        ),
        ({"as_of": ""}, "field 'as_of': expected an ISO date YYYY-MM-DD (got '')"),
        ({"as_of": "Nov 2026"}, "field 'as_of': expected an ISO date YYYY-MM-DD (got 'Nov 2026')"),
    ],
)
def test_a_preset_without_a_public_source_or_a_date_is_refused(tmp_path, changes, expected):
    path = write_csv(tmp_path, [good_row(**changes)])
    with pytest.raises(PresetError) as info:
        load_presets(path)
    assert str(info.value).startswith(f"{path}: row 2 (preset 'tiny'): {expected}")
