"""The Memory page in a real browser: change an input and watch the verdict change."""

from playwright.sync_api import expect


def test_changing_the_preset_turns_does_not_fit_into_fits(page, app_url):
    page.goto(app_url)
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Does not fit:", exact=False)).to_be_visible(timeout=60_000)

    preset = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="Preset")
    preset.click()
    page.get_by_role("option", name="gpt2", exact=True).click()

    expect(main.get_by_text("Fits:", exact=False)).to_be_visible()
    expect(main.get_by_text("Does not fit:", exact=False)).to_have_count(0)
    assert "model=gpt2" in page.url


def test_a_deep_link_reproduces_the_scenario(page, app_url):
    page.goto(f"{app_url}/?model=gpt2&mb=4")
    main = page.get_by_test_id("stMain")
    expect(main.get_by_text("Fits:", exact=False)).to_be_visible(timeout=60_000)
    expect(page.get_by_test_id("stSidebar").get_by_label("Micro-batch")).to_have_value("4")


def test_the_validation_page_opens_from_a_deep_link(page, app_url):
    page.goto(f"{app_url}/validation")
    expect(page.get_by_text("Validation against measurements")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)
