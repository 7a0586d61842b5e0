"""The Memory page in a real browser: change an input and watch the verdict change."""

import re

from playwright.sync_api import expect


def test_changing_the_preset_turns_does_not_fit_into_fits(page, app_url):
    page.goto(f"{app_url}/memory")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Does not fit:", exact=False)).to_be_visible(timeout=60_000)

    preset = page.get_by_test_id("stSidebar").get_by_role("combobox", name="Model (preset or Hugging Face id)")
    preset.click()
    page.get_by_role("option", name="gpt2", exact=True).click()

    expect(main.get_by_text("Fits:", exact=False)).to_be_visible()
    expect(main.get_by_text("Does not fit:", exact=False)).to_have_count(0)
    expect(page).to_have_url(re.compile(r"model=gpt2"))  # the link is rewritten when the rerun ends


def test_a_deep_link_reproduces_the_scenario(page, app_url):
    page.goto(f"{app_url}/memory?model=gpt2&mb=4")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Fits:", exact=False)).to_be_visible(timeout=60_000)
    expect(page.get_by_test_id("stSidebar").get_by_label("Micro-batch")).to_have_value("4")


def test_the_validation_page_opens_from_a_deep_link(page, app_url):
    page.goto(f"{app_url}/validation")
    expect(page.get_by_text("Validation against measurements")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)


def test_compare_page_filters_by_vendor_and_shows_the_fit_matrix(page, app_url):
    page.goto(f"{app_url}/compare?model=gpt2")
    main = page.get_by_test_id("stMain")
    count = main.get_by_text(re.compile(r"\d+ of \d+ GPUs"))
    expect(count).to_be_visible(timeout=60_000)
    total = int(re.search(r"of (\d+) GPUs", count.inner_text()).group(1))
    assert total >= 40
    vendor = main.get_by_test_id("stMultiSelect").filter(has_text="Vendor")
    vendor.click()
    page.get_by_role("option", name="AMD", exact=True).click()
    page.keyboard.press("Escape")
    expect(count).to_have_text(re.compile(rf"^[3-9] of {total} GPUs"))
    expect(main.get_by_test_id("stDataFrame").first).to_be_visible()


def test_cost_page_ranks_options_and_downloads_a_csv(page, app_url):
    import pandas as pd

    page.goto(f"{app_url}/cost?model=gpt2&tokens_b=2")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Cheapest on demand:", exact=False)).to_be_visible(timeout=60_000)
    with page.expect_download() as download_info:
        main.get_by_role("button", name="Download CSV").click()
    path = download_info.value.path()
    options = pd.read_csv(path)
    assert len(options) > 10
    # the download is the page's table: spot and on-demand rows apart, fitting first, then the cheapest
    assert {"gpu", "pricing", "provider", "hours", "usd", "usd range", "fits"} <= set(options.columns)
    assert set(options["pricing"]) == {"on demand", "spot"}
    fitting = options[options["fits"] != False]  # noqa: E712 - a column of True, False and empty
    assert list(fitting["usd"]) == sorted(fitting["usd"])


def test_inference_mode_shows_the_serving_answers(page, app_url):
    page.goto(f"{app_url}/memory?mode=inference&gpu=RTX-4090-24GB")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Most sequences that fit")).to_be_visible(timeout=60_000)
    expect(main.get_by_text("KV cache per sequence")).to_be_visible()


def test_qlora_mode_fits_a_7b_model_on_a_24_gb_card(page, app_url):
    page.goto(f"{app_url}/memory?model=llama-2-7b&gpu=RTX-4090-24GB&ckpt=full")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Does not fit:", exact=False)).to_be_visible(timeout=60_000)
    mode = page.get_by_test_id("stSidebar").get_by_role("combobox", name="Mode", exact=True)
    mode.click()
    page.get_by_role("option", name="Fine-tune: QLoRA (4-bit base)").click()
    expect(main.get_by_text("Fits:", exact=False)).to_be_visible()
    expect(main.get_by_text("trainable parameters: 39,976,960", exact=False)).to_be_visible()
