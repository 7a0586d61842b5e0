"""Memory page: peak GPU memory of a training step, the verdict, and what to change."""

import pandas as pd
import streamlit as st

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.interface.settings import all_settings
from calculators.memory.engine import estimate_memory
from calculators.memory.fit import check_fit, suggestions
from calculators.memory.result import COMPONENT_LABEL
from calculators.models.geometry import parameter_count
from calculators.plan.changes import RANKING_TIME_SETTINGS, ranked_changes
from calculators.workload.contradictions import workload_problems
from calculators.workload.frameworks import FRAMEWORK_LABEL, framework_rows
from calculators.workload.training import TrainingSettings
from ui.calibration_state import measured_matmul_fraction
from ui.changes_view import show_changes
from ui.gpu_table import fewest_gpus_text
from ui.layout import EMPTY_CELL, light_table, wrapping_row
from ui.memo import json_key, remembered
from ui.memory_chart import phase_breakdown_chart
from ui.serving_view import show_serving
from ui.trace_view import trace_section
from ui.user_gpus import user_gpus
from ui.vision_view import show_vision_memory


def framework_assumed(settings) -> str:
    """One sentence: which framework's defaults the estimate assumed, and what they set."""
    loss_impl = f"loss {settings.loss}, AdamW implementation {settings.optimizer_impl}"
    if settings.framework is None:
        return f"Training stack: plain PyTorch defaults ({loss_impl}); choose a framework under 'Training stack'."
    labels = {item.name: item.label for item in all_settings() if item.model is TrainingSettings}
    applied = [row for row in framework_rows(settings.framework) if row.applied]
    shipped = [f"{labels.get(row.setting, row.setting)} {row.value}" for row in applied]
    others = [
        f"{labels[row.setting]} {getattr(settings, row.setting)}"
        for row in applied
        if row.setting not in ("loss", "optimizer_impl") and row.setting in labels
    ]
    return (
        f"Training stack: {FRAMEWORK_LABEL[settings.framework]} defaults assumed where not set "
        f"({', '.join(shipped)}); in effect: {', '.join([loss_impl, *others])}. Sources on the Validation page."
    )


st.title("Will it fit?")
workload = st.session_state["workload"]
for message in workload.errors:
    st.error(message)
for note in workload.notes:
    st.info(note)
if workload.is_vision:  # an image model of the vision library: its own estimate and verdict
    show_vision_memory(workload.vision, workload.gpu_name, workload.gpu_memory_gib)
    st.stop()
if not workload.ready:
    st.info("Fix the inputs in the sidebar to see the estimate.")
    st.stop()

for problem in workload_problems(workload.workload):
    st.warning(problem, icon=":material/report:")

if workload.is_inference:
    chosen = next((g for g in list(load_gpu_catalogue()) + user_gpus() if g.name == workload.gpu_name), None)
    show_serving(workload.spec, workload, chosen)
    st.stop()

spec, settings = workload.spec, workload.settings
# pure functions of the workload: a rerun that did not change it (a setting changed back, a click on the page)
# reuses them instead of working out the estimate, the verdict and the ranked changes again
asked = json_key(spec, settings) + (workload.gpu_memory_gib, workload.gpu_name)
params = parameter_count(spec)
estimate = remembered("memory_estimate", asked, lambda: estimate_memory(spec, settings))
fit = remembered("memory_fit", asked, lambda: check_fit(spec, settings, workload.gpu_memory_gib))

st.caption(
    f"**{spec.name}**: {params.total / 1e9:.3g}B parameters, {spec.n_layers} layers, hidden {spec.hidden_size}, "
    f"{spec.n_heads} heads ({spec.n_kv_heads} kv), vocab {spec.vocab_size:,}. Source: {spec.source}"
)

summary = (
    f"peak **{estimate.peak_gib:.1f} GiB** per GPU on **{workload.gpu_name}** "
    f"({workload.gpu_memory_gib:g} GiB): headroom {fit.headroom_gib:+.1f} GiB ({fit.headroom_fraction:+.0%})"
)
if estimate.host_memory_gib > 0:  # what it offloads must fit the host: part of the verdict
    summary += f"; needs **{estimate.host_memory_gib:.0f} GiB of host RAM** per GPU for what it offloads"


def ranked_for_page() -> list:
    """The ranked combinations of changes that fit on the chosen GPU (the page's 'What to change')."""
    chosen_gpu = next((g for g in list(load_gpu_catalogue()) + user_gpus() if g.name == workload.gpu_name), None)
    time_settings = RANKING_TIME_SETTINGS.with_measured_matmul_fraction(
        workload.gpu_name, measured_matmul_fraction(settings.precision)
    )
    return remembered(
        "memory_changes",
        (*asked, json_key(chosen_gpu, time_settings)),
        lambda: ranked_changes(spec, settings, workload.gpu_memory_gib, chosen_gpu, time_settings),
    )


