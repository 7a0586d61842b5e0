"""Serving throughput: the serving step model against published serving measurements.

The rows (data/serving_throughput.csv, copied from shared/validation with each row's source, quote
and notes) are TensorRT-LLM's performance overview (offline maximum throughput at fixed lengths),
NVIDIA NIM's benchmarking tables (closed-loop concurrency, with TTFT and inter-token latency),
Vultr's vLLM tables and a vLLM blog row. Each row says which reading was taken: the whole tensor-
parallel group's output tokens per second, as the sources' notes read them. No coefficient is set
from these rows; a row whose model is not bundled, or whose lengths are not fixed, is shown with the
reason it is not estimated.
"""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

from pydantic import BaseModel

from calculators import DATA_DIR
from calculators.hardware.catalogue import find_gpu
from calculators.models.library import ModelNotFound, resolve_model
from calculators.timing.serving import ServingRequest, estimate_serving_speed, fitting_concurrency
from calculators.workload.serving import ServingSettings

SERVING_PATH = DATA_DIR / "serving_throughput.csv"
# The bundled model each published model name stands for (the quantised checkpoints keep the
# architecture; their precision is read from the row).
MODEL_NAMES: tuple[tuple[str, str], ...] = (
    ("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct"),
    ("llama-3.1-405b", "llama-3.1-405b"),
    ("llama-3.1-8b", "llama-3.1-8b"),
)
# Catalogue GPU by the row's system name, the longest first. NIM's "H100 80G" does not say SXM or
# PCIe: SXM is taken (its tensor-parallel pairs run over NVLink).
GPU_NAMES: tuple[tuple[str, str], ...] = (
    ("GB200", "GB200 (per B200 GPU)"),
    ("B200", "B200-SXM-180GB"),
    ("H200", "H200-SXM-141GB"),
    ("H100", "H100-SXM5-80GB"),
)


class ServingRow(BaseModel):
    """One published serving figure next to the estimate for its settings."""

    id: str
    source_kind: str
    model: str
    system: str
    precision: str
    lengths: str
    load: str
    reading: str
    measured: float
    estimate: float | None = None
    ratio: float | None = None
    concurrency: int | None = None
    measured_ttft_ms: float | None = None
    estimate_ttft_ms: float | None = None
    measured_tpot_ms: float | None = None
    estimate_tpot_ms: float | None = None
    why_not: str | None = None
    assumptions: list[str] = []
    source: str


def load_rows(path: Path = SERVING_PATH) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def source_kind(row: dict) -> str:
    """'TensorRT-LLM', 'NVIDIA NIM', 'vLLM (Vultr)' or 'vLLM blog'."""
    kind = row["source_type"]
    if "TensorRT-LLM" in kind:
        return "TensorRT-LLM"
    if "NIM" in kind:
        return "NVIDIA NIM"
    return "vLLM (Vultr)" if "Vultr" in kind else "vLLM blog"


