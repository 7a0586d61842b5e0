"""AppTest: Time and cost and Plan with an image model of the vision library in the sidebar: the
priced options' images/s, hours and cost per epoch and to the end, the input-bound warning, the plan
front and its deadline message; labels carry units and no page says "None"."""

from __future__ import annotations

import re

import pytest

from tests.apptest_helpers import open_app, texts

COST_PAGE = "app_pages/cost.py"
PLAN_PAGE = "app_pages/plan.py"


pytestmark = pytest.mark.usefixtures("hub_never_asked")


def page_text(app) -> str:
    return " ".join(texts(app.markdown) + texts(app.caption) + texts(app.info) + texts(app.warning))


def test_time_and_cost_prices_an_image_model_per_epoch():
    app = open_app(COST_PAGE, model="resnet50", img_mb="256")
    assert not app.exception and not app.error
    table = app.dataframe[0].value
    wanted = {"GPU or CPU", "Provider", "Images/s per GPU", "Hours per epoch (h)", "Hours total (h)",
              "Cost per epoch (USD)", "Cost total (USD)", "Input-bound"}  # fmt: skip
    assert wanted <= set(table.columns)
    fitting = table[table["Fits in memory"] == "yes"]
    assert len(fitting) > 0 and (fitting["Images/s per GPU"] > 0).all()
    # 90 epochs by default (torchvision's recipe): total = 90 x per epoch
    first = fitting.iloc[0]
    assert first["Cost total (USD)"] == pytest.approx(90 * first["Cost per epoch (USD)"], rel=0.01)
    assert len(app.dataframe) >= 2  # the CPU vs GPU vs mixed precision table follows
    assert "None" not in page_text(app)
    # how far the estimate ran from ResNet-50's published runs (DLE and timm) is stated beside the hours
    band = r"Against 14 published runs of resnet50 .* the estimate ran \d\.\d\dx to \d\.\d\dx"
    assert re.search(band, page_text(app))


def test_few_loader_cores_warn_that_the_run_is_input_bound():
    app = open_app(COST_PAGE, model="resnet50", img_mb="256")
    app.number_input(key="vision_host_cores").set_value(1.0).run()
    assert not app.exception
    assert any("Input-bound" in text and "under 70%" in text for text in texts(app.warning))


def test_the_plan_page_plans_an_image_model():
    app = open_app(PLAN_PAGE, model="resnet50", img_mb="256")
    assert not app.exception and not app.error
    table = app.dataframe[0].value
    assert {"GPUs", "GPU", "Pricing", "Sharding", "Peak memory (GiB)", "Hours total (h)", "Cost total (USD)"} <= set(
        table.columns
    )
    assert (table["Hours total (h)"] > 0).all()
    assert "Cheapest within the limits" in page_text(app)
    assert "None" not in page_text(app)


def test_an_unreachable_deadline_says_what_the_fastest_plan_takes():
    app = open_app(PLAN_PAGE, model="resnet50", img_mb="256")
    app.number_input(key="vision_deadline").set_value(0.001).run()
    assert not app.exception
    assert any(text.startswith("no plan ends within 0.001 h") for text in texts(app.warning))
