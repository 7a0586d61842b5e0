"""Screenshots of every page, whole, at 1400 and 800 px wide: what a reader sees, to look at after
a change of a page (issue 36). Run from the repository root:

    HF_HUB_OFFLINE=1 python bench/screenshots.py [--out docs/screenshots] [--pages memory,cost]

It starts the app, opens each view below in Debian's Chromium (/usr/bin/chromium, headless) at
1400 x 1000 and at 800 x 1000, waits until the page is idle and its charts are drawn, grows the
window to the page's height (Streamlit scrolls its main area inside the window, so a plain
full-page capture stops at the first screen), and writes `<view>-<width>.jpg` to the folder. It
prints each file with the page's height and whether anything is wider than the window (a cut-off
table or chart: the layout's check in tests/browser/test_narrow_window.py reads the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.browser.streamlit_server import start_streamlit, stop_streamlit  # noqa: E402

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
WIDTHS = (1400, 800)
TALLEST_PX = 8000  # a longer page is cut here: the file stays readable
IDLE_TIMEOUT_MS = 60_000
SETTLE_MS = 1500  # after idle: Plotly draws its charts after the page's elements are in place

# view name -> address (path and query) of the app; the Plan page is the landing page
VIEWS = {
    "plan": "?model=llama-3.1-8b",
    "memory": "memory?model=llama-2-7b",
    "memory-serve": "memory?model=llama-2-7b&mode=inference",
    "memory-resnet50": "memory?model=resnet50",
    "compare": "compare?model=llama-2-7b",
    "cost": "cost?model=llama-2-7b",
    "cost-resnet50": "cost?model=resnet50",
    "calibration": "calibration",
    "validation": "validation",
}

IDLE_JS = """() => {
  const root = document.querySelector('[data-testid="stApp"]');
  return root && root.getAttribute('data-test-script-state') === 'notRunning'
    && document.querySelector('[data-stale="true"]') === null
    && document.querySelector('[data-testid="stStatusWidgetRunningIcon"]') === null;
}"""

# the height of the page's content: the main area scrolls inside the window, so its block's height, and
# the bottom of the sidebar's own content when the sidebar is open (a closed one sits off-screen); the
# sidebar's box itself is as tall as the window, whatever it holds
HEIGHT_JS = """() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  const sidebar = document.querySelector('[data-testid="stSidebarUserContent"]');
  const box = sidebar ? sidebar.getBoundingClientRect() : null;
  return Math.max(main ? main.scrollHeight : 0, box && box.right > 50 ? box.bottom : 0);
}"""


# anything drawn wider than the window: a cut-off table, chart or metric
OVERFLOW_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  return main ? main.scrollWidth > main.clientWidth + 1 : false;
}"""


def capture(page, url: str, width: int, path: Path) -> tuple[int, bool]:
    """The view at `url` drawn `width` px wide, whole, written to `path`: (its height, overflows?)."""
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]', timeout=IDLE_TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=IDLE_TIMEOUT_MS)
    page.wait_for_timeout(SETTLE_MS)
    height = 1000
    for _ in range(5):  # until the page's height holds: a table or chart drawn late makes it taller
        wanted = min(int(page.evaluate(HEIGHT_JS)) + 120, TALLEST_PX)
        if wanted == height:
            break
        height = wanted
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(SETTLE_MS)  # charts redraw at the new size
    overflows = bool(page.evaluate(OVERFLOW_JS))
    page.screenshot(path=str(path), type="jpeg", quality=80)
    return height, overflows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/screenshots", help="folder for the images (default docs/screenshots)")
    parser.add_argument("--pages", default=",".join(VIEWS), help=f"comma-separated views: {', '.join(VIEWS)}")
    args = parser.parse_args()
    views = [name for name in args.pages.split(",") if name]
    unknown = [name for name in views if name not in VIEWS]
    if unknown:
        parser.error(f"unknown view {', '.join(unknown)}; choose from {', '.join(VIEWS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    process, app_url = start_streamlit(REPO_ROOT / "app.py", REPO_ROOT, 90, {"HF_HUB_OFFLINE": "1"})
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, headless=True, args=CHROMIUM_ARGS)
            for name in views:
                for width in WIDTHS:
                    # a fresh context each time: Streamlit keeps the sidebar closed for a page once a
                    # narrow window closed it
                    context = browser.new_context()
                    path = out / f"{name}-{width}.jpg"
                    height, overflows = capture(context.new_page(), f"{app_url}/{VIEWS[name]}", width, path)
                    context.close()
                    wider = "  WIDER THAN THE WINDOW" if overflows else ""
                    print(f"{path}  {width} x {height} px{wider}", flush=True)
            browser.close()
    finally:
        stop_streamlit(process)


if __name__ == "__main__":
    main()
