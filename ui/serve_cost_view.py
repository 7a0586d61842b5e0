"""Time and cost in the Serve mode: throughput and latency against concurrency on the sidebar's GPU,
and the cost per million tokens on every priced GPU and provider."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from calculators.cost.exports import csv_bytes
from calculators.cost.prices import load_prices
from calculators.cost.serving import serving_cost_options
from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.memory.serving import max_concurrency
from calculators.timing.serving import (
    ServingRequest,
    estimate_serving_speed,
    request_beyond_context,
    serving_assumptions,
    serving_speeds,
)
from calculators.units import counted, rate_text
from ui import state
from ui.axes import axis
from ui.charts import MARGIN
from ui.layout import EMPTY_CELL, wrapping_row
from ui.messages import in_words


def throughput_latency_figure(speeds: list) -> go.Figure:
    """Output tokens/s per GPU and time per output token against the concurrency, each axis with
    readable ticks in its unit (ui.axes)."""
    concurrency = [speed.concurrency for speed in speeds]
    tokens_per_s = [speed.output_tokens_per_s_per_gpu for speed in speeds]
    tpot_ms = [speed.tpot_s * 1e3 for speed in speeds]
    figure = go.Figure()
    figure.add_scatter(
        x=concurrency,
        y=tokens_per_s,
        name="output tokens/s per GPU",
        mode="lines+markers",
        hovertemplate="%{x:,} sequences: %{y:,.0f} tokens/s per GPU<extra></extra>",
    )
    figure.add_scatter(
        x=concurrency,
        y=tpot_ms,
        name="time per output token (ms)",
        mode="lines+markers",
        yaxis="y2",
        hovertemplate="%{x:,} sequences: %{y:,.1f} ms per token<extra></extra>",
    )
    # each axis keeps its own ticks: aligned to the left axis' grid the right one reads 5.46, 13.05, ...
    right = axis(tpot_ms, "time per output token (ms)", "ms") | dict(overlaying="y", side="right", showgrid=False)
    figure.update_layout(
        xaxis=axis(concurrency, "concurrent sequences"),
        yaxis=axis(tokens_per_s, "output tokens/s per GPU"),
        yaxis2=right | ({} if "tickvals" in right else dict(tickmode="auto")),
        legend=dict(orientation="h", y=-0.25),
        height=400,
        margin=MARGIN,
    )
    return figure


# The bound in the Memory page's words ("memory bandwidth", not "bandwidth").
BOUND_WORDS = {"bandwidth": "memory bandwidth"}

# Short headers with their units; what a header leaves out is in its help.
COST_COLUMNS = {
    "USD per million output tokens": st.column_config.NumberColumn(format="$%.3f"),
    "USD per million input tokens": st.column_config.NumberColumn(format="$%.4f"),
    "USD per hour": st.column_config.NumberColumn(format="$%.2f", help="one whole instance, all its GPUs"),
    "ms per output token": st.column_config.NumberColumn(format="%.1f", help="time per output token (TPOT)"),
    "sequences per replica": st.column_config.NumberColumn(help="concurrent sequences on each replica"),
}


def _gpu(name: str, catalogue: list[GpuSpec]) -> GpuSpec | None:
    try:
        return find_gpu(name, catalogue)
    except KeyError:
        return None


def serve_cost_section(workload, catalogue: list[GpuSpec]) -> None:
    """The Serve mode's answers on the Time and cost page: the sidebar's weights, KV cache, tensor
    parallel, concurrency and GPU, with requests of the lengths asked here, each no longer than the
    sidebar's context (the longest sequence the Memory page sizes the KV cache for)."""
    spec, settings = workload.spec, workload.serving
    st.write(
        "Serving at the steady state of continuous batching: each decode step reads the weights once and every "
        "sequence's KV cache, and every output token also carries its share of new prompts (chunked prefill)."
    )
    col1, col2, col3 = st.columns(3)
    # the same kept lengths as the Plan page's Serve mode, carried by a shared link
    input_len = state.number(col1, "serve_input_len", step=256)
    output_len = state.number(col2, "serve_output_len", step=256)
    best = col3.checkbox(
        "Throughput-optimal concurrency",
        key="serve_best_concurrency",
        help="Instead of the sidebar's concurrent sequences: the concurrency that fits with the most tokens/s",
    )
    concurrency = 0 if best else settings.concurrent_sequences
    request = ServingRequest(input_len=input_len, output_len=output_len, concurrency=concurrency)
    beyond = request_beyond_context(spec, settings, request)
    if beyond:
        st.error(beyond[0].upper() + beyond[1:] + ".")
        return
    st.caption(
        f"Each request: input {input_len:,} + output {output_len:,} = {input_len + output_len:,} tokens, within the "
        f"sidebar's context of {settings.context_len:,} tokens per sequence (the longest a request may be)."
    )
    gpu = _gpu(workload.gpu_name, catalogue)
    if gpu is None:
        st.info(f"{workload.gpu_name} has no rates in the GPU catalogue: pick a catalogue GPU for its speed.")
    else:
        _speed_on(spec, settings, gpu, request, workload.gpu_memory_gib)
    _cost_table(spec, settings, request, catalogue)


