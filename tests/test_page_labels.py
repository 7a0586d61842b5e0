"""Labels for people on the pages: a price-sheet template that the upload reads back, and plan
tables that say "-" where a cost does not apply instead of "None", and a Compare table that says why
a figure is missing."""

import ast
import csv
import datetime as dt
import io
from pathlib import Path

import pandas as pd

from calculators import DATA_DIR
from calculators.cost.prices import parse_price_csv
from calculators.hardware.catalogue import load_gpu_catalogue
from tests.apptest_helpers import open_app
from ui.cost_inputs import price_sheet_template
from ui.cost_table import shown_rows
from ui.gpu_table import MISSING_FIGURE_TEXT, missing_figure_help
from ui.layout import EMPTY_CELL
from ui.plan_view import plans_display


def test_the_price_sheet_template_has_the_price_sheets_columns_and_reads_back_as_one_row():
    with open(DATA_DIR / "cloud_prices.csv", newline="", encoding="utf-8") as sheet:
        header = next(csv.reader(sheet))
    rows = list(csv.reader(io.StringIO(price_sheet_template().decode("utf-8"))))
    assert rows[0] == header and len(rows) == 2
    (price,) = parse_price_csv(price_sheet_template(), "template", list(load_gpu_catalogue()))
    # the example row as written: 8 x H100-SXM5-80GB at $24.00 per instance-hour, so $3.00 per GPU-hour
    assert (price.gpu, price.gpu_count, price.on_demand_usd_per_hour) == ("H100-SXM5-80GB", 8, 24.0)
    assert price.on_demand_usd_per_hour / price.gpu_count == 3.0
    assert price.spot_usd_per_hour is None and price.as_of == dt.date(2026, 11, 1)


def test_a_plan_table_says_dash_for_a_cost_that_does_not_apply_and_leads_with_the_layout():
    table = pd.DataFrame(
        {
            "plan": [1, 2],
            "provider": ["AWS", None],
            "usd": [93.0, 40.0],
            "usd spot": [None, 40.0],
            "tp x pp": ["1 x 1", "2 x 1"],
            "gpus": [8, 16],
        }
    )
    shown = plans_display(table)
    assert list(shown.columns)[:4] == ["plan", "gpus", "usd", "tp x pp"]  # PLAN_LEADING_COLUMNS' order
    assert list(shown["usd spot"]) == ["- (not spot)", "$40"]  # usd_text: two significant figures
    assert list(shown["provider"]) == ["AWS", "-"]
    assert "None" not in shown.astype(str).to_string()
    assert list(shown["usd"]) == [93.0, 40.0]  # a number column stays a number (it sorts as one)


def test_the_cost_table_says_on_demand_rows_are_not_interrupted_instead_of_none():
    rows = pd.DataFrame({"pricing": ["on demand", "spot"], "usd": [10.0, 4.0], "interruptions per hour": [None, 0.05]})
    shown = shown_rows(rows)
    assert list(shown["interruptions per hour"]) == ["- (on demand)", "0.05"]
    assert "None" not in shown.astype(str).to_string() and "nan" not in shown.astype(str).to_string()
    assert rows["interruptions per hour"].isna().iloc[0]  # the downloads' rows keep the number (empty)


def test_a_catalogue_column_with_missing_figures_says_what_none_means_in_its_header():
    prices = pd.Series([30_000.0, None, None, 1_599.0])
    assert missing_figure_help(prices) == "'-' for 2 of the 4 GPUs shown: no such figure (see below the filters)."
    assert missing_figure_help(pd.Series([989.0, 312.0])) is None  # nothing missing: no note


def test_the_compare_page_says_why_a_figure_is_missing_and_its_tables_hold_no_literal_none():
    app = open_app("app_pages/compare.py", model="llama-2-7b")
    assert any(MISSING_FIGURE_TEXT in caption.value for caption in app.caption)
    catalogue = app.dataframe[0].value
    # the figures stay numbers (they sort as numbers); their empty cells are explained, not filled
    assert pd.api.types.is_float_dtype(catalogue["price_usd"]) and catalogue["price_usd"].isna().any()
    for text_column in [c for c in catalogue.columns if not pd.api.types.is_numeric_dtype(catalogue[c])]:
        assert not catalogue[text_column].isna().any(), text_column


def test_every_table_shows_a_dash_in_an_empty_cell():
    # the grid writes "None" in an empty cell unless told otherwise (st.dataframe's placeholder): every
    # table of every page passes ui.layout.EMPTY_CELL
    root = Path(__file__).resolve().parent.parent
    missing = []
    for path in sorted([*root.glob("app_pages/*.py"), *root.glob("ui/*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            is_table = (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dataframe"
            )
            if is_table and "placeholder" not in {keyword.arg for keyword in node.keywords}:
                missing.append(f"{path.name}:{node.lineno}")
    assert missing == []
    assert EMPTY_CELL == "-"
