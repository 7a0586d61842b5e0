"""A link carries every setting of every page and mode (issue 36): settings changed in one browser,
the address opened in a fresh one (no session, no cookies) shows the same answers and the same
widget values; and the sidebar shows only the controls that apply to the model."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.test_settings_survive import (
    MODEL_BOX,
    choose,
    open_stack,
    settled,
    sidebar,
    type_number,
    wait_for_app,
)

# what a page answers and shows: its messages, its metrics, and every input's value (the sidebar's and
# the page's; a check box or radio button as checked or not), in the page's order
SNAPSHOT_JS = """() => {
    const main = document.querySelector('[data-testid="stMain"]');
    const text = (id) => [...main.querySelectorAll(`[data-testid="${id}"]`)].map((e) => e.innerText.trim());
    const inputs = [...document.querySelectorAll(
        '[data-testid="stSidebar"] input, [data-testid="stMain"] input')].map(
        (e) => (e.type === "checkbox" || e.type === "radio") ? String(e.checked) : e.value);
    return {alerts: text("stAlert"), metrics: text("stMetricValue"), inputs: inputs};
}"""


def snapshot(page) -> dict:
    settled(page)
    return page.evaluate(SNAPSHOT_JS)


def go_to(page, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    wait_for_app(page)
    settled(page)


def stack_is_open(page) -> bool:
    return sidebar(page).get_by_role("combobox", name="ZeRO stage", exact=True).is_visible()


def same_in_a_fresh_browser(browser, page, wanted_in_url: str) -> None:
    """The address bar, once the last change's run has ended, opened in a new context: the same page."""
    expect(page).to_have_url(re.compile(wanted_in_url))
    sent = snapshot(page)
    for _ in range(20):  # after moving to a page, the last piece of the old one may still be drawn: wait
        again = snapshot(page)  # until two looks agree, as for the fresh browser below
        if again == sent:
            break
        sent = again
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        fresh = context.new_page()
        fresh.set_default_timeout(30_000)
        fresh.goto(page.url)
        wait_for_app(fresh)
        if stack_is_open(page):  # a closed section draws no controls: open it as the sender did
            open_stack(fresh)
        shown = snapshot(fresh)
        for _ in range(60):  # the first run draws the page in pieces: wait until it stops changing
            if shown == sent:
                break
            fresh.wait_for_timeout(500)
            shown = snapshot(fresh)
        assert shown == sent, page.url
        expect(fresh).to_have_url(page.url)  # opening the link does not rewrite it
    finally:
        context.close()


def test_serve_settings_survive_a_shared_link(page, browser, app_url):
    page.goto(f"{app_url}/memory")
    wait_for_app(page)
    choose(page, MODEL_BOX, "llama-2-7b", typed=True)
    choose(page, "GPU for the verdict", "RTX-4090-24GB", typed=True)
    choose(page, "Mode", "Serve (inference)")
    type_number(page, "Concurrency", "4")
    choose(page, "KV cache", "fp8")
    # Llama-2-7B serving 4 x 8,192 tokens with an fp8 KV cache fits a 24 GiB card: the sender's answer
    expect(page.get_by_test_id("stMain").get_by_text("Fits:", exact=False)).to_be_visible()
    same_in_a_fresh_browser(browser, page, r"(?=.*mode=inference)(?=.*conc=4)(?=.*kvprec=fp8)")
    go_to(page, "Compare GPUs")  # the fit matrix follows the mode
    same_in_a_fresh_browser(browser, page, r"/compare\?(?=.*mode=inference)(?=.*conc=4)(?=.*kvprec=fp8)")


def test_every_page_in_training_survives_a_shared_link(page, browser, app_url):
    """One session goes through the pages, changing the sidebar (a collapsed stack setting included)
    and each page's own settings; after each page the link reproduces it in a fresh browser."""
    page.goto(f"{app_url}/memory")
    wait_for_app(page)
    choose(page, MODEL_BOX, "gpt2")
    type_number(page, "Micro-batch", "4")
    open_stack(page)
    choose(page, "ZeRO stage", "ZeRO-2 · SHARD_GRAD_OP")
    same_in_a_fresh_browser(browser, page, r"/memory\?(?=.*mb=4)(?=.*zero=2)")

    go_to(page, "Compare GPUs")
    type_number(page, "Memory at least (GB)", "90", where=page.get_by_test_id("stMain"))
    same_in_a_fresh_browser(browser, page, r"/compare\?(?=.*min_gb=90)(?=.*zero=2)")

    go_to(page, "Time and cost")
    type_number(page, "Tokens per epoch (billions)", "3", where=page.get_by_test_id("stMain"))
    same_in_a_fresh_browser(browser, page, r"/cost\?(?=.*tokens_b=3(&|$))(?=.*mb=4)")

    go_to(page, "Plan a run")
    type_number(page, "Deadline (hours, 0 = none)", "48", where=page.get_by_test_id("stMain"))
    page.get_by_test_id("stMain").get_by_role("button", name="Find plans").click()
    expect(page.get_by_test_id("stMain").get_by_text("Cheapest within the limits:", exact=False)).to_be_visible()
    same_in_a_fresh_browser(browser, page, r"\?(?=.*plan=\d)(?=.*deadline_h=48)(?=.*tokens_b=3(&|$))")


def test_a_text_only_model_shows_no_image_or_target_length_controls(page, app_url):
    image_and_target = re.compile(r"Images per sample|Tokens per image|Freeze the vision tower|Target length")
    page.goto(f"{app_url}/memory?model=llama-2-7b")
    wait_for_app(page)
    settled(page)
    expect(sidebar(page).get_by_label("Micro-batch", exact=True)).to_be_visible()
    expect(sidebar(page).get_by_text(image_and_target)).to_have_count(0)
    page.goto(f"{app_url}/memory?model=Qwen/Qwen2.5-VL-3B-Instruct")  # a vision model shows them
    wait_for_app(page)
    expect(sidebar(page).get_by_label("Images per sample", exact=True)).to_be_visible()
