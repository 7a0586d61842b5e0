"""Accelerator catalogue: one validated `GpuSpec` per row of `data/gpus.csv`.

Conventions of the figures:

- Memory is the vendor's "GB" figure taken as-is (no GB/GiB conversion here;
  callers decide how to read it). Bandwidth is in TB/s as the vendor states it.
- Tensor TFLOPS (tf32, bf16, fp16, fp8; int8 in TOPS) are DENSE, i.e. without
  2:4 structured sparsity. Datasheets that quote sparse figures are halved.
  `fp32_tflops` is the non-tensor FP32 rate where the vendor publishes one.
- An empty cell means the chip lacks the format or the vendor publishes no
  figure for it.
- `interconnect_gbps` is the per-accelerator bidirectional GB/s (bytes) of the
  scale-up link, or of PCIe when the card has no such link.

The same parser checks user-uploaded CSV files, so every problem with the input
is reported as a `CatalogueError` that names the file, row, GPU and field. Figures
above `UPPER_BOUNDS` and text with control characters are refused; the catalogue
files (not uploads) must also name a public document in every `source` cell.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from calculators import DATA_DIR
from calculators.hardware import csv_rows

DEFAULT_CATALOGUE_PATH = DATA_DIR / "gpus.csv"

Category = Literal["consumer", "workstation", "datacenter", "cloud"]
PriceKind = Literal["msrp", "street", ""]
PositiveNumber = Annotated[float, Field(gt=0)]
OptionalPositive = Annotated[float | None, Field(gt=0)]
OptionalText = Annotated[str | None, Field(min_length=1)]


# Upper bounds (value, unit) far above any real accelerator, so a typo or a hostile
# upload is refused with the field and the bound named instead of breaking a page later.
UPPER_BOUNDS: dict[str, tuple[float, str]] = {
    "memory_gb": (100_000, "GB"),
    "memory_bandwidth_tbps": (1_000, "TB/s"),
    "fp32_tflops": (1e6, "TFLOPS"),
    "tf32_tflops": (1e6, "TFLOPS"),
    "bf16_tflops": (1e6, "TFLOPS"),
    "fp16_tflops": (1e6, "TFLOPS"),
    "fp8_tflops": (1e6, "TFLOPS"),
    "int8_tops": (1e6, "TOPS"),
    "tdp_w": (100_000, "W"),
    "interconnect_gbps": (1e6, "GB/s"),
    "price_usd": (1e9, "USD"),
}


class GpuSpec(BaseModel):
    """One accelerator's datasheet figures (dense tensor rates, vendor units)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    category: Category
    form_factor: OptionalText = None
    memory_gb: PositiveNumber
    memory_type: OptionalText = None
    memory_bandwidth_tbps: PositiveNumber
    # Optional: Google (TPUs) and Intel (Gaudi 2) publish no FP32 rate.
    fp32_tflops: OptionalPositive = None
    tf32_tflops: OptionalPositive = None
    bf16_tflops: OptionalPositive = None
    fp16_tflops: OptionalPositive = None
    fp8_tflops: OptionalPositive = None
    int8_tops: OptionalPositive = None
    tdp_w: OptionalPositive = None
    interconnect: OptionalText = None
    interconnect_gbps: OptionalPositive = None
    pcie_gen: Annotated[int | None, Field(ge=1, le=9)] = None
    launch_year: Annotated[int, Field(ge=2010, le=2035)]
    price_usd: OptionalPositive = None
    price_kind: PriceKind = Field(default="", validate_default=True)
    source: str = Field(min_length=1)
    as_of: dt.date
    notes: OptionalText = None
    # Chips built for serving only (AWS Inferentia): no training stack runs on them.
    inference_only: bool = False

    @field_validator(*UPPER_BOUNDS)
    @classmethod
    def _physically_plausible(cls, value: float | None, info: ValidationInfo) -> float | None:
        """Refuse figures no real accelerator comes near. A finite but absurd upload
        (memory 1e308 GB) would otherwise overflow to inf and NaN in the byte counts
        the pages compute, and fail far from the cell that caused it."""
        bound, unit = UPPER_BOUNDS[info.field_name]
        if value is not None and value > bound:
            raise ValueError(f"must be at most {bound:g} {unit}")
        return value

    @field_validator("name")
    @classmethod
    def _name_has_no_comma(cls, name: str) -> str:
        """Names stay comma-free so they read cleanly in CSV files and URLs."""
        if "," in name:
            raise ValueError("must not contain a comma")
        return name

    @field_validator("price_kind")
    @classmethod
    def _price_kind_matches_price(cls, price_kind: str, info: ValidationInfo) -> str:
        """A price needs a kind (msrp or street), and a kind needs a price."""
        has_price = info.data.get("price_usd") is not None
        if has_price and not price_kind:
            raise ValueError("must be 'msrp' or 'street' when price_usd is set")
        if price_kind and not has_price:
            raise ValueError("must be empty when price_usd is empty")
        return price_kind

    def dense_tflops(self, precision: str) -> float | None:
        """Dense peak rate for `precision` (fp32, tf32, bf16, fp16, fp8, int8), or None if unpublished."""
        field = PRECISION_FIELDS.get(precision.lower())
        if field is None:
            raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISION_FIELDS)}")
        return getattr(self, field)


