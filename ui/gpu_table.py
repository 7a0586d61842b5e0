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


def readable_fit_rows(fits: list[GpuFit] | list[ServingRow], zero: int | None = None) -> dict[str, dict[str, object]]:
    """Each GPU's fit answers by name, for reading: an empty cell says what it means ("none fits", "-")
    instead of "None", and those columns become text (the verdict, headroom and serving counts stay as
    they are). With the training run's ZeRO stage `zero`, the fewest GPUs read as on the Memory page."""
    columns = SERVING_COLUMNS if fits and isinstance(fits[0], ServingRow) else FIT_COLUMNS
    return {row.gpu: {column: _readable(column, getattr(row, column), zero) for column in columns} for row in fits}


def _readable(column: str, value: object, zero: int | None) -> object:
    if column not in EMPTY_FIT_TEXT:
        return value
    text = _fit_text(value, EMPTY_FIT_TEXT[column])
    if column == "min_gpus" and zero is not None and text == "-":
        return fewest_gpus_text(None, zero)  # the "-" came from an empty count: say why, in the Memory page's words
    return text


def with_fit_columns(figures: pd.DataFrame, fit_rows: dict[str, dict[str, object]], fields: list[str]) -> pd.DataFrame:
    """The table as shown: each GPU's name, its fit answers `fields` (readable_fit_rows), then the rest
    of `figures` (catalogue_table's rows and columns), made as one frame from the columns as they are:
    per column pandas work (a copy, a filter, an assignment) was most of the page's cost on each change
    of the workload."""
    names = list(figures["name"])
    fit_columns = {field: _fit_column(fit_rows, field, names) for field in fields}
    figure_columns = {column: figures[column].array for column in figures.columns if column != "name"}
    return pd.DataFrame({"name": figures["name"].array, **fit_columns, **figure_columns})


def _fit_column(
    fit_rows: dict[str, dict[str, object]], field: str, names: list[str]
) -> list | pd.api.extensions.ExtensionArray:
    """The answers `field` of the GPUs `names`; with no GPU left, typed as every GPU's answers are, so
    that it stays a number or a text column."""
    values = [fit_rows[name][field] for name in names]
    if values:
        return values
    return pd.Series([row[field] for row in fit_rows.values()]).array[:0]


def _cell_text(value: object) -> str:
    """Side-by-side cells as text: 2 decimals at most, '-' for unknown."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def side_by_side(rows: dict[str, dict[str, object]], names: list[str], fields: list[str]) -> pd.DataFrame:
    """Chosen GPUs as columns, one row per field, each row named for a person. `rows`: each GPU's cells
    by field, its catalogue row and its fit answers as readable_fit_rows writes them ("does not fit",
    167 tokens/s as the Memory page writes it), so the fit rows read as in the table above."""
    return pd.DataFrame(
        {name: [_cell_text(rows[name][field]) for field in fields] for name in names},
        index=[FIELD_LABEL.get(field, field) for field in fields],
    )


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
    if isinstance(value, float):
        # the decode tokens/s, written as the Memory page writes it
        return f"{int(value):,}" if value.is_integer() else rate_text(value)
    return str(value)  # counts (a micro-batch of 1026 images) as plain digits


def fewest_gpus_text(min_gpus: int | None, zero: int) -> str:
    """The fewest data-parallel GPUs in words, the same on the Memory and Compare pages: without ZeRO
    every GPU holds a full copy, so no count fits ("needs ZeRO"); with it, none means activations
    alone exceed the GPU."""
    if min_gpus:
        return f"{min_gpus:,}"
    return "needs ZeRO" if zero == 0 else "none"
