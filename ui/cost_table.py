"""The Cost page's ranked table and the export's assumptions (pandas only, no streamlit)."""

from __future__ import annotations

import math

import pandas as pd

from calculators.cost.options import CostOption, Option, pareto_front, ranked_and_set_apart
from calculators.cost.prices import CloudPrice, prices_as_of
from calculators.plan.figures import hours_range_text, usd_range_text

FORMULAS = [
    "training FLOPs per token = 6 N + 12 L s h_attn (+ 2 N + attention forward with full checkpointing) "
    "(Kaplan et al. 2020; PaLM appendix B; Korthikanti et al. 2022)",
    "GEMM s = max(2 m n k / (dense peak x achievable fraction at the shape x 0.825 sustained), bytes / bandwidth)"
    " per linear of a layer, per tensor-parallel rank and micro-batch (mamf-finder; XLA's measured H100 curve)",
    "attention s = FlashAttention FLOPs / the kernel's published TFLOPS at the head dim, sequence length and mask, "
    "forward and backward (Dao 2023; Shah et al. 2024; other GPUs scaled by peak); norms, "
    "activations, loss and optimizer = bytes / memory bandwidth",
    "data-parallel bytes per GPU = 2 (n - 1) / n x trainable per-rank gradient bytes (ring; nccl-tests "
    "PERFORMANCE.md); ZeRO-3 x 1.5; tensor parallel 4 all-reduces of b s h per layer; pipeline 2 b s h per micro-batch",
    "step s = compute s + exposed traffic per dimension + bubble (p - 1) / (v m) (Narayanan et al. 2021)",
    "hours = steps per epoch x epochs x step s / 3600",
    "cost on demand = instances x USD per instance-hour x hours; instances = ceil(GPUs / GPUs per instance)",
    "checkpoint interval = sqrt(2 x checkpoint write time x mean time between interruptions) (Young 1974, Daly 2006)",
    "expected spot hours: Daly 2006 (exponential interruptions), with restart time and lost work",
    "cost per epoch = cost x hours per epoch / hours; per million tokens = cost / (tokens / 1e6)",
    "energy kWh = (GPU TDP x share drawn while training + host W per GPU) x PUE x GPUs x on-demand hours / 1000 "
    "(76% of rated power measured on 8 x H100 nodes, Newkirk et al. 2025; DGX H100 rated 10.2 kW; Uptime "
    "Institute 2024 average PUE 1.56); a spot row shows the same energy (re-run work not counted)",
    "CO2 kg = energy kWh x the region's grid gCO2e/kWh / 1000 (data/grid_intensity.csv: Google Cloud region "
    "carbon data 2024, Ember via Our World in Data 2023); 'not known' where the region is not one place",
]


ENERGY_COLUMN = "energy (kWh)"
CO2_COLUMN = "CO2 (kg CO2e)"
# what a reader compares first leads, so a narrow window shows it without scrolling; the downloads keep this order
LEADING_COLUMNS = ["gpu", "pricing", "hours", "usd", "usd range", "gpus", "provider"]
RANKED_COLUMNS = LEADING_COLUMNS + [
    "instance",
    "region",
    "instances",
    "fits",
    "prices as of",
    ENERGY_COLUMN,
    CO2_COLUMN,
    "hours range",
    "usd per epoch",
    "usd per M tokens",
    "interruptions per hour",
    "pareto",
    "note",
]


def _known(value: float | None) -> str:
    """A figure for the table, or 'not known' in words (never a blank that reads as 0)."""
    if value is None:
        return "not known"
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def escape_dollars(text: str) -> str:
    """Markdown text with each "$" escaped, so that two prices in a line are not read as LaTeX."""
    return text.replace("$", "\\$")


def escape_markdown(text: str) -> str:
    """Plain text (an assumption, a formula) for st.markdown: "$", "*", "_", "~" and "`" escaped, so
    "12*L*s*heads*head_dim" reads as written instead of turning into italics, and two prices are not
    read as LaTeX."""
    for mark in ("\\", "`", "*", "_", "~"):
        text = text.replace(mark, "\\" + mark)
    return escape_dollars(text)


def table_and_left_out(options: list[Option], fits_only: bool) -> tuple[list[Option], list[Option]]:
    """The options (CostOption, or the TimedRow each is priced from) for the ranked table and those
    shown apart as "Left out".

    With `fits_only` the table has only options that fit and can run; without it, options that
    only fail the memory check join the table (marked `fits` False). Options whose software
    stack cannot run the workload are always left out.
    """
    if fits_only:
        return ranked_and_set_apart(options)
    return (
        [option for option in options if option.stack_problem is None],
        [option for option in options if option.stack_problem is not None],
    )


