"""The Validation page's image-model section: the vision step-time model against published runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.validation.vision_throughput import summary_by_model, vision_throughput_table
from ui.charts import throughput_ratio_figure


@st.cache_data(show_spinner=False)
def _table() -> list:
    """Every row estimated once per session: the data file does not change while the app runs."""
    return vision_throughput_table()


def vision_throughput_section() -> None:
    """Images per second per GPU, estimate against measured, grouped by model; rows not counted
    are shown with why."""
    st.header("Image-model training throughput")
    st.write(
        "NVIDIA DeepLearningExamples' ConvNets and EfficientNet tables (DGX A100 and DGX-1, PyTorch DataLoader with "
        "10 or 8 workers per GPU, whose CPU ceiling is applied) and timm's RTX 3090 benchmark (synthetic inputs), "
        "each row estimated by the vision step model at its GPU, GPU count, precision, memory format and batch. "
        "Targets: the DLE ResNet-50 and EfficientNet rows within ±20%, the median within 10%."
    )
    table = _table()
    counted = [row for row in table if row.counted]
    st.table(
        pd.DataFrame(
            [
                {
                    "model": item.model,
                    "rows": item.rows,
                    "median estimate / measured": round(item.median_ratio, 2),
                    "rows within ±20%": f"{item.within_20_pct} of {item.rows}",
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
        )
