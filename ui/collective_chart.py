"""The measured collective curves of a calibration: bus bandwidth against message size, one line
per collective, as nccl-tests prints them (no streamlit here)."""

from __future__ import annotations

import plotly.graph_objects as go

from measure.calibration.result import CalibrationResult
from ui.axes import axis
from ui.charts import MARGIN

CURVE_LABEL = {"all_reduce": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter"}


def collective_figure(result: CalibrationResult) -> go.Figure | None:
    """Bus bandwidth (GB/s) against message size (bytes, log axis); None when nothing was swept."""
    curves = {name: getattr(result, name) for name in CURVE_LABEL if getattr(result, name)}
    if not curves:
        return None
    figure = go.Figure()
    for name, curve in curves.items():
        figure.add_scatter(
            name=CURVE_LABEL[name],
            x=[point.bytes for point in curve],
            y=[point.busbw_gbytes_per_s for point in curve],
            mode="lines+markers",
            hovertemplate=f"{CURVE_LABEL[name]}: %{{x:,}} bytes, %{{y:.3g}} GB/s<extra></extra>",
        )
    sizes = [point.bytes for curve in curves.values() for point in curve]
    figure.update_layout(
        xaxis=axis(sizes, "message size (bytes)"),
        yaxis_title="bus bandwidth (GB/s)",
        height=360,
        margin=MARGIN,
        legend=dict(orientation="h", yanchor="bottom", y=1.02),
    )
    return figure
