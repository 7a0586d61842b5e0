"""Validation page: the estimate against published peak-memory measurements."""

import pandas as pd
import streamlit as st

from calculators.validation import validation_table
from ui.charts import validation_figure

st.title("Validation against measurements")
st.write(
    "Published peak-memory measurements of real training runs, next to this app's estimate for the same "
    "settings. NVML 'used' includes the CUDA context and the allocator's cache, so it is compared with the "
    "full peak; torch's peak active memory is compared with the allocated figure."
)

table = validation_table()
supported = [row for row in table if row.estimate_gib is not None and not row.excluded_reason]
st.dataframe(
    pd.DataFrame(
        [
            {
                "id": row.id,
                "model": row.model,
                "GPU": row.gpu,
                "setup": row.setup,
                "measured GiB": round(row.measured_gib, 2),
                "estimate GiB": None if row.estimate_gib is None else round(row.estimate_gib, 2),
                "error": None if row.error_fraction is None else f"{row.error_fraction:+.1%}",
                "compared with": row.compared_with,
                "not modelled because": row.unsupported_reason or row.excluded_reason or "",
            }
            for row in table
        ]
    ),
    hide_index=True,
    width="stretch",
)
if supported:
    worst = max(abs(row.error_fraction) for row in supported)
    st.metric("Largest error over supported rows", f"{worst:.1%}", help="Target: within 10% on every supported row")
    st.plotly_chart(
        validation_figure(
            [row.id for row in supported],
            [row.measured_gib for row in supported],
            [row.estimate_gib for row in supported],
        ),
        width="stretch",
    )
with st.expander("Per-row assumptions and sources"):
    for row in table:
        st.markdown(f"**{row.id}** ({row.what_was_measured}); source: {row.source}")
        for assumption in row.assumptions:
            st.markdown(f"- {assumption}")
