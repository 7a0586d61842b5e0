"""The bundled library of open models, search, and resolving a model by its name.

Every bundled model's computed parameter count is checked against its published count. Fifteen
of them, worked out against their model cards or the counts published with their weights:

1. Qwen/Qwen3-30B-A3B: card 30.5B total, 3.3B activated; computed 30,532,122,624 / 3,353,032,704
   (per layer 18,874,368 attention + 256 q/k norms + 128 x 4,718,592 experts + 262,144 router + 4,096 norms).
2. Qwen/Qwen3-235B-A22B: card 235B, 22B activated; computed 235,093,634,560 / 22.2B.
3. deepseek-ai/DeepSeek-V3: card and report 671B, 37B activated; computed 671,026,419,200 / 37.55B.
4. deepseek-ai/DeepSeek-V2: paper 236B, 21B activated; computed 235.7B / 21.4B.
5. deepseek-ai/DeepSeek-V2-Lite: paper 15.7B, 2.4B activated without the embedding; computed 15.71B / 2.45B.
6. openai/gpt-oss-20b: card 20.91B, 3.61B active without the embedding; computed 20,914,757,184 / 3.608B.
7. openai/gpt-oss-120b: card 116.83B, 5.13B active; computed 116,829,156,672 / 5.133B.
8. mistralai/Mixtral-8x7B-v0.1: 46,702,792,704 (paper: 47B, 13B active); computed 12.88B active.
9. meta-llama/Llama-3.1-8B: 8,030,261,248 = 32 x 218,112,000 + 2 x 128,256 x 4096 + 4096.
10. meta-llama/Llama-2-70b-hf: 68,976,653,312 published = 68,976,648,192 parameters + 80 x 64 inv_freq.
11. google/gemma-3-1b-it: 999,885,952 (26 layers of 26,842,112 + tied 262,144 x 1152 + 1152).
12. google/medgemma-4b-it: 4,300,079,472 = Gemma 3 4B text 3,880,263,168 + SigLIP 416,866,032
    + projector 1152 x 2560 + 1152.
13. google/gemma-2-27b: 27,227,128,320 (46 layers, head_dim 128, four norms per layer, tied head).
14. Qwen/Qwen2.5-72B-Instruct: 72,706,203,648 (q/k/v biases, untied 152,064 vocabulary).
15. google-bert/bert-base-uncased: 109,482,240 with the pooler, without a task head.
16. Qwen/Qwen2.5-VL-7B-Instruct: 8,292,166,656 = Qwen2.5-7B 7,615,616,512 + vision transformer
    and patch merger 676,550,144 (worked out in tests/test_architectures.py).
17. meta-llama/Llama-3.2-11B-Vision: 10,670,220,835 = 40 Llama 3.1 8B layers, (128,256 + 8)-row
    embedding and head, 8 cross-attention layers' q/k norms and gates, vision encoder 863,567,379
    and projector 31,461,376 (worked out in tests/test_architectures.py).
"""

from __future__ import annotations

import json
import sys
import types

import pytest

from calculators.interface import cli
from calculators.models.geometry import active_parameters, parameter_count
from calculators.models.hf_config import ModelInputError
from calculators.models.hub import fetch_hub_config
from calculators.models.library import (
    ModelNotFound,
    cached_config,
    load_library,
    resolve_model,
    search_models,
    split_model_ref,
)
from tests.cli_helpers import run_cli

LIBRARY = load_library()


def computed_total(model) -> int:
    spec = resolve_model(model.id)
    total = parameter_count(spec).total
    if model.counted == "without a task head":  # an encoder's published count has no classifier
        total -= spec.hidden_size * spec.num_labels + spec.num_labels
    if model.counted == "without embeddings":  # Pythia's cards give non-embedding parameters
        total -= spec.vocab_size * spec.hidden_size * (1 if spec.tied_embeddings else 2)
    if model.buffers == "rotary_inv_freq":  # a non-parameter buffer the checkpoint stores per layer
        total += spec.n_layers * spec.attention_head_dim // 2
    return total


def test_the_library_has_at_least_150_models_with_sourced_counts():
    assert len(LIBRARY) >= 150
    assert all(model.parameters_source and model.config_source for model in LIBRARY.values())


@pytest.mark.parametrize("model_id", list(LIBRARY))
def test_computed_count_matches_the_published_count(model_id):
    """Exact where the count is exact (parameters_unit 1); within one unit of the published
    figure's last digit where a card rounds it (671B: unit 1e9)."""
    model = LIBRARY[model_id]
    assert abs(computed_total(model) - model.parameters) < model.parameters_unit
    if model.active_parameters is not None:
        spec = resolve_model(model_id)
        active = active_parameters(spec)
        if model.active_excludes_embedding:
            active -= spec.vocab_size * spec.hidden_size
        assert abs(active - model.active_parameters) < model.active_parameters_unit


