"""AppTest fuzz of every page: generated link values, widget values and uploaded config.json
documents never raise on a page, nor show raw error text; a bad link value is named in a warning.

Each example reruns a whole page, so the counts are small here (10 links on a page drawn at
random, 2 links each rendered on all six pages, 10 widget sequences and 10 uploads) and 200 each
(60 links on all six pages) with GPU_SIZING_LONG_PROPERTIES=1.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apptest_helpers import open_app
from ui import page_settings, state  # noqa: F401  (declares the pages' settings)

LONG = os.environ.get("GPU_SIZING_LONG_PROPERTIES") == "1"
PAGE_FUZZ = settings(
    max_examples=200 if LONG else 10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
EVERY_LINK = settings(PAGE_FUZZ, max_examples=60 if LONG else 2)
PAGES = [
    "app_pages/plan.py",
    "app_pages/memory.py",
    "app_pages/compare.py",
    "app_pages/cost.py",
    "app_pages/calibration.py",
    "app_pages/validation.py",
]
QUERY_KEYS = sorted({item.query for item in state.known_settings()})
GPU_NAMES = ["H100-SXM5-80GB", "A100-SXM4-80GB", "MI300X-192GB", "H200-SXM-141GB", "L40S-48GB", "T4-16GB"]
RAW_ERROR_TEXT = ("validation error for", "errors.pydantic.dev", "Traceback", "[type=")
ODD_TEXT = [
    # numbers as a link may carry them: signs, unicode digits (isdigit() takes them, int() may not), NaN, huge
    *["-1", "0", "-0", "--1", "+-3", "+4", "3.5", "1e400", "-1e400", "1e-400", "9" * 30, "9" * 5000, "1_000"],
    *["nan", "NaN", "-nan", "inf", "-Infinity", "²", "1²", "١٢", "٣", "½", "Ⅻ", "0x10", "1,5", " 7 ", "1e", "."],
    # words, empty, lists with repeats and too many items
    *["abc", "", "true", "none", ",,", "H100-SXM5-80GB", "H100-SXM5-80GB,H100-SXM5-80GB", ",".join(GPU_NAMES)],
    # injection
    *["<script>alert(1)</script>", "'; DROP TABLE runs;--", "**bold** `tick` $x$", "{{7*7}}", "../../etc/passwd"],
    *["%00", "\x00", "a\nb", "[link](javascript:alert(1))", "${jndi:ldap://x}", "\u202eevil"],
]


def raised(app) -> list[str]:
    return [element.message for element in app.exception]


def raw_errors(app) -> list[str]:
    """Text a user should never see: pydantic's own messages or a traceback, in any element."""
    shown = [
        str(element.value)
        for kind in ("markdown", "caption", "text", "code", "warning", "error", "info", "success")
        for element in getattr(app, kind)
    ]
    return [text[:200] for text in shown if any(marker in text for marker in RAW_ERROR_TEXT)]


def link_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ODD_TEXT),
        st.text(max_size=12),
        st.lists(st.sampled_from([*GPU_NAMES, "NVIDIA", "AMD", "cloud", "x"]), max_size=6).map(",".join),
    ).filter(lambda text: not any(marker in text for marker in RAW_ERROR_TEXT))


@st.composite
def link_values(draw) -> dict[str, str]:
    keys = draw(st.lists(st.sampled_from(QUERY_KEYS), min_size=1, max_size=6, unique=True))
    return {key: draw(link_text()) for key in keys}


@PAGE_FUZZ
@given(page=st.sampled_from(PAGES), query=link_values())
def test_generated_links_never_break_a_page(page, query):
    app = _open_quietly(page, query)
    assert not raised(app), (page, query, raised(app))
    assert not raw_errors(app), (page, query, raw_errors(app))


@EVERY_LINK
@given(query=link_values())
def test_every_page_renders_each_generated_link(query):
    for page in PAGES:
        app = _open_quietly(page, query)
        assert not raised(app), (page, query, raised(app))
        assert not raw_errors(app), (page, query, raw_errors(app))


def _open_quietly(page: str, query: dict[str, str]):
    """The link opened straight on `page`, as a browser does, without open_app's own
    assertion, so a failure names the link."""
    from streamlit.testing.v1 import AppTest

    from tests.apptest_helpers import APP_PATH

    app = AppTest.from_file(APP_PATH, default_timeout=60)
    for key, value in query.items():
        app.query_params[key] = value
    return app.switch_page(page).run()


@PAGE_FUZZ
@given(page=st.sampled_from(PAGES), data=st.data())
def test_generated_widget_values_never_break_a_page(page, data):
    app = open_app(page, timeout_s=60)
    for _ in range(3):
        # the same draws whatever the page shows, so Hypothesis can replay and shrink
        kind = data.draw(st.sampled_from(["number", "select", "check"]))
        pick, choice = data.draw(st.integers(0, 999)), data.draw(st.integers(0, 999))
        widgets = {"number": app.number_input, "select": app.selectbox, "check": app.checkbox}[kind]
        enabled = [widget for widget in widgets if not widget.disabled]  # a user cannot touch the rest
        if not enabled:
            continue
        widget = enabled[pick % len(enabled)]
        if kind == "number":
            low = widget.min if widget.min is not None else 0
            high = widget.max if widget.max is not None else 1e6
            value = [low, high, (low + high) / 2][choice % 3]
            widget.set_value(int(value) if isinstance(widget.value, int) else float(value))
        elif kind == "select":
            # AppTest shows formatted labels; the values are the declared choices where a label differs
            known = {item.key: item for item in state.known_settings()}
            choices = list(known[widget.key].choices) if widget.key in known and known[widget.key].choices else []
            choices = choices or list(widget.options)
            if choices:
                widget.set_value(choices[choice % len(choices)])
        elif widget.value:
            widget.uncheck()
        else:
            widget.check()
        app.run()
        assert not raised(app), (page, kind, widget.key, raised(app))


@PAGE_FUZZ
@given(document=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size", "model_type",
                         "intermediate_size", "text_config", "tie_word_embeddings", "x"]), children, max_size=6),
    max_leaves=20,
))  # fmt: skip
def test_generated_config_uploads_never_break_the_memory_page(document):
    app = open_app(src="config.json")
    app.session_state["_uploaded_config"] = ("config.json", json.dumps(document).encode())
    app.run()
    assert not raised(app), (document, raised(app))
    assert app.error or app.success or app.warning  # an answer or a reason, never nothing


@pytest.mark.parametrize(
    ("page", "query", "named"),
    [
        ("app_pages/cost.py", {"tokens_b": "abc", "discount": "150"}, ["tokens_b=abc", "discount=150"]),
        ("app_pages/compare.py", {"gpus": "-1"}, ["gpus=-1"]),
        ("app_pages/compare.py", {"min_gb": "lots"}, ["min_gb=lots"]),
    ],
)
def test_bad_link_values_are_named_on_every_page(page, query, named):
    """One message path: whatever page a link opens, a bad value is named in a warning and
    the rest of the link still applies."""
    app = _open_quietly(page, query)
    warnings = " ".join(element.value for element in app.warning)
    assert not raised(app)
    for text in named:
        assert f"Ignored `{text}`" in warnings
