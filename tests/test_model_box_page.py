"""AppTest: the sidebar's model box finds presets and bundled open models by their names,
and keeps what the user typed when it cannot be found."""

from __future__ import annotations

import pytest

import ui.workload
from tests.apptest_helpers import open_app, texts


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    def offline(repo, revision):
        raise OSError("offline")

    monkeypatch.setattr(ui.workload, "fetch_hub_config", offline)


def test_the_model_box_offers_presets_and_library_models():
    app = open_app()
    box = app.selectbox(key="preset")
    assert "llama-3.1-8b" in box.options and "Qwen/Qwen3-30B-A3B" in box.options
    box.set_value("Qwen/Qwen3-30B-A3B").run()
    assert not app.exception
    assert app.query_params["model"] == "Qwen/Qwen3-30B-A3B"
    assert any(text.startswith("Qwen/Qwen3-30B-A3B@main: license apache-2.0") for text in texts(app.info))


def test_a_hub_id_in_the_link_is_kept_and_explained_when_offline():
    app = open_app(model="someone/not-bundled-7b")
    assert not app.exception
    assert app.selectbox(key="preset").value == "someone/not-bundled-7b"
    errors = texts(app.error)
    assert any("someone/not-bundled-7b" in text and "upload its config.json in the sidebar" in text for text in errors)
    assert not any("--config-json" in text for text in errors)  # a flag means nothing on a page


def test_a_model_typed_in_another_case_is_the_bundled_one():
    app = open_app(model="Llama-2-7B")  # as the box hands a typed name to the page
    assert not app.exception and not any("unknown model" in text for text in texts(app.error))
    # the box and the link spell it as the list does: Enter on a typed name picks the box's "Add: ..." entry
    assert app.selectbox(key="preset").value == "llama-2-7b"
    assert app.query_params["model"] == "llama-2-7b"
    assert any("llama-2-7b" in text for text in texts(app.markdown) + texts(app.caption) + texts(app.info))
