"""Plotly figures for the pages (no streamlit here)."""

from __future__ import annotations

import json
import math
from collections.abc import Collection

import pandas as pd
import plotly.graph_objects as go
import plotly.io

from ui.axes import axis
from ui.palette import HIGHLIGHT_LINE, pricing_colour, step_part_colour, vendor_colour

# Every figure's margins: room for the title bar, none wasted at the sides.
MARGIN = dict(l=10, r=10, t=30, b=10)


class FinishedFigure(go.Figure):
    """A figure left as it is once drawn, which a page may keep and draw again on later reruns. Its dict
    form is worked out on its first draw and handed out again after: st.plotly_chart converts a figure
    on every call, even an unchanged one (to_dict copies it and walks every value, the theme's template
    included, about 2 ms a chart). What is sent, and so the chart and its element id, stay the same."""

    _sent: dict | None = None

    def to_dict(self) -> dict:
        if self._sent is None:
            self._sent = json.loads(plotly.io.to_json(super().to_dict(), validate=False))
        # new trace dicts: plotly.io.to_json drops each trace's "uid" from the dict it is handed
        return {"data": [dict(trace) for trace in self._sent["data"]], "layout": self._sent["layout"]}


def validation_figure(ids: list[str], measured: list[float], estimated: list[float]) -> go.Figure:
    figure = go.Figure()
    figure.add_bar(name="measured", x=ids, y=measured, hovertemplate="%{y:.2f} GiB")
    figure.add_bar(name="estimate", x=ids, y=estimated, hovertemplate="%{y:.2f} GiB")
    figure.update_layout(barmode="group", yaxis_title="GiB", height=360, margin=MARGIN)
    return figure


def _picked_markers(rows: pd.DataFrame, picked: Collection[str]) -> dict:
    """Marker lines that single out the GPUs the user picked (their names: _label_picked)."""
    is_picked = rows["name"].isin(list(picked))
    return dict(
        mode="markers",
        marker_line=dict(
            width=[HIGHLIGHT_LINE["width"] if chosen else 0 for chosen in is_picked], color=HIGHLIGHT_LINE["color"]
        ),
    )


def _label_picked(figure: go.Figure, table: pd.DataFrame, x: str, y: str, picked: Collection[str]) -> None:
    """Each picked GPU's name in a box joined to its point by an arrow, the boxes staggered upwards
    so that neighbours' names and points stay readable, and never cut at the plot's edge (a name
    written on the point itself covered its neighbours and was cut: "H100-SXM5-80GI")."""
    log_x, log_y = (getattr(figure.layout, name).type == "log" for name in ("xaxis", "yaxis"))
    chosen = table[table["name"].isin(list(picked))].dropna(subset=[x, y]).sort_values(x)
    for order, (_, row) in enumerate(chosen.iterrows()):
        figure.add_annotation(
            x=math.log10(row[x]) if log_x else row[x],
            y=math.log10(row[y]) if log_y else row[y],
            text=str(row["name"]),
            showarrow=True,
            arrowhead=0,
            ax=0,
            ay=-30 - 18 * (order % 3),  # staggered: three names side by side do not sit on one line
            bgcolor="rgba(255,255,255,0.9)",
            bordercolor=HIGHLIGHT_LINE["color"],
            borderwidth=1,
            font_size=11,
        )


def memory_bandwidth_figure(table: pd.DataFrame, picked: Collection[str] = ()) -> go.Figure:
    """Memory capacity against bandwidth, one marker per GPU, coloured by vendor; picked GPUs labelled."""
    figure = FinishedFigure()
    for vendor, rows in table.groupby("vendor", sort=True):
        figure.add_scatter(
            x=rows["memory_gb"],
            y=rows["memory_bandwidth_tbps"],
            name=str(vendor),
            text=rows["name"],
            marker=dict(
                size=11, color=vendor_colour(str(vendor)), symbol=["star" if d else "circle" for d in rows["detected"]]
            ),
            hovertemplate="%{text}<br>%{x:g} GB memory, %{y:.2f} TB/s bandwidth<extra></extra>",
            **_picked_markers(rows, picked),
        )
    figure.update_layout(xaxis_title="Memory (GB)", yaxis_title="Bandwidth (TB/s)", height=420, margin=MARGIN)
    _label_picked(figure, table, "memory_gb", "memory_bandwidth_tbps", picked)
    return figure


