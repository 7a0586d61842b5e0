"""Widget values that survive moving between pages.

Streamlit forgets a widget's state when a page without that widget runs. A copy
under another key is kept and restored the next time the widget is drawn."""

from __future__ import annotations

import streamlit as st

SAVED_PREFIX = "_saved_"


def _save(key: str) -> None:
    st.session_state[SAVED_PREFIX + key] = st.session_state[key]


def remember(key: str, default: object, options: list | None = None) -> str:
    """Seed the widget `key` from its saved copy (or `default`) and keep the copy
    current. Use as `st.selectbox(..., key=remember("k", default))`. With `options`,
    a saved list loses the items that are no longer offered (streamlit refuses them)."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get(SAVED_PREFIX + key, default)
    if options is not None and isinstance(st.session_state[key], list):
        st.session_state[key] = [item for item in st.session_state[key] if item in options]
    _save(key)
    return key
