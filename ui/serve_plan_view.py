"""Plan a run in the Serve mode: the cheapest GPU x tensor parallel x weight precision x replicas that
serves a request rate within TTFT and TPOT targets, the front of cost against latency as a chart and
a table, and, when no layout meets the targets, the best latency reachable and its cost.

Every figure comes from calculators.plan.serving.plan_serving; this module only draws it."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from pydantic import ValidationError

from calculators.cost.exports import csv_bytes
from calculators.hardware.catalogue import GpuSpec
from calculators.plan.serving import ServingPlan, ServingPlanRequest, ServingPlanResult, plan_serving, rented_words
from calculators.timing.serving import LatencyLimits, ServingRequest, request_beyond_context
from ui import state
from ui.axes import axis
from ui.charts import MARGIN
from ui.cost_table import escape_dollars
from ui.layout import EMPTY_CELL, wrapping_row
from ui.memo import json_key, remembered
from ui.messages import in_words
from ui.palette import HIGHLIGHT_LINE, OTHER_COLOUR, vendor_colour


def serving_plan_request() -> tuple[ServingPlanRequest | None, str | None]:
    """The request from the kept settings (the providers and spot switch are the training plan's), or
    the reason it is not valid, in words."""
    chosen = state.value("plan_providers")
    try:
        request = ServingPlanRequest(
            requests_per_s=state.value("serve_requests_per_s"),
            input_len=state.value("serve_input_len"),
            output_len=state.value("serve_output_len"),
            limits=LatencyLimits(ttft_s=state.value("serve_ttft_ms"), tpot_s=state.value("serve_tpot_ms")),
            providers=tuple(chosen) if chosen else None,
            allow_spot=state.value("plan_spot"),
        )
    except ValidationError as error:
        return None, in_words(error)
    return request, None


def layout_words(plan: ServingPlan) -> str:
    """'2 replicas of 4 x H100-SXM5-80GB (tensor parallel 4, fp8 weights)': what to rent, in words."""
    replicas = f"{plan.replicas} replica{'s' if plan.replicas != 1 else ''}"
    return (
        f"{replicas} of {plan.tensor_parallel} x {plan.gpu} (tensor parallel {plan.tensor_parallel}, "
        f"{plan.weight_precision} weights)"
    )


def spare_words(plan: ServingPlan) -> str:
    """What the rented instances hold beyond the replicas asked for, or '' when nothing."""
    spare = plan.replicas_held - plan.replicas
    if spare <= 0:
        return ""
    return (
        f" (their spare GPUs hold {spare:,} more replica{'s' if spare != 1 else ''}; the price per million tokens "
        "counts every replica the instances hold)"
    )


def plan_words(plan: ServingPlan) -> str:
    """A plan's layout, the whole instances rented and its figures, with units."""
    return (
        f"**{layout_words(plan)}** on {rented_words(plan)}, {plan.provider} {plan.pricing}{spare_words(plan)}: "
        f"${plan.usd_per_hour:,.2f} per hour (${plan.usd_per_month:,.0f} per month), "
        f"${plan.usd_per_million_output_tokens:,.3f} per million output tokens; "
        f"time to first token {plan.ttft_s * 1e3:,.0f} ms, time per output token {plan.tpot_s * 1e3:,.1f} ms, "
        f"{plan.concurrency:,} concurrent sequences per replica"
    )


def front_figure(plans: list[ServingPlan], vendors: dict[str, str]) -> go.Figure:
    """USD per hour against time per output token of the front, a colour per GPU vendor, the
    cheapest plan (the first) marked."""
    figure = go.Figure()
    tpot_ms = [plan.tpot_s * 1e3 for plan in plans]
    usd_per_hour = [plan.usd_per_hour for plan in plans]
    figure.add_scatter(
        x=tpot_ms, y=usd_per_hour, mode="lines", name="cost-latency front", line=dict(dash="dot", color=OTHER_COLOUR),
        hoverinfo="skip",
    )  # fmt: skip
    numbered = list(enumerate(plans, start=1))
    for vendor in dict.fromkeys(vendors.get(plan.gpu, "other") for plan in plans):
        mine = [(number, plan) for number, plan in numbered if vendors.get(plan.gpu, "other") == vendor]
        figure.add_scatter(
            x=[plan.tpot_s * 1e3 for _, plan in mine],
            y=[plan.usd_per_hour for _, plan in mine],
            mode="markers",
            name=vendor,
            marker=dict(size=11, color=vendor_colour(vendor)),
            text=[f"{number}. {layout_words(plan)}, {plan.provider} {plan.pricing}" for number, plan in mine],
            customdata=[[plan.ttft_s * 1e3, plan.usd_per_million_output_tokens] for _, plan in mine],
            hovertemplate="%{text}<br>time to first token %{customdata[0]:,.0f} ms, per output token %{x:,.1f} ms"
            "<br>$%{y:,.2f} per hour, $%{customdata[1]:,.3f} per million output tokens<extra></extra>",
        )
    cheapest = plans[0]
    figure.add_scatter(
        x=[cheapest.tpot_s * 1e3], y=[cheapest.usd_per_hour], mode="markers", name="cheapest",
        marker=dict(size=18, symbol="star", color="rgba(0,0,0,0)", line=HIGHLIGHT_LINE), hoverinfo="skip",
    )  # fmt: skip
    figure.update_layout(
        xaxis=axis(tpot_ms, "Time per output token (ms)", "ms"),
        yaxis=axis(usd_per_hour, "USD per hour, all replicas", "usd"),
        legend=dict(orientation="h", y=-0.2),
        height=420,
        margin=MARGIN,
    )
    return figure


def plans_table(plans: list[ServingPlan]) -> pd.DataFrame:
    """The front for reading and for the CSV: labels with units, cheapest first; what a reader compares
    first leads, so a narrow window shows it without scrolling."""
    return pd.DataFrame(
        [
            {
                "plan": number,
                "GPU": plan.gpu,
                "GPUs rented": plan.gpus,
                "USD per hour": round(plan.usd_per_hour, 2),
                "USD per million output tokens": round(plan.usd_per_million_output_tokens, 4),
                "time to first token (ms)": round(plan.ttft_s * 1e3, 1),
                "time per output token (ms)": round(plan.tpot_s * 1e3, 2),
                "weights": plan.weight_precision,
                "replicas": plan.replicas,
                "GPUs per replica (tensor parallel)": plan.tensor_parallel,
                "provider": plan.provider,
                "instance": plan.instance_type,
                "instances": plan.instances,
                "GPUs per instance": plan.gpus_per_instance,
                "replicas the instances hold": plan.replicas_held,
                "pricing": plan.pricing,
                "USD per month": round(plan.usd_per_month),
                "USD per million input tokens": round(plan.usd_per_million_input_tokens, 4),
                "concurrent sequences per replica": plan.concurrency,
                "output tokens/s per GPU": round(plan.output_tokens_per_s_per_gpu),
            }
            for number, plan in enumerate(plans, start=1)
        ]
    )


def _inputs(providers: list[str]) -> None:
    """The requests, the targets, the providers and spot: kept settings, carried by a shared link."""
    columns = st.columns(3)
    state.number(columns[0], "serve_requests_per_s")
    state.number(columns[1], "serve_input_len", step=256)
    state.number(columns[2], "serve_output_len", step=256)
    columns = st.columns(2)
    state.number(columns[0], "serve_ttft_ms")
    state.number(columns[1], "serve_tpot_ms")
    state.multiselect(st, "plan_providers", providers)
    state.checkbox(st, "plan_spot")


def _headline(plan: ServingPlan) -> None:
    st.success(escape_dollars(f"Cheapest within the targets: {plan_words(plan)}."))
    row = wrapping_row()
    row.metric(
        "USD per hour", f"${plan.usd_per_hour:,.2f}", help=f"${plan.usd_per_month:,.0f} per month", width="content"
    )
    row.metric("USD per million output tokens", f"${plan.usd_per_million_output_tokens:,.3f}", width="content")
    row.metric("GPUs rented", f"{plan.gpus:,}", help=f"{layout_words(plan)} on {rented_words(plan)}", width="content")
    row.metric("Time to first token (ms)", f"{plan.ttft_s * 1e3:,.0f}", width="content")
    row.metric("Time per output token (ms)", f"{plan.tpot_s * 1e3:,.1f}", width="content")


def _unmet(result: ServingPlanResult) -> None:
    """No layout meets the targets: the nearest latency reachable and its cost, in words."""
    for problem in result.problems:
        st.warning(escape_dollars(problem[:1].upper() + problem[1:] + "."))
    best = result.best_latency
    if best is not None:
        st.markdown(
            escape_dollars(
                f"The nearest layout in full: {plan_words(best)}. Loosen the targets to see plans within them."
            )
        )


def serve_plan_section(workload, catalogue: list[GpuSpec], prices: list) -> None:
    """The Serve mode's answers on the Plan page."""
    spec, settings = workload.spec, workload.serving
    st.caption(
        "The cheapest way to serve the sidebar's model: every priced GPU, tensor-parallel size (1 to 8), weight "
        "precision (bf16, fp8, int4, fp4 where the GPU runs it) and concurrency is searched; the replicas that "
        "carry the request rate are packed into whole instances, each replica inside one instance, of the offer "
        "that bills least for them. The KV cache, prefill chunk and context (the longest a request may be, "
        f"{settings.context_len:,} tokens) come from the sidebar."
    )
    _inputs(sorted({price.provider for price in prices}))  # unknown providers from a link are named and dropped
    request, problem = serving_plan_request()
    if problem:
        st.error(f"Check the plan's settings: {problem}")
        return
    # the same bound on a request's length as Time and cost: the sidebar's context, as Memory sizes it
    lengths = ServingRequest(input_len=request.input_len, output_len=request.output_len)
    beyond = request_beyond_context(spec, settings, lengths)
    if beyond:
        st.error(beyond[:1].upper() + beyond[1:] + ".")
        return
    asked = json_key(spec, settings, request, prices, catalogue)
    with st.spinner("Searching GPUs, tensor parallel, precisions and concurrencies"):
        result = remembered("serve_plan", asked, lambda: plan_serving(spec, settings, request, catalogue, prices))
    st.caption(
        f"{result.searched:,} configurations examined in {result.seconds:.2f} s; {len(result.plans)} plans on the "
        "front of cost against time per output token."
    )
    if result.cheapest is None:
        _unmet(result)
        _left_out(result)
        return
    _headline(result.cheapest)
    vendors = {gpu.name: gpu.vendor for gpu in catalogue}
    st.plotly_chart(front_figure(result.plans, vendors), width="stretch")
    st.caption(
        "Each point is a plan no other beats on both USD per hour and time per output token; the star is the cheapest."
    )
    table = plans_table(result.plans)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "USD per hour": st.column_config.NumberColumn(format="$%.2f"),
            "USD per month": st.column_config.NumberColumn(format="$%.0f"),
            "USD per million output tokens": st.column_config.NumberColumn(format="$%.3f"),
            "USD per million input tokens": st.column_config.NumberColumn(format="$%.4f"),
        },
        placeholder=EMPTY_CELL,
    )
    st.download_button(
        "Serving plans (CSV)", lambda: csv_bytes(table), "serving_plans.csv", "text/csv", on_click="ignore"
    )
    _left_out(result)


def _left_out(result: ServingPlanResult) -> None:
    """The weight precisions no single instance of a GPU holds: serving them takes pipeline parallel."""
    shown = [words for words in result.left_out if words not in result.problems]
    if shown:
        with st.expander(f"Left out: weights that need more than one node ({len(shown)})"):
            st.markdown("\n".join(f"- {words[:1].upper() + words[1:]}." for words in shown))
