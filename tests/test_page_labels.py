"""Labels for people on the pages: a price-sheet template that the upload reads back, and plan
tables that say "-" where a cost does not apply instead of "None"."""

import csv
import datetime as dt
import io

import pandas as pd

from calculators import DATA_DIR
from calculators.cost.prices import parse_price_csv
from calculators.hardware.catalogue import load_gpu_catalogue
from ui.cost_inputs import price_sheet_template
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
