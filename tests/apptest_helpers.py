"""Opening the app under AppTest, shared by the page tests."""

import re
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

APP_PATH = str(Path(__file__).resolve().parent.parent / "app.py")
MEMORY_PAGE = "app_pages/memory.py"


# The collapsible sections whose controls are drawn only while open (ui.state.section): the page
# tests open them, as a user does before changing what is inside; tests of the closed state pass
# open_sections=False.
SECTIONS = (
    "stack_expander",
    "cost_step_section",
    "cost_run_section",
    "cost_energy_section",
    "memory_tables_open",
    "memory_trace_open",
    "memory_assumptions_open",
    "compare_roofline_open",
    "compare_mlperf_open",
    "cost_chart_open",
    "cost_uncosted_open",
    "cost_left_out_open",
    "cost_assumptions_open",
    "cost_buy_open",
    "user_gpus_section",
    "cost_prices_section",
)


def open_app(page: str | None = None, timeout_s: float = 30, open_sections: bool = True, **query: str) -> AppTest:
    """Run the app with `query` in the URL on `page` (the Memory page by default), and check nothing raised."""
    app = AppTest.from_file(APP_PATH, default_timeout=timeout_s)
    for key in SECTIONS if open_sections else ():
        app.session_state[key] = True
        app.session_state[f"_section_open_{key}"] = True
    for key, value in query.items():
        app.query_params[key] = value
    app.switch_page(page or MEMORY_PAGE).run()  # the Plan page is the landing page
    assert not app.exception, [e.message for e in app.exception]
    return app


def texts(elements) -> list[str]:
    """The shown values of AppTest elements (markdown, captions, metrics...)."""
    return [element.value for element in elements]


def light_tables(app) -> list[pd.DataFrame]:
    """The page's static tables (ui.layout.light_table: one Markdown table each) as frames of the text
    each cell shows, every column as written (an index drawn as the first column stays a column: its
    header is the index's name, "" for none)."""
    frames = []
    for element in app.markdown:
        lines = element.value.split("\n")
        if len(lines) < 2 or not lines[0].startswith("| ") or not set(lines[1]) <= set("|-:"):
            continue
        header, *rows = [_shown_cells(line) for line in (lines[0], *lines[2:])]
        frames.append(pd.DataFrame(rows, columns=header))
    return frames


def _shown_cells(line: str) -> list[str]:
    """A Markdown table row's cells as shown: split at the pipes that are not escaped, then unescaped
    (no-break spaces read as spaces)."""
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [cell.strip().replace("\\|", "|").replace("\\-", "-").replace("\u00a0", " ") for cell in cells]
