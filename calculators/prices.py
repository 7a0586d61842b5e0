"""Cloud price sheet: one validated `CloudPrice` per row of `data/cloud_prices.csv`.

Conventions of the figures:

- Prices are USD per INSTANCE-hour (the whole machine, host included), not per GPU.
  `usd_per_gpu_hour` divides by the GPUs in the instance.
- `spot_usd_per_hour` is empty where the provider or the source has no spot price.
  Spot prices are the cheapest zone seen (a best case) and move often.
- `interruptions_per_hour` is an estimate of spot interruptions per running hour,
  empty when there is no spot price. Each row's `notes` say how it was derived.
- `gpu` is a name in the GPU catalogue (`data/gpus.csv`), so prices join GPU figures.
- `as_of` is the date the price was known current; show it to users, prices go stale.

The same parser checks user-uploaded price sheets, so every problem with the input is
reported as a `PriceCatalogueError` naming the file, row, instance and field on one line.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from calculators.gpu_catalogue import GpuSpec, load_gpu_catalogue

DEFAULT_PRICES_PATH = Path(__file__).resolve().parent.parent / "data" / "cloud_prices.csv"

Text = Annotated[str, Field(min_length=1, max_length=500)]
UsdPerHour = Annotated[float, Field(ge=0, le=1_000_000)]


class CloudPrice(BaseModel):
    """One cloud instance's hourly price (USD per instance-hour) with its source and date."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    provider: Text
    instance_type: Text
    gpu: Text = Field(description="a name in the GPU catalogue")
    gpu_count: int = Field(ge=1, le=1024, description="GPUs in one instance")
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
OPTIONAL_COLUMNS: tuple[str, ...] = ("spot_usd_per_hour", "interruptions_per_hour", "notes")
REQUIRED_COLUMNS: tuple[str, ...] = tuple(column for column in COLUMNS if column not in OPTIONAL_COLUMNS)


class PriceCatalogueError(ValueError):
    """A price sheet (or uploaded CSV) is malformed; the message names file, row, instance and field."""


def usd_per_gpu_hour(price: CloudPrice, spot: bool = False) -> float | None:
    """Price of one GPU-hour: the instance price divided by its GPUs (None if no spot price)."""
    instance_usd_per_hour = price.spot_usd_per_hour if spot else price.on_demand_usd_per_hour
    if instance_usd_per_hour is None:
        return None
    return instance_usd_per_hour / price.gpu_count


def prices_as_of(prices: Iterable[CloudPrice]) -> tuple[dt.date, dt.date] | None:
    """(oldest, newest) as_of date of the prices, or None for no prices."""
    dates = [price.as_of for price in prices]
    return (min(dates), max(dates)) if dates else None


# --- parsing -------------------------------------------------------------------


def _shorten(value: object, limit: int = 40) -> str:
    """repr() of a bad value, cut to `limit` characters so a message stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(origin: str, row_number: int, label: str = "") -> str:
    """Prefix for messages: 'cloud_prices.csv row 7 (AWS p5.48xlarge)'. Rows count data rows from 1."""
    label = " ".join(label.split())[:60]
    place = f"{origin} row {row_number}"
    return f"{place} ({label})" if label else place


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
    present = list(columns)
    unknown = [column for column in present if column not in COLUMNS]
    if unknown:
        raise PriceCatalogueError(f"{where}: unknown column {_shorten(unknown[0])}; expected {', '.join(COLUMNS)}")
    missing = [column for column in REQUIRED_COLUMNS if column not in present]
    if missing:
        raise PriceCatalogueError(f"{where}: missing column {missing[0]!r}")


def _describe_validation_error(exc: ValidationError, values: Mapping[str, object]) -> str:
    """'field: message (got value)' for the first problem pydantic found."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "row"
    if error["type"] == "missing":
        return f"{field}: required, but the cell is empty"
    message = error["msg"].removeprefix("Value error, ")
    got = f" (got {_shorten(values[field])})" if field in values else ""
    return f"{field}: {message}{got}"


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
    raise PriceCatalogueError(f"{where}: gpu: unknown GPU {_shorten(name)}; {hint}")


