"""The Memory page for an image model of the vision library: the verdict on the sidebar's GPU, the
largest micro-batch and fewest GPUs, the parts of each phase in GiB, and the single changes that fit."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.memory.vision_fit import check_vision_fit, vision_batch_gains, vision_suggestions
from calculators.memory.vision_training import (
    PART_LABEL,
    PHASE_PARTS,
    VisionMemoryResult,
    VisionTrainingInput,
    device_peak_bytes,
    estimate_vision_memory,
)
from calculators.units import GIB
from ui.layout import EMPTY_CELL, wrapping_row
from ui.memo import json_key, remembered
from ui.memory_chart import MemoryChart, Segment, stacked_gib_chart
from ui.palette import VISION_PART_COLOUR

OVERHEAD_LABEL = "allocator reserve, CUDA context, NCCL"


def vision_phase_chart(run: VisionTrainingInput, estimate: VisionMemoryResult, capacity_gib: float) -> MemoryChart:
    """One stacked bar per phase (GiB per GPU): the parts live then, and on top what the device holds
    beyond torch's allocations; the GPU's capacity as a line."""
    phases = list(PHASE_PARTS)
    segments = []
    for name, label in PART_LABEL.items():
        gib = getattr(estimate, f"{name}_gib")
        if gib > 0:
            segments += [Segment(phase, label, gib if name in PHASE_PARTS[phase] else 0.0) for phase in phases]
    for phase in phases:
        overhead_gib = device_peak_bytes(estimate.phases_gib[phase] * GIB, run) / GIB - estimate.phases_gib[phase]
        segments.append(Segment(phase, OVERHEAD_LABEL, overhead_gib))
    colours = {label: VISION_PART_COLOUR[name] for name, label in PART_LABEL.items()}
    colours[OVERHEAD_LABEL] = VISION_PART_COLOUR["overheads"]
    return stacked_gib_chart(segments, colours, capacity_gib, height_px=420, column_title="phase")


def _what_to_change(found: list) -> None:
    """The changes that lower the peak, those that fit first."""
    st.subheader("What to change")
    table = [
        {"fits": "yes" if change.fits else "no", "peak (GiB)": round(change.peak_gib, 2), "change": change.change}
        for change in found
    ]
    if table:
        st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
        st.caption("Each change alone, with the device peak it leaves; only changes that lower the peak.")
    else:
        st.caption("No single change lowers the peak at this setting.")


def _larger_batch(run: VisionTrainingInput, capacity_gib: float, largest_today: int | None, asked) -> None:
    """It fits already: the changes that would let a larger micro-batch fit, with the gain."""
    st.subheader("To fit a larger batch")
    gains = remembered("vision_batch_gains", asked, lambda: vision_batch_gains(run, capacity_gib))
    table = [
        {
            "largest batch (images)": f"{gain.max_micro_batch:,}",
            "frees (GiB)": round(gain.freed_gib, 2),
            "change": gain.change,
        }
        for gain in gains
    ]
    if table:
        st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    today = f"{largest_today:,} images" if largest_today else "none"
    st.caption(
        f"It fits as set; nothing needs to change. Each change alone, with the memory it frees at "
        f"{run.micro_batch:,} images and the largest micro-batch it lets fit (today's: {today})."
        + ("" if table else " No single change raises that.")
    )


def show_vision_memory(run: VisionTrainingInput, gpu_name: str, capacity_gib: float) -> None:
    """The whole Memory page for an image model."""
    asked = json_key(run) + (capacity_gib,)
    estimate = remembered("vision_estimate", asked, lambda: estimate_vision_memory(run))
    fit = remembered("vision_fit", asked, lambda: check_vision_fit(run, capacity_gib))
    model = run.model
    st.caption(
        f"**{model.key}** ({model.kind.upper() if model.kind in ('cnn', 'vit') else model.kind.title()}): "
        f"{estimate.parameters / 1e6:.1f}M parameters, {run.micro_batch:,} images of {run.resolution} x "
        f"{run.resolution} px per GPU. Source: {model.source}, traced {model.as_of}."
    )
    summary = (
        f"peak **{estimate.device_peak_gib:.1f} GiB** per GPU on **{gpu_name}** ({capacity_gib:g} GiB): "
        f"headroom {fit.headroom_gib:+.1f} GiB ({fit.headroom_fraction:+.0%})"
    )
    found = remembered("vision_suggestions", asked, lambda: vision_suggestions(run, capacity_gib))
    if fit.verdict == "fits":
        st.success(f"Fits: {summary}", icon=":material/check_circle:")
    elif fit.verdict == "tight":
        st.warning(f"Tight fit (under 5% free): {summary}", icon=":material/warning:")
    else:
        cheapest = next((s for s in found if s.fits), None)
        extra = f". A change that fits: {cheapest.change}" if cheapest else ""
        if fit.max_micro_batch:
            extra += f". At most {fit.max_micro_batch:,} images per GPU fit"
        st.error(f"Does not fit: {summary}{extra}", icon=":material/block:")
    row = wrapping_row()
    row.metric("Peak (device)", f"{estimate.device_peak_gib:.2f} GiB", width="content",
               help=f"At {estimate.peak_phase}, with the allocator's reserve and the CUDA context")  # fmt: skip
    row.metric("Allocated", f"{estimate.peak_gib:.2f} GiB", width="content",
               help="torch.cuda.max_memory_allocated, as the fake-tensor trace measures it")  # fmt: skip
    row.metric("Largest micro-batch", f"{fit.max_micro_batch:,} images" if fit.max_micro_batch else "none fits",
               width="content")  # fmt: skip
    fewest = str(fit.min_gpus) if fit.min_gpus else ("needs ZeRO" if run.zero == 0 else "none")
    row.metric(
        "Fewest GPUs",
        fewest,
        width="content",
        help="Data-parallel GPUs with the chosen ZeRO stage; without ZeRO every GPU holds a full copy.",
    )
    chart = remembered("vision_chart", asked, lambda: vision_phase_chart(run, estimate, capacity_gib))
    st.vega_lite_chart(chart.data, chart.spec, width="stretch")
    st.caption(f"The peak is the largest phase ({estimate.peak_phase}), not the sum of every part.")
    # one above the other, full width: side by side, the changes' words were cut off at 800 px
    st.subheader("Parts")
    parts = {label: getattr(estimate, f"{name}_gib") for name, label in PART_LABEL.items()}
    rows = [{"part": label, "GiB": round(gib, 3)} for label, gib in parts.items() if gib > 0]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    if fit.verdict == "does not fit":
        _what_to_change(found)
    else:
        _larger_batch(run, capacity_gib, fit.max_micro_batch, asked)
    with st.expander("Assumptions and sources", expanded=False):
        st.markdown("\n".join(f"- {line}" for line in estimate.assumptions))
