"""Rows that fit any window: metrics and buttons that wrap onto another row where the window is
narrow, instead of being cut to "27.1..." or "Open on the Mem..." in columns too narrow for them.

st.columns stacks only below about 640 px; at 800 px four columns of metrics beside the sidebar
are about 110 px each, too narrow for "166.21 GiB" at the metric's font size."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

# What a table shows in an empty cell (st.dataframe's placeholder): the grid writes "None" otherwise, and
# a reader takes "None" for a value. Figures stay numbers, so columns still sort as numbers.
EMPTY_CELL = "-"


def static_table(frame, where=st, **kwargs) -> None:
    """st.table, with every cell read as the text it is: st.table renders its cells as Markdown, where
    a lone "-" (EMPTY_CELL) is a list item and was drawn as a bullet point ("•"). For the wide tables
    of pages without the sidebar (Validation): it scrolls sideways, and a table of many cells is slow
    to redraw (see light_table)."""
    where.table(frame.map(lambda cell: "\\-" if cell == EMPTY_CELL else cell), **kwargs)


def light_table(frame, where=st, hide_index: bool = False) -> None:
    """A table read whole (its cells wrap) drawn as one Markdown table, for tables that change with
    the sidebar and fit the page's width. st.table draws each cell as a Markdown element of its own,
    built again on every rerun: in Chromium on a 2-core machine a 5 x 6 table whose cells change took
    about 28 ms of the page's CPU a rerun and a 25 x 3 one about 68 ms, against about 10 and 21 ms as
    one Markdown table (one-widget pages with each table, timed as bench/bench_clicks.py times a
    change). A Markdown table does not scroll sideways: wide tables stay static_table, and a long word
    (a URL in a source) may break anywhere but in the first column (the row's label or key), so it
    does not push the table past the page."""
    where.html(_BREAK_LONG_WORDS_CSS)
    where.markdown(markdown_table(frame, hide_index))


# A style element takes no room on the page; it applies to every Markdown table of the page
_BREAK_LONG_WORDS_CSS = (
    "<style>[data-testid='stMarkdownContainer'] td:not(:first-child) { overflow-wrap: anywhere; }</style>"
)


def markdown_table(frame, hide_index: bool = False) -> str:
    """`frame` as a GitHub-flavoured Markdown table: its index first (unless `hide_index`), under the
    index's name, each label kept on one line; columns of numbers aligned right; each cell as
    table_cell writes it."""
    labels = list(frame.columns)
    numeric = [pd.api.types.is_numeric_dtype(frame[label]) and frame[label].dtype != bool for label in labels]
    rows = [list(row) for row in frame.itertuples(index=False, name=None)]
    if not hide_index:  # the row labels on one line each (no-break spaces): short, and the table's key
        labels = [frame.index.name or "", *labels]
        numeric = [False, *numeric]
        rows = [[str(label).replace(" ", "\u00a0"), *row] for label, row in zip(frame.index, rows, strict=True)]
    lines = [
        _table_row(labels),
        "|" + "|".join("---:" if right else "---" for right in numeric) + "|",
        *(_table_row(row) for row in rows),
    ]
    return "\n".join(lines)


def _table_row(cells) -> str:
    return "| " + " | ".join(table_cell(cell) for cell in cells) + " |"


def table_cell(value: object) -> str:
    """One cell's Markdown: EMPTY_CELL escaped (a lone "-" reads as a list item in Markdown), a missing
    value as EMPTY_CELL, a float with up to 4 decimals and no trailing zeros, a pipe escaped and a line break as a space
    (a table row is one line)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "\\-"
    if isinstance(value, float):  # up to 4 decimals, no trailing zeros, never 1e+06
        text = f"{value:.4f}".rstrip("0").rstrip(".")
    else:
        text = str(value)
    if text == EMPTY_CELL:
        return "\\-"
    return text.replace("|", "\\|").replace("\n", " ")


def wrapping_row(where=st):
    """A horizontal container whose items wrap onto further rows when they do not fit. Put
    metrics in it with `width="content"`, so each is as wide as its own label and value."""
    return where.container(horizontal=True, gap="large")


# Below this window width the sidebar starts closed: open beside the page it takes about 300 px, which at 800 px
# leaves the page 500 px for its metrics, tables and buttons. Streamlit's own "auto" closes it only at 768 px or less.
NARROW_WINDOW_PX = 1000
_CLOSE_SIDEBAR_JS = """<script>
(() => {
  if (window.innerWidth >= %d) return;
  let tries = 0;
  const close = () => {
    const sidebar = document.querySelector('[data-testid="stSidebar"]');
    const button = document.querySelector('[data-testid="stSidebarCollapseButton"] button');
    if (sidebar && sidebar.getAttribute('data-collapsed') === 'true') return;
    if (sidebar && button) { button.click(); return; }
    if (++tries < 50) setTimeout(close, 100);  // the sidebar may not be drawn yet
  };
  close();
})();
</script>"""


def close_sidebar_on_narrow_window() -> None:
    """Once per browser session: on a window narrower than NARROW_WINDOW_PX, close the sidebar, as
    streamlit does on a phone; its arrow opens it again and it then stays open. Only the first run
    sends the script, so a later rerun neither closes what the reader opened nor adds an element."""
    if st.session_state.get("_sidebar_width_checked"):
        return
    st.session_state["_sidebar_width_checked"] = True
    st.sidebar.html(_CLOSE_SIDEBAR_JS % NARROW_WINDOW_PX, unsafe_allow_javascript=True)
