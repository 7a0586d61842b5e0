"""The training pages' tables read with headers for people: no field names with underscores, no
lowercase "gpus" or "usd", units in the labels."""

from __future__ import annotations

import json

from tests.apptest_helpers import open_app
from ui.cost_table import significant_text


def shown_headers(frame) -> list[str]:
    """The headers the grid draws: each column's configured label, else its name."""
    config = json.loads(frame.proto.columns or "{}")
    return [config.get(str(column), {}).get("label") or str(column) for column in frame.value.columns]


def test_the_cost_table_names_its_columns_with_units():
    app = open_app("app_pages/cost.py", model="gpt2", tokens_b="2")
    headers = shown_headers(app.dataframe[0])
    assert {"GPU", "GPUs", "hours (h)", "cost (USD)", "cost range (USD)"} <= set(headers)
    assert not {"gpu", "gpus", "usd", "usd range"} & set(headers)
    # the spot rows' interruptions to 3 significant digits in plain notation, not "1.3300" or "3.47e-05"
    rates = [rate for rate in app.dataframe[0].value["interruptions per hour"] if rate[0].isdigit()]
    assert rates and all(len(rate.replace(".", "").lstrip("0")) <= 3 and "e" not in rate for rate in rates)


def test_significant_digits_in_plain_notation():
    assert [significant_text(x) for x in (3.47e-05, 1.33, 14.958, 59.83, 129408)] == [
        "0.0000347", "1.33", "15", "59.8", "129,408"
    ]  # fmt: skip


def test_the_plan_table_names_its_columns_with_units():
    app = open_app("app_pages/plan.py", model="gpt2", tokens_b="2")
    next(button for button in app.button if button.label == "Find plans").click().run()
    (plans,) = [frame for frame in app.dataframe if "tp x pp" in frame.value.columns]
    headers = shown_headers(plans)
    assert {"GPUs", "GPU", "hours (h)", "cost (USD)", "tensor x pipeline", "peak (GiB)"} <= set(headers)
    assert not [header for header in headers if header in {"gpus", "usd", "usd range", "tp x pp"}]


def test_the_roofline_and_framework_tables_have_no_field_names():
    compare = open_app("app_pages/compare.py", model="gpt2")
    compare.multiselect(key="cmp_pick").set_value(["H100-SXM5-80GB", "A100-SXM4-80GB"]).run()
    (roofline,) = [frame.value for frame in compare.dataframe if "ridge point (FLOP per byte)" in frame.value.columns]
    # H100 BF16 dense 989 TFLOPS over 3.35 TB/s: ridge at 989e12 / 3.35e12 = 295 FLOP per byte
    h100 = roofline.set_index("GPU").loc["H100-SXM5-80GB"]
    assert h100["peak (TFLOPS)"] == 989 and h100["ridge point (FLOP per byte)"] == 295
    assert not [column for column in roofline.columns if "_" in column]
    validation = open_app("app_pages/validation.py")
    (defaults,) = [frame.value for frame in validation.dataframe if "applied" in frame.value.columns]
    settings = set(defaults["setting"])
    assert "Optimizer implementation" in settings and "NF4 kernels" in settings
    assert not [setting for setting in settings if "_" in setting]


def test_the_left_out_reasons_lead_and_are_wide_enough_to_read():
    app = open_app("app_pages/cost.py", model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    (left_out,) = [frame for frame in app.dataframe if "reason" in frame.value.columns]
    assert list(left_out.value.columns[:2]) == ["gpu", "reason"]
    config = json.loads(left_out.proto.columns)
    # the longest reason, ~95 characters of about 6.5 px each, is about 620 px
    assert config["reason"]["width"] >= 620 and config["gpu"]["label"] == "GPU"
