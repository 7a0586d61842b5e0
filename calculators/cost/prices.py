"""Cloud price sheet: one validated `CloudPrice` per row of `data/cloud_prices.csv`.

Conventions of the figures:

- Prices are USD per INSTANCE-hour (the whole machine, host included), not per GPU.
  `usd_per_gpu_hour` divides by the GPUs in the instance.
- `spot_usd_per_hour` is empty where the provider or the source has no spot price.
  Spot prices are the cheapest zone seen (a best case) and move often.
- `interruptions_per_hour` is an estimate of spot interruptions per running hour,
  empty when there is no spot price. Each row's `notes` say how it was derived.
- `gpu` is a name in the GPU catalogue (`data/gpus.csv`), so prices join GPU figures.
- `host_ram_gib` is the host (CPU) memory of one whole instance in GiB, as its provider or a
  catalogue derived from the provider publishes it; empty where no public document gives it.
  The planner checks CPU offload against it (calculators.plan.search). Each filled row's `notes`
  name the document the figure comes from.
- `as_of` is the date the price was known current; show it to users, prices go stale.

The same parser checks user-uploaded price sheets, so every problem with the input is
reported as a `PriceCatalogueError` naming the file, row, instance and field on one line.
Text cells with control characters are refused (they break the Excel export); price
files read from disk must also name a public document in every `source` cell.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from calculators import DATA_DIR
from calculators.hardware import csv_rows
from calculators.hardware.catalogue import GpuSpec, load_gpu_catalogue

DEFAULT_PRICES_PATH = DATA_DIR / "cloud_prices.csv"

Text = Annotated[str, Field(min_length=1, max_length=500)]
UsdPerHour = Annotated[float, Field(ge=0, le=1_000_000)]


class CloudPrice(BaseModel):
    """One cloud instance's hourly price (USD per instance-hour) with its source and date."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    provider: Text
    instance_type: Text
    gpu: Text = Field(description="a name in the GPU catalogue")
    gpu_count: int = Field(ge=1, le=1024, description="GPUs in one instance")
    host_ram_gib: float | None = Field(
        default=None, gt=0, le=1_048_576, description="host RAM of one instance in GiB; None: not published"
    )
    region: Text
    on_demand_usd_per_hour: UsdPerHour
    spot_usd_per_hour: UsdPerHour | None = None
    interruptions_per_hour: float | None = Field(
        default=None, ge=0, le=100, description="expected spot interruptions per running hour"
    )
    source: str = Field(min_length=1)
    as_of: dt.date
    notes: str | None = None

    @field_validator("interruptions_per_hour")
    @classmethod
    def _rate_needs_a_spot_price(cls, rate: float | None, info: ValidationInfo) -> float | None:
        """An interruption rate only means something for a spot price."""
        if rate is not None and info.data.get("spot_usd_per_hour") is None:
            raise ValueError("must be empty when spot_usd_per_hour is empty")
        return rate


COLUMNS: tuple[str, ...] = tuple(CloudPrice.model_fields)
OPTIONAL_COLUMNS: tuple[str, ...] = ("host_ram_gib", "spot_usd_per_hour", "interruptions_per_hour", "notes")
REQUIRED_COLUMNS: tuple[str, ...] = tuple(column for column in COLUMNS if column not in OPTIONAL_COLUMNS)


class PriceCatalogueError(ValueError):
    """A price sheet (or uploaded CSV) is malformed; the message names file, row, instance and field."""


def instance_usd_per_hour(price: CloudPrice, spot: bool = False) -> float | None:
    """Price of one whole instance-hour, on demand or spot (None if the row has no spot price)."""
    return price.spot_usd_per_hour if spot else price.on_demand_usd_per_hour


def usd_per_gpu_hour(price: CloudPrice, spot: bool = False) -> float | None:
    """Price of one GPU-hour: the instance price divided by its GPUs (None if no spot price)."""
    whole = instance_usd_per_hour(price, spot)
    return None if whole is None else whole / price.gpu_count


def prices_as_of(prices: Iterable[CloudPrice]) -> tuple[dt.date, dt.date] | None:
    """(oldest, newest) as_of date of the prices, or None for no prices."""
    dates = [price.as_of for price in prices]
    return (min(dates), max(dates)) if dates else None


# --- parsing -------------------------------------------------------------------


def _label(row: Mapping[object, object]) -> str:
    """'provider instance_type' of a raw row, for messages."""
    parts = [row.get("provider"), row.get("instance_type")]
    return " ".join(part.strip() for part in parts if isinstance(part, str) and part.strip())


