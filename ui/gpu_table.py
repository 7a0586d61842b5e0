"""The Compare page's table: catalogue rows joined with the fit matrix (no streamlit)."""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit import verdict
from calculators.memory.fit_matrix import GpuFit
from calculators.memory.serving import serving_table
from calculators.models.spec import ModelSpec
from calculators.workload.compatibility import stack_problem
from calculators.workload.serving import ServingSettings

FIT_COLUMNS = ("verdict", "headroom_gib", "max_micro_batch", "min_gpus", "stack_problem")
SERVING_COLUMNS = (
    "verdict", "headroom_gib", "max_concurrency", "max_context_len", "decode_tokens_per_s", "min_gpus", "stack_problem"
)  # fmt: skip


class ServingRow(BaseModel):
    """A serving answer shaped like a fit-matrix row, so the table treats both alike."""

    gpu: str
    verdict: str
    headroom_gib: float
    max_concurrency: int
    max_context_len: int
    decode_tokens_per_s: float | None
    min_gpus: int | None
    stack_problem: str | None = None


def serving_fit_rows(spec: ModelSpec, settings: ServingSettings, gpus: list[GpuSpec]) -> list[ServingRow]:
    """The inference mode's matrix: fit, concurrency, context and decode speed on every GPU."""
    rows = []
    by_name = {gpu.name: gpu for gpu in gpus}
    for fit in serving_table(spec, settings, gpus):
        rows.append(
            ServingRow(
                gpu=fit.gpu,
                verdict=verdict(fit.total_gib, fit.budget_gib),
                headroom_gib=fit.budget_gib - fit.total_gib,
                max_concurrency=fit.max_concurrency,
                max_context_len=fit.max_context_len,
                decode_tokens_per_s=fit.decode_tokens_per_s_per_sequence,
                min_gpus=fit.gpus_needed,
                stack_problem=stack_problem(by_name[fit.gpu], "inference"),
            )
        )
    return rows


def gpu_table(
    gpus: list[GpuSpec], fits: list[GpuFit] | list[ServingRow] | None, detected: set[str], user_names: set[str]
) -> pd.DataFrame:
    """One row per GPU with its figures and, when a workload is set, its fit answers."""
    table = pd.DataFrame([gpu.model_dump() for gpu in gpus])
    table["detected"] = table["name"].isin(detected)
    table["yours"] = table["name"].isin(user_names)
    if fits is not None:
        by_name = {row.gpu: row for row in fits}
        columns = SERVING_COLUMNS if fits and isinstance(fits[0], ServingRow) else FIT_COLUMNS
        for column in columns:
            table[column] = [getattr(by_name[name], column) for name in table["name"]]
        for column in ("max_micro_batch", "min_gpus"):
            if column in table:
                table[column] = table[column].astype("Int64")
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