PRECISION_FIELDS: dict[str, str] = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "bf16": "bf16_tflops",
    "fp16": "fp16_tflops",
    "fp8": "fp8_tflops",
    "int8": "int8_tops",
}

COLUMNS: tuple[str, ...] = (
    "name",
    "vendor",
    "category",
    "form_factor",
    "memory_gb",
    "memory_type",
    "memory_bandwidth_tbps",
    "fp32_tflops",
    "tf32_tflops",
    "bf16_tflops",
    "fp16_tflops",
    "fp8_tflops",
    "int8_tops",
    "tdp_w",
    "interconnect",
    "interconnect_gbps",
    "pcie_gen",
    "launch_year",
    "price_usd",
    "price_kind",
    "source",
    "as_of",
    "notes",
    "inference_only",
)
# Columns an uploaded CSV may leave out (their defaults apply).
OPTIONAL_COLUMNS: tuple[str, ...] = ("inference_only",)
assert COLUMNS == tuple(GpuSpec.model_fields), "COLUMNS must follow the GpuSpec field order"


class CatalogueError(ValueError):
    """A GPU catalogue (or uploaded CSV) is malformed; the message names file, row, GPU and field."""


def _label(row: Mapping[object, object]) -> str:
    """The GPU name of a raw row, for messages."""
    name = row.get("name")
    return name.strip() if isinstance(name, str) else ""


def _check_columns(columns: Iterable[object], where: str) -> None:
    """Raise CatalogueError for an unknown or a missing column."""
    csv_rows.check_columns(
        columns,
        where,
        CatalogueError,
        known=COLUMNS,
        required=[column for column in COLUMNS if column not in OPTIONAL_COLUMNS],
    )


def _cell_text(value: object) -> object:
    """Strip text cells; other values (already typed) pass through."""
    return value.strip() if isinstance(value, str) else value


def _parse_row(row: object, origin: str, row_number: int) -> GpuSpec:
    """Validate one row (a mapping of column to cell); blank cells mean 'not set'."""
    where = csv_rows.row_where(row, origin, row_number, _label, CatalogueError)
    if None in row:  # csv.DictReader files surplus cells under the key None
        raise CatalogueError(f"{where}: more cells than header columns")
    _check_columns(row.keys(), where)
    short = [column for column, value in row.items() if value is None]
    if short:
        raise CatalogueError(f"{where}: {short[0]}: row ends before this column")
    values = {column: _cell_text(value) for column, value in row.items()}
    values = {column: value for column, value in values.items() if value != ""}
    csv_rows.check_text_cells(values, where, CatalogueError)
    return csv_rows.validate_row(GpuSpec, values, where, CatalogueError)


def parse_gpu_rows(rows: Sequence[Mapping[str, str]], origin: str = "gpus.csv") -> list[GpuSpec]:
    """Validate rows (column -> cell text) into GpuSpecs; raise CatalogueError on the first bad row.

    Rows are numbered from 1 (the first data row). Names must be unique, ignoring case.
    """
    if not rows:
        raise CatalogueError(f"{origin}: no GPU rows")
    specs: list[GpuSpec] = []
    first_row_of: dict[str, int] = {}
    for row_number, row in enumerate(rows, start=1):
        spec = _parse_row(row, origin, row_number)
        key = spec.name.casefold()
        if key in first_row_of:
            where = csv_rows.where(origin, row_number, spec.name)
            raise CatalogueError(f"{where}: name: duplicate of row {first_row_of[key]}")
        first_row_of[key] = row_number
        specs.append(spec)
    return specs


