"""The Validation table: every published peak-memory measurement (calculators.validation.peak_memory)
next to the estimate of its `python -m calculators memory ...` command line, parsed here as the
command line parses it, so the page, this table and the CLI give the same number."""

from __future__ import annotations

from calculators.interface.cli import build_parser, workload_from_args
from calculators.validation.peak_memory import (
    ValidationRow,
    all_measurements,
    estimated_gib,
    row_model,
    validation_row,
)


def validation_table() -> list[ValidationRow]:
    """Every measured row of both files with the estimate and the relative error."""
    table = []
    for row in all_measurements():
        model = row_model(row)
        workload = workload_from_args(build_parser().parse_args(["memory", *model.cli_args]))
        table.append(validation_row(row, model, estimated_gib(workload, model.compare_to)))
    return table
