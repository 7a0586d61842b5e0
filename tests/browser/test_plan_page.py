"""The Plan page in a real browser: find a plan for Llama-3.1-8B on 2e10 tokens within 72 h and
open it on the Memory page."""

import re

from playwright.sync_api import expect


def test_the_plan_page_finds_a_plan_and_opens_it_on_the_memory_page(page, app_url):
    page.goto(f"{app_url}/?model=llama-3.1-8b&plan_tokens_b=20&deadline_h=72")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_role("heading", name="Plan a run")).to_be_visible(timeout=60_000)
    main.get_by_role("button", name="Find plans").click()
    cheapest = main.get_by_text("Cheapest within the limits:", exact=False)
    expect(cheapest).to_be_visible(timeout=60_000)
    hours = float(re.search(r": ([\d,.]+) h,", cheapest.inner_text()).group(1).replace(",", ""))
    assert hours <= 72

    main.get_by_role("button", name="Open on the Memory page").click()
    expect(main.get_by_role("heading", name="Will it fit?")).to_be_visible(timeout=60_000)
    expect(page).to_have_url(re.compile(r"/memory\?(?=.*[?&](gpus|tp|pp)=\d)(?=.*tokens_b=20(&|$))"))
