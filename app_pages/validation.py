"""Validation page: the estimate against published peak-memory measurements, grouped by stack."""

import pandas as pd
import streamlit as st

from calculators.interface.settings import all_settings
from calculators.interface.validation import validation_table
from calculators.units import counted
from calculators.validation.peak_memory import error_summary
from calculators.workload.frameworks import FRAMEWORK_DEFAULTS, FRAMEWORK_LABEL
from calculators.workload.training import TrainingSettings
from ui.charts import validation_figure
from ui.layout import EMPTY_CELL, wrapping_row
from ui.mlperf_view import mlperf_validation_section
from ui.serving_validation_view import serving_section
from ui.throughput_view import throughput_section
from ui.vision_validation_view import vision_throughput_section

TARGET = 0.10

st.title("Validation against measurements")
st.write(
    "Published peak-memory measurements of real training and serving runs, next to this app's estimate for the "
    "same settings. Each row is compared like with like: NVML 'used' with the device peak (context and cache "
    "included), torch's reserved peak with reserved, torch's allocated or active peak with allocated; MiB, GB "
    "(1e9 bytes) and MB (1e6 bytes) are converted to GiB. Every row is one `python -m calculators memory` "
    "command, shown with it, which prints the same number."
)


@st.cache_data(show_spinner=False)
def measured_table() -> list:
    """Every row estimated once per session: the data files do not change while the app runs."""
    return validation_table()


table = measured_table()
median, worst = error_summary(table)
within = sum(abs(row.error_fraction) <= TARGET for row in table)
summary_row = wrapping_row()
summary_row.metric("Rows", len(table), width="content")
summary_row.metric("Within 10%", f"{within} of {len(table)}", width="content")
summary_row.metric("Median error", f"{median:.1%}", help="Target: within 5%", width="content")
summary_row.metric("Largest error", f"{worst:.1%}", help="Target: within 10% on every row", width="content")

stacks = list(dict.fromkeys(row.stack for row in table))
for stack in stacks:
    rows = [row for row in table if row.stack == stack]
    st.subheader(stack)
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "id": row.id,
                    "measured GiB": round(row.measured_gib, 2),
                    "estimate GiB": round(row.estimate_gib, 2),
                    "error": f"{row.error_fraction:+.1%}",
                    "compared with": row.compared_with,
                }
                for row in rows
            ]
        ),
        hide_index=True,
        width="stretch",
        placeholder=EMPTY_CELL,
    )
    with st.expander(f"Settings, assumptions and command lines ({counted(len(rows), 'row')})"):
        for row in rows:
            st.markdown(f"**{row.id}**: {row.model} on {row.gpu}; measured {row.what_was_measured} ({row.unit})")
            st.caption(f"{row.setup}. Source: {row.source}")
            st.markdown("\n".join(f"- {assumption}" for assumption in row.assumptions))
            st.code(row.command, language="bash", wrap_lines=True)

st.subheader("All rows")
st.plotly_chart(
    validation_figure(
        [row.id for row in table], [row.measured_gib for row in table], [row.estimate_gib for row in table]
    ),
    width="stretch",
)

st.subheader("Framework defaults")
st.write(
    "`--framework NAME` (the sidebar's Framework) fills the loss and the AdamW implementation when they are not "
    "given; an explicit choice wins. The other rows are the stack's reference recipe, shown for reference: set "
    "them yourself."
)
# each setting by the sidebar's label for it, not its field name
setting_labels = {item.name: item.label for item in all_settings() if item.model is TrainingSettings}
st.dataframe(
    pd.DataFrame(
        [
            {
                "framework": FRAMEWORK_LABEL[row.framework],
                "setting": setting_labels.get(row.setting, row.setting.replace("_", " ")),
                "default": str(row.value),
                "applied": "yes" if row.applied else "recipe (set it)",
                "source": row.source,
            }
            for row in FRAMEWORK_DEFAULTS
        ]
    ),
    hide_index=True,
    width="stretch",
    placeholder=EMPTY_CELL,
)

throughput_section()
vision_throughput_section()
mlperf_validation_section()
serving_section()
