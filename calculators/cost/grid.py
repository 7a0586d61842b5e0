"""Grid carbon intensity per cloud region: one validated `GridIntensity` per row of data/grid_intensity.csv.

Rows are keyed by (provider, region) as data/cloud_prices.csv spells them (GCP and Nebius both have
a `us-central1`, on different grids). `gco2e_per_kwh` is the grid's yearly average intensity,
location-based (the grid's mix, not the provider's renewable purchases); it is empty where the
region is not one place ("all regions", "not stated") or no public figure was at hand, and then
`notes` must say why: a region without a figure has no CO2 estimate, never 0. Every row names a
public document and the date its figure was known current (`as_of`), as the price sheet does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calculators import DATA_DIR
from calculators.cost.prices import Text
from calculators.hardware import csv_rows

DEFAULT_GRID_PATH = DATA_DIR / "grid_intensity.csv"


class GridIntensity(BaseModel):
    """One cloud region's grid: its yearly carbon intensity (None: not known, with the reason)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    provider: Text
    region: Text
    location: Text = Field(description="where the region is, in words")
    gco2e_per_kwh: float | None = Field(default=None, ge=0, le=5000, description="None: not known (see notes)")
    source: str = Field(min_length=1)
    as_of: dt.date
    notes: str | None = None

    @model_validator(mode="after")
    def _unknown_says_why(self) -> GridIntensity:
        """A region without a figure must say why, so the page can say it in words."""
        if self.gco2e_per_kwh is None and not self.notes:
            raise ValueError("notes: say why the intensity is not known when gco2e_per_kwh is empty")
        return self


COLUMNS: tuple[str, ...] = tuple(GridIntensity.model_fields)
OPTIONAL_COLUMNS: tuple[str, ...] = ("gco2e_per_kwh", "notes")
REQUIRED_COLUMNS: tuple[str, ...] = tuple(column for column in COLUMNS if column not in OPTIONAL_COLUMNS)

GridTable = Mapping[tuple[str, str], GridIntensity]


class GridIntensityError(ValueError):
    """The grid intensity table is malformed; the message names file, row, region and field."""


def _label(row: Mapping[object, object]) -> str:
    """'provider region' of a raw row, for messages."""
    parts = [row.get("provider"), row.get("region")]
    return " ".join(part.strip() for part in parts if isinstance(part, str) and part.strip())


def _check_header(columns: Iterable[object], where: str) -> None:
    csv_rows.check_columns(columns, where, GridIntensityError, known=COLUMNS, required=REQUIRED_COLUMNS)


def _key(provider: str, region: str) -> tuple[str, str]:
    """Case-folded (provider, region): a price sheet's spelling of either may differ in case."""
    return provider.strip().casefold(), region.strip().casefold()


def parse_grid_csv(text: str | bytes, origin: str = "grid_intensity.csv") -> dict[tuple[str, str], GridIntensity]:
    """Validate CSV text into GridIntensity rows keyed by case-folded (provider, region); raise
    GridIntensityError (one line, naming the row and field) for any problem, a duplicate region,
    or a source that is not a public document."""
    rows = csv_rows.parse_table(
        text, origin, GridIntensityError, rows_name="region rows", check_header=_check_header, label=_label
    )
    table: dict[tuple[str, str], GridIntensity] = {}
    for row_number, row in enumerate(rows, start=1):
        place = csv_rows.where(origin, row_number, _label(row))
        values = {column: cell for column, cell in row.items() if cell != ""}
        csv_rows.check_text_cells(values, place, GridIntensityError)
        intensity = csv_rows.validate_row(GridIntensity, values, place, GridIntensityError)
        csv_rows.require_public_source(intensity.source, place, GridIntensityError)
        key = _key(intensity.provider, intensity.region)
        if key in table:
            raise GridIntensityError(f"{place}: region: appears twice for {intensity.provider}")
        table[key] = intensity
    return table


@lru_cache(maxsize=1)
def load_grid_intensity() -> dict[tuple[str, str], GridIntensity]:
    """data/grid_intensity.csv, read and validated once per process (rows are frozen)."""
    return _read(DEFAULT_GRID_PATH)


def _read(path: Path) -> dict[tuple[str, str], GridIntensity]:
    return parse_grid_csv(csv_rows.read_csv_file(path, GridIntensityError, "grid intensity table"), path.name)


def grid_for(provider: str, region: str, table: GridTable | None = None) -> GridIntensity | None:
    """The table's row for a price row's provider and region (ignoring case); None when the table
    has no row for it (an uploaded price sheet's own region, say)."""
    table = load_grid_intensity() if table is None else table
    return table.get(_key(provider, region))


def grid_unknown_reason(provider: str, region: str, table: GridTable | None = None) -> str:
    """Why a region has no CO2 figure, in words."""
    row = grid_for(provider, region, table)
    if row is None:
        return f"grid intensity not known: {provider} {region} is not in data/grid_intensity.csv"
    return f"grid intensity not known: {(row.notes or '').removeprefix('Not known: ')}"
