"""No page ever shows a raw error: pydantic's own text, a traceback or a Python repr, in any
rendered text (markdown, alerts, captions, metrics, titles, tables), with the defaults or with the
page-fuzz links. A bounded property test: a few examples by default, 60 with
GPU_SIZING_LONG_PROPERTIES=1 (tests/test_page_fuzz.py's switch)."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from pydantic import BaseModel, Field, ValidationError

from tests.apptest_helpers import open_app
from tests.test_page_fuzz import LONG, PAGE_FUZZ, PAGES, _open_quietly, link_values, raised
from ui.messages import RAW_ERROR_MARKERS, in_words

# a Python repr of an object, besides pydantic's and the traceback's own markers
SHOWN_NEVER = (*RAW_ERROR_MARKERS, "object at 0x", "<class '")
FEW_LINKS = settings(PAGE_FUZZ, max_examples=60 if LONG else 3)


def rendered_text(app) -> list[str]:
    """Every piece of text a user can read on the page, table cells and headers included."""
    texts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "text", "code", "latex"):
        texts += [str(element.value) for element in getattr(app, kind)]
    for kind in ("warning", "error", "info", "success", "exception"):
        texts += [str(getattr(element, "value", "")) for element in getattr(app, kind)]
    texts += [f"{metric.label} {metric.value}" for metric in app.metric]
    for frame in app.dataframe:
        table = frame.value
        if isinstance(table, pd.DataFrame):
            texts += [str(column) for column in table.columns]
            texts += [str(cell) for cell in table.astype(str).to_numpy().ravel()]
    return texts


def raw_text(app) -> list[str]:
    return [text[:200] for text in rendered_text(app) if any(marker in text for marker in SHOWN_NEVER)]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_with_the_defaults_shows_no_raw_error_and_writes_nothing_to_the_link(page):
    """A fresh visit shows words only, and leaves the link as it found it: a link value is
    written only when the user sets it (the Cost page's GPU to buy and price are not)."""
    app = open_app(page, timeout_s=120)
    assert not raw_text(app), raw_text(app)
    assert dict(app.query_params) == {}


@FEW_LINKS
@given(query=link_values())
def test_no_page_shows_a_raw_error_for_a_generated_link(query):
    for page in PAGES:
        app = _open_quietly(page, query)
        assert not raised(app), (page, query, raised(app))
        assert not raw_text(app), (page, query, raw_text(app))


class _Priced(BaseModel):
    purchase_usd_per_gpu: float = Field(gt=0)


def test_a_pydantic_error_reads_as_the_setting_label_and_what_is_wrong():
    """OwnershipSettings' purchase_usd_per_gpu is declared with the label 'Price per GPU (USD, 0 =
    catalogue)' (calculators.interface.settings); pydantic's 'Input should be greater than 0' reads
    'must be greater than 0', with no 'validation error for', '[type=' or documentation link."""
    from calculators.cost.options import OwnershipSettings

    with pytest.raises(ValidationError) as caught:
        OwnershipSettings(purchase_usd_per_gpu=-5)
    assert in_words(caught.value) == "Price per GPU (USD, 0 = catalogue): must be greater than 0"
    with pytest.raises(ValidationError) as unknown:
        _Priced(purchase_usd_per_gpu=0)
    assert in_words(unknown.value) == "purchase usd per gpu: must be greater than 0"


def test_an_error_carrying_raw_text_is_never_shown_as_it_is():
    text = in_words(ValueError("1 validation error for Thing\nx\n  Input should be ... [type=greater_than"))
    assert not any(marker in text for marker in SHOWN_NEVER) and text
