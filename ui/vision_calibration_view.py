"""The Calibration page's table of a real ResNet's measured images/s next to the time model's estimate."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from calculators.timing.vision_measured import MeasuredVisionThroughput, measured_vs_estimate
from ui.layout import EMPTY_CELL

PRECISION_WORDS = {"fp32": "fp32", "amp-bf16": "mixed bf16", "amp-fp16": "mixed fp16"}


def _rounded(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def show_vision_measurements(measurements: Sequence[MeasuredVisionThroughput]) -> None:
    """One row per measured precision: measured and estimated images/s and their ratio."""
    st.markdown("**Vision training: measured vs estimate (images/s)**")
    compared = [measured_vs_estimate(measured) for measured in measurements]
    rows = [
        {
            "model": row.measured.model,
            "device": row.measured.device_name or row.measured.device.upper(),
            "precision": PRECISION_WORDS[row.measured.precision],
            "micro-batch (images)": row.measured.micro_batch,
            "image size (pixels)": row.measured.image_size,
            "channels-last": "yes" if row.measured.channels_last else "no",
            "measured (images/s)": _rounded(row.measured.images_per_s, 1),
            "estimate (images/s)": _rounded(row.estimate_images_per_s, 1),
            "measured / estimate": _rounded(row.measured_over_estimate, 2),
        }
        for row in compared
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    for why in sorted({row.why_no_estimate for row in compared if row.why_no_estimate}):
        st.caption(f"No estimate: {why}.")