@pytest.mark.parametrize(
    ("model_id", "total"),
    [
        ("Qwen/Qwen3-30B-A3B", 30_532_122_624),
        ("openai/gpt-oss-20b", 20_914_757_184),
        ("openai/gpt-oss-120b", 116_829_156_672),
        ("mistralai/Mixtral-8x7B-v0.1", 46_702_792_704),
        ("meta-llama/Llama-3.1-8B", 8_030_261_248),
        ("google/gemma-3-1b-it", 999_885_952),
        ("google/medgemma-4b-it", 4_300_079_472),
        ("google/gemma-2-27b", 27_227_128_320),
        ("Qwen/Qwen2.5-72B-Instruct", 72_706_203_648),
        ("Qwen/Qwen2.5-VL-3B-Instruct", 3_754_622_976),
        ("Qwen/Qwen2.5-VL-7B-Instruct", 8_292_166_656),
        ("meta-llama/Llama-3.2-11B-Vision", 10_670_220_835),
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", 10_670_220_835),
    ],
)
def test_hand_checked_totals(model_id, total):
    assert parameter_count(resolve_model(model_id)).total == total


def test_hand_checked_moe_active_counts():
    assert round(parameter_count(resolve_model("deepseek-ai/DeepSeek-V3")).total / 1e9) == 671
    assert int(active_parameters(resolve_model("deepseek-ai/DeepSeek-V3")) / 1e9) == 37
    assert int(active_parameters(resolve_model("Qwen/Qwen3-235B-A22B")) / 1e9) == 22
    assert round(active_parameters(resolve_model("mistralai/Mixtral-8x7B-v0.1")) / 1e8) == 129
    lite = resolve_model("deepseek-ai/DeepSeek-V2-Lite")
    assert int((active_parameters(lite) - 102_400 * 2048) / 1e8) == 24


def test_medgemma_counts_its_vision_tower():
    """SigLIP So400m at 896 px (27 layers, width 1152, MLP 4304, 4096 patches of 14 px):
    patch conv 3 x 14 x 14 x 1152 + 1152, positions 4096 x 1152, per layer 4 x (1152^2 + 1152)
    + 2 x 1152 x 4304 + 4304 + 1152 + 4 x 1152 = 15,239,504, final norm 2 x 1152: 416,866,032;
    projector 1152 x 2560 + 1152."""
    spec = resolve_model("google/medgemma-4b-it")
    assert spec.extra_params == 416_866_032 + 1152 * 2560 + 1152


def test_search_by_any_part_of_the_name():
    found = search_models("qwen3 a3b")
    assert found[0] == "Qwen/Qwen3-30B-A3B"
    assert set(found) == {
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-30B-A3B-Base",
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "Qwen/Qwen3-30B-A3B-Thinking-2507",
    }
    assert "llama-3.1-8b" in search_models("LLAMA-3.1")  # presets too, any case
    assert search_models("no such model at all") == []


def test_split_model_ref():
    assert split_model_ref("meta-llama/Llama-2-7b-hf@main") == ("meta-llama/Llama-2-7b-hf", "main")
    assert split_model_ref("Qwen/Qwen2.5-7B-Instruct") == ("Qwen/Qwen2.5-7B-Instruct", None)
    assert split_model_ref("llama-3.1-8b") is None
    assert split_model_ref("a/b/c") is None


def test_resolves_presets_ids_and_bare_names():
    assert resolve_model("llama-3.1-8b").name == "llama-3.1-8b"
    """A bundled model is named by its id and the revision its config was read at."""
    assert resolve_model("Qwen/Qwen2.5-7B-Instruct").name == "Qwen/Qwen2.5-7B-Instruct@main"
    assert resolve_model("qwen/qwen2.5-7b-instruct").name == "Qwen/Qwen2.5-7B-Instruct@main"
    assert resolve_model("Qwen2.5-7B-Instruct").name == "Qwen/Qwen2.5-7B-Instruct@main"
    assert resolve_model("Qwen/Qwen2.5-7B-Instruct@main").name == "Qwen/Qwen2.5-7B-Instruct@main"


def fake_cache(root, repo, commit, config):
    folder = root / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))


TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000}  # fmt: skip