def left_out_rows(options: list[CostOption]) -> pd.DataFrame:
    """One row per option set apart, with the reason in words."""
    return pd.DataFrame(
        [
            {
                "gpu": option.gpu,
                "provider": option.provider,
                "instance": option.instance_type,
                "region": option.region,
                "reason": option.excluded_reason or option.stack_problem,
                "usd on demand": option.usd_on_demand,
            }
            for option in options
        ],
        # the reason is what this list is read for: beside the GPU, before the offer's details
        columns=["gpu", "reason", "usd on demand", "provider", "instance", "region"],
    )


def ranked_rows(options: list[CostOption]) -> pd.DataFrame:
    """One row per option and pricing (on demand, spot), those that fit first, each cheapest first, in the columns
    RANKED_COLUMNS. An option not worth running on spot has no spot row; its on-demand row says why in "note"."""
    front_on_demand = {id(option) for option in pareto_front(options)}
    front_spot = {id(option) for option in pareto_front(options, spot=True)}
    rows = []
    for option in options:
        common = {
            "gpu": option.gpu,
            "provider": option.provider,
            "instance": option.instance_type,
            "region": option.region,
            "gpus": option.gpus,
            "instances": option.instances,
            "fits": option.fits_in_memory,
            "prices as of": option.price_as_of,
            ENERGY_COLUMN: _known(option.energy_kwh),
            CO2_COLUMN: _known(option.co2_kg),
        }
        rows.append(
            common
            | {
                "pricing": "on demand",
                "hours": option.hours,
                "hours range": hours_range_text(option.hours_range),
                "usd": option.usd_on_demand,
                "usd range": usd_range_text(option.usd_on_demand_range),
                "usd per epoch": option.usd_per_epoch_on_demand,
                "usd per M tokens": option.usd_per_million_tokens_on_demand,
                "interruptions per hour": None,
                "pareto": id(option) in front_on_demand,
                "note": option.spot_not_worth_reason or "",
            }
        )
        if option.usd_spot_expected is not None:
            rows.append(
                common
                | {
                    "pricing": "spot",
                    "hours": option.spot_hours_expected,
                    "hours range": hours_range_text(option.spot_hours_range),
                    "usd": option.usd_spot_expected,
                    "usd range": usd_range_text(option.usd_spot_expected_range),
                    "usd per epoch": option.usd_per_epoch_spot,
                    "usd per M tokens": option.usd_per_million_tokens_spot,
                    "interruptions per hour": option.interruptions_per_hour,
                    "pareto": id(option) in front_spot,
                    "note": "; ".join(option.range_notes[1:]),
                }
            )
    # what fits ranks first (options not checked count as fitting), then the cheapest; sorted here, in
    # Python (stable, as pandas' sort was), and the table made once in its columns' order (a sort, a
    # selection of columns and three copies of it took five times as long)
    rows.sort(key=lambda row: (row["fits"] is False, row["usd"]))
    return pd.DataFrame(rows, columns=RANKED_COLUMNS)


NOT_INTERRUPTED_TEXT = "- (on demand)"


def significant_text(value: float, digits: int = 3) -> str:
    """A number to `digits` significant digits in plain notation, never "3.47e-05" nor "1.3300":
    1.33, 0.0125, 0.0000347, 1,330."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{round(value, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def shown_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ranked rows as the page shows them: an on-demand row's interruptions per hour read
    "- (on demand)" instead of the grid's "None" (a text column then; the downloads keep the number)."""
    if "interruptions per hour" not in rows:
        return rows
    rates = rows["interruptions per hour"]
    texts = [NOT_INTERRUPTED_TEXT if pd.isna(rate) else significant_text(rate) for rate in rates]
    return rows.assign(**{"interruptions per hour": texts})


def range_lines(options: list[CostOption]) -> list[str]:
    """What the table's ranges rest on, each line once: the time model's measured error per GPU
    family (calculators.cost.ranges), interruptions at half and twice the rate, spot prices across
    regions where the data has them."""
    lines = dict.fromkeys(option.range_notes[0] for option in options if option.range_notes)
    return [
        *lines,
        "spot ranges also take interruptions at half and twice the rate (calculators.cost.spot) and, where the "
        "note says so, the spot price across regions",
    ]


def catalogue_dates(prices: list[CloudPrice], gpu_as_of: str) -> dict[str, str]:
    """As-of dates for the export: prices (oldest to newest) and the GPU catalogue."""
    span = prices_as_of(prices)
    dates = {"GPU catalogue": gpu_as_of}
    if span is not None:
        dates["cloud prices"] = f"{span[0].isoformat()} to {span[1].isoformat()}"
    return dates
