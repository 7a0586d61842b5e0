"""Plotly figures for the pages (no streamlit here)."""

from __future__ import annotations

import plotly.graph_objects as go

from calculators.memory import COMPONENT_LABEL, COMPONENTS, MemoryEstimate


def phase_breakdown_figure(estimate: MemoryEstimate, capacity_gib: float) -> go.Figure:
    """One stacked bar per phase of the step, with the GPU's capacity as a line."""
    phase_components = estimate.phase_components_gib
    phases = list(phase_components)
    figure = go.Figure()
    for component in COMPONENTS:
        values = [phase_components[phase].get(component, 0.0) for phase in phases]
        if any(v > 0 for v in values):
            figure.add_bar(name=COMPONENT_LABEL[component], x=phases, y=values, hovertemplate="%{y:.2f} GiB")
    figure.add_hline(y=capacity_gib, line_dash="dash", line_color="red", annotation_text=f"GPU {capacity_gib:g} GiB")
    figure.update_layout(
        barmode="stack",
        yaxis_title="GiB per GPU",
        height=420,
        margin=dict(l=10, r=10, t=30, b=10),
        legend=dict(orientation="h", y=-0.2),
    )
    return figure


def validation_figure(ids: list[str], measured: list[float], estimated: list[float]) -> go.Figure:
    figure = go.Figure()
    figure.add_bar(name="measured", x=ids, y=measured, hovertemplate="%{y:.2f} GiB")
    figure.add_bar(name="estimate", x=ids, y=estimated, hovertemplate="%{y:.2f} GiB")
    figure.update_layout(barmode="group", yaxis_title="GiB", height=360, margin=dict(l=10, r=10, t=30, b=10))
    return figure
