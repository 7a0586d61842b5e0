"""The Plan page's pieces: the request from the page's settings, the search with a progress bar,
the front as a chart and a table, and opening a plan on the other pages."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from pydantic import ValidationError

from calculators.cost.options import OwnershipSettings
from calculators.interface.settings import all_settings
from calculators.plan.figures import hours_text, usd_text
from calculators.plan.search import Plan, PlanRequest, PlanResult, layout_update, plan_run
from calculators.timing.settings import TimeSettings
from calculators.validation.error_band import time_band_for
from ui import state
from ui.charts import hours_usd_layout
from ui.cost_inputs import kept_pause_hours, kept_time_settings
from ui.messages import in_words

RESULT_KEY = "_plan_result"


def plan_request(mode: str, seq_len: int) -> tuple[PlanRequest | None, TimeSettings | None, str | None]:
    """The request and the run's time settings from the kept settings (the dataset, epochs, step
    assumptions, checkpoint and restart times are the Time and cost page's, the same values), or
    the reason they are not valid."""
    time_settings, problem = kept_time_settings()
    if time_settings is None:
        return None, None, problem
    providers = state.value("plan_providers")
    checkpoint_write_h, restart_h = kept_pause_hours()
    try:
        request = PlanRequest(
            mode=mode,
            dataset_tokens=time_settings.tokens_per_epoch(seq_len),
            epochs=time_settings.epochs,
            global_batch_tokens=state.value("plan_global_batch") or None,
            deadline_hours=state.value("plan_deadline_hours") or None,
            budget_usd=state.value("plan_budget_usd") or None,
            max_gpus=state.value("plan_max_gpus"),
            providers=tuple(providers) if providers else None,
            allow_spot=state.value("plan_spot"),
            include_owned=state.value("plan_owned"),
            rank_on="pessimistic" if state.value("plan_pessimistic") else "estimate",
            checkpoint_write_h=checkpoint_write_h,
            restart_h=restart_h,
        )
    except ValidationError as error:
        return None, None, in_words(error)
    return request, time_settings, None


def calibration_caption(calibrated: dict[str, float]) -> str | None:
    """The line saying which calibrated matmul fractions the search applies, or None without any."""
    if not calibrated:
        return None
    applied = ", ".join(f"{gpu} {value:.0%}" for gpu, value in sorted(calibrated.items()))
    return (
        f"Calibrated matmul fraction applied: {applied} of dense peak (measured here) replaces mamf-finder's "
        "in that GPU's GEMMs in the search."
    )


def run_search(
    spec,
    settings,
    request: PlanRequest,
    catalogue,
    prices,
    time_settings: TimeSettings,
    ownership: OwnershipSettings | None,
    measured_matmul_fraction: dict[str, float] | None = None,
) -> PlanResult:
    """The search with a progress bar that is removed when it ends; `time_settings` and `ownership` are
    the Time and cost page's (kept settings), `measured_matmul_fraction` (GPU name -> fraction, from
    the active calibration) replaces mamf-finder's in those GPUs' GEMMs."""
    bar = st.progress(0.0, text="Searching GPUs, counts and layouts")

    def report(fraction: float, gpu: str) -> None:
        bar.progress(min(fraction, 1.0), text=f"Searching {gpu}")

    try:
        return plan_run(
            spec,
            settings,
            request,
            catalogue,
            prices,
            time_settings=time_settings,
            ownership=ownership,
            progress=report,
            measured_matmul_fraction=measured_matmul_fraction,
            time_band=time_band_for,
        )
    finally:
        bar.empty()


def plan_label(number: int, plan: Plan) -> str:
    return (
        f"{number}. {plan.gpus} x {plan.gpu} · {plan.provider} {plan.pricing} · {hours_text(plan.hours)} · "
        f"{usd_text(plan.usd)}"
    )


def front_figure(plans: list[Plan], chosen: Plan | None) -> go.Figure:
    """Hours against USD of the front, the chosen plan marked."""
    figure = go.Figure()
    figure.add_scatter(
        x=[plan.hours for plan in plans],
        y=[plan.usd for plan in plans],
        mode="lines+markers",
        name="time-cost front",
        text=[plan_label(number, plan) for number, plan in enumerate(plans, start=1)],
        hovertemplate="%{text}<extra></extra>",
        line=dict(dash="dot"),
    )
    if chosen is not None:
        figure.add_scatter(
            x=[chosen.hours], y=[chosen.usd], mode="markers", name="chosen", marker=dict(size=16, symbol="star")
        )
    hours_usd_layout(figure, height=420)
    return figure


def plan_values(plan: Plan, gpu_names: set[str]) -> dict[str, object]:
    """The kept settings (by key) that put a plan on the other pages: its layout and GPU (the
    dataset, epochs and step assumptions are already the same kept values on every page)."""
    # the layout's settings keep their TrainingSettings names as their keys (calculators.interface.settings)
    values: dict[str, object] = layout_update(plan)
    if plan.gpu in gpu_names:
        values["gpu"] = plan.gpu
    return values


def apply_plan(plan: Plan, gpu_names: set[str]) -> None:
    """Make the plan's settings the user's (the sidebar and the other pages read them)."""
    for key, value in plan_values(plan, gpu_names).items():
        state.set_value(key, value)


def share_query(plan: Plan, gpu_names: set[str], current: dict[str, str]) -> str:
    """The link's query: the current one with the plan's settings, keys as calculators.interface.settings declares."""
    declared = {item.key: item for item in state.known_settings()} | {item.key: item for item in all_settings()}
    query = dict(current)
    for key, value in plan_values(plan, gpu_names).items():
        item = declared[key]
        query[item.query] = item.format_shown(value)
    return urlencode(query)


def price_basis(plan: Plan) -> str:
    """Which price and hours a plan's figures are, in words: spot's expected hours include
    interruptions, restarts and lost work, so they are longer than the same plan on demand."""
    if plan.pricing == "spot":
        return (
            "on spot: expected hours with interruptions, restarts and lost work; "
            f"{hours_text(plan.hours_on_demand)} on demand"
        )
    if plan.pricing == "owned":
        return "owned GPUs: amortised purchase and power"
    return "on demand, no interruptions"


def cheapest_fitting_layout(
    mode: str,
    spec,
    settings,
    gpu,
    catalogue,
    prices,
    time_settings: TimeSettings,
    pause_hours: tuple[float, float],
    measured_matmul_fraction: dict[str, float] | None = None,
) -> Plan | None:
    """The cheapest layout on `gpu` that fits, on demand, found by the planner's own search
    (calculators.plan.search.plan_run over that one GPU, up to the Plan page's most GPUs and its
    global batch); None when none fits or nothing prices it."""
    checkpoint_write_h, restart_h = pause_hours
    try:
        request = PlanRequest(
            mode=mode,
            dataset_tokens=time_settings.tokens_per_epoch(settings.seq_len),
            epochs=time_settings.epochs,
            global_batch_tokens=state.value("plan_global_batch") or None,
            max_gpus=state.value("plan_max_gpus"),
            allow_spot=False,
            gpus=(gpu.name,),
            checkpoint_write_h=checkpoint_write_h,
            restart_h=restart_h,
        )
        result = plan_run(
            spec, settings, request, catalogue, prices, time_settings, measured_matmul_fraction=measured_matmul_fraction
        )
    except ValueError:  # a global batch shorter than a sequence: the Plan page says so in words
        return None
    return result.cheapest


def batch_text(plan: Plan) -> str:
    """The batch in the one wording every page uses: micro-batch x accumulation x data-parallel =
    global batch, in sequences."""
    sequences = plan.micro_batch * plan.grad_accum * plan.data_parallel
    return (
        f"micro-batch {plan.micro_batch} x {plan.grad_accum} accumulation x {plan.data_parallel} data-parallel "
        f"= {sequences:,} sequences per step"
    )


def layout_text(plan: Plan) -> str:
    """A plan's layout and figures in one line, with units."""
    return (
        f"**{plan.gpus} x {plan.gpu}** (data {plan.data_parallel} x tensor {plan.tensor_parallel} x pipeline "
        f"{plan.pipeline_parallel}), ZeRO-{plan.zero}, checkpointing {plan.checkpointing}, {batch_text(plan)}"
        + (", optimizer on the CPU" if plan.offload_optimizer else "")
        + (", parameters on the CPU" if plan.offload_parameters else "")
        + f": peak {plan.peak_gib:,.1f} GiB of {plan.gpu_memory_gib:,.1f} GiB per GPU, "
        f"{hours_text(plan.hours)} and {usd_text(plan.usd)} on demand on {plan.provider} {plan.instance_type}"
    )


# what a reader compares first, so a 1400 px window shows the layout beside the hours and dollars;
# the rest scroll (the downloads keep the exports' own order)
PLAN_LEADING_COLUMNS = [
    "plan", "gpus", "gpu", "pricing", "hours", "usd", "tp x pp", "ZeRO", "micro-batch x accumulation", "checkpointing",
]  # fmt: skip


def plans_display(table):
    """The Plan page's table for reading: the key columns first, and the dollar columns that do
    not apply to a plan (spot's expected cost of an on-demand plan) as "-" rather than "None"."""
    table = table.copy()
    for column, absent in (("usd spot", "- (not spot)"), ("usd on demand", "- (owned)")):
        if column in table:
            table[column] = [absent if value is None or value != value else usd_text(value) for value in table[column]]
    # text columns only: a number column keeps its type
    for column in [name for name in table.columns if not pd.api.types.is_numeric_dtype(table[name])]:
        table[column] = table[column].where(table[column].notna(), "-")
    leading = [column for column in PLAN_LEADING_COLUMNS if column in table]
    return table[leading + [column for column in table.columns if column not in leading]]