def _speed_on(spec, settings, gpu: GpuSpec, request: ServingRequest, capacity_gib: float) -> None:
    try:
        speed = estimate_serving_speed(spec, settings, gpu, request)
        curve = serving_speeds(spec, settings, gpu, request.model_copy(update={"concurrency": 0}))
    except ValueError as error:
        st.error(in_words(error))
        return
    st.subheader(f"On {settings.tensor_parallel} x {gpu.name}")
    tokens = request.input_len + request.output_len
    mean_context = request.input_len + request.output_len / 2
    row = wrapping_row()
    row.metric("Output tokens/s per GPU", rate_text(speed.output_tokens_per_s_per_gpu), width="content")
    row.metric(
        "Output tokens/s per sequence",
        rate_text(speed.output_tokens_per_s_per_sequence),
        help=f"1 / time per output token: a decode step at the requests' mean context ({mean_context:,.0f} tokens) "
        "plus its share of new prompts and the kernel gaps. The Memory page's decode tokens/s is the bare step "
        f"at the full context ({settings.context_len:,} tokens).",
        width="content",
    )
    row.metric("Time to first token (ms)", f"{speed.ttft_s * 1e3:,.0f}", width="content")
    row.metric("Time per output token (ms)", f"{speed.tpot_s * 1e3:,.1f}", width="content")
    row.metric("Concurrent sequences", f"{speed.concurrency:,}", width="content")
    row.metric(
        "Decode step bound by",
        BOUND_WORDS.get(speed.bound, speed.bound),
        help=f"one decode step {speed.decode_step_s * 1e3:.2f} ms",
        width="content",
    )
    # the Memory page's "most sequences that fit" is at the full context; requests shorter than it fit more
    at_full_context = max_concurrency(spec, settings, capacity_gib)
    st.caption(
        f"Up to {counted(speed.max_concurrency, 'request')} of {tokens:,} tokens fit in the KV cache at once; "
        f"{at_full_context:,} at the full context of {settings.context_len:,} tokens (the Memory page's figure)."
    )
    st.plotly_chart(throughput_latency_figure(curve), width="stretch")
    with st.expander("Serving assumptions and sources"):
        st.markdown("\n".join(f"- {line}" for line in serving_assumptions(speed)))


def _cost_table(spec, settings, request: ServingRequest, catalogue: list[GpuSpec]) -> None:
    st.subheader("Cost per million tokens")
    st.caption(
        "Each instance is rented whole and runs as many replicas as it holds (each replica inside one "
        "instance); the price per million tokens counts the tokens of all of them. An instance of one GPU is the "
        "price of one GPU."
    )
    options = serving_cost_options(spec, settings, request, load_prices(), catalogue)
    served = [option for option in options if option.excluded_reason is None]
    # cheapest first (serving_cost_options); the answers first, the instance's make-up last, as at
    # 800 px the right-hand columns scroll out of view
    frame = pd.DataFrame(
        [
            {
                "GPU": o.gpu,
                "USD per million output tokens": round(o.usd_per_million_output_tokens, 4),
                "USD per million input tokens": round(o.usd_per_million_input_tokens, 4),
                "USD per hour": round(o.usd_per_hour, 2),
                "provider": o.provider,
                "pricing": o.pricing,
                "instance": o.instance_type,
                "ms per output token": round(o.tpot_s * 1e3, 1),
                "sequences per replica": o.concurrency,
                "GPUs per replica": o.tensor_parallel,
                "replicas per instance": o.replicas_per_instance,
                "GPUs per instance": o.gpus_per_instance,
            }
            for o in served
        ]
    )
    if served:
        st.dataframe(frame, hide_index=True, width="stretch", column_config=COST_COLUMNS, placeholder=EMPTY_CELL)
        st.download_button("Download the table (CSV)", csv_bytes(frame), "serving_cost.csv", "text/csv")
    else:
        st.info("No priced GPU serves these settings: use more tensor-parallel GPUs or smaller weights.")
    # one line per GPU and reason: a reason about one instance's size names that instance
    left_out = list(dict.fromkeys((o.gpu, o.excluded_reason) for o in options if o.excluded_reason is not None))
    if left_out:
        with st.expander(f"Left out ({len(left_out)})"):
            st.markdown("\n".join(f"- {name}: {reason}" for name, reason in left_out))
