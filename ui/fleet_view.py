"""The fleet on the Calibration page: the newest calibration of each host and GPU in the store, and
a picker that applies one host's figures to the other pages."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from measure.calibration.result import CalibrationResult
from measure.calibration.store import newest_per_host_and_gpu
from ui import state
from ui.calibration_state import USE_KEY, set_active
from ui.layout import EMPTY_CELL

CHOICE_KEY = "_calibration_fleet_choice"


def fleet_label(result: CalibrationResult) -> str:
    return f"{result.host} · {result.gpu_name or 'CPU only'}"


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.0%}"


def _rate(gbytes_per_s: float | None) -> str:
    return "-" if gbytes_per_s is None else f"{gbytes_per_s:,.1f}"


def fleet_rows(history: list[CalibrationResult]) -> list[dict[str, str | int]]:
    """One row per host and GPU, newest first, with the figures the estimates use."""
    runs = Counter((result.host, result.gpu_name) for result in history)
    return [
        {
            "host": result.host,
            "GPU": result.gpu_name or "CPU only",
            "measured (UTC)": f"{result.created_at:%Y-%m-%d %H:%M}",
            "calibrations": runs[(result.host, result.gpu_name)],
            "bf16 matmul (% of dense peak)": _percent(result.utilisation.get("bf16")),
            "training-step MFU (%)": _percent(result.training_mfu),
            "all-reduce bus bandwidth (GB/s)": _rate(result.best_busbw_gbytes_per_s("all_reduce")),
            "all-gather bus bandwidth (GB/s)": _rate(result.best_busbw_gbytes_per_s("all_gather")),
        }
        for result in newest_per_host_and_gpu(history)
    ]


def _apply(result: CalibrationResult) -> None:
    """on_click: runs before the page script, so the whole page (the switch included) sees it."""
    set_active(result)
    state.set_value(USE_KEY, True)


def show_fleet(history: list[CalibrationResult], store_name: str) -> None:
    """The fleet table and the picker; nothing when the store holds no calibration."""
    fleet = newest_per_host_and_gpu(history)
    if not fleet:
        return
    st.subheader("Fleet")
    st.caption(f"The newest calibration of each host and GPU in the store {store_name}.")
    st.dataframe(pd.DataFrame(fleet_rows(history)), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    by_label = {fleet_label(result): result for result in fleet}
    chosen = st.selectbox("Host and GPU", list(by_label), key=CHOICE_KEY)
    st.button(
        "Apply this host's figures",
        on_click=_apply,
        args=(by_label[chosen],),
        help="Makes it the calibration the Memory, Compare and Cost pages use, and switches it on",
    )
