"""The image-model validation's target (calculators.validation.vision_target) and its statement on
the Validation page: each DeepLearningExamples row within +-20%, their median within 10%."""

import re

import pytest

from calculators.validation.vision_target import check_target
from calculators.validation.vision_throughput import VisionThroughputRow
from tests.apptest_helpers import open_app

DLE = "https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/README.md"
TIMM = "https://github.com/huggingface/pytorch-image-models/blob/main/results/README.md"


def row(model: str, ratio: float, source: str = DLE, counted: bool = True) -> VisionThroughputRow:
    return VisionThroughputRow(
        id=f"{model}-{ratio}", model=model, library_key=None, gpu="A100-SXM4-80GB", gpus=8, precision="amp-fp16",
        channels_last=True, micro_batch=256, image_size=224, measured_images_per_s_per_gpu=1000.0,
        loader_cores_per_gpu=10, gpu_estimate_images_per_s_per_gpu=1000.0 * ratio,
        estimate_images_per_s_per_gpu=1000.0 * ratio, ratio=ratio, counted=counted,
        why_not=None if counted else "ambiguous table", source=source,
    )  # fmt: skip


def test_a_group_meets_the_target_only_with_every_row_in_band_and_its_median_within_10_pct():
    check = check_target(
        [row("ResNet-50", 0.95), row("ResNet-50", 1.05), row("ResNet-50", 1.10)]  # median 1.05, all in band
        + [row("EfficientNet-b4", 1.15), row("EfficientNet-b4", 1.19)]  # in band, median 1.17 > 1.10
        + [row("ResNeXt-101", 1.0), row("ResNeXt-101", 1.25), row("ResNeXt-101", 0.98)]  # one row out
    )
    met = {group.model: group.met for group in check.groups}
    assert met == {"EfficientNet-b4": False, "ResNeXt-101": False, "ResNet-50": True}
    # of 0.95 0.98 1.0 1.05 | 1.10 1.15 1.19 1.25: (1.05 + 1.10) / 2
    assert check.median_ratio == pytest.approx(1.075)
    assert check.median_met and not check.met


def test_timm_and_uncounted_rows_are_not_in_the_target():
    check = check_target(
        [row("ResNet-50", 1.0), row("resnet50 (timm)", 0.5, TIMM), row("ResNet-50", 3.0, counted=False)]
    )
    assert [group.model for group in check.groups] == ["ResNet-50"]
    assert check.met


def test_the_validation_page_states_the_target_and_the_groups_that_miss_it():
    # the review: EfficientNet-B0 and B4 missed it silently; their figures today (bench/vision_time.py)
    app = open_app("app_pages/validation.py")
    assert not app.exception
    warning = next(w.value for w in app.warning if w.value.startswith("Target:"))
    assert "not met" in warning
    # each group that misses it with its median and rows within the band, in words (the figures move
    # with the model: bench/vision_time.py prints them)
    assert re.search(r"EfficientNet-b0 \(median \d\.\d\d, \d+ of 10 rows within ±20%\)", warning)
    assert re.search(r"EfficientNet-b4 \(median \d\.\d\d, \d+ of 14 rows within ±20%\)", warning)
    summary = next(t.value for t in app.table if "target" in t.value.columns)
    assert summary.loc["EfficientNet-b4", "target"] == "missed"
    assert summary.loc["resnet50 (timm)", "target"] == "not in the target"
