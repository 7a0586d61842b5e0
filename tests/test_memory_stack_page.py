"""The sidebar's training-stack controls and the Memory page's framework sentence."""

from tests.apptest_helpers import open_app


def captions(app) -> list[str]:
    return [caption.value for caption in app.caption]


def test_memory_page_says_plain_pytorch_defaults_without_a_framework():
    app = open_app()
    assert any("plain PyTorch defaults (loss full, AdamW implementation foreach)" in c for c in captions(app))


def test_choosing_torchtune_applies_its_defaults_and_says_so():
    app = open_app()
    app.selectbox(key="framework").set_value("torchtune").run()
    assert not app.exception
    sentence = next(c for c in captions(app) if c.startswith("Training stack"))
    assert "torchtune defaults assumed" in sentence and "loss chunked" in sentence
    assert "AdamW implementation fused" in sentence


def test_liger_with_chunked_loss_is_one_clear_error_in_the_sidebar():
    app = open_app()
    app.selectbox(key="loss").set_value("chunked").run()
    app.checkbox(key="liger").check().run()
    assert any("--liger" in error.value and "--loss chunked" in error.value for error in app.error)


def test_litgpt_lora_names_its_model_code_defaults_and_dropout_changes_the_estimate():
    """litgpt fills LoRA dropout 0.05 and a fused q/k/v; the sentence says so with the sidebar's
    labels, and choosing dropout 0 in the sidebar lowers the activations (Llama-2-7B, r=16 on
    every linear: the masks and dropout outputs go)."""
    app = open_app(model="llama-2-7b", mode="finetune-lora", fw="litgpt")
    sentence = next(c for c in captions(app) if c.startswith("Training stack"))
    assert "LoRA dropout 0.05" in sentence and "q/k/v projection fused" in sentence
    before = peak_line(app)
    app.selectbox(key="lora_dropout").set_value(0.0).run()
    assert not app.exception
    assert "LoRA dropout 0.0" in next(c for c in captions(app) if c.startswith("Training stack"))
    assert peak_line(app) != before


def peak_line(app) -> str:
    return app.metric[0].value
