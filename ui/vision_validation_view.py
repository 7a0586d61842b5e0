"""The Validation page's image-model section: the vision step-time model against published runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.validation.vision_target import MEDIAN_BAND, ROW_BAND, TargetCheck, check_target
from calculators.validation.vision_throughput import summary_by_model, vision_throughput_table
from ui.charts import throughput_ratio_figure
from ui.layout import EMPTY_CELL, static_table


@st.cache_data(show_spinner=False)
def _table() -> list:
    """Every row estimated once per session: the data file does not change while the app runs."""
    return vision_throughput_table()


def target_words(check: TargetCheck) -> str:
    """The target and which groups miss it, in one paragraph."""
    target = (
        f"Target: every DeepLearningExamples row (ResNet-50, ResNeXt-101, SE-ResNeXt-101, EfficientNet) within "
        f"±{ROW_BAND:.0%} of its measured images/s and their median within {MEDIAN_BAND:.0%}"
    )
    if check.met:
        return f"{target}: met."
    missed = [
        f"{group.model} (median {group.median_ratio:.2f}, {group.within_band} of {group.rows} rows within "
        f"±{ROW_BAND:.0%})"
        for group in check.missed
    ]
    median = "" if check.median_met else f" The median over all of them is {check.median_ratio:.2f}."
    groups = f" Missed by {'; '.join(missed)}." if missed else ""
    return f"{target}: not met.{groups}{median}"


def _target_column(model: str, check: TargetCheck) -> str:
    group = next((group for group in check.groups if group.model == model), None)
    if group is None:
        return "not in the target"
    return "met" if group.met else "missed"


def vision_throughput_section() -> None:
    """Images per second per GPU, estimate against measured, grouped by model; rows not counted
    are shown with why."""
    st.header("Image-model training throughput")
    st.write(
        "NVIDIA DeepLearningExamples' ConvNets and EfficientNet tables (DGX A100 and DGX-1, PyTorch DataLoader with "
        "10 or 8 workers per GPU, whose CPU ceiling is applied) and timm's RTX 3090 benchmark (synthetic inputs), "
        "each row estimated by the vision step model at its GPU, GPU count, precision, memory format and batch. "
        "timm's rows are shown beside them and are not part of the target."
    )
    table = _table()
    counted = [row for row in table if row.counted]
    check = check_target(table)
    if check.met:
        st.success(target_words(check), icon=":material/check_circle:")
    else:
        st.warning(target_words(check), icon=":material/report:")
    static_table(
        pd.DataFrame(
            [
                {
                    "model": item.model,
                    "rows": item.rows,
                    "median estimate / measured": round(item.median_ratio, 2),
                    "rows within ±20%": f"{item.within_20_pct} of {item.rows}",
                    "target": _target_column(item.model, check),
                }
                for item in summary_by_model(table)
            ]
        ).set_index("model")
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "id": row.id,
                    "model": row.model,
                    "GPU": row.gpu,
                    "GPUs": row.gpus,
                    "precision": row.precision,
                    "channels-last": "yes" if row.channels_last else "no",
                    "batch per GPU (images)": row.micro_batch,
                    "image size (px)": row.image_size,
                    "measured images/s per GPU": round(row.measured_images_per_s_per_gpu),
                    "GPU alone images/s per GPU": round(row.gpu_estimate_images_per_s_per_gpu),
                    "estimate images/s per GPU": round(row.estimate_images_per_s_per_gpu),
                    "estimate / measured": round(row.ratio, 2),
                }
                for row in counted
            ]
        ),
        hide_index=True,
        width="stretch",
        placeholder=EMPTY_CELL,
    )
    st.plotly_chart(throughput_ratio_figure([row.id for row in counted], [row.ratio for row in counted], "images/s"),
                    width="stretch")  # fmt: skip
    with st.expander(f"Rows not counted, and why ({len(table) - len(counted)})"):
        st.dataframe(
            pd.DataFrame(
                [
                    {"id": row.id, "model": row.model, "GPU": row.gpu, "why not counted": row.why_not}
                    for row in table
                    if not row.counted
                ]  # fmt: skip
            ),
            hide_index=True,
            width="stretch",
            placeholder=EMPTY_CELL,
        )
