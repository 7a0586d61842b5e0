"""The Memory page in the inference mode: weights, KV cache, concurrency and decode speed."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit import verdict
from calculators.memory.serving import (
    context_limit,
    decode_tokens_per_s,
    estimate_serving,
    max_concurrency,
    min_tensor_parallel,
)
from calculators.memory.serving_changes import serving_changes
from calculators.models.spec import ModelSpec
from calculators.units import counted, rate_text
from calculators.workload.serving import ServingSettings, context_beyond_training, serving_problem
from ui.layout import EMPTY_CELL, wrapping_row
from ui.memory_chart import MemoryChart, Segment, stacked_gib_chart
from ui.palette import SERVING_PART_COLOUR


def serving_breakdown_chart(parts_gib: dict[str, float], capacity_gib: float) -> MemoryChart:
    """One stacked bar of what a GPU holds while serving, in the memory chart's colours for the same things."""
    segments = [Segment("per GPU", name, gib) for name, gib in parts_gib.items()]
    return stacked_gib_chart(segments, SERVING_PART_COLOUR, capacity_gib, height_px=340, column_title="bar")


def show_serving(spec: ModelSpec, workload, gpu: GpuSpec | None) -> None:
    """Draw the serving answers for the workload's model and serving settings."""
    settings, capacity = workload.serving, workload.gpu_memory_gib
    problem = serving_problem(spec, settings)
    if problem:
        st.error(f"Serving settings: {problem}")
        return
    estimate = estimate_serving(spec, settings)
    result = verdict(estimate.total_gib, capacity)
    summary = (
        f"**{estimate.total_gib:.1f} GiB** per GPU for {counted(settings.concurrent_sequences, 'sequence')} of "
        f"{settings.context_len:,} tokens on **{workload.gpu_name}** ({capacity:g} GiB)"
    )
    if result == "fits":
        st.success(f"Fits: {summary}", icon=":material/check_circle:")
    elif result == "tight":
        st.warning(f"Tight fit (under 5% free): {summary}", icon=":material/warning:")
    else:
        st.error(f"Does not fit: {summary}", icon=":material/block:")
    beyond = context_beyond_training(spec, settings)
    if beyond:
        st.warning(beyond[0].upper() + beyond[1:] + ".", icon=":material/warning:")
    if result == "does not fit":
        _show_changes(spec, settings, capacity)
    else:
        st.page_link(
            "app_pages/cost.py", label="Throughput, latency and cost per million tokens", icon=":material/payments:"
        )
    # the serving plan searches GPUs, counts, tensor parallel and precisions, so it answers a step that
    # does not fit here too
    st.page_link("app_pages/plan.py", label="Cheapest way to serve it within latency targets", icon=":material/route:")

    row = wrapping_row()
    row.metric("KV cache per sequence", f"{estimate.kv_cache_per_sequence_gib:.3f} GiB", width="content")
    row.metric("Most sequences that fit", max_concurrency(spec, settings, capacity), width="content")
    longest, binds = context_limit(spec, settings, capacity)
    row.metric(
        f"Longest context ({binds})",
        f"{longest:,} tokens",
        help="The longest prompt + answer per sequence at this concurrency: limited by the GPU's memory, "
        "or by the positions the model was trained on (max_position_embeddings), whichever comes first.",
        width="content",
    )
    fewest = min_tensor_parallel(spec, settings, capacity)
    row.metric("Fewest GPUs (tensor parallel)", fewest if fewest else "over 8", width="content")
    if gpu is not None and result != "does not fit":
        speed = decode_tokens_per_s(spec, settings, gpu, settings.concurrent_sequences)
        row = wrapping_row()
        full = f"at the full context of {settings.context_len:,} tokens"
        row.metric(
            "Decode tokens/s per sequence",
            rate_text(speed.tokens_per_s_per_sequence),
            help=f"One decode step {full}, the weights and KV cache read at once; Time and cost adds the share of "
            "new prompts and kernel gaps at its requests' lengths.",
            width="content",
        )
        row.metric("Decode tokens/s in all", rate_text(speed.tokens_per_s_aggregate), width="content")
        step_ms = speed.step_time_s * 1000
        row.metric("Bound by", speed.bound, help=f"one decode step {step_ms:.2f} ms {full}", width="content")

    parts = {
        "Weights": estimate.weights_gib,
        "KV cache": estimate.kv_cache_gib,
        "Activations": estimate.activations_gib,
        "Overhead": estimate.overhead_gib,
    }
    chart = serving_breakdown_chart(parts, capacity)
    st.vega_lite_chart(chart.data, chart.spec, width="stretch")
    # GiB to 3 decimals as the KV cache metric above writes them ("1.000", not "1")
    st.dataframe(
        pd.DataFrame([{"part": k, "GiB per GPU": v} for k, v in parts.items()]),
        hide_index=True,
        width="content",
        column_config={"GiB per GPU": st.column_config.NumberColumn(format="%.3f")},
        placeholder=EMPTY_CELL,
    )
    with st.expander("Assumptions and sources"):
        st.markdown("\n".join(f"- {line}" for line in estimate.assumptions))  # one element, not one a line


def _show_changes(spec: ModelSpec, settings: ServingSettings, capacity_gib: float) -> None:
    """What to change so the deployment fits, gentlest first, with the memory each needs."""
    changes = serving_changes(spec, settings, capacity_gib)
    st.markdown("**What to change**")
    if not changes:
        st.caption("No single change or pair of precision changes fits this GPU: pick a larger GPU.")
        return
    rows = [{"change": c.change, "needs (GiB per GPU)": round(c.total_gib, 1), "gives up": c.cost} for c in changes[:6]]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
