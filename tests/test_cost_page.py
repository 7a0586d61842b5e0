"""AppTest of the Time and cost page: ranked options, spot, downloads, bad price sheets."""

import pandas as pd
import pytest

from calculators.cost import cost_options
from calculators.gpu_catalogue import load_gpu_catalogue
from calculators.presets import get_preset
from calculators.prices import load_prices
from calculators.time_model import TimeSettings
from calculators.training import TrainingSettings
from tests.apptest_helpers import open_app


def test_the_ranked_table_matches_the_calculator_and_is_cheapest_first():
    app = open_cost(model="gpt2", tokens_b="2")
    table = app.dataframe[0].value
    assert list(table["usd"]) == sorted(table["usd"])
    expected = cost_options(
        get_preset("gpt2"), TrainingSettings(), TimeSettings(dataset_tokens=2e9), load_prices(), load_gpu_catalogue()
    )
    on_demand = table[table["pricing"] == "on demand"]
    assert on_demand["usd"].iloc[0] == pytest.approx(min(o.usd_on_demand for o in expected))
    assert {"on demand", "spot"} <= set(table["pricing"])


def test_only_fitting_gpus_are_listed_by_default():
    app = open_cost(model="llama-3.1-8b", zero="3", gpus="8", ckpt="full")
    table = app.dataframe[0].value
    assert table["fits"].all()
    assert "RTX-4090-24GB" not in set(table["gpu"])


def test_a_discount_lowers_every_price():
    app = open_cost(model="gpt2")
    before = app.dataframe[0].value["usd"].min()
    app.number_input(key="cost_discount_pct").set_value(20.0).run()
    assert app.dataframe[0].value["usd"].min() == pytest.approx(0.8 * before)
    assert app.query_params["discount"] == "20.0"


def test_no_interruptions_make_spot_cost_the_plain_spot_price():
    app = open_cost(model="gpt2", rate_set="1", rate="0")
    table = app.dataframe[0].value
    spot = table[table["pricing"] == "spot"].iloc[0]
    on_demand = table[(table["pricing"] == "on demand") & (table["instance"] == spot["instance"])].iloc[0]
    assert spot["hours"] == pytest.approx(on_demand["hours"])


def test_downloads_are_offered_and_read_back():
    app = open_cost(model="gpt2")
    labels = [button.label for button in app.get("download_button")]
    assert labels == ["Download CSV", "Download Excel"]


def test_a_malformed_price_sheet_is_explained_and_the_page_keeps_working():
    app = open_cost(model="gpt2")
    bad = (
        b"provider,instance_type,gpu,gpu_count,region,on_demand_usd_per_hour,source,as_of\n"
        b"Me,box,H100-SXM5-80GB,8,eu,-3,me,2026-11-01\n"
    )
    app.file_uploader(key="price_upload").set_value(("mine.csv", bad, "text/csv")).run()
    assert not app.exception
    assert any("mine.csv row 1" in e.value and "on_demand_usd_per_hour" in e.value for e in app.error)
    assert len(app.dataframe[0].value) > 10


def test_an_uploaded_price_sheet_can_be_used_alone():
    app = open_cost(model="gpt2")
    sheet = (
        b"provider,instance_type,gpu,gpu_count,region,on_demand_usd_per_hour,source,as_of\n"
        b"OurDC,rack-1,H100-SXM5-80GB,8,home,10,contract 2026,2026-11-01\n"
    )
    app.file_uploader(key="price_upload").set_value(("ours.csv", sheet, "text/csv")).run()
    app.checkbox(key="cost_only_mine").check().run()
    table = app.dataframe[0].value
    assert set(table["provider"]) == {"OurDC"} and list(table["pricing"]) == ["on demand"]
    # 1 instance x $10/h x hours
    assert table["usd"].iloc[0] == pytest.approx(10 * table["hours"].iloc[0])


def test_excel_export_reads_back_with_pandas():
    import io

    from calculators.exports import options_excel_bytes

    options = cost_options(
        get_preset("gpt2"), TrainingSettings(), TimeSettings(dataset_tokens=1e9), load_prices(), load_gpu_catalogue()
    )
    sheets = pd.read_excel(io.BytesIO(options_excel_bytes(options, {"model": "gpt2"}, {}, ["f"])), sheet_name=None)
    assert set(sheets) == {"options", "assumptions"} and len(sheets["options"]) == len(options)


def open_cost(**query: str):
    return open_app("app_pages/cost.py", **query)
