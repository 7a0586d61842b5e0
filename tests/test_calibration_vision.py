"""Calibration's vision benchmark: a real ResNet trained on the CPU within a small budget, its
images/s stored and read back, set against the estimate on the Calibration page, and applied to the
CPU vs GPU vs mixed precision table."""

import json
import math

import pytest
from pydantic import ValidationError

from calculators.cost.prices import load_prices
from calculators.cost.vision_comparison import cpu_gpu_precision_table
from calculators.hardware.catalogue import find_gpu
from calculators.hardware.cpus import find_cpu
from calculators.models.vision_library import vision_model
from calculators.timing.vision_measured import MeasuredVisionThroughput, measured_vs_estimate, scaled_images_per_s
from measure.calibration.result import BenchmarkRecord, CalibrationResult, utc_now
from measure.calibration.store import CalibrationImportError, CalibrationStore, export_json, import_json
from tests.apptest_helpers import open_app

# This project's H200 run of ResNet-50, 128 images of 224 pixels, channels-last, bf16 autocast:
# 4,320.6 images/s (data/device_runs/2026-11-27-h200-measurements.json, "vision").
H200_RESNET50 = MeasuredVisionThroughput(
    model="resnet50",
    device="cuda",
    device_name="H200-SXM-141GB",
    precision="amp-bf16",
    micro_batch=128,
    image_size=224,
    channels_last=True,
    images_per_s=4320.6,
    timed_steps=20,
)
CPU_RESNET18 = MeasuredVisionThroughput(
    model="resnet18", device="cpu", device_name="EPYC-9654", precision="fp32", micro_batch=8, image_size=112,
    images_per_s=47.0, timed_steps=5,
)  # fmt: skip


def a_result(**changes) -> CalibrationResult:
    return CalibrationResult(
        host="lab-node", device="cuda", gpu_name="NVIDIA H200", catalogue_gpu="H200-SXM-141GB",
        created_at=utc_now(), budget_s=100, vision=[H200_RESNET50, CPU_RESNET18],
    ).model_copy(update=changes)  # fmt: skip


@pytest.fixture(autouse=True)
def private_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "calibration.sqlite3"))
    monkeypatch.delenv("GPU_SIZING_CALIBRATION_LOCK", raising=False)
    return tmp_path / "calibration.sqlite3"


def test_a_cpu_resnet_trains_within_a_small_budget():
    pytest.importorskip("torch")
    from measure.calibration.vision import VisionConfig, measured_throughputs, vision_benchmark
    from measure.vision.imports import torchvision_module

    torchvision_module()  # imported once per process (3 s on a loaded 2-core host): not the benchmark's time
    config = VisionConfig("resnet18", 2, 64, False)  # 2 images of 64 pixels: a step of ~0.05 s here
    record = vision_benchmark("cpu", "fp32", budget_s=8.0, config=config, device_name="EPYC-9654")
    if record.skipped_reason:
        pytest.skip(f"the loaded host did not fit a timed step in 8 s: {record.skipped_reason}")
    assert record.ok and record.unit == "images/s" and record.name == "vision_cpu_fp32"
    assert record.value == pytest.approx(2 / record.details["step_s"])
    (measured,) = measured_throughputs([record])
    assert (measured.model, measured.device, measured.precision, measured.micro_batch) == ("resnet18", "cpu", "fp32", 2)
    assert measured.image_size == 64 and measured.timed_steps >= 1


def test_a_budget_too_small_skips_with_the_reason():
    pytest.importorskip("torch")
    from measure.calibration.vision import vision_benchmark

    record = vision_benchmark("cpu", "amp-bf16", budget_s=1.0)
    assert record.skipped_reason == "out of time: 1.0 s left, it needs 4 s"


def test_the_vision_entries_round_trip_through_the_sqlite_store(private_store):
    store = CalibrationStore(private_store)
    store.save(a_result())
    (stored,) = store.history()
    assert stored.vision == [H200_RESNET50, CPU_RESNET18]


def test_a_result_stored_before_the_vision_benchmark_still_reads():
    data = json.loads(export_json(a_result()))
    del data["vision"]
    assert import_json(json.dumps(data)).vision == []