def tflops_price_figure(
    table: pd.DataFrame, tflops_column: str, format_label: str, picked: Collection[str] = ()
) -> go.Figure:
    """Dense TFLOPS of the workload's matmul format against the price, where both are known."""
    priced = table.dropna(subset=["price_usd", tflops_column])
    figure = FinishedFigure()
    for vendor, rows in priced.groupby("vendor", sort=True):
        figure.add_scatter(
            x=rows["price_usd"],
            y=rows[tflops_column],
            name=str(vendor),
            text=rows["name"],
            customdata=rows[tflops_column] / rows["price_usd"] * 1000,
            marker=dict(size=11, color=vendor_colour(str(vendor))),
            hovertemplate="%{text}<br>$%{x:,.0f}: %{y:g} TFLOPS (%{customdata:.1f} per $1000)<extra></extra>",
            **_picked_markers(rows, picked),
        )
    figure.update_layout(
        xaxis=axis(priced["price_usd"], "Price per GPU (USD, list or street)", "usd"),
        yaxis=axis(priced[tflops_column], f"Dense {format_label} TFLOPS"),
        height=420,
        margin=MARGIN,
    )
    _label_picked(figure, priced, "price_usd", tflops_column, picked)
    return figure


def roofline_figure(points: list, intensity_flops_per_byte: float, format_label: str) -> go.Figure:
    """Each GPU's roofline min(peak, I x bandwidth) on log axes, and the workload's intensity."""
    low = min([1.0, intensity_flops_per_byte / 4] + [p.ridge_flops_per_byte / 8 for p in points])
    high = max([10_000.0, intensity_flops_per_byte * 4] + [p.ridge_flops_per_byte * 8 for p in points])
    figure = go.Figure()
    for point in points:
        xs = sorted({low, point.ridge_flops_per_byte, high})
        ys = [min(point.peak_tflops, x * point.bandwidth_tbps) for x in xs]
        figure.add_scatter(
            x=xs, y=ys, mode="lines", name=point.gpu, hovertemplate="%{x:.0f} FLOP/B: %{y:.0f} TFLOPS<extra></extra>"
        )
    figure.add_vline(
        x=intensity_flops_per_byte,
        line_dash="dash",
        annotation_text=f"workload {intensity_flops_per_byte:.0f} FLOP/B",
    )
    lowest_tflops = min(min(low * p.bandwidth_tbps, p.peak_tflops) for p in points) if points else 1.0
    highest_tflops = max((p.peak_tflops for p in points), default=1000.0)
    figure.update_layout(
        xaxis=axis([low, high], "Arithmetic intensity (FLOP per byte)"),
        yaxis=axis([lowest_tflops, highest_tflops], f"Attainable {format_label} TFLOPS"),
        height=420,
        margin=MARGIN,
    )
    return figure


def time_cost_figure(rows: pd.DataFrame) -> go.Figure:
    """Hours against USD for every option, on demand and spot, with each Pareto front as a line."""
    figure = go.Figure()
    for pricing, group in rows.groupby("pricing", sort=True):
        label = group["gpu"] + " · " + group["provider"] + " " + group["instance"]
        figure.add_scatter(
            x=group["hours"],
            y=group["usd"],
            mode="markers",
            name=str(pricing),
            text=label,
            marker=dict(size=8, opacity=0.6, color=pricing_colour(str(pricing))),
            hovertemplate="%{text}<br>%{x:.1f} h, $%{y:,.0f}<extra></extra>",
        )
        front = group[group["pareto"]].sort_values("hours")
        figure.add_scatter(
            x=front["hours"],
            y=front["usd"],
            mode="lines+markers",
            name=f"Pareto front ({pricing})",
            text=front["gpu"] + " · " + front["provider"],
            line=dict(dash="dot", color=pricing_colour(str(pricing))),
            hovertemplate="%{text}<br>%{x:.1f} h, $%{y:,.0f}<extra></extra>",
        )
    hours_usd_layout(figure, height=460)
    return figure


def hours_usd_layout(figure: go.Figure, height: int) -> None:
    """Axes of run hours against run cost for the points drawn, as the Time and cost and Plan pages
    draw them: log with $10, $100, $1k and 1 h, 10 h ticks, or linear when the points span little."""
    hours = [float(x) for trace in figure.data if trace.x is not None for x in trace.x if isinstance(x, int | float)]
    usd = [float(y) for trace in figure.data if trace.y is not None for y in trace.y if isinstance(y, int | float)]
    figure.update_layout(
        xaxis=axis(hours, "Hours (wall clock)", "hours"),
        yaxis=axis(usd, "USD for the run", "usd"),
        height=height,
        margin=MARGIN,
    )


