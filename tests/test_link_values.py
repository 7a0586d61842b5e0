"""Link values the app cannot use (issue 37, round 2): each is named in a warning with what is
used instead, never a traceback, and a page that stops early still writes its settings to the link."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from calculators.interface.settings import SettingError, _number_from_text
from tests.apptest_helpers import open_app
from ui import page_settings, state  # noqa: F401  (declares the pages' settings)

FIVE = ["H100-SXM5-80GB", "A100-SXM4-80GB", "MI300X-192GB", "H200-SXM-141GB", "L40S-48GB"]


def warnings_of(app) -> str:
    return " ".join(element.value for element in app.warning)


def kept(app, key: str):
    return app.session_state[state.VALUE_PREFIX + key]


@pytest.mark.parametrize(
    "raw", ["--1", "²", "1²", "١٢", "1_000", "+-3", "0x10", pytest.param("1" * 5000, id="5000-digits"), " ", "1e", "."]
)
def test_text_that_is_not_an_ascii_number_is_a_setting_error(raw):
    with pytest.raises(SettingError, match="Micro-batch"):
        _number_from_text(raw, "Micro-batch")


@pytest.mark.parametrize(
    ("raw", "number"),
    [("7", 7), ("-3", -3), ("+4", 4), ("9" * 30, int("9" * 30)), ("1.5", 1.5), (".5", 0.5), ("1e3", 1000.0)],
)
def test_ascii_numbers_are_read_exactly(raw, number):
    value = _number_from_text(raw, "x")
    assert value == number and type(value) is type(number)


@pytest.mark.parametrize(("page", "raw"), [("app_pages/memory.py", "--1"), ("app_pages/compare.py", "²")])
def test_a_number_int_refuses_is_named_not_raised(page, raw):
    app = open_app(page, mb=raw, seq="1024")
    assert f"Ignored `mb={raw}`" in warnings_of(app)
    assert kept(app, "seq_len") == 1024  # the rest of the link applies
    assert app.query_params["seq"] == "1024"


def test_a_repeated_pick_is_counted_once_and_named():
    app = open_app("app_pages/compare.py", pick="MI300X-192GB,MI300X-192GB,H100-SXM5-80GB")
    assert "repeats are counted once" in warnings_of(app)
    assert kept(app, "cmp_pick") == ["MI300X-192GB", "H100-SXM5-80GB"]
    assert app.query_params["pick"] == "MI300X-192GB,H100-SXM5-80GB"


def test_five_picks_keep_the_first_four_and_say_so():
    app = open_app("app_pages/compare.py", pick=",".join(FIVE))
    assert "at most 4 can be picked, so the first 4 are kept" in warnings_of(app)
    assert kept(app, "cmp_pick") == FIVE[:4]
    assert "`L40S-48GB`" not in warnings_of(app).split("using")[1]


def test_unknown_compare_filters_and_picks_are_named_with_what_is_used():
    app = open_app(
        "app_pages/compare.py", pick="H100-SXM5-80GB,B999,A100-SXM4-80GB", vendors="NVIDIA,Acme", categories="x"
    )
    text = warnings_of(app)
    assert "`B999` is not offered; using `H100-SXM5-80GB`, `A100-SXM4-80GB` instead" in text
    assert "`Acme` is not offered; using `NVIDIA` instead" in text
    assert "`x` is not offered; using none instead" in text
    assert kept(app, "cmp_vendors") == ["NVIDIA"]


def test_an_unknown_gpu_is_named_with_the_gpu_used():
    app = open_app(gpu="B999-1TB")
    assert "GPU for the verdict: `B999-1TB` is not one of the choices; using `H100-SXM5-80GB` instead" in warnings_of(
        app
    )
    assert kept(app, "gpu") == "H100-SXM5-80GB"


def test_a_dropout_the_box_does_not_offer_is_named():
    app = open_app(mode="finetune-lora", lora_drop="0.3")
    assert "LoRA dropout: `0.3` is not one of the choices; using `framework default` instead" in warnings_of(app)


def test_an_unknown_gpu_to_buy_is_named():
    app = open_app("app_pages/cost.py", buy_gpu="B999-1TB")
    assert "GPU to buy: `B999-1TB` is not among the GPUs priced above; using `" in warnings_of(app)
    # the page's own choice is used, not kept: the link no longer carries the unknown GPU
    assert state.VALUE_PREFIX + "cost_buy_gpu" not in app.session_state
    assert "buy_gpu" not in app.query_params


def test_a_page_that_stops_early_still_writes_its_settings_to_the_link():
    """Cost in inference mode stops before its own controls; the sidebar's change is linked anyway."""
    app = open_app("app_pages/cost.py", mode="inference")
    app.number_input(key="s_concurrency").set_value(8).run()
    assert not app.exception
    assert app.query_params["conc"] == "8" and app.query_params["mode"] == "inference"


