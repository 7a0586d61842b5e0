"""AppTest of the fine-tuning modes: 'does a 7B model fit a 24 GB card?'"""

from streamlit.testing.v1 import AppTest

from tests.apptest_helpers import open_app


def verdict(app: AppTest) -> str:
    texts = [e.value for e in list(app.success) + list(app.warning) + list(app.error)]
    return next(t for t in texts if t.startswith(("Fits", "Tight", "Does not fit")))


def test_7b_on_a_24_gb_card_full_training_does_not_fit_but_qlora_does():
    full = open_app(model="llama-2-7b", gpu="RTX-4090-24GB")
    assert verdict(full).startswith("Does not fit")
    qlora = open_app(model="llama-2-7b", gpu="RTX-4090-24GB", mode="finetune-qlora", ckpt="full")
    assert verdict(qlora).startswith("Fits")
    assert any("trainable parameters: 39,976,960 of 6,738,415,616" in m.value for m in qlora.markdown)


def test_lora_mode_has_rank_and_targets_and_they_change_the_trainable_count():
    app = open_app(model="llama-2-7b", mode="finetune-lora")
    app.number_input(key="lora_rank").set_value(8).run()
    assert any("trainable parameters: 19,988,480 of" in m.value for m in app.markdown)  # half of r=16


def test_offload_reports_the_host_memory_and_bad_combinations_are_explained():
    app = open_app(model="llama-2-7b", zero="3", gpus="8", off_opt="1")
    assert any("host RAM needed per GPU" in m.value for m in app.markdown)
    bad = open_app(model="llama-2-7b", off_params="1")  # needs ZeRO-3
    assert any("ZeRO stage 3" in e.value for e in bad.error)


def test_tensor_parallel_that_does_not_divide_the_heads_is_explained():
    app = open_app(model="llama-2-7b", tp="3")
    assert any("Training settings" in e.value and "heads" in e.value for e in app.error)
