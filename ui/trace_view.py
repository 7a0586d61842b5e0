"""The Memory page's "Trace exactly" action: one real step under fake tensors, next to the estimate.

The trace runs in a subprocess (torch is imported there, never by the page) and only when
the user asks for it; the last result is kept per workload so a rerun does not trace again."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.memory.result import MemoryEstimate
from calculators.models.spec import ModelSpec
from calculators.workload.training import TrainingSettings
from measure.trace.result import PHASES, TraceError, TraceResult
from measure.trace.runner import run_trace
from ui.layout import EMPTY_CELL, wrapping_row
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
    row.metric("Traced peak (allocated)", f"{traced.allocated_gib:,.2f} GiB", help=peak_help, width="content")
    row.metric("Estimate (allocated)", f"{estimate.allocated_gib:,.2f} GiB", width="content")
    row.metric(
        "Estimate against the trace",
        difference_text(error),
        help="(estimate - traced) / traced, of the allocated peak",
        width="content",
    )
    row.metric("Compute per token", flops_text(traced.flops_per_token), width="content")
    st.dataframe(trace_table(traced, estimate), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    st.caption(
        "'-' in the estimate column: the estimate computes each phase's peak at its boundaries, so the whole "
        "forward pass and the middle layers' backward have no figure of their own there."
    )
    if traced.extrapolated:
        st.caption(
            f"Traced models of {_and_list(traced.traced_layers)} layers and extended linearly to {spec.n_layers:,} "
            "layers (checked to the byte)."
        )


def difference_text(fraction: float) -> str:
    """A relative difference in percent with its sign, or "same to 0.01%" when it rounds to zero
    (never "-0.00%")."""
    if abs(fraction) < 0.00005:
        return "same to 0.01%"
    return f"{fraction:+.2%}"


def flops_text(flops: float) -> str:
    """FLOPs in the SI unit that keeps 3 significant digits readable: 48.8 GFLOP, 1.23 TFLOP."""
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:,.0f} FLOP"


def _and_list(numbers: list[int]) -> str:
    """[3, 4, 5] as "3, 4 and 5"."""
    words = [f"{number:,}" for number in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _gib_text(gib: float | None) -> str:
    return "-" if gib is None else f"{gib:,.2f}"


def trace_table(traced: TraceResult, estimate: MemoryEstimate) -> pd.DataFrame:
    """The traced and estimated peak of each phase, in the order a step passes through them, as
    text: "-" where the estimate has no figure for a phase."""
    names = set(traced.phases_gib) | set(estimate.phases_gib)
    ordered = [name for name in PHASES if name in names] + sorted(names - set(PHASES))
    return pd.DataFrame(
        [
            {
                "phase": name,
                "traced (GiB)": _gib_text(traced.phases_gib.get(name)),
                "estimate (GiB)": _gib_text(estimate.phases_gib.get(name)),
            }
            for name in ordered
        ]
    )
