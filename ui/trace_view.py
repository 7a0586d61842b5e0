"""The Memory page's "Trace exactly" action: one real step under fake tensors, next to the estimate.

The trace runs in a subprocess (torch is imported there, never by the page) and only when
the user asks for it; the last result is kept per workload so a rerun does not trace again."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.memory.result import MemoryEstimate
from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings
from measure.trace.result import TraceError
from measure.trace.runner import run_trace
from ui.layout import wrapping_row
from ui.messages import in_words

RESULT_KEY = "trace_result"
BIG_MODEL_LAYERS = 8  # above this, trace 3-5 layers and extend exactly (checked by the tracer)


def _workload_key(spec: ModelSpec, settings: TrainingSettings) -> str:
    return spec.model_dump_json() + settings.model_dump_json()


def trace_section(spec: ModelSpec, settings: TrainingSettings, estimate: MemoryEstimate) -> None:
    """The button, its progress, and the traced result side by side with the estimate."""
    st.subheader("Trace exactly")
    st.caption(
        "Runs one real training step (two, so optimizer states exist) under PyTorch fake tensors on the CPU: "
        "no memory is allocated, every tensor's bytes are counted, and FLOPs come from FlopCounterMode."
    )
    key = _workload_key(spec, settings)
    if st.button("Trace this step", key="trace_button"):
        with st.status("Tracing in a subprocess...", expanded=False) as status:
            try:
                traced = run_trace(spec, settings, timeout_s=120, extrapolate=spec.n_layers > BIG_MODEL_LAYERS)
            except TraceError as error:
                st.session_state[RESULT_KEY] = (key, in_words(error))
                status.update(label="Could not trace", state="error")
            else:
                st.session_state[RESULT_KEY] = (key, traced)
                status.update(label=f"Traced in {traced.seconds:.1f} s", state="complete")
    stored_key, traced = st.session_state.get(RESULT_KEY, (None, None))
    if stored_key != key or traced is None:
        return
    if isinstance(traced, str):
        st.error(traced)
        return
    error = estimate.allocated_gib / traced.allocated_gib - 1
    row = wrapping_row()
    peak_help = f"op at the peak: {traced.peak_op}"
    row.metric("Traced peak (allocated)", f"{traced.allocated_gib:.3f} GiB", help=peak_help, width="content")
    row.metric(
        "Estimate (allocated)",
        f"{estimate.allocated_gib:.3f} GiB",
        delta=f"{error:+.2%}",
        delta_color="off",
        width="content",
    )
    row.metric("FLOPs per token", f"{traced.flops_per_token:.3g}", width="content")
    phases = sorted(set(traced.phases_gib) | set(estimate.phases_gib))
    st.dataframe(
        pd.DataFrame(
            [
                {"phase": p, "traced GiB": traced.phases_gib.get(p), "estimate GiB": estimate.phases_gib.get(p)}
                for p in phases
            ]
        ).round(3),
        hide_index=True,
        width="stretch",
    )
    if traced.extrapolated:
        st.caption(f"Traced {traced.traced_layers} layers and extended linearly (checked to the byte).")
