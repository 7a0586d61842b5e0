"""A vision-language config.json whose vision sizes cannot divide (issue 37, item 5).

patch_size 0 used to raise ZeroDivisionError in image_size // patch_size (Gemma 3's SigLIP and
Llama 3.2 Vision in calculators/models/geometry.py) and window_size // patch_size (Qwen2.5-VL in
the reader). Now the reader refuses it with the ModelInputError every other bad field gets: one
`error:` line and exit 2 in the CLI, a message on the page.
"""

from __future__ import annotations

import json
import re

import pytest

from calculators.models.hf_config import ModelInputError, spec_from_hf_config
from tests.apptest_helpers import open_app
from tests.cli_helpers import run_cli
from tests.test_architectures import LLAMA_32_11B_VISION, LLAVA_15_7B, QWEN25_VL_7B, tiny

GEMMA3_VLM = {
    "model_type": "gemma3", "mm_tokens_per_image": 256, "text_config": tiny("gemma3_text", head_dim=16),
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                      "num_hidden_layers": 1, "patch_size": 14, "image_size": 28},
}  # fmt: skip
# LLaVA's CLIP tower divides the same way (geometry.clip_vision_params, hf_config._image_tokens).
FAMILIES = {"gemma3": GEMMA3_VLM, "llava": LLAVA_15_7B, "mllama": LLAMA_32_11B_VISION, "qwen2_5_vl": QWEN25_VL_7B}


def with_vision(config: dict, **fields) -> dict:
    return config | {"vision_config": config["vision_config"] | fields}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_unchanged_configs_still_load(family):
    assert spec_from_hf_config(json.dumps(FAMILIES[family])).vision is not None


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("value", [0, -14])
def test_a_patch_size_that_cannot_divide_is_refused_by_name(family, value):
    bad = with_vision(FAMILIES[family], patch_size=value)
    expected = f"config.json: vision_config.patch_size: expected a positive integer, got {value}"
    with pytest.raises(ModelInputError) as refusal:
        spec_from_hf_config(json.dumps(bad))
    assert str(refusal.value) == expected


@pytest.mark.parametrize(
    ("family", "field", "value", "message"),
    [
        ("qwen2_5_vl", "spatial_merge_size", 0, "vision_config.spatial_merge_size: expected a positive integer, got 0"),
        ("qwen2_5_vl", "window_size", -112, "vision_config.window_size: expected a positive integer, got -112"),
        ("mllama", "max_num_tiles", 0, "vision_config.max_num_tiles: expected a positive integer, got 0"),
        ("gemma3", "image_size", 0, "vision_config.image_size: expected a positive integer, got 0"),
        ("gemma3", "image_size", 7, "vision_config.image_size: expected at least patch_size (14), got 7"),
        ("gemma3", "num_channels", 0, "vision_config.num_channels: expected a positive integer, got 0"),
    ],
)
def test_other_vision_sizes_are_positive(family, field, value, message):
    with pytest.raises(ModelInputError, match=re.escape(f"config.json: {message}")):
        spec_from_hf_config(json.dumps(with_vision(FAMILIES[family], **{field: value})))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_cli_gives_one_error_line_and_exit_2(capsys, tmp_path, family):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(with_vision(FAMILIES[family], patch_size=0)))
    code, out, err = run_cli(capsys, "memory", "--config-json", str(config))
    assert code == 2 and out == ""
    assert err == "error: config.json: vision_config.patch_size: expected a positive integer, got 0\n"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_page_shows_the_message_for_an_upload(family):
    app = open_app()
    app.radio(key="model_source").set_value("config.json").run()
    upload = json.dumps(with_vision(FAMILIES[family], patch_size=0)).encode()
    app.file_uploader(key="config_upload").set_value(("config.json", upload, "application/json")).run()
    assert not app.exception
    errors = [element.value for element in app.error]
    assert any("vision_config.patch_size: expected a positive integer, got 0" in text for text in errors)
    # The same upload, fixed, is estimated.
    fixed = json.dumps(FAMILIES[family]).encode()
    app.file_uploader(key="config_upload").set_value(("config.json", fixed, "application/json")).run()
    assert not app.exception
    assert not any("vision_config" in element.value for element in app.error)