def throughput_ratio_figure(ids: list[str], ratios: list[float], unit: str = "tokens/s") -> go.Figure:
    """Estimate / measured throughput (`unit`) per GPU per published run, with the +-20% band."""
    figure = go.Figure()
    hover = f"%{{x}}: estimate %{{y:.2f}}x the measured {unit}<extra></extra>"
    figure.add_bar(x=ids, y=ratios, name="estimate / measured", hovertemplate=hover)
    figure.add_hrect(y0=0.8, y1=1.2, fillcolor="green", opacity=0.1, line_width=0)
    figure.add_hline(y=1.0, line_dash="dash")
    figure.update_layout(yaxis_title="estimate / measured", height=380, margin=MARGIN)
    return figure


def step_breakdown_figure(compute_s: dict[str, float], exposed_s: dict[str, float], bubble_s: float) -> go.Figure:
    """One stacked bar of the step: compute by op class, exposed traffic by dimension, the bubble."""
    figure = go.Figure()
    parts = {
        **compute_s,
        **{f"{dim} traffic (exposed)": s for dim, s in exposed_s.items()},
        "pipeline bubble": bubble_s,
    }
    for name, seconds in parts.items():
        if seconds > 0:
            figure.add_bar(
                name=name,
                x=["step"],
                y=[seconds],
                marker_color=step_part_colour(name),
                hovertemplate=f"{name}: %{{y:.4f}} s<extra></extra>",
            )
    figure.update_layout(barmode="stack", yaxis_title="seconds per step", height=380, margin=MARGIN)
    return figure


def scaling_figure(gpus: list[int], tokens_per_s_per_gpu: list[float], hours: list[float]) -> go.Figure:
    """Tokens per second per GPU and hours for the run against the number of GPUs."""
    figure = go.Figure()
    figure.add_scatter(
        x=gpus, y=tokens_per_s_per_gpu, name="tokens/s per GPU", mode="lines+markers",
        hovertemplate="%{x} GPUs: %{y:,.0f} tokens/s per GPU<extra></extra>",
    )  # fmt: skip
    figure.add_scatter(
        x=gpus, y=hours, name="hours", mode="lines+markers", yaxis="y2",
        hovertemplate="%{x} GPUs: %{y:,.1f} h<extra></extra>",
    )  # fmt: skip
    figure.update_layout(
        xaxis=decade_ticks(axis(gpus, "GPUs")) | dict(tickangle=0),
        yaxis=axis(tokens_per_s_per_gpu, "tokens/s per GPU"),
        yaxis2=axis(hours, "hours", "hours") | dict(overlaying="y", side="right"),
        height=400,
        # room above for the top tick's label ("50 h" was cut); the legend below the chart, where at 800 px
        # it covered the right axis
        margin=MARGIN | dict(t=40),
        legend=dict(orientation="h", yanchor="top", y=-0.25),
    )
    return figure


def decade_ticks(axis_dict: dict) -> dict:
    """A log axis labelled at whole decades only (1, 10, 100, 1k): in half a narrow page ten
    1-2-5 labels were turned on end."""
    if axis_dict.get("type") != "log":
        return axis_dict
    kept = [(value, text) for value, text in zip(axis_dict["tickvals"], axis_dict["ticktext"], strict=True)
            if math.log10(value).is_integer()]  # fmt: skip
    if len(kept) < 2:
        return axis_dict
    values, texts = zip(*kept, strict=True)
    return axis_dict | dict(tickvals=list(values), ticktext=list(texts))


def device_precision_figure(
    labels: list[str], hours_per_epoch: list[float], usd_per_epoch: list[float | None]
) -> go.Figure:
    """Hours per epoch (bars, left axis) and cost per epoch (markers, right axis) per device and
    precision; a row with no price has no marker."""
    figure = go.Figure()
    figure.add_bar(x=labels, y=hours_per_epoch, name="hours per epoch",
                   hovertemplate="%{x}: %{y:.2f} h per epoch<extra></extra>")  # fmt: skip
    figure.add_scatter(x=labels, y=usd_per_epoch, name="USD per epoch", mode="markers", yaxis="y2", marker_size=12,
                       hovertemplate="%{x}: $%{y:.2f} per epoch<extra></extra>")  # fmt: skip
    figure.update_layout(
        yaxis=axis(hours_per_epoch, "hours per epoch (h)", "hours"),
        yaxis2=axis(usd_per_epoch, "cost per epoch (USD)", "usd") | dict(overlaying="y", side="right"),
        height=380,
        margin=MARGIN,
        legend={"orientation": "h", "y": -0.25},
    )
    return figure