def parse_gpu_csv(text: str | bytes, origin: str = "uploaded CSV") -> list[GpuSpec]:
    """Parse CSV text (header + one GPU per row) into GpuSpecs; raise CatalogueError if anything is wrong."""
    rows = csv_rows.parse_table(
        text,
        origin,
        CatalogueError,
        rows_name="GPU rows",
        check_header=_check_columns,
        label=_label,
        byte_types=(bytes,),  # a bytearray is reported as not CSV text
    )
    return parse_gpu_rows(rows, origin)


def _read_catalogue(path: Path) -> tuple[GpuSpec, ...]:
    """Read and validate one catalogue file, whose every source must be a public document.

    Uploads (`parse_gpu_csv`) skip the source check: a user's own card may have no
    public document, but a figure shipped with the app must be checkable by anyone."""
    text = csv_rows.read_csv_file(path, CatalogueError, "GPU catalogue")
    specs = parse_gpu_csv(text, origin=path.name)
    for row_number, spec in enumerate(specs, start=1):
        place = csv_rows.where(path.name, row_number, spec.name)
        csv_rows.require_public_source(spec.source, place, CatalogueError)
    return tuple(specs)


@lru_cache(maxsize=1)
def _load_default_catalogue() -> tuple[GpuSpec, ...]:
    """The repo's data/gpus.csv, read once per process."""
    return _read_catalogue(DEFAULT_CATALOGUE_PATH)


def load_gpu_catalogue(path: Path | None = None) -> tuple[GpuSpec, ...]:
    """All GPUs in `path` (default: the repo's data/gpus.csv, cached) in file order.

    Raises CatalogueError for a missing or malformed file. GpuSpecs are frozen, so
    sharing the cached tuple is safe.
    """
    if path is None:
        return _load_default_catalogue()
    return _read_catalogue(Path(path))


VARIANTS_PATH = DATA_DIR / "gpu_variants.csv"
VARIANT_FIELDS = (
    "bf16_tflops", "fp16_tflops", "fp8_tflops", "tf32_tflops", "memory_bandwidth_tbps", "memory_gb", "tdp_w",
)  # fmt: skip


class GpuVariant(BaseModel):
    """A catalogue GPU as one published run had it (a power limit, another memory): a row of
    data/gpu_variants.csv, found by name but not offered by the planner (nobody rents it)."""

    name: str
    base: str
    bf16_tflops: float = Field(gt=0)
    fp16_tflops: float = Field(gt=0)
    fp8_tflops: float = Field(gt=0)
    tf32_tflops: float = Field(gt=0)
    memory_bandwidth_tbps: float = Field(gt=0)
    memory_gb: float = Field(gt=0)
    tdp_w: float = Field(gt=0)
    source: str
    as_of: str
    notes: str = ""


@lru_cache(maxsize=1)
def load_gpu_variants() -> tuple[GpuSpec, ...]:
    """The variants of data/gpu_variants.csv as GpuSpecs: the base GPU with the variant's figures
    and source."""
    with VARIANTS_PATH.open(newline="") as handle:
        variants = [GpuVariant.model_validate(row) for row in csv.DictReader(handle)]
    by_name = {gpu.name: gpu for gpu in load_gpu_catalogue()}
    specs = []
    for variant in variants:
        csv_rows.require_public_source(variant.source, variant.name, CatalogueError)
        figures = {field: getattr(variant, field) for field in VARIANT_FIELDS}
        base = by_name[variant.base]
        specs.append(base.model_copy(update=figures | {"name": variant.name, "source": variant.source}))
    return tuple(specs)


def find_gpu(name: str, catalogue: Iterable[GpuSpec] | None = None) -> GpuSpec:
    """The GPU called `name` (case-insensitive), in the catalogue or, with the default catalogue,
    among its variants (load_gpu_variants). KeyError names up to 3 close matches."""
    gpus = list(load_gpu_catalogue() + load_gpu_variants() if catalogue is None else catalogue)
    by_key = {gpu.name.casefold(): gpu for gpu in gpus}
    wanted = name.strip().casefold()
    if wanted in by_key:
        return by_key[wanted]
    close_keys = difflib.get_close_matches(wanted, list(by_key), n=3, cutoff=0.5)
    close = [by_key[key].name for key in close_keys]
    hint = f"did you mean: {', '.join(close)}?" if close else f"{len(gpus)} GPUs are in the catalogue"
    raise KeyError(f"unknown GPU {name!r}; {hint}")
