"""Settings declared once: the link codec, the CLI flags and the sidebar widgets all follow the
pydantic fields they point at (the drifts found before: concurrency capped at 100,000 in the UI
and 16,777,216 in the model; context 10M against 100M)."""

from __future__ import annotations

import pytest

from calculators.interface.cli import build_parser
from calculators.interface.settings import SettingError, all_settings, setting
from tests.apptest_helpers import open_app


def test_values_are_read_from_links_in_the_units_shown():
    assert setting("seq_len").parse("2048") == 2048
    assert setting("cost_tokens_billion").parse_shown("2") == 2e9  # billions of tokens
    assert setting("cost_utilisation_pct").parse_shown("45") == pytest.approx(0.45)  # per cent
    assert setting("cost_tokens_billion").format_shown(2e9) == "2"
    assert setting("precision").parse("bf16") == "bf16"


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        ("seq_len", "0", "must be greater than 0 and at most 10,000,000, not 0"),
        ("seq_len", "3.5", "must be a whole number"),
        ("seq_len", "nan", "must be a finite number"),
        ("cost_discount_pct", "100", "must be at least 0 and less than 100, not 100"),
        ("precision", "fp7", "'fp7' is not one of"),
        ("offload_optimizer", "maybe", "expected true or false"),
    ],
)
def test_bad_values_name_the_setting_and_the_bound(key, raw, message):
    with pytest.raises(SettingError, match=message):
        setting(key).parse(raw)


def test_every_cli_flag_has_the_declared_default():
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("memory", "fit", "cost"):
        defaults = {
            action.option_strings[0]: action.default for action in commands[name]._actions if action.option_strings
        }
        for item in all_settings():
            if item.flag in defaults and item.value_type is not bool and item.key != "s_tensor_parallel":
                assert defaults[item.flag] == item.default_value, (name, item.flag)


SERVING_REQUEST_KEYS = ("serve_input_len", "serve_output_len", "serve_requests_per_s", "serve_ttft_ms", "serve_tpot_ms")


def test_the_serving_request_flags_are_their_declarations():
    """--input-len ... --tpot-ms keep their names (the CLI contract) and take their default and help from the
    one declaration: 1,024 tokens each way, no request rate and no latency target unless given."""
    commands = build_parser()._subparsers._group_actions[0].choices
    flags = {key: setting(key).flag for key in SERVING_REQUEST_KEYS}
    assert list(flags.values()) == ["--input-len", "--output-len", "--requests-per-s", "--ttft-ms", "--tpot-ms"]
    for name in ("time", "cost", "plan"):
        actions = {action.option_strings[0]: action for action in commands[name]._actions if action.option_strings}
        for key, flag in flags.items():
            assert actions[flag].default == setting(key).default_value, (name, flag)
            assert actions[flag].help == setting(key).help_text.replace("%", "%%"), (name, flag)
    assert [setting(key).default_value for key in SERVING_REQUEST_KEYS] == [1024, 1024, None, None, None]
    assert setting("serve_requests_per_s").start_value == 1.0  # the app starts from 1 request/s


def test_latency_target_flags_read_milliseconds_as_links_do():
    """250 ms is 0.25 s; 0 is no target; a bound is said in the milliseconds the flag was written in."""
    ttft = setting("serve_ttft_ms")
    assert ttft.parse_flag("250", "--ttft-ms") == 0.25
    assert ttft.parse_flag("0", "--ttft-ms") is None
    assert ttft.parse_flag("250", "--ttft-ms") == ttft.parse_shown("250")
    with pytest.raises(SettingError, match=r"^--ttft-ms: must be greater than 0 and at most 3,600,000, not -5$"):
        ttft.parse_flag("-5", "--ttft-ms")
    assert setting("serve_input_len").parse_flag("512", "--input-len") == 512  # tokens: no scale


def test_query_keys_and_flags_are_unique():
    queries = [item.query for item in all_settings()]
    assert len(queries) == len(set(queries))
    flags = [item.flag for item in all_settings() if item.flag and item.key != "s_tensor_parallel"]
    assert len(flags) == len(set(flags))  # --tensor-parallel alone serves two modes


def test_sidebar_widgets_take_their_bounds_from_the_model():
    training = open_app()
    assert training.number_input(key="seq_len").max == 10_000_000  # TrainingSettings.seq_len le
    assert training.number_input(key="micro_batch").min == 1  # gt=0 on an integer
    serving = open_app(mode="inference")
    assert serving.number_input(key="s_concurrency").max == 16_777_216  # ServingSettings bound
    assert serving.number_input(key="s_context_len").max == 100_000_000


def test_an_exclusive_bound_is_never_offered_by_its_widget():
    """The discount must stay below 100% (RunInputs.discount_pct lt=100): the widget's maximum
    is the float just below it, and choosing it breaks nothing (found by the page fuzz)."""
    app = open_app("app_pages/cost.py")
    discount = app.number_input(key="cost_discount_pct")
    assert discount.max < 100 and discount.max > 99.999
    discount.set_value(discount.max).run()
    assert not app.exception


@pytest.mark.parametrize("value", [2e9, 123_456_789.0, 1.5e9, 7.0, 987_654_321_987.0])
def test_a_link_carries_a_value_exactly(value):
    """format_shown -> parse_shown gives back the value the user set, to the last digit
    (123,456,789 tokens once came back as 123,457,000 through '%g')."""
    item = setting("cost_tokens_billion")
    assert item.parse_shown(item.format_shown(value)) == value