@pytest.mark.parametrize("images_per_s", [0.0, -5.0, math.nan, math.inf])
def test_a_rate_that_is_no_measurement_is_refused(images_per_s):
    with pytest.raises(ValidationError):
        MeasuredVisionThroughput.model_validate(H200_RESNET50.model_dump() | {"images_per_s": images_per_s})
    with pytest.raises(ValidationError):
        BenchmarkRecord(name="vision_cpu_fp32", value=0.0, unit="images/s")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"images_per_s": 0}, "not a calibration result: vision.0.images_per_s: Input should be greater than 0"),
        ({"precision": "fp8"}, "not a calibration result: vision.0.precision: Input should be 'fp32', 'amp-bf16' or"),
    ],
)
def test_an_imported_file_with_a_bad_vision_entry_is_one_line(change, message):
    data = json.loads(export_json(a_result()))
    data["vision"][0] |= change
    with pytest.raises(CalibrationImportError) as refused:
        import_json(json.dumps(data))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_measured_over_estimate_is_the_ratio_and_a_device_without_a_row_says_why():
    compared = measured_vs_estimate(H200_RESNET50)
    assert compared.measured_over_estimate == pytest.approx(4320.6 / compared.estimate_images_per_s)
    unknown = measured_vs_estimate(CPU_RESNET18.model_copy(update={"device_name": None}))
    assert unknown.estimate_images_per_s is None
    assert unknown.why_no_estimate == "this CPU has no row in the catalogue, so there is no estimate to compare with"


def test_the_same_configuration_keeps_the_measurement_and_scaling_is_linear_in_it():
    h200, resnet50 = find_gpu("H200-SXM-141GB"), vision_model("resnet50")
    assert scaled_images_per_s(H200_RESNET50, h200, resnet50, 128, 224, True) == pytest.approx(4320.6)
    doubled = H200_RESNET50.model_copy(update={"images_per_s": 8641.2})
    resnet101 = vision_model("resnet101")
    assert scaled_images_per_s(doubled, h200, resnet101, 128, 224, True) == pytest.approx(
        2 * scaled_images_per_s(H200_RESNET50, h200, resnet101, 128, 224, True)
    )


def test_the_applied_measurement_replaces_the_row_of_its_device_and_precision():
    rows = cpu_gpu_precision_table(
        vision_model("resnet50"), find_cpu("EPYC-9654"), find_gpu("H200-SXM-141GB"), 128, load_prices(),
        image_size=224, measured=[H200_RESNET50],
    )  # fmt: skip
    cpu_fp32, cpu_bf16, gpu_fp32, gpu_mixed = rows
    # 1,281,167 images / 4,320.6 images/s = 296.52 s = 0.082368 h
    assert gpu_mixed.samples_per_s == pytest.approx(4320.6)
    assert gpu_mixed.hours_per_epoch == pytest.approx(0.082368, rel=1e-4)
    assert gpu_mixed.measured_from == "resnet50, 128 images of 224 pixels: 4,320.6 images/s"
    assert gpu_fp32.measured_from is None and cpu_bf16.measured_from is None
    # the CPU measurement (ResNet-18) is on EPYC-9654 fp32 and carries to ResNet-50 by the estimates' ratio
    rows = cpu_gpu_precision_table(
        vision_model("resnet50"), find_cpu("EPYC-9654"), find_gpu("H200-SXM-141GB"), 128, load_prices(),
        image_size=224, measured=[CPU_RESNET18],
    )  # fmt: skip
    assert rows[0].measured_from is not None and rows[0].samples_per_s < 47.0  # ResNet-50 is the heavier


def test_the_calibration_page_shows_measured_against_the_estimate():
    app = open_app("app_pages/calibration.py", timeout_s=120)
    app.file_uploader[0].set_value(("c.json", export_json(a_result()).encode(), "application/json")).run()
    assert not app.exception
    table = next(frame.value for frame in app.dataframe if "measured / estimate" in frame.value.columns)
    assert list(table["model"]) == ["resnet50", "resnet18"]
    assert list(table["measured (images/s)"]) == ["4,320.6", "47.0"]
    assert all(ratio != "-" for ratio in table["measured / estimate"])
    assert not any("None" in str(value) for value in table.to_numpy().ravel())


def test_the_applied_calibration_times_its_row_on_time_and_cost():
    # the section compares the sidebar's image model at the sidebar's micro-batch
    app = open_app("app_pages/calibration.py", timeout_s=120, model="resnet50", img_mb="128")
    app.file_uploader[0].set_value(("c.json", export_json(a_result()).encode(), "application/json")).run()
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/cost.py").run(timeout=120)
    app.selectbox(key="vision_cmp_gpu").set_value("H200-SXM-141GB").run(timeout=120)
    assert not app.exception
    table = next(frame.value for frame in app.dataframe if "hours per epoch (h)" in frame.value.columns)
    assert list(table["from"]) == ["estimate", "estimate", "estimate", "calibration"]
    assert list(table["images/s"])[-1] == 4321  # the measurement itself: same model, batch and size
    assert any("H200-SXM-141GB mixed bf16: measured by the applied calibration" in c.value for c in app.caption)
