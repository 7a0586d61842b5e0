"""Estimates against published peak-memory measurements (data/measured_peak_memory.csv)."""

import pytest

from calculators.validation import load_measurements, validation_table

TABLE = validation_table()


def test_every_measurement_is_either_estimated_or_explained():
    assert [row.id for row in TABLE] == [row["id"] for row in load_measurements()]
    for row in TABLE:
        assert (row.estimate_gib is None) == (row.unsupported_reason is not None), row.id


def test_bert_and_llama_rows_are_supported():
    supported = {row.id for row in TABLE if row.estimate_gib is not None}
    assert {f"hf-{i}" for i in range(1, 9)} | {"tt-2"} <= supported


@pytest.mark.parametrize("row", [row for row in TABLE if row.estimate_gib is not None], ids=lambda row: row.id)
def test_estimate_is_within_ten_percent_of_the_measurement(row):
    assert abs(row.error_fraction) <= 0.10, f"{row.id}: {row.estimate_gib:.2f} vs {row.measured_gib:.2f} GiB"
    assert row.error_fraction == pytest.approx(row.estimate_gib / row.measured_gib - 1)


def test_hf_measurements_are_converted_from_mib():
    """hf-1 was published as 14949 MB in nvidia-smi, i.e. MiB: 14949 / 1024 = 14.599 GiB."""
    row = next(row for row in TABLE if row.id == "hf-1")
    assert row.measured_gib == pytest.approx(14949 / 1024)
