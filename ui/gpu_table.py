"""The Compare page's table: catalogue rows joined with the fit matrix (no streamlit)."""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit import verdict
from calculators.memory.fit_matrix import GpuFit
from calculators.memory.serving import serving_table
from calculators.models.spec import ModelSpec
from calculators.units import rate_text
from calculators.workload.compatibility import stack_problem
from calculators.workload.serving import ServingSettings

FIT_COLUMNS = ("verdict", "headroom_gib", "max_micro_batch", "min_gpus", "stack_problem")
SERVING_COLUMNS = (
    "verdict", "headroom_gib", "max_concurrency", "max_context_len", "decode_tokens_per_s", "min_gpus", "stack_problem"
)  # fmt: skip


# What a person reads for each column of the Compare tables (field names stay in the data).
FIELD_LABEL = {
    "name": "GPU",
    "verdict": "fits?",
    "headroom_gib": "headroom (GiB)",
    "max_micro_batch": "largest micro-batch",
    "min_gpus": "fewest GPUs",
    "stack_problem": "cannot run because",
    "max_concurrency": "most sequences",
    "max_context_len": "longest context (tokens)",
    "decode_tokens_per_s": "decode tokens/s per sequence",
    "vendor": "vendor",
    "category": "category",
    "memory_gb": "memory (GB, vendor's figure)",
    "memory_type": "memory type",
    "memory_bandwidth_tbps": "memory bandwidth (TB/s)",
    "fp32_tflops": "FP32 TFLOPS",
    "tf32_tflops": "TF32 TFLOPS",
    "bf16_tflops": "BF16 TFLOPS",
    "fp16_tflops": "FP16 TFLOPS",
    "fp8_tflops": "FP8 TFLOPS",
    "int8_tops": "INT8 TOPS",
    "tdp_w": "board power (W)",
    "interconnect": "GPU-to-GPU link",
    "interconnect_gbps": "link bandwidth (GB/s, both ways)",
    "pcie_gen": "PCIe generation",
    "launch_year": "launched",
    "price_usd": "price (USD)",
    "source": "source",
    "as_of": "as of",
    "detected": "on this host",
    "yours": "added by you",
}


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


def catalogue_table(gpus: list[GpuSpec], detected: set[str], user_names: set[str]) -> pd.DataFrame:
    """One row per GPU with its figures, whether this host has it and whether the user added it: what
    does not depend on the workload, so the Compare page keeps it from one change of the sidebar to
    the next (building it is most of the table's cost: pandas turns every text column into Arrow)."""
    table = pd.DataFrame([gpu.model_dump() for gpu in gpus])
    table["detected"] = table["name"].isin(detected)
    table["yours"] = table["name"].isin(user_names)
    return table


def with_fits(table: pd.DataFrame, fits: list[GpuFit] | list[ServingRow] | None) -> pd.DataFrame:
    """`table` (catalogue_table) with the workload's fit answers added as columns, when a workload is set;
    `table` itself is never changed (the page keeps it for the next run)."""
    if fits is None:
        return table
    by_name = {row.gpu: row for row in fits}
    columns = SERVING_COLUMNS if fits and isinstance(fits[0], ServingRow) else FIT_COLUMNS
    answers = {column: [getattr(by_name[name], column) for name in table["name"]] for column in columns}
    for column in ("max_micro_batch", "min_gpus"):
        if column in answers:
            answers[column] = pd.array(answers[column], dtype="Int64")
    return table.assign(**answers)  # one new frame, not one copy per column


def _cell_text(value: object) -> str:
    """Side-by-side cells as text: 2 decimals at most, '-' for unknown."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def side_by_side(table: pd.DataFrame, names: list[str], fields: list[str], zero: int | None = None) -> pd.DataFrame:
    """Chosen GPUs as columns, one row per field, each row named for a person; the fit columns read
    as in the table above ("does not fit", 167 tokens/s as the Memory page writes it; `zero` as in
    readable_fits)."""
    chosen = readable_fits(table.set_index("name").loc[names, fields], zero)
    return chosen.T.map(_cell_text).rename(index=lambda field: FIELD_LABEL.get(field, field))


# An empty number cell reads "-" (ui.layout.EMPTY_CELL, the grid's placeholder); the figures stay numbers
# (text "-" would sort "1,000" before "989"), and the header and caption say what an empty one means.
MISSING_FIGURE_TEXT = (
    "'-' in a figure column: the GPU has no such figure (no FP8 units before Hopper and Ada, no list price "
    "for a chip sold only as a cloud instance) or its vendor publishes none."
)


def missing_figure_help(column: pd.Series) -> str | None:
    """A number column's header help when some of its cells are empty: what "-" there means."""
    if not column.isna().any():
        return None
    return f"'-' for {column.isna().sum()} of the {len(column)} GPUs shown: no such figure (see below the filters)."


# what an empty fit cell means: a GPU the workload does not fit has no largest micro-batch and no decode speed
EMPTY_FIT_TEXT = {
    "max_micro_batch": "none fits",
    "decode_tokens_per_s": "does not fit",
    "min_gpus": "-",
    "stack_problem": "-",
}


def _fit_text(value: object, empty: str) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return empty
    if isinstance(value, float) and not value.is_integer():
        return rate_text(value)  # the decode tokens/s, written as the Memory page writes it
    return f"{int(value):,}" if isinstance(value, int | float) else str(value)


def fewest_gpus_text(min_gpus: int | None, zero: int) -> str:
    """The fewest data-parallel GPUs in words, the same on the Memory and Compare pages: without ZeRO
    every GPU holds a full copy, so no count fits ("needs ZeRO"); with it, none means activations
    alone exceed the GPU."""
    if min_gpus:
        return f"{min_gpus:,}"
    return "needs ZeRO" if zero == 0 else "none"


def readable_fits(table: pd.DataFrame, zero: int | None = None) -> pd.DataFrame:
    """The fit columns for reading: an empty cell says what it means ("none fits", "-") instead of
    "None". They become text; the catalogue's own columns keep their numbers (and their sorting).
    With the training run's ZeRO stage `zero`, the fewest GPUs read as on the Memory page."""
    table = table.copy()
    for column, empty in EMPTY_FIT_TEXT.items():
        if column in table:
            table[column] = [_fit_text(value, empty) for value in table[column]]
    if zero is not None and "min_gpus" in table:
        # the text "-" above came from an empty count: say why, in the Memory page's words
        table["min_gpus"] = [text if text != "-" else fewest_gpus_text(None, zero) for text in table["min_gpus"]]
    return table