def _parse_row(row: object, origin: str, row_number: int, gpu_names: Mapping[str, str]) -> CloudPrice:
    """Validate one row (a mapping of column to cell); blank cells mean 'not set'."""
    if not isinstance(row, Mapping):
        raise PriceCatalogueError(f"{_where(origin, row_number)}: expected a mapping of column to value")
    where = _where(origin, row_number, _label(row))
    _check_columns(row.keys(), where)
    values = {column: value.strip() if isinstance(value, str) else value for column, value in row.items()}
    values = {column: value for column, value in values.items() if not _is_blank(value)}
    if isinstance(values.get("gpu"), str):
        values["gpu"] = _canonical_gpu(values["gpu"], gpu_names, where)
    try:
        return CloudPrice.model_validate(values)
    except ValidationError as exc:
        raise PriceCatalogueError(f"{where}: {_describe_validation_error(exc, values)}") from None


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
            where = _where(origin, row_number, f"{price.provider} {price.instance_type}")
            raise PriceCatalogueError(f"{where}: instance_type: duplicate of row {first_row_of[key]} (same region)")
        first_row_of[key] = row_number
        prices.append(price)
    return prices


def _read_table(text: str, origin: str) -> list[list[str]]:
    """Split CSV text into rows of stripped cells, leaving out blank lines."""
    try:
        table = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise PriceCatalogueError(f"{origin}: not a readable CSV file: {exc}") from None
    stripped = [[cell.strip() for cell in cells] for cells in table]
    return [cells for cells in stripped if any(cells)]


def _rows_from_table(header: list[str], body: list[list[str]], origin: str) -> list[dict[str, str]]:
    """Pair each data row with the header; a row with too few or too many cells is an error."""
    rows = []
    for row_number, cells in enumerate(body, start=1):
        if len(cells) != len(header):
            label = _label(dict(zip(header, cells, strict=False)))
            where = _where(origin, row_number, label)
            raise PriceCatalogueError(f"{where}: {len(cells)} cells but the header has {len(header)} columns")
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _decode(text: object, origin: str) -> str:
    """CSV text from str or UTF-8 bytes (a byte-order mark is dropped)."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise PriceCatalogueError(f"{origin}: not UTF-8 text") from None
    if not isinstance(text, str):
        raise PriceCatalogueError(f"{origin}: expected CSV text, got {type(text).__name__}")
    return text.lstrip("\ufeff")


def parse_price_csv(
    text: str | bytes,
    origin: str = "uploaded price sheet",
    catalogue: Iterable[GpuSpec] | None = None,
) -> list[CloudPrice]:
    """Parse CSV text (header + one instance per row) into CloudPrices.

    Raises PriceCatalogueError, and nothing else, for any malformed input. Required columns:
    provider, instance_type, gpu, gpu_count, region, on_demand_usd_per_hour, source, as_of;
    spot_usd_per_hour, interruptions_per_hour and notes may be left out.
    """
    table = _read_table(_decode(text, origin), origin)
    if not table:
        raise PriceCatalogueError(f"{origin}: the file is empty (expected a header row and price rows)")
    header, body = table[0], table[1:]
    duplicates = sorted({column for column in header if header.count(column) > 1})
    if duplicates:
        raise PriceCatalogueError(f"{origin} header: column {_shorten(duplicates[0])} appears twice")
    _check_columns(header, f"{origin} header")
    if not body:
        raise PriceCatalogueError(f"{origin}: no price rows below the header")
    return parse_price_rows(_rows_from_table(header, body, origin), origin, catalogue)


def _read_prices(path: Path) -> tuple[CloudPrice, ...]:
    """Read and validate one price file."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PriceCatalogueError(f"price sheet not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PriceCatalogueError(f"price sheet {path} cannot be read: {exc}") from None
    return tuple(parse_price_csv(text, origin=path.name))


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
