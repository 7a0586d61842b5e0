"""Published serving results that are not in shared/validation, against the serving step model.

data/serving_published_extra.csv holds fixed-length serving figures from documents other than
those behind data/serving_throughput.csv: TensorRT-LLM's v0.9.0 performance table (a static batch
of equal requests, out tok/s/GPU and first-token latency) and Oracle's blog on Llama 3.1 405B FP8
with vLLM on 8 x MI300X (whole-system output tokens/s). Each row names the bundled model and
catalogue GPU it stands for, its precisions, lengths and batch, and which reading the figure is
(`metric`). The estimate is `estimate_serving_speed` at those settings; no coefficient is set from
these rows. The comparison reuses the `ServingRow` and `summary_by_source` of validation.serving.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from calculators import DATA_DIR
from calculators.hardware.catalogue import find_gpu
from calculators.hardware.csv_rows import check_public_source, describe_validation_error
from calculators.models.library import ModelNotFound, resolve_model
from calculators.timing.serving import ServingRequest, estimate_serving_speed, fitting_concurrency
from calculators.validation.serving import ServingRow
from calculators.workload.serving import KvPrecision, ServingSettings, WeightPrecision

PUBLISHED_PATH = DATA_DIR / "serving_published_extra.csv"
# What a row's figure measures: output tokens/s of one GPU, of the whole tensor-parallel group, or
# the time to the first token in milliseconds.
Metric = Literal["output_tokens_per_s_per_gpu", "output_tokens_per_s", "ttft_ms"]
METRIC_WORDS = {
    "output_tokens_per_s_per_gpu": "output tokens/s per GPU",
    "output_tokens_per_s": "output tokens/s, whole group",
    "ttft_ms": "time to first token, ms",
}


class PublishedServingError(ValueError):
    """A row of the published serving file that cannot be read, in one line."""


class PublishedServingRow(BaseModel):
    """One published serving figure at fixed lengths, with the settings it was measured at."""

    id: str = Field(min_length=1)
    source_kind: str = Field(min_length=1, description="the publisher and stack, e.g. 'TensorRT-LLM v0.9'")
    published_model: str = Field(min_length=1, description="the model as the document names it")
    model: str = Field(min_length=1, description="the bundled model it stands for")
    gpu: str = Field(min_length=1, description="catalogue GPU name")
    tensor_parallel: int = Field(gt=0, le=1024)
    weight_precision: WeightPrecision
    kv_cache_precision: KvPrecision
    input_len: int = Field(gt=0, le=10_000_000)
    output_len: int = Field(gt=0, le=10_000_000)
    concurrency: int = Field(ge=0, le=1 << 24, description="batch or concurrency; 0 = offline, all at once")
    metric: Metric
    value: float = Field(gt=0)
    quote: str = Field(min_length=1, description="the figure as the document prints it")
    source: str
    published: str = Field(pattern=r"^\d{4}-\d{2}(-\d{2})?$", description="the document's date (or month)")
    as_of: dt.date
    notes: str = ""

    @field_validator("source")
    @classmethod
    def _public(cls, text: str) -> str:
        return check_public_source(text)


def load_published_rows(path: Path = PUBLISHED_PATH) -> list[PublishedServingRow]:
    """Every row of `path`, validated; PublishedServingError names the first bad row and field."""
    with path.open(newline="", encoding="utf-8") as handle:
        raw_rows = list(csv.DictReader(handle))
    rows = []
    for number, raw in enumerate(raw_rows, start=2):  # line 1 is the header
        try:
            rows.append(PublishedServingRow.model_validate(raw))
        except ValidationError as exc:
            raise PublishedServingError(f"{path.name} line {number}: {describe_validation_error(exc, raw)}") from None
    return rows


def _settings_and_request(row: PublishedServingRow) -> tuple[ServingSettings, ServingRequest]:
    settings = ServingSettings(
        weight_precision=row.weight_precision,
        kv_cache_precision=row.kv_cache_precision,
        tensor_parallel=row.tensor_parallel,
        context_len=row.input_len + row.output_len,
    )
    return settings, ServingRequest(input_len=row.input_len, output_len=row.output_len, concurrency=row.concurrency)


def _reading(row: PublishedServingRow, speed) -> float:
    """The estimate in the row's own reading (`metric`)."""
    if row.metric == "output_tokens_per_s_per_gpu":
        return speed.output_tokens_per_s_per_gpu
    if row.metric == "output_tokens_per_s":
        return speed.output_tokens_per_s
    return speed.ttft_s * 1e3


def estimate_published_row(row: PublishedServingRow) -> ServingRow:
    """The row next to the estimate at its settings, or with why_not when the model refuses them."""
    base = ServingRow(
        id=row.id,
        source_kind=row.source_kind,
        model=f"{row.published_model} (as {row.model})",
        system=f"{row.tensor_parallel} x {row.gpu}",
        precision=f"weights {row.weight_precision}, KV cache {row.kv_cache_precision}",
        lengths=f"{row.input_len} in / {row.output_len} out",
        load=f"batch {row.concurrency}" if row.concurrency else "offline, best concurrency that fits",
        reading=METRIC_WORDS[row.metric],
        measured=row.value,
        measured_ttft_ms=row.value if row.metric == "ttft_ms" else None,
        source=row.source,
    )
    settings, request = _settings_and_request(row)
    assumptions = []
    try:
        spec, gpu = resolve_model(row.model), find_gpu(row.gpu)
        fits = fitting_concurrency(spec, settings, gpu, request)
        if request.concurrency > fits:  # the server runs what fits and queues the rest
            assumptions.append(f"At most {fits} sequences fit: the server runs those and queues the others.")
            request = request.model_copy(update={"concurrency": fits})
        speed = estimate_serving_speed(spec, settings, gpu, request)
    except (ValueError, KeyError, ModelNotFound) as error:
        return base.model_copy(update={"why_not": re.sub(r"\s+", " ", str(error))})
    estimate = _reading(row, speed)
    return base.model_copy(
        update={
            "estimate": estimate,
            "ratio": estimate / row.value,
            "concurrency": speed.concurrency,
            "estimate_ttft_ms": speed.ttft_s * 1e3,
            "estimate_tpot_ms": speed.tpot_s * 1e3,
            "assumptions": assumptions,
        }
    )


def published_serving_table(path: Path = PUBLISHED_PATH) -> list[ServingRow]:
    return [estimate_published_row(row) for row in load_published_rows(path)]
