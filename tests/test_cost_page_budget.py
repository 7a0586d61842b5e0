"""AppTest: the Time and cost page as a budget holder reads it: buy vs rent with the catalogue's
price, what fits first, and one run described once across Plan, Memory and Time and cost."""

from __future__ import annotations

from tests.apptest_helpers import open_app

COST_PAGE = "app_pages/cost.py"


def metric(app, label: str):
    return next(item for item in app.metric if item.label == label)


def test_buy_vs_rent_with_0_uses_the_catalogue_price():
    """MI300X-192GB: catalogue street price $15,000, TDP 750 W (data/gpus.csv); defaults 3 years,
    PUE 1.5, $0.13/kWh. One GPU owned for an hour:
        15,000 / (3 x 8,760 h) = $0.5708 amortised + 0.750 kW x 1.5 x $0.13 = $0.1463 power = $0.7170.
    Rented on TensorWave at $1.50 per GPU-hour, the cheapest MI300X row: break-even
        15,000 / (1.50 - 0.14625) = 11,080 h."""
    app = open_app(COST_PAGE, timeout_s=120, model="gpt2", buy_gpu="MI300X-192GB")
    assert app.number_input(key="cost_buy_price").value == 0.0  # "0 = catalogue"
    assert metric(app, "Owned, per hour").value == "$0.72"
    assert metric(app, "Break-even").value == "11,080 h"
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
