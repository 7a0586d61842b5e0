"""A running app and a headless Debian Chromium for the browser tests.

Under CI=true the tests must run: a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.streamlit_server import start_streamlit, stop_streamlit

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_TIMEOUT_S = 60


@pytest.fixture(scope="session")
def app_url():
    process, url = start_streamlit("app.py", REPO_ROOT, STARTUP_TIMEOUT_S)
    try:
        yield url
    finally:
        stop_streamlit(process)


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM_PATH):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM_PATH} is missing; .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM_PATH} is not installed (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    # expect() retries for 5 s by default; a rerun of the app on the two-core CI machine, with the
    # other test worker busy, can take longer
    playwright_api.expect.set_options(timeout=30_000)
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            # one worker runs them all, against one app and one Chromium (--dist loadgroup)
            item.add_marker(pytest.mark.xdist_group("browser"))