def _lengths(text: str) -> tuple[int, int] | None:
    found = re.search(r"ISL=(\d+) / OSL=(\d+)", text) or re.search(r"(\d+) input tokens / (\d+) output", text)
    found = found or re.search(r"input (\d+) / output (\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _tensor_parallel(row: dict) -> int:
    found = re.search(r"TP=?(\d+)", row["system"])
    return int(found.group(1)) if found else int(row["accelerators_total"])


def _concurrency(row: dict) -> int:
    """The row's concurrency; 0 (the throughput-optimal one that fits) for offline maximum load."""
    found = re.search(r"concurrency (\d+)", row["scenario_or_load"])
    return int(found.group(1)) if found else 0


def _weight_precision(row: dict) -> str:
    text = row["precision"].upper()
    return "fp4" if "FP4" in text else "fp8" if "FP8" in text else "bf16"


def _bundled_model(name: str) -> str | None:
    folded = name.lower().replace(" ", "-")
    return next((bundled for key, bundled in MODEL_NAMES if key in folded), None)


def _gpu_name(row: dict) -> str | None:
    text = f"{row['system']} {row['accelerator']}"
    return next((gpu for key, gpu in GPU_NAMES if key in text), None)


def _why_not(row: dict) -> str | None:
    """Why a row is shown without an estimate, or None."""
    if _lengths(row["input_output_lengths"]) is None:
        return "variable request lengths (ShareGPT) and a requests/s figure: no fixed lengths to estimate"
    if _bundled_model(row["model"]) is None:
        return f"{row['model']} is not among the bundled models (a hybrid Mamba mixture of experts)"
    if _gpu_name(row) is None:
        return f"{row['accelerator']} is not in the GPU catalogue"
    return None


def row_inputs(row: dict) -> tuple[str, str, ServingSettings, ServingRequest, list[str]]:
    """(model name, GPU name, serving settings, request, assumptions) of an estimable row."""
    precision = _weight_precision(row)
    input_len, output_len = _lengths(row["input_output_lengths"])
    settings = ServingSettings(
        weight_precision=precision,
        kv_cache_precision="fp8" if precision in ("fp8", "fp4") else "bf16",
        tensor_parallel=_tensor_parallel(row),
        context_len=input_len + output_len,
    )
    request = ServingRequest(input_len=input_len, output_len=output_len, concurrency=_concurrency(row))
    assumptions = [
        "Whole tensor-parallel group's output tokens/s compared (the row's notes' reading).",
        "KV cache in fp8 with fp8/fp4 weights (ModelOpt checkpoints quantise it: kv_cache_quant_algo FP8)"
        if precision != "bf16"
        else "KV cache in bf16.",
        "Offline maximum load: the throughput-optimal concurrency that fits."
        if not request.concurrency
        else f"Closed loop at concurrency {request.concurrency}.",
    ]
    if "H100 80G" in row["system"]:
        assumptions.append("H100 SXM taken: the page does not say SXM or PCIe.")
    return _bundled_model(row["model"]), _gpu_name(row), settings, request, assumptions


def _float(text: str) -> float | None:
    text = text.replace(",", "").strip()
    return float(text) if text else None


def estimate_row(row: dict) -> ServingRow:
    """The row with its estimate, or with why_not when it is not estimated."""
    base = ServingRow(
        id=row["id"],
        source_kind=source_kind(row),
        model=row["model"],
        system=row["system"],
        precision=row["precision"],
        lengths=row["input_output_lengths"],
        load=row["scenario_or_load"],
        reading=row["unit"],
        measured=float(row["value"]),
        measured_ttft_ms=_float(row["ttft_ms"]),
        measured_tpot_ms=_float(row["tpot_or_itl_ms"]),
        source=row["source"],
    )
    why_not = _why_not(row)
    if why_not:
        return base.model_copy(update={"why_not": why_not})
    model, gpu, settings, request, assumptions = row_inputs(row)
    try:
        spec, gpu_spec = resolve_model(model), find_gpu(gpu)
        fits = fitting_concurrency(spec, settings, gpu_spec, request)
        if request.concurrency > fits:  # the server runs what fits and queues the rest
            assumptions.append(f"At most {fits} sequences fit: the server runs those and queues the others.")
            request = request.model_copy(update={"concurrency": fits})
        speed = estimate_serving_speed(spec, settings, gpu_spec, request)
    except (ValueError, KeyError, ModelNotFound) as error:
        return base.model_copy(update={"why_not": str(error), "assumptions": assumptions})
    return base.model_copy(
        update={
            "estimate": speed.output_tokens_per_s,
            "ratio": speed.output_tokens_per_s / base.measured,
            "concurrency": speed.concurrency,
            "estimate_ttft_ms": speed.ttft_s * 1e3,
            "estimate_tpot_ms": speed.tpot_s * 1e3,
            "assumptions": assumptions,
        }
    )


def serving_table(path: Path = SERVING_PATH) -> list[ServingRow]:
    return [estimate_row(row) for row in load_rows(path)]


class SourceSummary(BaseModel):
    source_kind: str
    rows: int
    estimated: int
    median_ratio: float | None
    within_30_percent: float | None


def summary_by_source(table: list[ServingRow]) -> list[SourceSummary]:
    """Per source and over all: rows, rows estimated, median estimate/measured, share within +-30%."""
    groups = {kind: [row for row in table if row.source_kind == kind] for kind in dict.fromkeys(
        row.source_kind for row in table)}  # fmt: skip
    groups["all"] = table
    return [_summary(kind, rows) for kind, rows in groups.items()]


def _summary(kind: str, rows: list[ServingRow]) -> SourceSummary:
    ratios = [row.ratio for row in rows if row.ratio is not None]
    return SourceSummary(
        source_kind=kind,
        rows=len(rows),
        estimated=len(ratios),
        median_ratio=statistics.median(ratios) if ratios else None,
        within_30_percent=sum(abs(ratio - 1) <= 0.3 for ratio in ratios) / len(ratios) if ratios else None,
    )
