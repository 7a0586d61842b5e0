"""The Compare page's table: catalogue rows joined with the fit matrix (no streamlit)."""

from __future__ import annotations

import pandas as pd

from calculators.fit_matrix import GpuFit
from calculators.gpu_catalogue import GpuSpec

FIT_COLUMNS = ("verdict", "headroom_gib", "max_micro_batch", "min_gpus")


def gpu_table(gpus: list[GpuSpec], fits: list[GpuFit] | None, detected: set[str], user_names: set[str]) -> pd.DataFrame:
    """One row per GPU with its figures and, when a workload is set, its fit answers."""
    table = pd.DataFrame([gpu.model_dump() for gpu in gpus])
    table["detected"] = table["name"].isin(detected)
    table["yours"] = table["name"].isin(user_names)
    if fits is not None:
        by_name = {row.gpu: row for row in fits}
        for column in FIT_COLUMNS:
            table[column] = [getattr(by_name[name], column) for name in table["name"]]
        table["max_micro_batch"] = table["max_micro_batch"].astype("Int64")
        table["min_gpus"] = table["min_gpus"].astype("Int64")
    return table


def _cell_text(value: object) -> str:
    """Side-by-side cells as text: 2 decimals at most, '-' for unknown."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def side_by_side(table: pd.DataFrame, names: list[str], fields: list[str]) -> pd.DataFrame:
    """Chosen GPUs as columns, one row per field."""
    chosen = table.set_index("name").loc[names, fields]
    return chosen.T.map(_cell_text)
