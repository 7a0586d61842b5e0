"""The Time and cost page's step breakdown and scaling charts for the chosen GPU."""

from __future__ import annotations

import streamlit as st

from calculators.cost.prices import CloudPrice
from calculators.hardware.catalogue import GpuSpec
from calculators.models.spec import ModelSpec
from calculators.timing.estimate import TimeEstimate, scaling_points
from calculators.timing.settings import TimeSettings
from calculators.units import counted
from calculators.workload.training import TrainingSettings
from ui.charts import scaling_figure, step_breakdown_figure
from ui.cost_table import escape_dollars
from ui.memo import json_key, remembered


def _usd_per_gpu_hour(gpu: GpuSpec, prices: list[CloudPrice]) -> float | None:
    """The cheapest on-demand price of one GPU-hour of `gpu` among the price rows."""
    rates = [price.on_demand_usd_per_hour / price.gpu_count for price in prices if price.gpu == gpu.name]
    return min(rates, default=None)


def step_view(
    spec: ModelSpec,
    settings: TrainingSettings,
    gpu: GpuSpec,
    time_settings: TimeSettings,
    estimate: TimeEstimate,
    prices: list[CloudPrice],
    fits: bool = True,
) -> None:
    """The step as a stacked bar, and tokens/s per GPU, hours and cost against the GPU count; a
    layout that does not fit gets no cost (a price of a setup that cannot run is no answer)."""
    # drawn only while open: closed, its two figures and ten time estimates cost every rerun nothing
    with st.expander("Step breakdown and scaling", key="cost_step_open", on_change="rerun") as section:
        if not section.open:
            return
        left, right = st.columns(2)
        # built again only when the step they draw changes (ten time estimates and two figures)
        asked = json_key(spec, settings, gpu, time_settings, estimate)
        breakdown = remembered(
            "step_breakdown_figure",
            asked,
            lambda: step_breakdown_figure(
                estimate.compute_by_class_s | {"compute lost to hidden traffic": estimate.overlap_contention_s},
                estimate.comm_exposed_by_dimension_s,
                estimate.bubble_s,
            ),
        )
        left.plotly_chart(breakdown, width="stretch")
        points = remembered("step_scaling_points", asked, lambda: scaling_points(spec, settings, gpu, time_settings))
        scaling = remembered(
            "step_scaling_figure",
            asked,
            lambda: scaling_figure(
                [point.gpus for point in points],
                [point.tokens_per_s_per_gpu for point in points],
                [point.hours_total for point in points],
            ),
        )
        right.plotly_chart(scaling, width="stretch")
        rate = _usd_per_gpu_hour(gpu, prices)
        if rate is not None and fits:
            costs = ", ".join(
                f"{counted(point.gpus, 'GPU')} ${point.hours_total * point.gpus * rate:,.0f}" for point in points
            )
            st.caption(escape_dollars(f"Cost at the cheapest on-demand GPU-hour (${rate:.2f}): {costs}"))
