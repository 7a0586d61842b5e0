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
from calculators.timing.serving import ServingRequest, estimate_serving_speed, serving_assumptions, serving_speeds
from ui import state
from ui.charts import MARGIN
from ui.layout import wrapping_row
from ui.messages import in_words


def throughput_latency_figure(speeds: list) -> go.Figure:
    """Output tokens/s per GPU and time per output token against the concurrency."""
    concurrency = [speed.concurrency for speed in speeds]
    figure = go.Figure()
    figure.add_scatter(
        x=concurrency,
        y=[speed.output_tokens_per_s_per_gpu for speed in speeds],
        name="output tokens/s per GPU",
        mode="lines+markers",
        hovertemplate="concurrency %{x}: %{y:,.0f} tokens/s per GPU<extra></extra>",
    )
    figure.add_scatter(
        x=concurrency,
        y=[speed.tpot_s * 1e3 for speed in speeds],
        name="time per output token (ms)",
        mode="lines+markers",
        yaxis="y2",
        hovertemplate="concurrency %{x}: %{y:,.1f} ms per token<extra></extra>",
    )
    figure.update_layout(
        xaxis=dict(title="concurrent sequences", type="log"),
        yaxis=dict(title="output tokens/s per GPU"),
        yaxis2=dict(title="time per output token (ms)", overlaying="y", side="right"),
        legend=dict(orientation="h", y=-0.25),
        height=400,
        margin=MARGIN,
    )
    return figure


def _gpu(name: str, catalogue: list[GpuSpec]) -> GpuSpec | None:
    try:
        return find_gpu(name, catalogue)
    except KeyError:
        return None


def serve_cost_section(workload, catalogue: list[GpuSpec]) -> None:
    """The Serve mode's answers on the Time and cost page."""
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
    gpu = _gpu(workload.gpu_name, catalogue)
    if gpu is None:
        st.info(f"{workload.gpu_name} has no rates in the GPU catalogue: pick a catalogue GPU for its speed.")
    else:
        _speed_on(spec, settings, gpu, request)
    _cost_table(spec, settings, request, catalogue)


def _speed_on(spec, settings, gpu: GpuSpec, request: ServingRequest) -> None:
    try:
        speed = estimate_serving_speed(spec, settings, gpu, request)
        curve = serving_speeds(spec, settings, gpu, request.model_copy(update={"concurrency": 0}))
    except ValueError as error:
        st.error(in_words(error))
        return
    st.subheader(f"On {settings.tensor_parallel} x {gpu.name}")
    row = wrapping_row()
    row.metric("Output tokens/s per GPU", f"{speed.output_tokens_per_s_per_gpu:,.0f}", width="content")
    row.metric("Output tokens/s per sequence", f"{speed.output_tokens_per_s_per_sequence:,.1f}", width="content")
    row.metric("Time to first token (ms)", f"{speed.ttft_s * 1e3:,.0f}", width="content")
    row.metric("Time per output token (ms)", f"{speed.tpot_s * 1e3:,.1f}", width="content")
    row.metric("Concurrent sequences", f"{speed.concurrency:,} of {speed.max_concurrency:,}", width="content")
    row.metric("Decode step bound by", speed.bound, help=f"step {speed.decode_step_s * 1e3:.2f} ms", width="content")
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
    frame = pd.DataFrame(
        [
            {
                "GPU": o.gpu,
                "provider": o.provider,
                "instance": o.instance_type,
                "pricing": o.pricing,
                "GPUs per instance": o.gpus_per_instance,
                "GPUs per replica": o.tensor_parallel,
                "replicas per instance": o.replicas_per_instance,
                "USD per hour (one instance)": round(o.usd_per_hour, 2),
                "USD per million output tokens": round(o.usd_per_million_output_tokens, 4),
                "USD per million input tokens": round(o.usd_per_million_input_tokens, 4),
                "concurrent sequences": o.concurrency,
                "time per output token (ms)": round(o.tpot_s * 1e3, 1),
            }
            for o in served
        ]
    )
    if served:
        st.dataframe(frame, hide_index=True, width="stretch")
        st.download_button("Download the table (CSV)", csv_bytes(frame), "serving_cost.csv", "text/csv")
    else:
        st.info("No priced GPU serves these settings: use more tensor-parallel GPUs or smaller weights.")
    # one line per GPU and reason: a reason about one instance's size names that instance
    left_out = list(dict.fromkeys((o.gpu, o.excluded_reason) for o in options if o.excluded_reason is not None))
    if left_out:
        with st.expander(f"Left out ({len(left_out)})"):
            st.markdown("\n".join(f"- {name}: {reason}" for name, reason in left_out))
