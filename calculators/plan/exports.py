"""Downloads of a plan search: CSV of the plans, and an Excel workbook with the request, the
assumptions and the price dates beside them (sheets "plans" and "assumptions", columns kind,
name, value, as calculators.cost.exports writes them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from calculators.cost.exports import ASSUMPTION_COLUMNS, ASSUMPTIONS_SHEET, csv_bytes, models_frame, workbook_bytes
from calculators.plan.figures import hours_range_text, usd_range_text
from calculators.plan.search import Plan, PlanResult

PLANS_SHEET = "plans"
PLAN_COLUMNS: tuple[str, ...] = tuple(Plan.model_fields)


# the Plan page's table: its column -> the Plan field it shows (None: written from several fields)
PAGE_COLUMNS: dict[str, str | None] = {
    "plan": None,
    "gpus": "gpus",
    "gpu": "gpu",
    "pricing": "pricing",
    "hours": "hours",
    "hours range": None,
    "usd": "usd",
    "usd range": None,
    "provider": "provider",
    "instance": "instance_type",
    "usd on demand": "usd_on_demand",
    "usd spot": "usd_spot_expected",
    "ZeRO": "zero",
    "tp x pp": None,
    "checkpointing": "checkpointing",
    "micro-batch x accumulation": None,
    "peak GiB": "peak_gib",
    "headroom GiB": "headroom_gib",
    "step s": "step_s",
    "price as of": "price_as_of",
    "why": "reason",
}


def plans_table(plans: Sequence[Plan]) -> pd.DataFrame:
    """The Plan page's table: the front, fastest first, numbered as the page numbers its plans."""
    rows = []
    for number, plan in enumerate(plans, start=1):
        row = {column: getattr(plan, field) for column, field in PAGE_COLUMNS.items() if field is not None}
        row["plan"] = number
        row["tp x pp"] = f"{plan.tensor_parallel} x {plan.pipeline_parallel}"
        row["micro-batch x accumulation"] = f"{plan.micro_batch} x {plan.grad_accum}"
        row["hours range"] = hours_range_text(plan.hours_range)
        row["usd range"] = usd_range_text(plan.usd_range)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(PAGE_COLUMNS))


def plans_frame(plans: Sequence[Plan]) -> pd.DataFrame:
    """The download: the page's table (its rows in its order, its columns first), then every Plan
    field the page does not show (an empty table keeps the columns)."""
    shown = set(PAGE_COLUMNS) | {field for field in PAGE_COLUMNS.values() if field}
    rest = [column for column in PLAN_COLUMNS if column not in shown]
    return pd.concat([plans_table(plans), models_frame(plans, rest)], axis=1)


def plan_assumptions_frame(result: PlanResult, request: Mapping[str, object]) -> pd.DataFrame:
    """The request, the assumptions, the impossible asks, the GPUs left uncosted and why, each price
    source's as-of date and the host RAM each plan's offload check used (the instance's published
    RAM, or the per-GPU assumption)."""
    rows = [("request", str(name), str(value)) for name, value in request.items()]
    rows += [("assumption", str(number), text) for number, text in enumerate(result.assumptions, start=1)]
    rows += [("problem", str(number), text) for number, text in enumerate(result.problems, start=1)]
    rows += [("not costed", text.split(":", 1)[0], text.split(": ", 1)[1]) for text in result.unpriced]
    dates = sorted({(plan.provider, plan.source, str(plan.price_as_of)) for plan in result.plans})
    rows += [("price as of", f"{provider}: {source}", as_of) for provider, source, as_of in dates]
    host = {(f"{p.gpus} x {p.gpu}, {p.provider} {p.instance_type}", p.host_ram_basis) for p in result.plans}
    rows += [("host RAM", name, basis) for name, basis in sorted(host) if basis]
    return pd.DataFrame(rows, columns=list(ASSUMPTION_COLUMNS))


def plans_csv_bytes(plans: Sequence[Plan]) -> bytes:
    """The plans as UTF-8 CSV (header row, ISO dates, empty for None)."""
    return csv_bytes(plans_frame(plans))


def plans_excel_bytes(result: PlanResult, request: Mapping[str, object]) -> bytes:
    """An .xlsx workbook with the sheets "plans" and "assumptions" (needs openpyxl)."""
    return workbook_bytes(
        {PLANS_SHEET: plans_frame(result.plans), ASSUMPTIONS_SHEET: plan_assumptions_frame(result, request)}
    )
