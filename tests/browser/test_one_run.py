"""One run described once, in a real browser: the tokens set on Plan are Time and cost's after
moving there by the sidebar, and a shared link to a chosen plan shows that plan in a fresh browser."""

import re

from playwright.sync_api import expect

from tests.browser.test_settings_survive import choose, settled, sidebar, type_number, wait_for_app

TOKENS = "Tokens per epoch (billions)"


def test_plan_to_time_and_cost_by_the_sidebar_keeps_2b_tokens(page, app_url):
    page.goto(f"{app_url}/?model=gpt2")
    wait_for_app(page)
    main = page.get_by_test_id("stMain")
    type_number(page, TOKENS, "2", where=main)
    sidebar(page).get_by_role("link", name="Time and cost").click()
    expect(main.get_by_role("heading", name="Time and cost")).to_be_visible(timeout=60_000)
    settled(page)
    expect(main.get_by_label(TOKENS, exact=True)).to_have_value("2")
    expect(page).to_have_url(re.compile(r"[?&]tokens_b=2(&|$)"))


def test_a_shared_plan_link_shows_the_same_plan_in_a_fresh_browser(page, browser, app_url):
    page.goto(f"{app_url}/?model=gpt2&tokens_b=1&deadline_h=24&max_gpus=8")
    wait_for_app(page)
    main = page.get_by_test_id("stMain")
    main.get_by_role("button", name="Find plans").click()
    box = main.get_by_role("combobox", name="Plan", exact=True)
    expect(box).to_be_visible(timeout=60_000)
    second = page.get_by_role("option", name=re.compile(r"^2\. "))
    for _ in range(5):  # a click that lands while the page is redrawn focuses the box but opens no list
        settled(page)
        box.click()
        try:
            expect(second).to_be_visible(timeout=5_000)
            break
        except AssertionError:
            page.keyboard.press("Escape")
    label = second.inner_text()
    page.keyboard.press("Escape")
    choose(page, "Plan", label, where=main)
    expect(page).to_have_url(re.compile(r"[?&]plan=2(&|$)"))
    link = page.url

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = fresh.new_page()
        other.goto(link)
        other_box = other.get_by_test_id("stMain").get_by_role("combobox", name="Plan", exact=True)
        expect(other_box).to_have_value(label, timeout=60_000)
    finally:
        fresh.close()
