"""The Validation table: every published peak-memory measurement (calculators.validation.peak_memory)
next to the estimate of its `python -m calculators memory ...` command line, parsed here as the
command line parses it, so the page, this table and the CLI give the same number; and the report of
`python -m calculators validation --json`: the memory and throughput rows, each with its estimate,
the measurement, their ratio and the command line that reproduces the estimate."""

from __future__ import annotations

import statistics

from calculators.interface.cli import build_parser, workload_from_args
from calculators.validation.peak_memory import (
    ValidationRow,
    all_measurements,
    estimated_gib,
    row_model,
    validation_row,
)
from calculators.validation.throughput import summary, throughput_table


def validation_table() -> list[ValidationRow]:
    """Every measured row of both files with the estimate and the relative error."""
    table = []
    for row in all_measurements():
        model = row_model(row)
        workload = workload_from_args(build_parser().parse_args(["memory", *model.cli_args]))
        table.append(validation_row(row, model, estimated_gib(workload, model.compare_to)))
    return table


def _compared(row_id: str, estimate: float, measured: float, unit: str, command: str) -> dict:
    """One row of the report: estimate, measurement, estimate / measured and the command line."""
    return {
        "id": row_id,
        "estimate": estimate,
        "measured": measured,
        "ratio": estimate / measured,
        "unit": unit,
        "cli_command": command,
    }


def _memory_rows() -> list[dict]:
    """Every peak-memory row; a row whose command line fails gives its error instead."""
    rows = []
    for row in all_measurements():
        try:
            model = row_model(row)
            workload = workload_from_args(build_parser().parse_args(["memory", *model.cli_args]))
            result = validation_row(row, model, estimated_gib(workload, model.compare_to))
        except (ValueError, KeyError) as error:  # one bad row stays one line of the report
            rows.append({"id": row.get("id", "?"), "error": str(error)})
            continue
        rows.append(_compared(result.id, result.estimate_gib, result.measured_gib, "GiB", result.command))
    return rows


def validation_report() -> dict:
    """The report of `validation --json`: {"memory": [...], "throughput": [...], "summary": {...}},
    each row with id, estimate, measured, ratio (or error), unit and cli_command."""
    memory = _memory_rows()
    throughput_rows = throughput_table()
    throughput = [
        _compared(row.id, row.estimate_tokens_s_gpu, row.measured_tokens_s_gpu, "tokens/s per GPU", row.command)
        for row in throughput_rows
    ]
    errors = [abs(row["ratio"] - 1) for row in memory if "ratio" in row]
    return {
        "memory": memory,
        "throughput": throughput,
        "summary": {
            "memory_median_abs_error": statistics.median(errors) if errors else None,
            "memory_worst_abs_error": max(errors, default=None),
            "throughput": summary(throughput_rows),
        },
    }
