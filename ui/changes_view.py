"""The Memory page's 'What to change': the ranked combinations that fit, as a table with units."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calculators.plan.changes import RankedChange, best_few, slowdown_text
from ui.layout import light_table

METHOD_TRAINS = {"full": "all weights", "lora": "LoRA adapters", "qlora": "QLoRA adapters (4-bit base)"}


def changes_frame(options: list[RankedChange], method: str) -> pd.DataFrame:
    """One row per combination: what to change and what it costs, each column with its unit."""
    rows = []
    for option in options:
        gpus = f"{option.gpus} (+{option.extra_gpus})" if option.extra_gpus else str(option.gpus)
        rows.append(
            {
                "change": option.change,
                "fits at": f"{option.peak_gib:.1f}\u00a0GiB",  # the figure and its unit on one line
                "speed": "-" if option.slowdown is None else slowdown_text(option.slowdown).lstrip("~"),
                "host RAM": f"{option.host_memory_gib:.0f}\u00a0GiB" if option.host_memory_gib > 0 else "none",
                "GPUs": gpus,
                "trains": METHOD_TRAINS.get(option.update.get("method", method), option.update.get("method", method)),
            }
        )
    return pd.DataFrame(rows)


def show_changes(options: list[RankedChange], method: str, gpu_name: str) -> None:
    """The best few combinations, or why there are none."""
    st.subheader("What to change")
    if not options:
        st.info("No combination of up to three changes fits; a GPU with more memory is needed.")
        return
    # a static table: its cells wrap, so no column is cut off on a narrow window (at most 5 rows)
    light_table(changes_frame(best_few(options), method), hide_index=True)
    timed = "" if options[0].slowdown is not None else f" (no time model for {gpu_name}: not ranked by speed)"
    st.caption(
        "Combinations of up to three changes that fit, cheapest first"
        f"{timed}: every weight trained on the current GPUs, then on more GPUs, then LoRA/QLoRA (they change "
        "what is trained). Speed: wall-clock time per token against the current setup, from the time model "
        "(faster on more GPUs, or with a cheaper optimizer step); ranked by GPU-hours per token, then host RAM, "
        "then fewer changes. Host RAM: per GPU, for what is offloaded."
    )
