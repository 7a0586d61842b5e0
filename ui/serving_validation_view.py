"""The Validation page's serving section: the serving step model against published serving runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.validation.serving import serving_table, summary_by_source
from ui.layout import static_table


def _ms(value: float | None) -> str:
    return "not published" if value is None else f"{value:,.0f}"


def _figure(value: float | None, digits: int = 0) -> str:
    return "not estimated" if value is None else f"{value:,.{digits}f}"


@st.cache_data(show_spinner=False)
def _table() -> list:
    """Every row estimated once per session: the data file does not change while the app runs."""
    return serving_table()


def serving_section() -> None:
    """Estimate against measured output tokens per second, by source, with the reading taken."""
    st.header("Serving throughput")
    st.write(
        "Published serving runs (TensorRT-LLM's performance overview, NVIDIA NIM tables, vLLM on Vultr, a vLLM "
        "blog row), each estimated by the serving step model at its lengths, precision, tensor parallel and "
        "concurrency (offline maximum load: the throughput-optimal concurrency that fits). No coefficient is "
        "set from these rows. Targets: the median estimate / measured within 15%, 80% of rows within ±30%."
    )
    table = _table()
    static_table(  # static tables, as the training rows above (the page's data frames are the memory rows)
        pd.DataFrame(
            [
                {
                    "source": s.source_kind,
                    "rows": s.rows,
                    "estimated": s.estimated,
                    "median estimate / measured": _figure(s.median_ratio, 2),
                    "within ±30%": "not estimated" if s.within_30_percent is None else f"{s.within_30_percent:.0%}",
                }
                for s in summary_by_source(table)
            ]
        ).set_index("source")
    )
    static_table(
        pd.DataFrame(
            [
                {
                    "id": row.id,
                    "source": row.source_kind,
                    "model": row.model,
                    "system": row.system,
                    "lengths": row.lengths,
                    "measured output tokens/s": f"{row.measured:,.0f}",
                    "estimate output tokens/s": _figure(row.estimate),
                    "estimate / measured": _figure(row.ratio, 2),
                    "concurrency": _figure(row.concurrency),
                    "measured TTFT (ms)": _ms(row.measured_ttft_ms),
                    "estimate TTFT (ms)": _ms(row.estimate_ttft_ms),
                    "measured TPOT (ms)": _ms(row.measured_tpot_ms),
                    "estimate TPOT (ms)": _ms(row.estimate_tpot_ms),
                    "reading taken": row.reading,
                    "why not estimated": row.why_not or "",
                }
                for row in table
            ]
        ).set_index("id")
    )
    with st.expander("Serving rows: assumptions and sources"):
        for row in table:
            st.markdown(f"**{row.id}**: {row.load}. Source: {row.source}")
            for assumption in row.assumptions:
                st.markdown(f"- {assumption}")