def test_plan_before_a_search_writes_its_settings_and_a_bad_value_keeps_the_rest():
    app = open_app("app_pages/plan.py", mb="abc", seq="1024", max_gpus="lots")
    assert "Ignored `mb=abc`" in warnings_of(app) and "Ignored `max_gpus=lots`" in warnings_of(app)
    app.number_input(key="plan_max_gpus").set_value(64).run()
    assert not app.exception
    assert app.query_params["seq"] == "1024" and app.query_params["max_gpus"] == "64"
    app.run()  # and on the next rerun
    assert app.query_params["seq"] == "1024" and app.query_params["max_gpus"] == "64"


def test_buy_vs_rent_reads_the_price_box_0_as_the_catalogue_price_not_a_validation_error():
    """Found by the link fuzz: the price box's 0 ('0 = catalogue') reached OwnershipSettings as
    0.0 and the page showed pydantic's raw text; a link's buy_usd=0 was refused."""
    app = open_app("app_pages/cost.py", buy_usd="0", model="gpt2", buy_gpu="H100-SXM5-80GB")
    shown = " ".join(element.value for element in [*app.info, *app.warning, *app.error])
    assert "validation error for" not in shown and "buy_usd" not in shown
    assert app.session_state[state.VALUE_PREFIX + "cost_buy_price"] is None
    assert [metric.label for metric in app.metric][-4:] == [
        "Run, rented",
        "Run, owned",
        "Owned, per hour",
        "Break-even",
    ]


LONG = os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1"
ODD_NUMBERS = ["--1", "²", "١٢", "+-3", "1_000", "nan", "-inf", "1e400", "9" * 5000, "0", "-0", " 7 ", "1e", "½"]


@settings(max_examples=5000 if LONG else 300, deadline=None, database=None)
@given(
    item=hst.sampled_from(state.known_settings()),
    raw=hst.one_of(hst.sampled_from(ODD_NUMBERS), hst.text(max_size=20), hst.from_regex(r"[+-]{0,2}[0-9²³¹٠-٩]{1,8}")),
)
def test_every_setting_reads_any_link_text_or_names_it(item, raw):
    """What a link carries is a checked value or a SettingError naming the setting, nothing else
    (an int() ValueError from '²' crashed every page)."""
    try:
        parsed = item.parse_shown(raw)
    except SettingError as error:
        assert item.label in str(error) or "expected" in str(error) or "must" in str(error)
        assert "validation error for" not in str(error) and "[type=" not in str(error)
    else:
        assert parsed is None or item.check(item.parse_shown(item.format_shown(parsed))) == parsed


@settings(max_examples=1000 if LONG else 100, deadline=None, database=None)
@given(text=hst.text(max_size=80))
def test_a_quoted_value_is_one_short_code_span(text):
    shown = state.quoted(text)
    assert shown.startswith("`") and shown.endswith("`") and shown.count("`") == 2
    assert "\n" not in shown and len(shown) <= 40 + 5
