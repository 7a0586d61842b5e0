"""The Plan page under AppTest: nothing runs on load, a search finds plans, a plan opens on the Memory page."""

from __future__ import annotations

from tests.apptest_helpers import open_app

PLAN_PAGE = "app_pages/plan.py"


def find_plans(app):
    next(button for button in app.button if button.label == "Find plans").click().run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def test_nothing_is_searched_until_asked():
    app = open_app(PLAN_PAGE, model="gpt2")
    assert app.title[0].value == "Plan a run"
    assert any("Find plans" in info.value for info in app.info)
    assert not app.dataframe


def test_a_search_shows_the_front_and_the_cheapest_plan_within_the_deadline():
    app = find_plans(open_app(PLAN_PAGE, model="gpt2", plan_tokens_b="1", deadline_h="24", max_gpus="8"))
    assert any(message.value.startswith("Cheapest within the limits") for message in app.success)
    table = app.dataframe[0].value
    assert len(table) >= 1 and (table["peak GiB"] <= 288).all()
    assert not app.warning
    # the chips nothing prices are named with why, not silently left out
    (unpriced,) = [info.value for info in app.info if info.value.startswith("Not costed")]
    assert "TPU7x: access is arranged through a Google Cloud account team" in unpriced
    assert "V100-PCIe-32GB: no provider in the price sheet rents it" in unpriced


def test_an_impossible_deadline_says_the_shortest_time():
    app = find_plans(open_app(PLAN_PAGE, model="gpt2", plan_tokens_b="1000", deadline_h="0.01", max_gpus="8"))
    (warning,) = [message.value for message in app.warning]
    assert warning.startswith("no plan meets the 0.01 h deadline: the fastest takes"), warning  # not "0.0 h"
    assert "0.0 h" not in warning


def test_a_plan_of_decades_is_flagged_and_small_figures_keep_their_digits():
    app = find_plans(open_app(PLAN_PAGE, model="gpt2", plan_tokens_b="1000000", deadline_h="0", max_gpus="1"))
    (warning,) = [message.value for message in app.warning]
    assert warning.startswith("even the fastest plan takes ") and "longer than a plausible run of a year" in warning
    assert "allow more GPUs than 1 (max GPUs), or fewer tokens" in warning
    cheapest = next(message.value for message in app.success if message.value.startswith("Cheapest"))
    assert " h, \\$" in cheapest and ".0 h" not in cheapest
    small = open_app(PLAN_PAGE, model="gpt2", plan_tokens_b="0.001", deadline_h="0", budget_usd="0.0001", max_gpus="8")
    find_plans(small)
    (warning,) = [message.value for message in small.warning]
    assert warning.startswith("no plan fits the $0.0001 budget: the cheapest costs $0.00"), warning
    labels = small.selectbox(key="plan_chosen").options
    assert all(" · 0.0 h · " not in label and not label.endswith(" · $0") for label in labels), labels


def test_a_plan_opens_on_the_memory_page_with_its_settings():
    app = find_plans(open_app(PLAN_PAGE, model="gpt2", plan_tokens_b="1", deadline_h="24", max_gpus="8"))
    chosen = app.selectbox(key="plan_chosen").value
    next(button for button in app.button if button.label == "Open on the Memory page").click().run()
    assert not app.exception
    assert app.title[0].value == "Will it fit?"
    gpus = int(chosen.split(". ")[1].split(" x ")[0])
    zero = app.session_state["_value_zero"]
    data_parallel = app.session_state["_value_gpus"]
    assert data_parallel * app.session_state["_value_tensor_parallel"] * app.session_state[
        "_value_pipeline_parallel"] == gpus  # fmt: skip
    assert zero in (0, 1, 2, 3)
