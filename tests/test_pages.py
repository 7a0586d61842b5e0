"""AppTest: every page renders, reacts to the shared workload, and survives bad input."""

import pytest

from tests.apptest_helpers import open_app


def messages(elements) -> list[str]:
    return [element.value for element in elements]


def test_memory_page_default_workload_does_not_fit_one_h100():
    """Llama-3.1-8B, bf16-mixed AdamW: 16 bytes x 8.03e9 parameters = 120 GiB of states alone."""
    app = open_app()
    assert any(text.startswith("Does not fit") for text in messages(app.error))
    assert app.metric[0].label == "Peak (device)"


def test_changing_the_model_changes_the_verdict():
    app = open_app()
    app.selectbox(key="preset").set_value("gpt2").run()
    assert not app.exception
    assert any(text.startswith("Fits") for text in messages(app.success))
    assert app.query_params["model"] == "gpt2"


def test_the_url_reproduces_a_scenario_and_bad_values_are_ignored_with_a_warning():
    app = open_app(model="llama-2-7b", zero="3", gpus="8", ckpt="full", mb="abc")
    assert app.selectbox(key="preset").value == "llama-2-7b"
    assert app.selectbox(key="zero").value == 3
    assert app.number_input(key="micro_batch").value == 1
    assert any("Ignored `mb=abc`" in text for text in messages(app.warning))


def test_heads_that_do_not_divide_hidden_give_a_clear_message():
    app = open_app()
    app.radio(key="model_source").set_value("Custom architecture").run()
    app.number_input(key="c_heads").set_value(30).run()
    assert not app.exception
    assert any("Custom architecture" in text and "divide" in text for text in messages(app.error))
    # The sidebar keeps working: fixing the value brings the estimate back.
    app.number_input(key="c_heads").set_value(32).run()
    assert not any("Custom architecture" in text for text in messages(app.error))
    assert app.metric[0].label == "Peak (device)"


def test_parameter_count_states_the_assumed_shape():
    app = open_app()
    app.radio(key="model_source").set_value("Parameter count").run()
    assert any("Assumed a Llama-style shape for 7B parameters: 32 layers, hidden 4096" in t for t in messages(app.info))


def test_workload_survives_moving_between_pages():
    app = open_app()
    app.selectbox(key="preset").set_value("mistral-7b-v0.1").run()
    app.switch_page("app_pages/validation.py").run()
    app.switch_page("app_pages/memory.py").run()
    assert app.selectbox(key="preset").value == "mistral-7b-v0.1"


def test_validation_page_lists_every_measurement_with_its_error():
    """One table per stack, HF Trainer first; the framework-defaults table last."""
    app = open_app("app_pages/validation.py")
    tables = [frame.value for frame in app.dataframe]
    memory = [table for table in tables if "error" in table.columns]  # the image-model tables follow
    assert list(memory[0]["id"])[:3] == ["hf-1", "hf-2", "hf-3"]
    rows = sum(len(table) for table in memory)
    assert rows == 24 and all(table["error"].notna().all() for table in memory)
    assert app.metric[0].value == "24"
    assert any("framework" in table.columns for table in tables)


@pytest.mark.parametrize("source", ["config.json"])
def test_config_json_source_without_upload_asks_for_a_file(source):
    app = open_app()
    app.radio(key="model_source").set_value(source).run()
    assert any("Upload a config.json" in text for text in messages(app.error))


def test_an_uploaded_config_json_is_estimated_and_a_broken_one_is_explained():
    app = open_app()
    app.radio(key="model_source").set_value("config.json").run()
    config = b'{"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}'
    app.file_uploader(key="config_upload").set_value(("config.json", config, "application/json")).run()
    assert not app.exception and any(t.startswith("Fits") for t in messages(app.success))
    app.file_uploader(key="config_upload").set_value(("config.json", b"{oops", "application/json")).run()
    assert not app.exception
    assert any("not valid JSON" in text for text in messages(app.error))
