"""Compare GPUs: the catalogue, filtered and sorted, with the workload's fit on each."""

import pandas as pd
import streamlit as st

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.memory.fit_matrix import fit_matrix
from calculators.memory.vision_fit import vision_fit_matrix
from calculators.timing.roofline import matmul_format, roofline_point, workload_intensity_flops_per_byte
from calculators.units import counted
from calculators.workload.serving import serving_problem
from ui import state
from ui.charts import memory_bandwidth_figure, roofline_figure, tflops_price_figure
from ui.gpu_table import (
    FIELD_LABEL,
    FIT_COLUMNS,
    MISSING_FIGURE_TEXT,
    SERVING_COLUMNS,
    catalogue_table,
    missing_figure_help,
    readable_fit_rows,
    serving_fit_rows,
    side_by_side,
    with_fit_columns,
)
from ui.host_gpus import detected_gpu_names
from ui.layout import EMPTY_CELL, light_table
from ui.memo import json_key, remembered
from ui.mlperf_view import mlperf_section
from ui.user_gpus import user_gpu_controls, user_gpus

SPEC_FIELDS = [
    "vendor", "category", "memory_gb", "memory_type", "memory_bandwidth_tbps", "fp32_tflops", "tf32_tflops",
    "bf16_tflops", "fp16_tflops", "fp8_tflops", "int8_tops", "tdp_w", "interconnect", "interconnect_gbps",
    "pcie_gen", "launch_year", "price_usd", "source", "as_of",
]  # fmt: skip

NUMBER_FORMATS = {"headroom_gib": "%.1f", "decode_tokens_per_s": "%.0f", "price_usd": "$%d"}


def column_headers(table: pd.DataFrame, columns: list[str]) -> dict:
    """Each column's header for a person: a number column's with its format and, where some of its cells
    are empty, what "-" there means; a date column read as a date."""
    headers = {}
    for column in columns:
        values = table[column]
        if column == "as_of":
            headers[column] = st.column_config.DateColumn(FIELD_LABEL[column])
        elif pd.api.types.is_numeric_dtype(values) and values.dtype != bool:
            headers[column] = st.column_config.NumberColumn(
                FIELD_LABEL[column], format=NUMBER_FORMATS.get(column), help=missing_figure_help(values)
            )
        else:
            headers[column] = FIELD_LABEL[column]
    return headers


st.title("Compare GPUs")
workload = st.session_state["workload"]
catalogue = list(load_gpu_catalogue())
user_gpu_controls(catalogue)
gpus = catalogue + user_gpus()
detected, detection_message = detected_gpu_names(gpus)
if detected:
    st.success(f"This host has: {', '.join(sorted(detected))} (marked in the table).", icon=":material/memory:")
elif detection_message.startswith("This host has"):  # GPUs the catalogue lacks; no driver is no news to a visitor
    st.caption(detection_message)

gpus_key = json_key(gpus)  # a part of the keys below, worked out once a run
fits = None
if workload.is_vision:
    fit_asked = json_key(workload.vision) + gpus_key
    fits = remembered("compare_vision_fits", fit_asked, lambda: vision_fit_matrix(workload.vision, gpus))
elif not workload.ready:
    st.warning("The workload in the sidebar has an error, so the fit columns are left out.")
elif workload.is_inference:
    problem = serving_problem(workload.spec, workload.serving)
    if problem:
        st.warning(f"Serving settings: {problem}; the fit columns are left out.")
    else:
        fits = serving_fit_rows(workload.spec, workload.serving, gpus)
else:
    fit_asked = json_key(workload.spec, workload.settings) + gpus_key
    fits = remembered("compare_fits", fit_asked, lambda: fit_matrix(workload.spec, workload.settings, gpus))
fit_by_name = {row.gpu: row for row in fits or []}
# "none fits", "needs ZeRO" and "-" rather than "None" in the fit columns, in the Memory page's words
is_training_fit = fits is not None and not (workload.is_inference or workload.is_vision)
training_zero = workload.settings.zero if is_training_fit else None
fit_rows = readable_fit_rows(fits or [], training_zero)
fit_fields = [] if fits is None else list(SERVING_COLUMNS if workload.is_inference else FIT_COLUMNS)

# What does not depend on the workload is kept from one change of the sidebar to the next: the catalogue's
# table, its rows by name, and the rows the filters leave in; only the fit columns are made on each run.
user_names = {gpu.name for gpu in user_gpus()}
catalogue_key = (gpus_key, tuple(sorted(detected)), tuple(sorted(user_names)))
table = remembered("compare_catalogue", catalogue_key, lambda: catalogue_table(gpus, detected, user_names))
row_by_name = remembered(
    "compare_catalogue_rows", catalogue_key, lambda: {row["name"]: row for row in table.to_dict("records")}
)

filter_notes = st.container()  # above the filter row, which a warning inside it would squeeze
with st.container(horizontal=True):
    vendors = sorted({gpu.vendor for gpu in gpus})
    chosen_vendors = state.multiselect(st, "cmp_vendors", vendors, notes=filter_notes)
    categories = sorted({gpu.category for gpu in gpus})
    chosen_categories = state.multiselect(st, "cmp_categories", categories, notes=filter_notes)
    min_memory_gb = state.number(st, "cmp_min_memory", step=8)
    fits_only = state.checkbox(st, "cmp_fits_only", disabled=fits is None)

