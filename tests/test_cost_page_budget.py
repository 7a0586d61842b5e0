"""AppTest: the Time and cost page as a budget holder reads it: buy vs rent with the catalogue's
price, what fits first, and one run described once across Plan, Memory and Time and cost."""

from __future__ import annotations

import re

import pytest

from tests.apptest_helpers import open_app

COST_PAGE = "app_pages/cost.py"


def metric(app, label: str):
    return next(item for item in app.metric if item.label == label)


def test_buy_vs_rent_with_0_uses_the_catalogue_price():
    """MI300X-192GB: catalogue street price $15,000, TDP 750 W (data/gpus.csv); defaults 3 years,
    PUE 1.56, $0.13/kWh, and the energy defaults (calculators/cost/energy.py): 76% of TDP plus 437 W
    of host per GPU. One GPU owned for an hour:
        15,000 / (3 x 8,760 h) = $0.5708 amortised
        + (750 x 0.76 + 437) W x 1.56 = 1.57092 kW x $0.13 = $0.2042 power = $0.7750.
    Rented on TensorWave at $1.50 per GPU-hour, the cheapest MI300X row: break-even
        15,000 / (1.50 - 0.2042196) = 11,576 h."""
    app = open_app(COST_PAGE, timeout_s=120, model="gpt2", buy_gpu="MI300X-192GB")
    assert app.number_input(key="cost_buy_price").value == 0.0  # "0 = catalogue"
    assert metric(app, "Owned, per hour").value == "$0.77"
    assert metric(app, "Break-even").value == "11,576 h"
    assert any("purchase 15,000 USD per GPU (catalogue street)" in caption.value for caption in app.caption)


def test_a_gpu_without_a_purchase_price_says_so_in_words():
    """B300-SXM-288GB has no price_usd in data/gpus.csv."""
    app = open_app(COST_PAGE, timeout_s=120, model="gpt2", buy_gpu="B300-SXM-288GB")
    infos = " ".join(info.value for info in app.info)
    assert "B300-SXM-288GB has no purchase price in the GPU catalogue" in infos
    assert "MI300X-192GB" in infos  # a GPU that has one is named
    assert not [item for item in app.metric if item.label == "Owned, per hour"]


def test_a_fresh_visit_writes_no_buy_settings_to_the_link():
    app = open_app(COST_PAGE, timeout_s=120)
    assert not [key for key in app.query_params if key.startswith("buy_")]
    # picking a GPU to buy is the user's: then, and only then, it is in the link
    box = app.selectbox(key="cost_buy_gpu")
    other = next(name for name in box.options if name != box.value)
    box.set_value(other).run()
    assert app.query_params["buy_gpu"] == other


def test_when_the_sidebar_layout_does_not_fit_the_page_says_so_first_and_shows_one_that_fits():
    """Llama-3.1-8B full training on one H100 (80 GB): 8.03e9 parameters x 16 bytes of weights, gradients,
    fp32 master and two Adam states = 119.7 GiB before activations, so it cannot fit; the planner's
    search over H100 layouts finds one whose peak is within its 80 GB, read as 80 GiB (nvidia-smi
    reports 81,559 MiB; calculators.memory.fit_matrix.gpu_memory_gib)."""
    app = open_app(COST_PAGE, timeout_s=120, model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    first = app.warning[0].value
    assert first.startswith("Does not fit on 1 x H100-SXM5-80GB: the workload needs ")
    assert not [header for header in app.subheader if header.value.startswith("On ")]  # no headline for it
    (layout,) = [text.value for text in app.markdown if text.value.startswith("The cheapest layout that fits")]
    peak, capacity = (float(x) for x in re.search(r"peak ([\d.]+) GiB of ([\d.]+) GiB per GPU", layout).groups())
    assert capacity == 80.0 and peak <= capacity
    assert "on demand on " in layout and "x H100-SXM5-80GB" in layout
    # the headline's cheapest fits: MI325X-256GB is the cheapest GPU with 198 GiB to spare here
    table = app.dataframe[0].value
    assert table["fits"].all()
    next(button for button in app.button if button.label == "Use this layout").click().run()
    assert not app.exception
    assert not [warning for warning in app.warning if warning.value.startswith("Does not fit")]
    assert app.subheader[0].value.startswith("On ") and "x H100-SXM5-80GB" in app.subheader[0].value


def test_plan_tokens_and_epochs_are_the_cost_pages_and_survive_the_sidebar():
    """One run described once: 2B tokens and 3 epochs set on Plan are what Time and cost shows."""
    app = open_app("app_pages/plan.py", timeout_s=120, model="gpt2")
    app.number_input(key="cost_tokens_billion").set_value(2.0).run()
    app.number_input(key="cost_epochs").set_value(3.0).run()
    assert app.query_params["tokens_b"] == "2" and app.query_params["epochs"] == "3"
    app.switch_page(COST_PAGE).run()
    assert not app.exception
    assert app.number_input(key="cost_tokens_billion").value == 2.0
    assert app.number_input(key="cost_epochs").value == 3.0
    assert app.query_params["tokens_b"] == "2"


def test_an_old_plan_link_reads_its_tokens_into_the_shared_setting():
    app = open_app("app_pages/plan.py", timeout_s=120, model="gpt2", plan_tokens_b="20")
    assert app.number_input(key="cost_tokens_billion").value == 20.0
    assert app.query_params["tokens_b"] == "20" and "plan_tokens_b" not in app.query_params


def test_a_link_with_a_chosen_plan_shows_that_plan_to_its_recipient():
    query = {"model": "gpt2", "tokens_b": "1", "deadline_h": "24", "max_gpus": "8"}
    sender = open_app("app_pages/plan.py", timeout_s=120, **query)
    next(button for button in sender.button if button.label == "Find plans").click().run()
    labels = sender.selectbox(key="plan_chosen").options
    assert len(labels) >= 2
    sender.selectbox(key="plan_chosen").set_value(labels[1]).run()
    assert sender.query_params["plan"] == "2"
    recipient = open_app("app_pages/plan.py", timeout_s=120, **dict(sender.query_params))
    assert recipient.selectbox(key="plan_chosen").value == labels[1]  # searched on opening, same plan


def test_the_plan_headline_says_its_price_basis():
    app = open_app("app_pages/plan.py", timeout_s=120, model="gpt2", tokens_b="1", deadline_h="24", max_gpus="8")
    next(button for button in app.button if button.label == "Find plans").click().run()
    cheapest = next(message.value for message in app.success if message.value.startswith("Cheapest"))
    assert "on demand, no interruptions)" in cheapest or "; on spot: expected hours with interruptions" in cheapest


def test_the_cost_downloads_are_the_page_table_in_its_order():
    import io

    import pandas as pd

    from calculators.cost.exports import csv_bytes, table_excel_bytes

    app = open_app(COST_PAGE, timeout_s=120, model="gpt2")
    table = app.dataframe[0].value
    frame = pd.read_csv(io.BytesIO(csv_bytes(table)))
    assert list(frame.columns) == list(table.columns)
    assert list(frame["usd"]) == pytest.approx(list(table["usd"]))
    assert list(frame["pricing"]) == list(table["pricing"])  # spot and on-demand rows, as the page lists them
    assert frame["usd"].is_monotonic_increasing  # all fit: cheapest first, whatever the pricing
    sheets = pd.read_excel(io.BytesIO(table_excel_bytes(table, [], {}, {}, [])), sheet_name=None)
    assert list(sheets["options"].columns) == list(table.columns) and len(sheets["options"]) == len(table)
