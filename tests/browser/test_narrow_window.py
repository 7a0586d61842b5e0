"""At 800 px wide no metric's value is cut: each is as wide as its text and the row wraps
(ui/layout.py), on Memory, Compare, Time and cost and Plan, with the sidebar open beside the page
as well as closed. The sidebar starts closed below 1000 px (ui/layout.close_sidebar_on_narrow_window),
stays open once the reader opens it, and starts open at 1400 px."""

import re

import pytest
from playwright.sync_api import expect

# the elements of every metric value whose text would be cut with an ellipsis, if any
CUT_METRICS_JS = """() => [...document.querySelectorAll(
    '[data-testid="stMetricValue"], [data-testid="stMetricValue"] *')]
  .filter(element => element.offsetParent !== null && element.scrollWidth > element.clientWidth + 1)
  .map(element => element.innerText)"""

# page, its address (llama-2-7b: values such as "166.21 GiB"; gpt2 fits, so Time and cost shows its step),
# and a text that says the page has finished drawing its metrics
PAGES = [
    ("memory", "memory?model=llama-2-7b", "Largest micro-batch", True),
    ("compare", "compare?model=llama-2-7b", "Side by side", False),
    ("cost", "cost?model=gpt2&tokens_b=2", "Hours in all", True),
    ("plan", "?model=llama-2-7b", "Press Find plans", False),
]


@pytest.fixture
def narrow_page(browser, app_url):
    context = browser.new_context(viewport={"width": 800, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


def open_sidebar(page) -> None:
    """Open the sidebar by its arrow, again if a click that lands while the page is redrawn is lost."""
    sidebar = page.get_by_test_id("stSidebar")
    for _ in range(4):
        expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=30_000)
        if sidebar.get_attribute("data-collapsed") == "true":
            page.get_by_test_id("stExpandSidebarButton").click()
        try:
            expect(sidebar).to_have_attribute("data-collapsed", "false", timeout=5_000)
            return
        except AssertionError:
            continue
    expect(sidebar).to_have_attribute("data-collapsed", "false")


@pytest.mark.parametrize("sidebar_open", [False, True], ids=["sidebar closed", "sidebar open"])
@pytest.mark.parametrize(("name", "address", "drawn", "has_metrics"), PAGES, ids=[p[0] for p in PAGES])
def test_no_metric_value_is_cut_at_800_px(narrow_page, app_url, name, address, drawn, has_metrics, sidebar_open):
    narrow_page.goto(f"{app_url}/{address}")
    main = narrow_page.get_by_test_id("stMain")
    expect(main.get_by_text(drawn, exact=False).first).to_be_visible(timeout=90_000)
    expect(narrow_page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "true")
    if sidebar_open:
        open_sidebar(narrow_page)
    expect(narrow_page.locator('[data-stale="true"]')).to_have_count(0)
    values = main.get_by_test_id("stMetricValue")
    if has_metrics:  # the page shows metrics here, so the check below is not vacuous
        expect(values.first).to_be_visible()
    assert narrow_page.evaluate(CUT_METRICS_JS) == []


def test_the_sidebar_starts_closed_at_800_px_and_stays_open_once_opened(narrow_page, app_url):
    narrow_page.goto(f"{app_url}/memory?model=llama-2-7b")
    sidebar = narrow_page.get_by_test_id("stSidebar")
    expect(sidebar).to_have_attribute("data-collapsed", "true", timeout=90_000)
    open_sidebar(narrow_page)
    micro_batch = sidebar.get_by_label("Micro-batch", exact=True)
    micro_batch.fill("2")
    micro_batch.press("Enter")  # a rerun: the sidebar the reader opened stays open
    expect(narrow_page).to_have_url(re.compile(r"mb=2"))
    expect(narrow_page.locator('[data-stale="true"]')).to_have_count(0)
    narrow_page.wait_for_timeout(1_000)  # time for a late script to close it, which it must not
    expect(sidebar).to_have_attribute("data-collapsed", "false")


def test_the_sidebar_starts_open_at_1400_px(page, app_url):
    page.goto(f"{app_url}/memory?model=llama-2-7b")
    expect(page.get_by_test_id("stMain").get_by_text("Largest micro-batch").first).to_be_visible(timeout=90_000)
    page.wait_for_timeout(1_000)
    expect(page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "false")
