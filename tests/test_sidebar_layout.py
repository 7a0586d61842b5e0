"""The sidebar fits the model, the mode and the page (issue 36): model and GPU first, the settings
that decide the answer next, the training stack in a collapsed section titled with what it assumes;
controls only where they apply, and a hidden control keeps its value (the session and the link)."""

from __future__ import annotations

from apptest_helpers import open_app

from ui import state

VLM = "Qwen/Qwen2.5-VL-3B-Instruct"  # reads images as tokens of its sequence
CROSS_ATTENTION_VLM = "meta-llama/Llama-3.2-11B-Vision"  # reads them by cross-attention
T5 = "google-t5/t5-base"  # an encoder-decoder


def labels(app) -> set[str]:
    sidebar = app.sidebar
    return {widget.label for widget in [*sidebar.number_input, *sidebar.selectbox, *sidebar.checkbox]}


def kept(app, key: str):
    return app.session_state[state.VALUE_PREFIX + key]


def test_model_and_gpu_come_first_then_the_mode_and_the_settings_that_decide():
    app = open_app()
    assert [box.key for box in app.sidebar.radio] == ["model_source"]
    assert [box.key for box in app.sidebar.selectbox][:6] == [
        "preset",
        "gpu",
        "mode",
        "precision",
        "checkpointing",
        "optimizer",
    ]


def test_a_text_only_model_shows_no_image_target_or_serving_controls():
    shown = labels(open_app(model="llama-2-7b"))
    assert {"Micro-batch", "Sequence length", "Data-parallel GPUs", "GPU for the verdict"} <= shown
    hidden = {"Images per sample", "Tokens per image (0 = the model's)", "Freeze the vision tower"}
    hidden |= {"Target length (encoder-decoder; 0 = as the input)", "KV cache", "Concurrency", "Weights"}
    assert not shown & hidden


def test_a_vision_model_shows_its_image_controls_and_t5_its_target_length():
    vision = labels(open_app(model=VLM))
    assert {"Images per sample", "Tokens per image (0 = the model's)", "Freeze the vision tower"} <= vision
    assert "Target length (encoder-decoder; 0 = as the input)" not in vision
    t5 = labels(open_app(model=T5))
    assert "Target length (encoder-decoder; 0 = as the input)" in t5 and "Images per sample" not in t5


def test_serve_shows_serving_controls_and_images_only_for_cross_attention():
    serve = labels(open_app(model=VLM, mode="inference"))
    assert {"Weights", "KV cache", "Context (tokens)", "Concurrency", "Tensor-parallel GPUs"} <= serve
    assert not serve & {"Micro-batch", "Precision", "Images per sequence (cross-attention)"}
    assert "Images per sequence (cross-attention)" in labels(open_app(model=CROSS_ATTENTION_VLM, mode="inference"))


def test_a_hidden_target_length_is_kept_and_does_not_reach_a_decoder_only_model():
    app = open_app(model=T5)
    app.number_input(key="target_len").set_value(128).run()
    app.selectbox(key="preset").set_value("llama-2-7b").run()
    assert "Target length (encoder-decoder; 0 = as the input)" not in labels(app)
    assert kept(app, "target_len") == 128 and app.query_params["target"] == "128"
    # the kept length is not the model's: Llama's estimate does not say it ignored one
    assert app.session_state["workload"].settings.target_len is None
    app.selectbox(key="preset").set_value(T5).run()
    assert app.number_input(key="target_len").value == 128
    assert app.session_state["workload"].settings.target_len == 128


def test_the_training_stack_is_one_collapsed_section_titled_with_what_it_assumes():
    app = open_app()
    (stack,) = app.sidebar.expander
    assert stack.label == "Training stack: ZeRO-0, no offload, plain PyTorch"
    inside = {widget.key for widget in [*stack.selectbox, *stack.number_input, *stack.checkbox]}
    assert {"zero", "tensor_parallel", "offload_optimizer", "framework", "attention", "liger"} <= inside
    linked = open_app(zero="3", tp="2", off_opt="1", fw="torchtitan", frozen="4")
    assert linked.sidebar.expander[0].label == (
        "Training stack: ZeRO-3, TP 2 x PP 1, optimizer on the CPU, torchtitan, 4 frozen layers"
    )


def test_calibration_and_validation_draw_no_workload_and_keep_it():
    for page in ("app_pages/calibration.py", "app_pages/validation.py"):
        app = open_app(page, mb="3", mode="finetune-lora", rank="8")
        assert not app.sidebar.number_input and not app.sidebar.selectbox
        assert kept(app, "micro_batch") == 3 and kept(app, "lora_rank") == 8
        assert app.query_params["mb"] == "3" and app.query_params["rank"] == "8"
        app.switch_page("app_pages/memory.py").run()
        assert app.number_input(key="micro_batch").value == 3 and app.number_input(key="lora_rank").value == 8


def test_a_select_box_left_on_its_default_shows_it_not_a_placeholder():
    """Streamlit reads a None value as nothing chosen ("Choose an option", seen in Chromium); the
    framework left unset shows "none (plain PyTorch)" and the loss "framework default", and picking
    one and going back keeps None (nothing enters the link)."""
    app = open_app()
    for key, shown in (("framework", "none (plain PyTorch)"), ("loss", "framework default")):
        box = app.selectbox(key=key)
        assert box.index is not None and box.options[box.index] == shown
    app.selectbox(key="framework").select("torchtitan").run()
    assert kept(app, "framework") == "torchtitan" and app.query_params["fw"] == "torchtitan"
    app.selectbox(key="framework").select_index(0).run()
    assert kept(app, "framework") is None and "fw" not in app.query_params


def test_a_closed_stack_section_draws_no_controls_and_its_kept_values_still_count():
    """ZeRO-3 from a link, stack section closed: no ZeRO box is drawn, yet the estimate is ZeRO-3's
    (the same peak as with the section open) and the link keeps zero=3."""
    closed = open_app(open_sections=False, zero="3", gpus="8")
    assert "zero" not in {box.key for box in closed.selectbox}
    opened = open_app(zero="3", gpus="8")
    assert "zero" in {box.key for box in opened.selectbox}
    headline = [element.value for kind in ("error", "success", "warning") for element in getattr(closed, kind)]
    assert headline == [element.value for kind in ("error", "success", "warning") for element in getattr(opened, kind)]
    assert closed.query_params["zero"] == "3"


def test_the_closed_stack_section_sends_nothing_but_its_title():
    """Closed, the training stack draws no control, heading, caption, file box or column: each would be
    an element the browser is sent and redraws on every change of the sidebar. Open, they are all there."""
    closed = open_app(open_sections=False, model="llama-2-7b")
    (section,) = [box for box in closed.sidebar.expander if box.label.startswith("Training stack")]
    assert list(section.children.values()) == []
    opened = open_app(model="llama-2-7b")
    (section,) = [box for box in opened.sidebar.expander if box.label.startswith("Training stack")]
    texts = [element.value for element in section.markdown]
    assert {"**Sharding and offload**", "**Kernels and implementation**", "**Framework**"} <= set(texts)
    assert [uploader.label.startswith("Framework config") for uploader in section.get("file_uploader")] == [True]
    assert len(section.columns) == 2  # tensor and pipeline parallel side by side
