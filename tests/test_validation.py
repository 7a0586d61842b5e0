"""Estimates against published peak-memory measurements (data/measured_peak_memory*.csv)."""

import json

import pytest

from calculators.interface.cli import main
from calculators.interface.validation import validation_table
from calculators.validation.peak_memory import (
    FRAMEWORK_MEASUREMENTS_PATH,
    JSON_FIELD,
    MEASUREMENTS_PATH,
    all_measurements,
    error_summary,
    load_measurements,
    measured_gib,
    row_model,
)

TABLE = validation_table()

# Rows the engine reproduces within the 10% target today; the others are listed in the
# report with what is missing (see the Validation page).
WITHIN_TARGET = {
    "hf-1", "hf-2", "hf-3", "hf-4", "hf-5", "hf-6", "hf-7", "hf-8", "tt-1", "tt-2", "tt-3", "tt-4", "tt-5",
    "litgpt-lora-phi15-mb4", "litgpt-lora-stablelm3b-mb4", "litgpt-lora-llama2-7b-mb1",
    "torchtitan-l31-8b-fsdp8-eager", "mleng-l31-8b-z3-offload-8k", "torchtune-readme-l31-8b-qlora-4090",
    "hf-sdpa-pythia410m-eager-bs1-s2048", "automodel-l32-1b-fsdp8-ac", "automodel-l32-1b-fsdp8-ac-lcce",
    "vllm-pr10511-llama3-8b-profile",
}  # fmt: skip


def test_every_row_of_both_files_is_estimated():
    """24 rows: 13 in the first file (tt-1 to tt-5 included), 11 in the frameworks file."""
    assert len(load_measurements(MEASUREMENTS_PATH)) == 13
    assert len(load_measurements(FRAMEWORK_MEASUREMENTS_PATH)) == 11
    assert [row.id for row in TABLE] == [row["id"] for row in all_measurements()]
    assert all(row.error_fraction == pytest.approx(row.estimate_gib / row.measured_gib - 1) for row in TABLE)


@pytest.mark.parametrize("row", [row for row in TABLE if row.id in WITHIN_TARGET], ids=lambda row: row.id)
def test_estimate_is_within_ten_percent_of_the_measurement(row):
    assert abs(row.error_fraction) <= 0.10, f"{row.id}: {row.estimate_gib:.2f} vs {row.measured_gib:.2f} GiB"


def test_units_are_converted_to_gib():
    """hf-1: 14949 MiB / 1024 = 14.599 GiB; litgpt phi-1.5: 10.68 GB = 10.68e9 / 2^30 = 9.947 GiB;
    pythia: 13484.1 MB = 13484.1e6 / 2^30 = 12.558 GiB; torchtitan 82.4 GiB as it is."""
    rows = {row.id: row for row in TABLE}
    assert rows["hf-1"].measured_gib == pytest.approx(14949 / 1024)
    assert rows["litgpt-lora-phi15-mb4"].measured_gib == pytest.approx(9.9465, abs=1e-4)
    assert rows["hf-sdpa-pythia410m-eager-bs1-s2048"].measured_gib == pytest.approx(12.558, abs=1e-3)
    assert rows["torchtitan-l31-8b-fsdp8-eager"].measured_gib == 82.4
    assert measured_gib({"measured": "2", "unit": "GB (1e9 bytes)"}) == pytest.approx(2e9 / 2**30)


def test_each_row_is_compared_like_with_like():
    rows = {row["id"]: row_model(row) for row in all_measurements()}
    assert rows["hf-1"].compare_to == "used"  # NVML used
    assert rows["torchtitan-l31-8b-fsdp8-eager"].compare_to == "reserved"  # reserved_bytes.all.peak
    assert rows["mleng-l31-8b-z3-offload-8k"].compare_to == "reserved"  # max_memory_reserved
    assert rows["litgpt-lora-phi15-mb4"].compare_to == "allocated"  # max_memory_allocated
    assert rows["tt-1"].compare_to == "allocated"  # peak active
    assert rows["vllm-pr10511-llama3-8b-profile"].compare_to == "serving-activations"


@pytest.mark.parametrize("row", TABLE, ids=lambda row: row.id)
def test_the_cli_prints_what_the_page_shows(row, capsys):
    model = row_model(next(r for r in all_measurements() if r["id"] == row.id))
    assert main(["memory", *model.cli_args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed[JSON_FIELD[model.compare_to]] == pytest.approx(row.estimate_gib, rel=1e-12)
    assert row.command.startswith("python -m calculators memory " + " ".join(model.cli_args))


def test_deepspeed_row_peaks_while_loading_the_whole_model():
    """deepspeed.initialize moves the bf16 model to each GPU before ZeRO-3 partitions it:
    2 x 8,030,261,248 bytes = 14.957 GiB allocated, 16.453 GiB reserved with the 10% reserve."""
    row = next(row for row in TABLE if row.id == "mleng-l31-8b-z3-offload-8k")
    assert row.estimate_gib == pytest.approx(2 * 8_030_261_248 / 2**30 * 1.10)


def test_summary_is_the_median_and_the_largest_error():
    median, worst = error_summary(TABLE)
    errors = sorted(abs(row.error_fraction) for row in TABLE)
    assert worst == errors[-1] and median == pytest.approx((errors[11] + errors[12]) / 2)


def test_unpacked_torchtune_row_peaks_on_the_step_not_the_longest_sample():
    """torchtune resets its peak counters every step, so tt-1 is a typical batch (512 tokens at
    most). At that length the peak is the embedding's backward with every state alive:
    weights, gradients and AdamW's two states in bf16 are 4 x 2 bytes x 3,212,749,824
    parameters = 23.94 GiB, plus two embedding-sized transients, the embedding's dense gradient
    and its sum with the tied head's gradient (128,256 x 3,072 x 2 bytes = 0.734 GiB each),
    25.4 GiB in all; the longest
    Alpaca sample (1304 tokens) would give 31.2 GiB, 22% over the measured 25.5."""
    row = next(row for row in TABLE if row.id == "tt-1")
    assert "--seq-len 512" in row.command
    assert row.estimate_gib == pytest.approx(25.40, abs=0.01)
    assert abs(row.error_fraction) < 0.01
