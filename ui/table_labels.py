"""What a person reads above each column of the Time and cost and Plan tables, with units. The data,
the tests and the downloads keep the short column names; only the grid's headers change."""

from __future__ import annotations

import streamlit as st

COLUMN_LABELS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "hours": "hours (h)",
    "hours range": "hours range (h)",
    "usd": "cost (USD)",
    "usd range": "cost range (USD)",
    "usd per epoch": "per epoch (USD)",
    "usd per M tokens": "per million tokens (USD)",
    "usd on demand": "on demand (USD)",
    "usd spot": "spot, expected (USD)",
    "peak GiB": "peak (GiB)",
    "headroom GiB": "headroom (GiB)",
    "step s": "step (s)",
    "tp x pp": "tensor x pipeline",
    "fits": "fits in memory",
}


def column_config(formats: dict[str, str], widths: dict[str, str | int] | None = None) -> dict:
    """A table's st.dataframe column_config: every known column under its label for people; the
    columns in `formats` as numbers in that format; `widths` ("small", "medium", "large" or pixels) where a
    column's text must not be cut."""
    widths = widths or {}
    config = {}
    for column in {**COLUMN_LABELS, **widths}:
        config[column] = st.column_config.Column(COLUMN_LABELS.get(column, column), width=widths.get(column))
    for column, number_format in formats.items():
        config[column] = st.column_config.NumberColumn(
            COLUMN_LABELS.get(column, column), format=number_format, width=widths.get(column)
        )
    return config
