"""Tests for calculators.cost.exports: the CSV and Excel downloads read back with pandas."""

from __future__ import annotations

import datetime as dt
import io

import pandas as pd
import pytest

from calculators.cost.exports import ASSUMPTION_COLUMNS, OPTION_COLUMNS, options_csv_bytes, options_excel_bytes
from calculators.cost.options import CostOption, cost_options
from calculators.cost.prices import CloudPrice
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.models.presets import get_preset
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings


def make_options() -> list[CostOption]:
    """Two options for Llama-2-7B on one H100: one with a spot price, one without."""
    rows = [
        CloudPrice(
            provider="A", instance_type="a1", gpu="H100-SXM5-80GB", gpu_count=1, region="r", source="s",
            on_demand_usd_per_hour=3.0, spot_usd_per_hour=1.0, interruptions_per_hour=0.0, as_of=dt.date(2026, 1, 2),
        ),
        CloudPrice(
            provider="B", instance_type="b1", gpu="H100-SXM5-80GB", gpu_count=1, region="r", source="s",
            on_demand_usd_per_hour=4.0, as_of=dt.date(2026, 3, 4),
        ),
    ]  # fmt: skip
    settings = TrainingSettings(micro_batch=1, seq_len=4096)
    time = TimeSettings(dataset_tokens=1e9, utilisation=0.5)
    return cost_options(get_preset("llama-2-7b"), settings, time, rows, load_gpu_catalogue())


OPTIONS = make_options()
ASSUMPTIONS = {"utilisation": "0.5 (given)", "overlap": "50%"}
DATES = {"cloud prices": "2026-01-02 to 2026-03-04", "GPU catalogue": "2026-11-23"}
FORMULAS = ["usd = instances x USD per instance-hour x hours", "6N + 12 L s h FLOPs per token"]


def test_csv_reads_back_with_every_field():
    frame = pd.read_csv(io.BytesIO(options_csv_bytes(OPTIONS)))
    assert tuple(frame.columns) == OPTION_COLUMNS
    assert list(frame["provider"]) == ["A", "B"]
    assert frame.loc[0, "usd_on_demand"] == pytest.approx(OPTIONS[0].usd_on_demand)
    assert frame.loc[0, "usd_spot_expected"] == pytest.approx(OPTIONS[0].usd_spot_expected)
    assert pd.isna(frame.loc[1, "usd_spot_expected"])  # no spot price -> empty cell
    assert list(frame["price_as_of"]) == ["2026-01-02", "2026-03-04"]


def test_empty_csv_keeps_the_header():
    frame = pd.read_csv(io.BytesIO(options_csv_bytes([])))
    assert tuple(frame.columns) == OPTION_COLUMNS and frame.empty


def test_excel_has_the_two_sheets_and_reads_back():
    sheets = pd.read_excel(io.BytesIO(options_excel_bytes(OPTIONS, ASSUMPTIONS, DATES, FORMULAS)), sheet_name=None)
    assert list(sheets) == ["options", "assumptions"]
    options = sheets["options"]
    assert tuple(options.columns) == OPTION_COLUMNS
    # 3.00 USD/h x 25.8875 h = 77.66 USD (hand-worked in test_cost.py).
    assert options.loc[0, "usd_on_demand"] == pytest.approx(OPTIONS[0].usd_on_demand)
    assert options.loc[0, "usd_on_demand"] == pytest.approx(77.66, rel=1e-3)
    assert options.loc[1, "instance_type"] == "b1"
    assert pd.Timestamp(options.loc[1, "price_as_of"]).date() == dt.date(2026, 3, 4)


def test_excel_assumptions_sheet_lists_assumptions_dates_and_numbered_formulas():
    workbook = io.BytesIO(options_excel_bytes(OPTIONS, ASSUMPTIONS, DATES, FORMULAS))
    sheet = pd.read_excel(workbook, sheet_name="assumptions", dtype=str)
    assert tuple(sheet.columns) == ASSUMPTION_COLUMNS
    rows = list(sheet.itertuples(index=False, name=None))
    assert rows == [
        ("assumption", "utilisation", "0.5 (given)"),
        ("assumption", "overlap", "50%"),
        ("catalogue date", "cloud prices", "2026-01-02 to 2026-03-04"),
        ("catalogue date", "GPU catalogue", "2026-11-23"),
        ("formula", "1", FORMULAS[0]),
        ("formula", "2", FORMULAS[1]),
    ]


def test_empty_excel_keeps_both_headers():
    sheets = pd.read_excel(io.BytesIO(options_excel_bytes([], {}, {}, [])), sheet_name=None)
    assert tuple(sheets["options"].columns) == OPTION_COLUMNS and sheets["options"].empty
    assert tuple(sheets["assumptions"].columns) == ASSUMPTION_COLUMNS


def test_text_that_looks_like_a_formula_stays_text():
    sneaky = [OPTIONS[0].model_copy(update={"provider": '=HYPERLINK("http://x")'})]
    workbook = io.BytesIO(options_excel_bytes(sneaky, {"=1+1": "=A1"}, {}, []))
    assert pd.read_excel(workbook, sheet_name="options").loc[0, "provider"] == '=HYPERLINK("http://x")'
    workbook.seek(0)
    assert pd.read_excel(workbook, sheet_name="assumptions").loc[0, "value"] == "=A1"


def test_control_characters_are_removed_from_the_workbook():
    # XML 1.0 cannot hold U+0001; openpyxl would raise IllegalCharacterError. Tab stays.
    boxed = [OPTIONS[0].model_copy(update={"instance_type": "box\x01", "provider": "A\x1fB"})]
    workbook = io.BytesIO(options_excel_bytes(boxed, {"note\x0b": "x\ty\x00"}, {}, []))
    options = pd.read_excel(workbook, sheet_name="options")
    assert options.loc[0, "instance_type"] == "box" and options.loc[0, "provider"] == "AB"
    workbook.seek(0)
    assert list(pd.read_excel(workbook, sheet_name="assumptions").iloc[0]) == ["assumption", "note", "x\ty"]


def test_csv_keeps_the_new_reason_columns():
    reasons = ("spot_not_worth_reason", "stack_problem", "excluded_reason")
    start = OPTION_COLUMNS.index(reasons[0])
    assert OPTION_COLUMNS[start : start + 3] == reasons


def test_csv_carries_energy_and_carbon():
    assert {"energy_kwh", "co2_kg", "grid_gco2e_per_kwh", "co2_unknown_reason"} <= set(OPTION_COLUMNS)
