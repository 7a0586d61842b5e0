"""The memory engine against peaks measured on a real GPU (data/device_runs/README.md).

The measured values come from the files; the estimates are worked out again by the current
engine, so a change that moves the engine away from what the GPU allocated fails here.
"""

from __future__ import annotations

import json

import pytest

from calculators import DATA_DIR
from calculators.memory.engine import estimate_memory
from measure.calibration import benchmarks
from measure.calibration.result import CalibrationResult

RUNS = DATA_DIR / "device_runs"
CALIBRATION = RUNS / "2026-11-27-h200-calibration.json"
MEASUREMENTS = RUNS / "2026-11-27-h200-measurements.json"


def _reference_rows() -> list[dict]:
    return json.loads(MEASUREMENTS.read_text())["reference_models"]


def test_the_h200_calibration_loads_and_names_its_gpu_driver_and_torch():
    result = CalibrationResult.model_validate_json(CALIBRATION.read_text())
    assert (result.gpu_name, result.catalogue_gpu) == ("NVIDIA H200", "H200-SXM-141GB")
    assert (result.driver_version, result.torch_version) == ("580.159.04", "2.11.0+cu130")
    step = result.record("training_step")
    assert step.details["energy"].startswith("measured") and 600 < step.details["mean_power_w"] < 750


@pytest.mark.parametrize(
    "row", _reference_rows(), ids=lambda row: f"{row['layers']}x{row['hidden']}-{row['precision']}"
)
def test_the_engine_matches_the_peak_a_real_h200_allocated(row):
    spec = benchmarks.reference_spec(row["layers"], row["hidden"], row["vocab"], row["seq_len"], row["heads"])
    settings = benchmarks._reference_settings(row["micro_batch"], row["seq_len"], row["precision"])
    estimated_gib = estimate_memory(spec, settings).allocated_gib
    assert estimated_gib == pytest.approx(row["measured_allocated_gib"], rel=0.01)


def test_the_h200_host_link_and_cpu_adam_rates_are_what_the_readme_says():
    measured = json.loads(MEASUREMENTS.read_text())
    largest = measured["host_link"]["copies"][-1]
    assert largest["size_mib"] == 1024 and 55 < largest["pinned_h2d_gbps"] < 56
    fused_all_threads = next(
        row for row in measured["cpu_adamw"]["rows"] if row["implementation"] == "fused" and row["threads"] == 16
    )
    assert fused_all_threads["parameters_per_s"] == pytest.approx(4.1e9, rel=0.01)