def _is_blank(value: object) -> bool:
    """Empty text, None and NaN (pandas' empty cell) all mean 'not set'."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _check_columns(columns: Iterable[object], where: str) -> None:
    """Raise PriceCatalogueError for an unknown or a missing required column."""
    csv_rows.check_columns(
        columns,
        where,
        PriceCatalogueError,
        known=COLUMNS,
        required=REQUIRED_COLUMNS,
        unknown_hint=f"; expected {', '.join(COLUMNS)}",
    )


def _gpu_names(catalogue: Iterable[GpuSpec] | None) -> dict[str, str]:
    """Catalogue names keyed by their case-folded form."""
    gpus = load_gpu_catalogue() if catalogue is None else catalogue
    return {gpu.name.casefold(): gpu.name for gpu in gpus}


def _canonical_gpu(name: str, names: Mapping[str, str], where: str) -> str:
    """The catalogue's spelling of `name`; an unknown name lists close catalogue names."""
    key = name.strip().casefold()
    if key in names:
        return names[key]
    close = [names[match] for match in difflib.get_close_matches(key, list(names), n=3, cutoff=0.4)]
    hint = f"close catalogue names: {', '.join(close)}" if close else f"{len(names)} GPUs are in the catalogue"
    raise PriceCatalogueError(f"{where}: gpu: unknown GPU {csv_rows.shorten(name)}; {hint}")


def _parse_row(row: object, origin: str, row_number: int, gpu_names: Mapping[str, str]) -> CloudPrice:
    """Validate one row (a mapping of column to cell); blank cells mean 'not set'."""
    where = csv_rows.row_where(row, origin, row_number, _label, PriceCatalogueError)
    _check_columns(row.keys(), where)
    values = {column: value.strip() if isinstance(value, str) else value for column, value in row.items()}
    values = {column: value for column, value in values.items() if not _is_blank(value)}
    csv_rows.check_text_cells(values, where, PriceCatalogueError)
    if isinstance(values.get("gpu"), str):
        values["gpu"] = _canonical_gpu(values["gpu"], gpu_names, where)
    return csv_rows.validate_row(CloudPrice, values, where, PriceCatalogueError)


def parse_price_rows(
    rows: Sequence[Mapping[str, object]],
    origin: str = "cloud_prices.csv",
    catalogue: Iterable[GpuSpec] | None = None,
) -> list[CloudPrice]:
    """Validate rows (column -> cell) into CloudPrices; raise PriceCatalogueError on the first bad row.

    Rows are numbered from 1 (the first data row). `gpu` must name a GPU of `catalogue`
    (default: data/gpus.csv), ignoring case. (provider, instance_type, region) must be unique.
    """
    if not rows:
        raise PriceCatalogueError(f"{origin}: no price rows")
    gpu_names = _gpu_names(catalogue)
    prices: list[CloudPrice] = []
    first_row_of: dict[tuple[str, str, str], int] = {}
    for row_number, row in enumerate(rows, start=1):
        price = _parse_row(row, origin, row_number, gpu_names)
        key = (price.provider.casefold(), price.instance_type.casefold(), price.region.casefold())
        if key in first_row_of:
            where = csv_rows.where(origin, row_number, f"{price.provider} {price.instance_type}")
            raise PriceCatalogueError(f"{where}: instance_type: duplicate of row {first_row_of[key]} (same region)")
        first_row_of[key] = row_number
        prices.append(price)
    return prices


def parse_price_csv(
    text: str | bytes,
    origin: str = "uploaded price sheet",
    catalogue: Iterable[GpuSpec] | None = None,
) -> list[CloudPrice]:
    """Parse CSV text (header + one instance per row) into CloudPrices.

    Raises PriceCatalogueError, and nothing else, for any malformed input. Required columns:
    provider, instance_type, gpu, gpu_count, region, on_demand_usd_per_hour, source, as_of;
    host_ram_gib, spot_usd_per_hour, interruptions_per_hour and notes may be left out.
    """
    rows = csv_rows.parse_table(
        text,
        origin,
        PriceCatalogueError,
        rows_name="price rows",
        check_header=_check_columns,
        label=_label,
        quote_column=csv_rows.shorten,
    )
    return parse_price_rows(rows, origin, catalogue)


def _read_prices(path: Path) -> tuple[CloudPrice, ...]:
    """Read and validate one price file, whose every source must be a public document.

    Uploaded sheets (`parse_price_csv`) skip the source check: a negotiated quote has no
    public document, but a price shipped with the app must be checkable by anyone."""
    text = csv_rows.read_csv_file(path, PriceCatalogueError, "price sheet")
    prices = parse_price_csv(text, origin=path.name)
    for row_number, price in enumerate(prices, start=1):
        place = csv_rows.where(path.name, row_number, _label(price.model_dump()))
        csv_rows.require_public_source(price.source, place, PriceCatalogueError)
    return tuple(prices)


@lru_cache(maxsize=1)
def _load_default_prices() -> tuple[CloudPrice, ...]:
    """The repo's data/cloud_prices.csv, read once per process."""
    return _read_prices(DEFAULT_PRICES_PATH)


def load_prices(path: Path | None = None) -> tuple[CloudPrice, ...]:
    """All prices in `path` (default: the repo's data/cloud_prices.csv, cached) in file order.

    Raises PriceCatalogueError for a missing or malformed file. CloudPrices are frozen,
    so sharing the cached tuple is safe.
    """
    if path is None:
        return _load_default_prices()
    return _read_prices(Path(path))
