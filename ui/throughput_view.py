"""The Validation page's throughput section: the time model against published runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.validation.throughput import summary, throughput_table
from ui.charts import throughput_ratio_figure
from ui.layout import static_table, wrapping_row


def throughput_section() -> None:
    """Estimate against measured tokens per second per GPU, with the ratio, the median and worst."""
    st.header("Training throughput")
    st.write(
        "Published training runs (llm-foundry, llm.c, torchtitan, Megatron-Core, Megatron-Bridge), each "
        "estimated with the step built from its operations and its traffic per parallel dimension. "
        "Targets: every row within ±20%, the median within ±10%."
    )
    table = throughput_table()
    static_table(  # a static table: 17 rows, all shown
        pd.DataFrame(
            [
                {
                    "id": row.id,
                    "model": row.model,
                    "GPU": row.gpu,
                    "setup": row.setup,
                    "measured tokens/s/GPU": round(row.measured_tokens_s_gpu),
                    "estimate tokens/s/GPU": round(row.estimate_tokens_s_gpu),
                    "estimate / measured": round(row.ratio, 2),
                    "estimated MFU": f"{row.estimate_mfu:.0%}",
                }
                for row in table
            ]
        ).set_index("id")
    )
    figures = summary(table)
    figures_row = wrapping_row()
    figures_row.metric("Median estimate / measured", f"{figures['median_ratio']:.2f}", width="content")
    figures_row.metric("Worst row", f"{figures['worst_ratio']:.2f}", width="content")
    figures_row.metric("Rows within ±20%", f"{figures['share_within_20pct']:.0%}", width="content")
    st.plotly_chart(throughput_ratio_figure([row.id for row in table], [row.ratio for row in table]), width="stretch")
    with st.expander("Throughput rows: assumptions, sources and command lines"):
        for row in table:
            st.markdown(f"**{row.id}**: source {row.source}")
            for assumption in row.assumptions:
                st.markdown(f"- {assumption}")
            st.code(row.command, language="bash", wrap_lines=True)
