"""The calibration the pages use: the active result and the switch that applies it.

The Calibration page sets them; the sidebar applies the measured overheads to the
training settings, and the Cost page the measured utilisation on the measured GPU."""

from __future__ import annotations

import streamlit as st

from calculators.timing.vision_measured import MeasuredVisionThroughput
from measure.calibration.result import CalibrationResult
from ui import state

ACTIVE_KEY = "calibration_active"
USE_KEY = "use_calibration"


def active_calibration() -> CalibrationResult | None:
    """The calibration to apply, or None when there is none or the switch is off."""
    if not state.value(USE_KEY):
        return None
    return st.session_state.get(ACTIVE_KEY)


def set_active(result: CalibrationResult | None) -> None:
    st.session_state[ACTIVE_KEY] = result


def measured_matmul_fraction(precision: str) -> dict[str, float]:
    """GPU name -> the active calibration's measured matmul fraction of dense peak for the
    precision's matmuls; the time model times each GEMM with it instead of mamf-finder's."""
    calibration = active_calibration()
    if calibration is None or not calibration.catalogue_gpu:
        return {}
    matmul_fraction = calibration.utilisation_for(precision)
    if matmul_fraction is None:
        return {}
    return {calibration.catalogue_gpu: min(1.0, matmul_fraction)}


def measured_vision_throughputs() -> list[MeasuredVisionThroughput]:
    """The active calibration's measured images/s of a real ResNet (empty when none is applied)."""
    calibration = active_calibration()
    return list(calibration.vision) if calibration is not None else []


def measured_collective_curves(gpu_name: str) -> dict[str, list[dict[str, float]]] | None:
    """The active calibration's swept collective curves ({'all_reduce': [{bytes, bus_gbytes_per_s}], ...})
    when it was measured on `gpu_name` (a catalogue GPU): the time model uses them in place of the
    published intra-node curves for that GPU only. None when there is no such calibration or no sweep."""
    calibration = active_calibration()
    if calibration is None or calibration.catalogue_gpu != gpu_name:
        return None
    curves = {}
    for name in ("all_reduce", "all_gather", "reduce_scatter"):
        # a one-rank sweep moves nothing over a link (busbw 0): it says nothing about the fabric
        points = [
            {"bytes": point.bytes, "bus_gbytes_per_s": point.busbw_gbytes_per_s}
            for point in getattr(calibration, name)
            if point.busbw_gbytes_per_s > 0
        ]
        if points:
            curves[name] = points
    return curves or None