def show_verdict(summary: str, changes: list) -> None:
    """The headline: fits, tight or does not fit, with the cheapest change that fits."""
    if changes:
        summary += f". Cheapest change that fits: {changes[0].sentence()}"
    if fit.verdict == "fits":
        st.success(f"Fits: {summary}", icon=":material/check_circle:")
    elif fit.verdict == "tight":
        st.warning(f"Tight fit (under 5% free): {summary}", icon=":material/warning:")
    else:
        st.error(f"Does not fit: {summary}", icon=":material/block:")


changes = ranked_for_page() if fit.verdict == "does not fit" else []
show_verdict(summary, changes)

fewest_gpus = fewest_gpus_text(fit.min_gpus, settings.zero)
row = wrapping_row()
row.metric(
    "Peak (device)",
    f"{estimate.peak_gib:.2f} GiB",
    help=f"At {estimate.peak_phase}, as nvidia-smi would show it",
    width="content",
)
row.metric(
    "Allocated",
    f"{estimate.allocated_gib:.1f} GiB",
    help=f"torch.cuda.max_memory_allocated; reserved by the caching allocator: {estimate.reserved_gib:.1f} GiB",
    width="content",
)
row.metric("Largest micro-batch", fit.max_micro_batch if fit.max_micro_batch else "none fits", width="content")
row.metric(
    "Fewest GPUs",
    fewest_gpus,
    width="content",
    help="Data-parallel GPUs with the chosen ZeRO stage. Without ZeRO every GPU holds a full copy, so more GPUs "
    "do not lower the per-GPU peak; 'none' means activations alone exceed the GPU.",
)

if fit.verdict == "does not fit":
    show_changes(changes, settings.method, workload.gpu_name)

chart = remembered("memory_chart", asked, lambda: phase_breakdown_chart(estimate, workload.gpu_memory_gib))
st.vega_lite_chart(chart.data, chart.spec, width="stretch")
st.caption(f"The peak is the largest phase ({estimate.peak_phase}), not the sum of everything that ever exists.")
details = [f"trainable parameters: {estimate.trainable_parameters:,} of {estimate.parameters:,}"]
if estimate.host_memory_gib > 0:
    details.append(f"host RAM needed per GPU for offloaded states and activations: {estimate.host_memory_gib:.1f} GiB")
if estimate.outside_allocator_gib > 0:
    details.append(f"paged optimizer states outside torch's allocator: {estimate.outside_allocator_gib:.1f} GiB")
if estimate.load_peak_gib > 0:
    details.append(f"peak while the model is loaded (and quantised, for QLoRA): {estimate.load_peak_gib:.1f} GiB")
if estimate.pipeline_stage != "only":
    details.append(f"most loaded pipeline stage: the {estimate.pipeline_stage} one")
if settings.total_gpus != settings.gpus:
    details.append(f"GPUs in all: {settings.total_gpus} (data x tensor x pipeline parallel)")
st.markdown(" · ".join(details))
st.caption(framework_assumed(settings))


def show_tables() -> None:
    """What the peak is made of, and each single change with the peak it leaves."""
    left, right = st.columns(2)
    with left:
        st.subheader("Breakdown at the peak")
        rows = [
            {"component": COMPONENT_LABEL[name], "GiB": gib} for name, gib in estimate.components_gib.items() if gib > 0
        ]
        st.dataframe(
            pd.DataFrame(rows),
            hide_index=True,
            width="stretch",
            column_config={"GiB": st.column_config.NumberColumn("size (GiB)", format="%.2f")},  # 14.96, not 14.958
            placeholder=EMPTY_CELL,
        )
        st.caption(
            "Activations saved by one layer (GiB): "
            + ", ".join(
                f"{name.replace('_', ' ')} {gib:.3f}" for name, gib in estimate.activations_per_layer_gib.items()
            )
        )
    with right:
        st.subheader("Single changes")
        found = remembered("memory_suggestions", asked, lambda: suggestions(spec, settings, workload.gpu_memory_gib))
        # a static table: its cells wrap, so the long change text is read whole in a half-width column
        light_table(
            pd.DataFrame(
                [
                    {"change": s.change, "fits": "yes" if s.fits else "no", "peak (GiB)": f"{s.peak_gib:,.1f}"}
                    for s in found
                ]
            ),
            hide_index=True,
        )
        st.caption("Each change alone, with the peak it leaves.")


# Drawn only while open, like the sidebar's stack: each element is a message to the browser and a
# redraw on every change of the sidebar, and a reader who never opens them should not wait for them.
with st.expander("Breakdown at the peak and single changes", key="memory_tables_open", on_change="rerun") as section:
    if section.open:
        show_tables()
with st.expander(
    "Trace exactly: one real step under fake tensors", key="memory_trace_open", on_change="rerun"
) as section:
    if section.open:
        trace_section(spec, settings, estimate)
with st.expander("Assumptions and sources", key="memory_assumptions_open", on_change="rerun") as section:
    if section.open:
        st.markdown("\n".join(f"- {assumption}" for assumption in estimate.assumptions))  # one element, not one a line
