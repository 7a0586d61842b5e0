"""Rows that fit any window: metrics and buttons that wrap onto another row where the window is
narrow, instead of being cut to "27.1..." or "Open on the Mem..." in columns too narrow for them.

st.columns stacks only below about 640 px; at 800 px four columns of metrics beside the sidebar
are about 110 px each, too narrow for "166.21 GiB" at the metric's font size."""

from __future__ import annotations

import streamlit as st


def wrapping_row(where=st):
    """A horizontal container whose items wrap onto further rows when they do not fit. Put
    metrics in it with `width="content"`, so each is as wide as its own label and value."""
    return where.container(horizontal=True, gap="large")
