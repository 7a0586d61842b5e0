"""Pages read at a glance, in real Chromium (issue 36): every chart's tick labels increase along
each axis, a memory component keeps its colour from one state to the next, a bundled name typed
in another case selects the bundled model, and an unknown id with the Hub offline answers within
5 s with one message."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from calculators.memory.result import COMPONENT_LABEL
from tests.browser.conftest import REPO_ROOT, STARTUP_TIMEOUT_S
from tests.browser.streamlit_server import start_streamlit, stop_streamlit
from tests.browser.test_settings_survive import (
    MODEL_BOX,
    choose,
    open_stack,
    selected,
    settled,
    sidebar,
    wait_for_app,
)
from ui.palette import COMPONENT_COLOUR

# --- tick labels -------------------------------------------------------------------------------

# Plotly's short scales (its SI format writes G as B here) and ui/axes.short_number's
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "m": 1e-3, "µ": 1e-6, "μ": 1e-6, "n": 1e-9}
# "$1.5k", "1,000 h", "0.1 h", "−5", "10 ms", "50%", "2e+3": a currency sign, the number, a scale letter
# written against it (not the start of a unit such as "ms"), then the unit after a space
TICK = re.compile(
    r"^(?P<currency>\$?)(?P<number>[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?)"
    r"(?P<scale>[kMBGTmµμn]?)(?![A-Za-z])\s*(?P<unit>.*)$"
)


def tick_value(text: str) -> tuple[str, float]:
    """The unit and the number a tick label reads: "$1k" -> ("$", 1000.0), "0.1 h" -> ("h", 0.1)."""
    match = TICK.match(text.strip())
    assert match, f"tick label {text!r} is not a number with a unit"
    number = float(match["number"].replace(",", "").replace("−", "-")) * SCALE[match["scale"]]
    return match["currency"] + match["unit"].strip(), number


def assert_reads_in_order(texts: list[str], where: str) -> None:
    """The labels of one axis, in the order a reader meets them (left to right, bottom to top): one
    unit, and each number larger than the one before."""
    values = [tick_value(text) for text in texts]
    units = {unit for unit, _ in values}
    assert len(units) <= 1, f"{where}: ticks in several units {sorted(units)}: {texts}"
    numbers = [number for _, number in values]
    assert all(a < b for a, b in zip(numbers, numbers[1:], strict=False)), f"{where}: ticks out of order: {texts}"


@pytest.mark.parametrize(
    ("texts", "reads"),
    [
        (["$1", "$2", "$5", "$10", "$20", "$50", "$100", "$1k", "$1.5k", "$10k"], True),
        (["0.5 h", "1 h", "10 h", "100 h", "1,000 h", "10,000 h"], True),
        (["0 ms", "10 ms", "20 ms"], True),
        (["−1", "0", "0.001", "500m", "1", "5k", "2M", "1B"], True),
        (["5", "6", "7", "8", "9", "100", "2", "3", "4"], False),  # a log axis' minor digits (issue 36)
        (["0.1", "2", "5", "1", "2", "5", "10"], False),
        (["1000", "5", "2", "100"], False),
        (["$1", "$1"], False),
        (["1 h", "$2"], False),  # two units on one axis
    ],
)
def test_the_tick_reader_tells_ordered_ticks_from_noise(texts, reads):
    if reads:
        assert_reads_in_order(texts, "axis")
    else:
        with pytest.raises(AssertionError):
            assert_reads_in_order(texts, "axis")


# Each chart drawn on the page, in the page's order: its axes' types, and the text and on-screen box of
# each shown tick label of each axis. Plotly charts: one `g.xtick`, `g.y2tick`... per tick in the SVG,
# the axis types from the figure Plotly drew. Vega-Lite charts (the memory charts, ui/memory_chart.py):
# one `g.role-axis` per axis, whose aria-label names the axis and its scale ("Y-axis titled 'GiB per
# GPU' for a linear scale ..."), its labels in `g.role-axis-label`.
CHARTS = '[data-testid="stMain"] .js-plotly-plot, [data-testid="stMain"] [data-testid="stVegaLiteChart"] svg.marks'
CHART_TICKS_JS = """(selector) => [...document.querySelectorAll(selector)].map((chart) => {
    const ticks = {}, types = {}, titles = [];
    const read = (axis, label) => {
        if (!label || !label.textContent.trim()) return;
        const box = label.getBoundingClientRect();
        if (box.width === 0) return;  // a label hidden at the plot's edge is not read
        (ticks[axis] = ticks[axis] || []).push(
            {text: label.textContent, left: box.left, right: box.right, top: box.top, bottom: box.bottom});
    };
    if (chart.classList.contains('js-plotly-plot')) {
        for (const tick of chart.querySelectorAll('g.xtick, g.ytick, g.x2tick, g.y2tick')) {
            read(tick.getAttribute('class').replace('tick', ''), tick.querySelector('text'));
        }
        for (const axis of Object.keys(ticks)) {
            const layout = chart._fullLayout[axis.replace(/^([xy])/, '$1axis')];
            types[axis] = {type: layout.type, reversed: Boolean(layout.autorange === 'reversed' ||
                (layout.range && layout.range[0] > layout.range[1]))};
        }
        titles.push(...[...chart.querySelectorAll('.g-xtitle, .g-ytitle, .g-y2title')].map((t) => t.textContent));
    } else {
        chart.querySelectorAll('g.role-axis[aria-roledescription="axis"]').forEach((group, index) => {
            const words = group.getAttribute('aria-label') || '';
            const axis = words[0].toLowerCase() + (index > 1 ? '2' : '');
            const scale = (words.match(/for an? (\\w+) scale/) || [])[1];
            types[axis] = {type: scale === 'discrete' ? 'category' : scale, reversed: false};
            titles.push((words.match(/titled '([^']*)'/) || [])[1]);
            group.querySelectorAll('g.role-axis-label text').forEach((label) => read(axis, label));
        });
    }
    return {title: titles.filter(Boolean).join(' / '), ticks, types};
})"""


def in_reading_order(ticks: list[dict], axis: str) -> list[dict]:
    """An axis' labels as a reader meets them: x left to right, y bottom to top."""
    if axis.startswith("x"):
        return sorted(ticks, key=lambda tick: tick["left"] + tick["right"])
    return sorted(ticks, key=lambda tick: -(tick["top"] + tick["bottom"]))


def assert_apart(ticks: list[dict], axis: str, where: str) -> None:
    """No label drawn over the next one ("0.1100288" is 0.1, 100 and 288 on top of each other)."""
    for before, after in zip(ticks, ticks[1:], strict=False):
        apart = before["right"] <= after["left"] if axis.startswith("x") else before["top"] >= after["bottom"]
        assert apart, f"{where}: {before['text']!r} and {after['text']!r} overlap"


def test_the_overlap_check_tells_labels_apart():
    side_by_side = [{"text": "1", "left": 0, "right": 10}, {"text": "10", "left": 12, "right": 30}]
    assert_apart(side_by_side, "x", "axis")
    on_top = [{"text": "0.1", "left": 0, "right": 20}, {"text": "100", "left": 15, "right": 35}]
    with pytest.raises(AssertionError):
        assert_apart(on_top, "x", "axis")


def drawn_charts(page, count: int) -> list[dict]:
    """The page's charts once `count` are drawn and two looks agree (a rerun redraws them in pieces)."""
    expect(page.locator(CHARTS)).to_have_count(count, timeout=60_000)
    settled(page)
    seen = page.evaluate(CHART_TICKS_JS, CHARTS)
    for _ in range(20):
        page.wait_for_timeout(500)
        again = page.evaluate(CHART_TICKS_JS, CHARTS)
        if again == seen and all(chart["ticks"] for chart in seen):
            return seen
        seen = again
    return seen


def open_section(page, title: str) -> None:
    """Open the page's collapsed section whose title starts with `title` (its charts are drawn only
    while it is open), again if a click that lands while the page is redrawn is lost."""
    section = page.get_by_test_id("stMain").get_by_test_id("stExpander").filter(has_text=title)
    details = section.locator("details")
    for _ in range(4):
        settled(page)
        if details.get_attribute("open") is not None:
            return
        section.get_by_text(title, exact=False).first.click()
    expect(details).to_have_attribute("open", "")


def find_plans(page) -> None:
    settled(page)
    main = page.get_by_test_id("stMain")
    main.get_by_role("button", name="Find plans").click()
    expect(main.get_by_text("Cheapest within the limits:", exact=False)).to_be_visible(timeout=90_000)


# page and mode, its address, what to open before every chart is drawn, and how many charts it then draws
CHART_PAGES = [
    ("memory", "memory", [], 1),  # phases of the step
    ("memory serve", "memory?mode=inference&gpu=RTX-4090-24GB", [], 1),  # the serving breakdown
    # memory against bandwidth, TFLOPS against price, the roofline, MLPerf scaling
    ("compare", "compare", ["Roofline of the GPUs picked above", "MLPerf Training"], 4),
    ("compare serve", "compare?mode=inference", ["MLPerf Training"], 3),  # no roofline when serving
    # step breakdown, scaling (GPUs, tokens/s and hours), hours against USD
    ("cost", "cost?model=gpt2&tokens_b=2", ["Step breakdown and scaling", "Chart: hours against USD"], 3),
    ("cost serve", "cost?mode=inference&gpu=RTX-4090-24GB", [], 1),  # tokens/s and latency against concurrency
    ("plan", "?model=gpt2", [find_plans], 1),  # the plans' front
    ("plan serve", "?mode=inference", [], 1),  # the serving plans' front
    ("memory image model", "memory?model=resnet50", [], 1),  # an image model's phases
    # memory against bandwidth, TFLOPS against price, MLPerf time to train (no roofline for an image model)
    ("compare image model", "compare?model=resnet50", ["MLPerf Training"], 3),
    ("cost image model", "cost?model=resnet50", [], 1),  # hours and USD per epoch per device and precision
    ("validation", "validation", [], 3),  # peak memory, tokens/s and images/s: estimate against measured
]


@pytest.mark.parametrize(("name", "address", "opened", "count"), CHART_PAGES, ids=[p[0] for p in CHART_PAGES])
def test_every_charts_tick_labels_read_in_increasing_order(page, app_url, name, address, opened, count):
    """Along each numeric axis the labels, in the order a reader meets them (x left to right, y bottom
    to top), increase in one unit, none drawn over the next. Category axes (the Memory chart's phases,
    the step's one bar, the validation rows) have no order to read and are skipped. Calibration draws
    a chart only for a calibration run on this host, which a browser test has not got."""
    page.goto(f"{app_url}/{address}")
    wait_for_app(page)
    for step in opened:
        step(page) if callable(step) else open_section(page, step)
    numeric_axes = 0
    for number, chart in enumerate(drawn_charts(page, count), start=1):
        for axis, ticks in chart["ticks"].items():
            where = f"{name}, chart {number} ({chart['title']}), axis {axis}"
            if chart["types"][axis]["type"] in ("category", "multicategory"):
                continue
            assert not chart["types"][axis]["reversed"], f"{where}: drawn reversed"
            along = in_reading_order(ticks, axis)
            assert_reads_in_order([tick["text"] for tick in along], where)
            assert_apart(along, axis, where)
            numeric_axes += 1
    assert numeric_axes >= count  # every chart has at least one numeric axis: the check is not vacuous


# --- one colour per memory component ----------------------------------------------------------

# Each legend entry of the page's first chart (its name and swatch colour) and each part's bars (the
# part read from the bar's aria-label, "...; part: Weights; ...", and its bars' colours), as the browser
# renders them: the memory charts are Vega-Lite (ui/memory_chart.py).
CHART_COLOURS_JS = """() => {
    const chart = document.querySelector('[data-testid="stMain"] [data-testid="stVegaLiteChart"] svg.marks');
    const legend = [...chart.querySelectorAll('g.role-legend-symbol')].map((symbol) => [
        symbol.parentElement.querySelector('g.role-legend-label text').textContent,
        getComputedStyle(symbol.querySelector('path')).fill]);
    const bars = {};
    for (const bar of chart.querySelectorAll('path[aria-roledescription="bar"]')) {
        const part = bar.getAttribute('aria-label').match(/; part: ([^;]*);/)[1];
        (bars[part] = bars[part] || new Set()).add(getComputedStyle(bar).fill);
    }
    return {legend, bars: Object.entries(bars).map(([part, fills]) => [part, [...fills]])};
}"""


def rgb(hex_colour: str) -> str:
    """#1f77b4 as the browser's computed style writes it: rgb(31, 119, 180)."""
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


def component_colours(page) -> dict[str, str]:
    """Each component's colour on the Memory chart, once two looks agree; its legend swatch and its
    bars in one colour."""
    drawn_charts(page, 1)
    seen = page.evaluate(CHART_COLOURS_JS)
    for _ in range(20):
        page.wait_for_timeout(500)
        again = page.evaluate(CHART_COLOURS_JS)
        if again == seen:
            break
        seen = again
    legend = dict(seen["legend"])
    assert len(legend) == len(seen["legend"]), f"a component named twice: {seen['legend']}"
    for name, fills in seen["bars"]:
        assert fills == [legend[name]], f"{name}: bars {fills}, legend {legend[name]}"
    return legend


def test_a_memory_component_keeps_its_colour_from_one_state_to_the_next(page, app_url):
    """BF16 mixed keeps FP32 master weights, pure BF16 does not: the chart loses a component and those
    after it move up one place, so a colour picked by place would move with them. Serving draws
    weights and activations again, among other parts."""
    page.goto(f"{app_url}/memory?model=llama-2-7b")
    wait_for_app(page)
    mixed = component_colours(page)
    open_stack(page)
    choose(page, "Precision", "Pure BF16")
    pure = component_colours(page)
    choose(page, "Mode", "Serve (inference)")
    serving = component_colours(page)

    assert "FP32 master weights" in mixed and "FP32 master weights" not in pure
    assert set(pure) < set(mixed)  # the second of the chart's traces gone, those after it moved up one place
    both = set(mixed) & set(pure)
    assert {"Weights", "Gradients", "Optimizer states", "Activations", "CUDA context, cuBLAS, NCCL"} <= both
    assert {name: pure[name] for name in both} == {name: mixed[name] for name in both}
    assert {"Weights", "Activations"} <= set(serving)
    assert serving["Weights"] == mixed["Weights"] and serving["Activations"] == mixed["Activations"]
    # the palette's colours as the browser renders them: weights blue, activations green
    palette = {COMPONENT_LABEL[key]: rgb(colour) for key, colour in COMPONENT_COLOUR.items()}
    for shown in (mixed, pure):
        assert shown == {name: palette[name] for name in shown}
    assert mixed["Weights"] == "rgb(31, 119, 180)"


# --- the model box ------------------------------------------------------------------------------


def type_in_model_box(page, typed: str, offered: str) -> None:
    """Type `typed` in the sidebar's model box and press Enter once the list offers `offered`."""
    settled(page)
    box = selected(page, MODEL_BOX)
    box.click()
    box.fill(typed)
    expect(page.get_by_role("option", name=offered, exact=True)).to_be_visible()
    box.press("Enter")


def test_typing_a_bundled_name_in_another_case_and_enter_selects_it(page, app_url):
    page.goto(f"{app_url}/memory")
    wait_for_app(page)
    type_in_model_box(page, "Llama-2-7B", "llama-2-7b")
    settled(page)
    expect(selected(page, MODEL_BOX)).to_have_value("llama-2-7b")  # not "Add: Llama-2-7B"'s spelling
    expect(page).to_have_url(re.compile(r"model=llama-2-7b(&|$)"))
    main = page.get_by_test_id("stMain")
    # Llama 2 7B's published size, 6,738,415,616 parameters (the Hub's model card: 6.74B), all trained
    expect(main.get_by_text("trainable parameters: 6,738,415,616 of 6,738,415,616", exact=False)).to_be_visible()
    model_problems = main.get_by_test_id("stAlert").filter(has_text=re.compile(r"model '|unknown model|upload"))
    expect(model_problems).to_have_count(0)


@pytest.fixture(scope="module")
def offline_app_url():
    """The app with the Hugging Face Hub offline (HF_HUB_OFFLINE, read by huggingface_hub): the test
    must not depend on whether this machine reaches the network."""
    process, url = start_streamlit("app.py", REPO_ROOT, STARTUP_TIMEOUT_S, env={"HF_HUB_OFFLINE": "1"})
    try:
        yield url
    finally:
        stop_streamlit(process)


def test_an_unknown_id_offline_answers_within_5_s_with_one_message(page, offline_app_url):
    page.goto(f"{offline_app_url}/memory")
    wait_for_app(page)
    type_in_model_box(page, "some-org/unknown-model", "Add: some-org/unknown-model")
    started_s = time.monotonic()
    # the message names the page's upload box (not a command-line flag)
    upload = page.get_by_test_id("stAlert").filter(has_text="upload its config.json in the sidebar")
    expect(upload).to_have_count(1, timeout=5_000)
    waited_s = time.monotonic() - started_s
    assert waited_s < 5, f"answered after {waited_s:.1f} s"
    settled(page)
    expect(upload).to_have_count(1)
    expect(upload).to_contain_text("some-org/unknown-model")
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(1)  # one message, in the page only
    expect(page.get_by_test_id("stException")).to_have_count(0)
    assert "Traceback" not in page.get_by_test_id("stMain").inner_text()
    expect(sidebar(page).get_by_test_id("stAlert")).to_have_count(0)
