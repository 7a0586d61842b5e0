"""The image-model time model's spread over published runs, shown beside its hours on Time and cost
(calculators.validation.vision_error)."""

import pytest

from calculators.validation.vision_error import error_band_words, vision_error_band
from calculators.validation.vision_throughput import VisionThroughputRow


def row(key: str | None, ratio: float | None, counted: bool = True) -> VisionThroughputRow:
    return VisionThroughputRow(
        id="V", model=key or "nnU-Net", library_key=key, gpu="A100", gpus=1, precision="AMP", channels_last=True,
        micro_batch=64, image_size=224, measured_images_per_s_per_gpu=100.0, loader_cores_per_gpu=None,
        gpu_estimate_images_per_s_per_gpu=None if ratio is None else 100.0 * ratio,
        estimate_images_per_s_per_gpu=None if ratio is None else 100.0 * ratio, ratio=ratio, counted=counted,
        why_not=None if counted else "not in the library", source="s",
    )  # fmt: skip


TABLE = [row("resnet50", 0.8), row("resnet50", 1.1), row("resnet50", 0.9), row("efficientnet_b4", 2.0),
         row(None, None, counted=False)]  # fmt: skip


def test_the_band_is_the_models_own_rows():
    band = vision_error_band("resnet50", TABLE)
    assert (band.model_key, band.rows) == ("resnet50", 3)
    assert (band.low_ratio, band.median_ratio, band.high_ratio) == pytest.approx((0.8, 0.9, 1.1))


def test_a_model_without_a_published_run_takes_every_counted_row():
    # 0.8, 0.9, 1.1, 2.0: median (0.9 + 1.1) / 2; the uncounted row is left out
    band = vision_error_band("mobilenet_v2", TABLE)
    assert (band.model_key, band.rows) == (None, 4)
    assert (band.low_ratio, band.median_ratio, band.high_ratio) == pytest.approx((0.8, 1.0, 2.0))
    assert vision_error_band("resnet50", [row(None, None, counted=False)]) is None


def test_the_words_say_what_the_hours_may_be_off_by():
    words = error_band_words(vision_error_band("resnet50", TABLE))
    assert "Against 3 published runs of resnet50" in words
    assert "0.80x to 1.10x the measured images/s (median 0.90x)" in words
    assert "took 0.80x to 1.10x the estimated hours" in words
    assert error_band_words(vision_error_band("mobilenet_v2", TABLE)).startswith(
        "How far off: No published run of this model; against all 4 published image-model runs"
    )
