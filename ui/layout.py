"""Rows that fit any window: metrics and buttons that wrap onto another row where the window is
narrow, instead of being cut to "27.1..." or "Open on the Mem..." in columns too narrow for them.

st.columns stacks only below about 640 px; at 800 px four columns of metrics beside the sidebar
are about 110 px each, too narrow for "166.21 GiB" at the metric's font size."""

from __future__ import annotations

import streamlit as st

# What a table shows in an empty cell (st.dataframe's placeholder): the grid writes "None" otherwise, and
# a reader takes "None" for a value. Figures stay numbers, so columns still sort as numbers.
EMPTY_CELL = "-"


def static_table(frame, where=st, **kwargs) -> None:
    """st.table, with every cell read as the text it is: st.table renders its cells as Markdown, where
    a lone "-" (EMPTY_CELL) is a list item and was drawn as a bullet point ("•")."""
    where.table(frame.map(lambda cell: "\\-" if cell == EMPTY_CELL else cell), **kwargs)


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