def test_reads_the_local_hugging_face_cache(tmp_path, monkeypatch):
    """Layer: q 64 x 64 + k, v 64 x 32 + o 64 x 64 = 12,288; MLP 3 x 64 x 128 = 24,576; norms 128:
    36,992 x 2 + 2 x 1000 x 64 + 64 = 202,048."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    fake_cache(tmp_path, "someone/tiny", "abc123", TINY)
    spec = resolve_model("someone/tiny", fetch=lambda repo, revision: pytest.fail("the Hub was reached"))
    assert spec.name == "someone/tiny@abc123"  # named by the cached snapshot's commit
    assert parameter_count(spec).total == 202_048
    assert resolve_model("someone/tiny@abc123").name == "someone/tiny@abc123"
    assert cached_config("someone/tiny", "v2") is None


def test_reads_the_hub_through_the_stand_in(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    calls = []

    def hub(repo, revision):
        calls.append((repo, revision))
        return json.dumps(TINY).encode()

    spec = resolve_model("someone/remote@v1", fetch=hub)
    assert calls == [("someone/remote", "v1")]
    assert spec.name == "someone/remote@v1" and parameter_count(spec).total == 202_048


class GatedRepoError(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (OSError("no network"), "the Hub cannot be reached (offline)"),
        (GatedRepoError("401"), "is gated on the Hub: accept its license there and set HF_TOKEN"),
        (ImportError("huggingface_hub"), "huggingface_hub (the Hub client) is not installed"),
    ],
)
def test_hub_failures_name_the_upload_alternative_and_closest_names(tmp_path, monkeypatch, error, says):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))

    def hub(repo, revision):
        raise error

    with pytest.raises(ModelNotFound) as caught:
        resolve_model("Qwen/Qwen3-31B-A3B", fetch=hub)
    message = str(caught.value)
    assert says in message and "give its config.json with --config-json FILE" in message
    assert "closest bundled: Qwen/" in message and "\n" not in message
    on_page = caught.value.for_page()
    assert "upload its config.json in the sidebar" in on_page and "--config-json" not in on_page


def test_a_hub_that_does_not_answer_is_given_up_within_the_deadline(tmp_path, monkeypatch):
    import time

    from calculators.models import hub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub, "_download", lambda repo, revision: time.sleep(30))
    started_s = time.perf_counter()
    with pytest.raises(ModelNotFound) as caught:
        resolve_model("someone/slow-7b", fetch=lambda repo, revision: hub.fetch_hub_config(repo, revision, 0.3))
    assert time.perf_counter() - started_s < 2
    assert "the Hugging Face Hub did not answer within 0.3 s" in str(caught.value)


@pytest.mark.parametrize(
    ("typed", "resolved"),
    [
        ("Llama-2-7B", "llama-2-7b"),
        ("llama2 7b", "llama-2-7b"),
        ("LLAMA_2_7B", "llama-2-7b"),
        ("Llama-2-7b-HF", "meta-llama/Llama-2-7b-hf@main"),
        ("qwen3 0.6b", "Qwen/Qwen3-0.6B@main"),
    ],
)
def test_a_bundled_model_is_found_whatever_its_case_and_punctuation(typed, resolved):
    assert resolve_model(typed).name == resolved


def test_a_bad_config_from_the_hub_is_a_model_input_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelInputError, match="someone/broken config.json is not valid JSON"):
        resolve_model("someone/broken", fetch=lambda repo, revision: b"{not json")


def test_fetch_hub_config_asks_only_for_config_json(tmp_path, monkeypatch):
    """huggingface_hub is replaced by a stand-in module: nothing reaches the network."""
    asked = []

    def hf_hub_download(repo_id, filename, revision):
        asked.append((repo_id, filename, revision))
        path = tmp_path / "config.json"
        path.write_text(json.dumps(TINY))
        return str(path)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=hf_hub_download))
    assert json.loads(fetch_hub_config("someone/tiny", "main")) == TINY
    assert asked == [("someone/tiny", "config.json", "main")]


def test_cli_models_search(capsys):
    code, out, _ = run_cli(capsys, "models", "--search", "qwen", "--json")
    names = json.loads(out)
    assert code == 0 and "Qwen/Qwen3-30B-A3B" in names and all("qwen" in name.casefold() for name in names)


@pytest.mark.parametrize(
    ("model_id", "total", "active"),
    [
        ("Qwen/Qwen3-30B-A3B", 30_532_122_624, 3_353_032_704),
        ("deepseek-ai/DeepSeek-V3", 671_026_419_200, 37_552_297_472),
        ("openai/gpt-oss-20b", 20_914_757_184, 4_187_440_704),
    ],
)
def test_cli_memory_by_hub_id_offline(capsys, monkeypatch, model_id, total, active):
    monkeypatch.setattr(cli, "fetch_hub_config", lambda repo, revision: pytest.fail("the Hub was reached"))
    code, out, _ = run_cli(capsys, "memory", "--model", model_id, "--json")
    result = json.loads(out)
    assert code == 0 and result["parameters"] == total and result["active_parameters"] == active


def test_cli_unknown_id_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))

    def offline(repo, revision):
        raise OSError("offline")

    monkeypatch.setattr(cli, "fetch_hub_config", offline)
    code, out, err = run_cli(capsys, "memory", "--model", "meta-llama/Llama-9-7b", "--json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: model 'meta-llama/Llama-9-7b'")
    assert "--config-json" in err and "closest bundled" in err


def library_file(tmp_path, **changes) -> object:
    row = LIBRARY["openai/gpt-oss-20b"].model_dump() | changes
    path = tmp_path / "library.json"
    path.write_text(json.dumps({"models": [row]}))
    return path


def test_a_library_row_must_name_public_sources_and_a_date(tmp_path):
    from calculators.models.library import LibraryError

    with pytest.raises(LibraryError, match=r"model 1 \('openai/gpt-oss-20b'\): parameters_source"):
        load_library(library_file(tmp_path, parameters_source="read it somewhere"))
    with pytest.raises(LibraryError, match="as_of: expected an ISO date"):
        load_library(library_file(tmp_path, as_of="last week"))
    with pytest.raises(LibraryError, match="parameters"):
        load_library(library_file(tmp_path, parameters=-1))