shown_names = [
    gpu.name
    for gpu in gpus
    if gpu.vendor in (chosen_vendors or vendors)
    and gpu.category in (chosen_categories or categories)
    and gpu.memory_gb >= min_memory_gb
]
if fits is not None:
    cannot_run = [gpu.name for gpu in gpus if fit_by_name[gpu.name].stack_problem is not None]
    if cannot_run:
        st.caption(
            f"{counted(len(cannot_run), 'GPU')} cannot run this workload's software (see 'cannot run because'): "
            + ", ".join(cannot_run)
            + ". The filter below leaves them out."
        )
if fits_only and fits is not None:
    shown_names = [
        name
        for name in shown_names
        if fit_by_name[name].verdict != "does not fit" and fit_by_name[name].stack_problem is None
    ]
st.caption(
    f"{len(shown_names)} of {len(gpus)} GPUs. Click a column header to sort. Tensor TFLOPS are dense (no sparsity). "
    f"{MISSING_FIGURE_TEXT}"
)
if workload.is_vision:
    st.caption(f"{workload.vision.model.key}: the largest micro-batch counts images per GPU; peaks are device peaks.")
shown_key = (catalogue_key, tuple(shown_names))
figure_columns = ["name", *SPEC_FIELDS, "detected", "yours"]
figures = remembered("compare_shown", shown_key, lambda: table.loc[table["name"].isin(shown_names), figure_columns])
shown = with_fit_columns(figures, fit_rows, fit_fields)
# the figures' headers, with what their empty cells mean, change with the rows shown, not with the workload
figure_headers = remembered("compare_figure_headers", shown_key, lambda: column_headers(figures, figure_columns))
column_config = column_headers(shown, fit_fields) | figure_headers
st.dataframe(shown, hide_index=True, width="stretch", column_config=column_config, placeholder=EMPTY_CELL)

st.subheader("Side by side")
picked = state.multiselect(st, "cmp_pick", [gpu.name for gpu in gpus], max_selections=4)
if len(picked) >= 2:
    rows = {name: row_by_name[name] | fit_rows.get(name, {}) for name in picked}
    # a static table: read whole, without a grid of its own to scroll, and cheaper to redraw on each change
    light_table(side_by_side(rows, picked, fit_fields + SPEC_FIELDS))
else:
    st.info("Pick at least two GPUs to compare them side by side.")

st.subheader("Charts")
fmt = matmul_format(workload.settings.precision) if workload.ready and not workload.is_inference else "bf16"
tflops_column = {"bf16": "bf16_tflops", "fp16": "fp16_tflops", "fp32": "fp32_tflops"}[fmt]
left, right = st.columns(2)
# each figure is built again only when the rows it draws or the picks change, not on every change of the workload
memory_key = (shown_key, tuple(picked))
left.plotly_chart(
    remembered("compare_memory_figure", memory_key, lambda: memory_bandwidth_figure(figures, picked)), width="stretch"
)
price_key = (shown_key, tflops_column, tuple(picked))
right.plotly_chart(
    remembered(
        "compare_price_figure", price_key, lambda: tflops_price_figure(figures, tflops_column, fmt.upper(), picked)
    ),
    width="stretch",
)


def roofline_rows(points: list) -> pd.DataFrame:
    """The roofline's figures per GPU, each column named with its unit."""
    return pd.DataFrame(
        [
            {
                "GPU": point.gpu,
                "peak (TFLOPS)": round(point.peak_tflops, 1),
                "memory bandwidth (TB/s)": round(point.bandwidth_tbps, 2),
                "ridge point (FLOP per byte)": round(point.ridge_flops_per_byte),
                "attainable at this intensity (TFLOPS)": round(point.attainable_tflops, 1),
                "bound by": point.bound,
            }
            for point in points
        ]
    )


def show_roofline() -> None:
    """The picked GPUs' rooflines with the workload's intensity, and their figures."""
    intensity = workload_intensity_flops_per_byte(workload.spec, workload.settings)
    roofline_gpus = [gpu for gpu in gpus if gpu.name in picked]
    points = [p for p in (roofline_point(gpu, fmt, intensity) for gpu in roofline_gpus) if p is not None]
    if points:
        roofline = remembered(
            "compare_roofline",
            (json_key(points), intensity, fmt),
            lambda: roofline_figure(points, intensity, fmt.upper()),
        )
        st.plotly_chart(roofline, width="stretch")
        st.dataframe(roofline_rows(points), hide_index=True, width="stretch", placeholder=EMPTY_CELL)
    st.caption(
        f"Roofline (Williams et al. 2009) of the GPUs picked above. The workload's intensity is that of its largest "
        f"GEMM, the MLP up-projection of one micro-batch ({workload.settings.micro_batch} x "
        f"{workload.settings.seq_len} tokens) in {fmt.upper()}: {intensity:.0f} FLOP per byte."
    )


if workload.ready and not workload.is_inference:
    # drawn only while open: the roofline moves with every change of the workload, and a chart drawn
    # anew is the costliest element of a rerun in the browser (bench/bench_clicks.py)
    label = "Roofline of the GPUs picked above, with the workload's intensity"
    with st.expander(label, key="compare_roofline_open", on_change="rerun") as section:
        if section.open:
            show_roofline()

# drawn only while open, like the roofline: its table, benchmark box and chart do not depend on the
# sidebar, yet each is an element the browser redraws on every change of it (a fifth of this page's
# browser work per change, bench/bench_clicks.py)
label = "MLPerf Training: published time-to-train on these GPUs, this app's prediction and the cost to reproduce"
with st.expander(label, key="compare_mlperf_open", on_change="rerun") as section:
    if section.open:
        # the GPUs picked side by side, else those the filters leave in the table
        looked_at = picked or shown_names
        mlperf_section(looked_at, {gpu.name: gpu.vendor for gpu in gpus}, workload)
