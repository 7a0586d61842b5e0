"""How far a spot price moves across regions: AWS Spot Advisor's savings per region and instance.

The price sheet's spot price is the cheapest availability zone seen (calculators.cost.prices: a
best case). `data/aws_spot_savings.csv` holds, per AWS region and GPU instance type of the price
sheet, the saving of spot over on demand that the AWS Spot Instance Advisor publishes (copied from
shared/reference/aws_spot_advisor_gpu.csv, itself alexei-led/spotinfo's copy of AWS's
spot-advisor-data.json, each row with its source and date). A region's spot price is taken as

    spot USD/h in region r = on-demand USD/h x (1 - savings_r / 100)

with the row's on-demand price standing for every region's (the price sheet gives the cheapest
region's; AWS lists the same on-demand price in us-east-1, us-east-2 and us-west-2 for these
instances). The range is the lowest and highest of those and the sheet's own spot price. A region
whose spot costs as much as on demand or more (savings <= 0) is left out: there one would rent on
demand.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from calculators import DATA_DIR
from calculators.cost.prices import CloudPrice
from calculators.hardware.csv_rows import check_public_source

SPOT_SAVINGS_PATH = DATA_DIR / "aws_spot_savings.csv"
# Providers whose spot price in the price sheet is the cheapest zone's (the sheet's notes:
# "spot = MIN over AZs in region (best case)", SkyPilot's AWS catalogue).
CHEAPEST_ZONE_PROVIDERS = frozenset({"aws"})


class SpotSaving(BaseModel):
    """Spot's saving over on demand for one instance type in one region, with its source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    instance_type: str = Field(min_length=1)
    savings_vs_ondemand_pct: float = Field(ge=-1000, le=100)
    interruption_band: str = ""
    source: str
    as_of: dt.date
    notes: str = ""

    @field_validator("source")
    @classmethod
    def _public(cls, value: str) -> str:
        return check_public_source(value)


class SpotPriceRange(NamedTuple):
    """The spot price of one instance across regions (USD per instance-hour) and what it rests on."""

    low_usd_per_hour: float
    high_usd_per_hour: float
    note: str | None  # the spread in words; None when the sheet's price is all there is


@lru_cache(maxsize=4)
def load_spot_savings(path: Path = SPOT_SAVINGS_PATH) -> tuple[SpotSaving, ...]:
    """Every row of the savings table, validated (read once per path)."""
    with path.open(newline="", encoding="utf-8") as handle:
        return tuple(SpotSaving.model_validate(row) for row in csv.DictReader(handle))


def savings_of(price: CloudPrice, savings: Sequence[SpotSaving]) -> list[SpotSaving]:
    """The rows for `price`'s provider and instance type, in the table's order."""
    return list(_indexed(savings).rows.get((price.provider.casefold(), price.instance_type), ()))


class _IndexedTable(NamedTuple):
    """A savings table's rows by (case-folded provider, instance type), each list in the table's
    order, and the spot price range of each price row asked about (spot_price_range)."""

    table: Sequence[SpotSaving]
    rows: dict[tuple[str, str], list[SpotSaving]]
    ranges: dict[CloudPrice, SpotPriceRange]


# Each savings table a caller passes, indexed once: the Time and cost page prices ~130 rows against
# the ~630 of data/aws_spot_savings.csv each rerun. Kept only for a tuple, held here so that its id
# stays its own: a tuple of frozen rows cannot change, so the same object is the same table. A
# price row (frozen, hashed and compared by every field) always gets the same range from it.
_INDEXED: dict[int, _IndexedTable] = {}
_INDEXED_TABLES = 8
_RANGES_PER_TABLE = 4096  # price rows a table keeps ranges for (a sheet's, at a few discounts)


def _indexed(savings: Sequence[SpotSaving]) -> _IndexedTable:
    """`savings` indexed: the one held for this tuple, else a new one (held when `savings` is a tuple)."""
    held = _INDEXED.get(id(savings))
    if held is not None and held.table is savings:
        return held
    rows: dict[tuple[str, str], list[SpotSaving]] = {}
    for row in savings:
        rows.setdefault((row.provider.casefold(), row.instance_type), []).append(row)
    indexed = _IndexedTable(savings, rows, {})
    if isinstance(savings, tuple):
        if len(_INDEXED) >= _INDEXED_TABLES:
            _INDEXED.clear()
        _INDEXED[id(savings)] = indexed
    return indexed


def region_spot_usd_per_hour(on_demand_usd_per_hour: float, savings_pct: float) -> float:
    """A region's spot price from its saving: on demand x (1 - savings / 100) (AWS Spot Advisor's
    "Savings over On-Demand")."""
    return on_demand_usd_per_hour * (1 - savings_pct / 100)


def spot_price_range(price: CloudPrice, savings: Sequence[SpotSaving] | None = None) -> SpotPriceRange | None:
    """The spot price of `price`'s instance from its cheapest to its dearest region (None without a
    spot price). It always includes the sheet's spot price; without savings rows it is that price
    alone, with a note saying so where the provider's price is the cheapest zone's."""
    if price.spot_usd_per_hour is None:
        return None
    indexed = _indexed(load_spot_savings() if savings is None else savings)
    found = indexed.ranges.get(price)
    if found is None:
        found = _spot_price_range(price, indexed.rows.get((price.provider.casefold(), price.instance_type), []))
        if len(indexed.ranges) >= _RANGES_PER_TABLE:
            indexed.ranges.clear()
        indexed.ranges[price] = found
    return found


def _spot_price_range(price: CloudPrice, every: list[SpotSaving]) -> SpotPriceRange:
    """spot_price_range of a row with a spot price, from the savings rows of its instance type."""
    spot = price.spot_usd_per_hour
    rows = [row for row in every if row.savings_vs_ondemand_pct > 0]
    cheapest_zone = price.provider.casefold() in CHEAPEST_ZONE_PROVIDERS
    if not rows:
        note = None
        if cheapest_zone:
            note = f"{price.provider} spot price is the cheapest zone's (a best case); the data has no spread for it"
        return SpotPriceRange(spot, spot, note)
    regional = [region_spot_usd_per_hour(price.on_demand_usd_per_hour, row.savings_vs_ondemand_pct) for row in rows]
    low, high = min([spot, *regional]), max([spot, *regional])
    pcts = [row.savings_vs_ondemand_pct for row in rows]
    where = "is the cheapest zone's (a best case)" if cheapest_zone else "is one region's"
    note = (
        f"{price.provider} {price.instance_type} spot price {where}: AWS Spot Advisor's savings of "
        f"{min(pcts):g}-{max(pcts):g}% over on demand in {len(rows)} regions ({rows[0].as_of}) give "
        f"${low:,.2f}-{high:,.2f}/h per instance"
    )
    if len(rows) < len(every):
        note += f" ({len(every) - len(rows)} region(s) where spot costs at least on demand left out)"
    return SpotPriceRange(low, high, note)
