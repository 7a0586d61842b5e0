"""The memory charts: GiB per GPU by part, one stacked bar per phase of a step (one bar when
serving), with the GPU's capacity as a dashed red line. Streamlit draws them with Vega-Lite (no
streamlit here: the pages call st.vega_lite_chart(chart.data, chart.spec, width="stretch")).

Why Vega-Lite, when every other chart is Plotly: these three charts change with every change of
the sidebar. Streamlit 1.67 mounts a Plotly chart afresh whenever its figure changes (the element's
id is a hash of the figure) and its component then draws it twice; a Vega-Lite chart whose data is
passed apart from its spec keeps its element, and Vega swaps the data in place. Measured in
Chromium on a 2-core machine with bench/bench_clicks.py --fresh, the Memory page went from 2.4-2.6x
to 1.8-2.0x the one-widget page. The colours are the palette's (ui/palette.py), as on every chart.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from calculators.memory.result import COMPONENT_LABEL, COMPONENTS, MemoryEstimate
from ui.palette import COMPONENT_COLOUR

CAPACITY_COLOUR = "red"  # the GPU's memory: the line and its label


@dataclass(frozen=True)
class MemoryChart:
    """A Vega-Lite chart: its rows (one per bar segment) and its spec, which names no data."""

    data: pd.DataFrame
    spec: dict


@dataclass(frozen=True)
class Segment:
    """One part of one bar: `gib` of `part` in the bar `column`."""

    column: str
    part: str
    gib: float


def stacked_gib_chart(
    segments: list[Segment], colours: dict[str, str], capacity_gib: float, height_px: int, column_title: str
) -> MemoryChart:
    """Stacked bars of GiB per GPU, the columns in the order of `segments` left to right and the
    parts in their order from the bottom up, each part in its `colours` entry; the GPU's capacity
    as a dashed line labelled 'GPU 80 GiB' on a white halo (a red label drawn over an orange bar
    could not be read otherwise)."""
    columns = list(dict.fromkeys(segment.column for segment in segments))
    parts = list(dict.fromkeys(segment.part for segment in segments))
    data = pd.DataFrame(
        {
            "column": [segment.column for segment in segments],
            "part": [segment.part for segment in segments],
            "GiB": [segment.gib for segment in segments],
            "stack": [parts.index(segment.part) for segment in segments],
        }
    )
    bars = {
        "mark": {"type": "bar"},
        "encoding": {
            "x": {
                "field": "column",
                "type": "nominal",
                "sort": columns,
                "title": None,
                "axis": {"labelAngle": -30 if len(columns) > 1 else 0, "labelLimit": 200},
            },
            "y": {"field": "GiB", "type": "quantitative", "stack": "zero", "title": "GiB per GPU"},
            "color": {
                "field": "part",
                "type": "nominal",
                "title": None,
                "scale": {"domain": parts, "range": [colours[part] for part in parts]},
                "legend": {"orient": "bottom", "columns": 3, "symbolType": "square", "labelLimit": 300},
            },
            "order": {"field": "stack", "type": "quantitative"},
            "tooltip": [
                {"field": "column", "type": "nominal", "title": column_title},
                {"field": "part", "type": "nominal", "title": "part"},
                {"field": "GiB", "type": "quantitative", "title": "GiB per GPU", "format": ".2f"},
            ],
        },
    }
    label = f"GPU {capacity_gib:g} GiB"
    at_capacity = {"y": {"datum": capacity_gib, "type": "quantitative"}}
    line = {
        "mark": {"type": "rule", "color": CAPACITY_COLOUR, "strokeDash": [6, 4], "strokeWidth": 1.5},
        "encoding": at_capacity,
    }
    text = {"type": "text", "align": "left", "baseline": "bottom", "dx": 4, "dy": -3, "fontSize": 12}
    halo = {
        "mark": text | {"stroke": "white", "strokeWidth": 4, "strokeJoin": "round"},
        "encoding": at_capacity | {"x": {"value": 0}, "text": {"value": label}},
    }
    words = {"mark": text | {"color": CAPACITY_COLOUR}, "encoding": halo["encoding"]}
    spec = {"height": height_px, "layer": [bars, line, halo, words]}
    return MemoryChart(data=data, spec=spec)


def phase_breakdown_chart(estimate: MemoryEstimate, capacity_gib: float) -> MemoryChart:
    """The training step's phases, each a stack of the memory components live then (the engine's
    order from the bottom up, each in its palette colour); components absent from every phase are
    left out, so the legend lists only what the step holds."""
    phase_components = estimate.phase_components_gib
    segments = [
        Segment(phase, COMPONENT_LABEL[component], phase_components[phase].get(component, 0.0))
        for component in COMPONENTS
        if any(components.get(component, 0.0) > 0 for components in phase_components.values())
        for phase in phase_components
    ]
    colours = {COMPONENT_LABEL[component]: COMPONENT_COLOUR[component] for component in COMPONENTS}
    return stacked_gib_chart(segments, colours, capacity_gib, height_px=420, column_title="phase")
