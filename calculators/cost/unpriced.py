"""Why a catalogue GPU has no cost: `data/unpriced_gpus.csv` names each chip that neither a
rental row (`data/cloud_prices.csv`) nor a purchase price (`data/gpus.csv`) prices, with the
public document that says how it is sold, and `unpriced_gpus` says for any GPU list and price
sheet which GPUs get no cost and what would give them one.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Iterable
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

from calculators import DATA_DIR
from calculators.cost.prices import CloudPrice
from calculators.hardware.catalogue import GpuSpec
from calculators.hardware.csv_rows import check_public_source

UNPRICED_PATH = DATA_DIR / "unpriced_gpus.csv"


class UnpricedReason(BaseModel):
    """Why one chip has no public price, with the document that says how it is sold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str = Field(min_length=1, description="a name in the GPU catalogue")
    reason: str = Field(min_length=1, max_length=300)
    source: str
    as_of: dt.date

    @field_validator("source")
    @classmethod
    def _public(cls, value: str) -> str:
        return check_public_source(value)


@lru_cache(maxsize=1)
def unpriced_reasons() -> dict[str, UnpricedReason]:
    """GPU name -> why it has no public price (data/unpriced_gpus.csv, read once)."""
    with UNPRICED_PATH.open(newline="", encoding="utf-8") as handle:
        reasons = [UnpricedReason.model_validate(row) for row in csv.DictReader(handle)]
    return {reason.gpu: reason for reason in reasons}


def unpriced_gpus(gpus: Iterable[GpuSpec], prices: Iterable[CloudPrice], include_owned: bool) -> list[str]:
    """One line per GPU of `gpus` that gets no cost: no row of `prices` rents it and it is not
    costed as owned hardware (owned left out, or no purchase price). Each line, "GPU: why", says
    what would price it: owned hardware where a purchase price exists, else the user's own sheet.
    A GPU that only providers outside the user's choice rent is left out: the choice says why."""
    rented = {price.gpu for price in prices}
    lines = []
    for gpu in gpus:
        if gpu.name in rented or (include_owned and gpu.price_usd is not None):
            continue
        if gpu.price_usd is not None:
            lines.append(
                f"{gpu.name}: no provider in the price sheet rents it; owned, it costs its purchase price "
                f"(USD {gpu.price_usd:,.0f}) amortised plus power (owned hardware on the Plan page, buy or rent "
                "on the Time and cost page)"
            )
            continue
        known = unpriced_reasons().get(gpu.name)
        why = f"{known.reason} ({known.source}, {known.as_of})" if known else "no rental row and no purchase price"
        lines.append(f"{gpu.name}: {why}; add your own price in a price sheet to cost it")
    return lines
