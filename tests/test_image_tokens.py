"""Images of a vision-language workload lengthen each sample's sequence (issue 16)."""

import pytest
from apptest_helpers import open_app

from calculators.interface.cli import main
from calculators.memory.engine import estimate_memory
from calculators.models.presets import get_preset
from calculators.workload.training import TrainingSettings, image_tokens_per_image, language_model_settings
from ui import state


def llava_like():
    """A fixed-resolution tower: LLaVA-1.5's CLIP ViT-L/14 at 336 px gives (336/14)^2 = 576 tokens."""
    return get_preset("llama-2-7b").model_copy(update={"name": "llava-like", "image_tokens": 576})


def test_each_image_adds_the_models_tokens_to_the_sequence():
    """2 images x 576 + 512 text tokens = 1664 tokens per sample; 2 samples = 3328 per micro-batch."""
    settings = TrainingSettings(micro_batch=2, seq_len=512, images_per_sample=2, method="lora")
    assert language_model_settings(llava_like(), settings).seq_len == 1664
    estimate = estimate_memory(llava_like(), settings)
    assert estimate.tokens_per_micro_batch == 3328
    assert estimate.assumptions[0].startswith("Images: 2 per sample x 576 tokens each = 1152 tokens added")


def test_a_given_count_per_image_wins_over_the_models():
    settings = TrainingSettings(seq_len=100, images_per_sample=3, image_tokens=256)
    assert image_tokens_per_image(llava_like(), settings) == 256
    assert language_model_settings(llava_like(), settings).seq_len == 100 + 3 * 256


def test_no_images_leaves_the_settings_as_given():
    settings = TrainingSettings(seq_len=777)
    assert language_model_settings(llava_like(), settings) is settings


def test_dynamic_resolution_models_need_the_count(capsys):
    """Qwen2.5-VL's tokens per image depend on the image: (H/28) x (W/28), 1296 at 1008 x 1008."""
    args = ["memory", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--mode", "finetune-lora", "--seq-len", "512"]
    assert main([*args, "--images-per-sample", "2", "--json"]) == 2
    assert "give it with --image-tokens" in capsys.readouterr().err
    assert main([*args, "--images-per-sample", "2", "--image-tokens", "1296", "--json"]) == 0
    assert '"tokens_per_micro_batch": 3104' in capsys.readouterr().out  # 512 + 2 x 1296


def test_cross_attention_vision_models_take_images_but_not_tokens_per_image(capsys):
    """Llama 3.2 Vision reads images by cross-attention: images per sample apply, tokens per image do not."""
    args = ["memory", "--model", "meta-llama/Llama-3.2-11B-Vision", "--images-per-sample", "1"]
    assert main([*args, "--json"]) == 0
    assert "cross-attention layers as 6404 keys and values" in capsys.readouterr().out
    assert main([*args, "--image-tokens", "100", "--json"]) == 2
    err = capsys.readouterr().err
    assert "reads each image by cross-attention" in err and "Traceback" not in err


@pytest.mark.parametrize("bad", ["-1", "2000", "abc"])
def test_bad_image_counts_are_one_error_line(bad, capsys):
    assert main(["memory", "--model", "llama-2-7b", "--images-per-sample", bad, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


def test_text_models_refuse_images(capsys):
    assert main(["memory", "--model", "llama-2-7b", "--images-per-sample", "1", "--image-tokens", "64", "--json"]) == 2
    assert "has no vision tower" in capsys.readouterr().err


def test_sidebar_images_are_kept_when_a_text_model_hides_them():
    """Changed on purpose (issue 36): a text-only model no longer shows the images controls, so its
    refusal is the command line's; the app keeps the count a vision model was given, unused."""
    at = open_app(model="Qwen/Qwen2.5-VL-3B-Instruct")
    at.number_input(key="images_per_sample").set_value(2).run()
    at.selectbox(key="preset").set_value("llama-2-7b").run()
    assert not any(n.label == "Images per sample" for n in at.sidebar.number_input)
    assert not any("has no vision tower" in error.value for error in at.error)
    assert at.session_state[state.VALUE_PREFIX + "images_per_sample"] == 2 and at.query_params["imgs"] == "2"
    at.selectbox(key="preset").set_value("Qwen/Qwen2.5-VL-3B-Instruct").run()
    assert at.number_input(key="images_per_sample").value == 2
    assert not at.exception
