"""Model presets: architecture numbers of well-known models, kept in a CSV file.

`data/models.csv` has one row per model. Every column but `notes` is a `ModelSpec`
field. An empty cell means "not set", so the field's default (often None) applies.
The numbers come from each model's Hugging Face `config.json`. The `source` column
names the public documents the row was read from (and where `reported_params` comes
from), `as_of` the ISO date it was read, and `notes` explain the row to people
reading the file; the app does not use them.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from calculators import DATA_DIR
from calculators.hardware import csv_rows
from calculators.models.spec import ModelSpec

DEFAULT_PRESETS_PATH = DATA_DIR / "models.csv"
# Columns of the file that are not ModelSpec fields.
EXTRA_COLUMNS: tuple[str, ...] = ("notes",)


class PresetError(ValueError):
    """A preset file is malformed. The message names the file, row and field."""


def _where(path: Path, row: int, name: str) -> str:
    return f"{path}: row {row} (preset {name!r})"


def _parse_row(path: Path, number: int, row: dict) -> ModelSpec:
    """Validate one CSV row as a ModelSpec. Empty cells fall back to the defaults."""
    where = _where(path, number, (row.get("name") or "").strip() or "?")
    if None in row:  # csv.DictReader files surplus cells under the key None
        raise PresetError(f"{where}: more cells than header columns")
    missing = [column for column, value in row.items() if value is None]
    if missing:
        raise PresetError(f"{where}: field {missing[0]!r}: row ends before it")
    values = {key: value.strip() for key, value in row.items() if value.strip() and key not in EXTRA_COLUMNS}
    try:
        spec = ModelSpec.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "(whole row)"
        got = f" (got {values[field]!r})" if field in values else ""
        message = f"{where}: field {field!r}: {error['msg']}{got}"
        raise PresetError(message) from exc
    _check_provenance(spec, where)
    return spec


def _check_provenance(spec: ModelSpec, where: str) -> None:
    """A preset must say where its numbers were read and when, so anyone can check them:
    `source` names public documents (`csv_rows.check_public_source`), `as_of` is an ISO date.
    ModelSpec cannot require this itself: a user's custom model has neither."""
    try:
        csv_rows.check_public_source(spec.source)
    except ValueError as exc:
        raise PresetError(f"{where}: field 'source': {exc}") from None
    try:
        dt.date.fromisoformat(spec.as_of)
    except ValueError:
        raise PresetError(f"{where}: field 'as_of': expected an ISO date YYYY-MM-DD (got {spec.as_of!r})") from None


@lru_cache(maxsize=8)
def load_presets(path: Path | None = None) -> dict[str, ModelSpec]:
    """Read and validate every preset in `path` (default: the repo's data/models.csv).

    Returns a dict that maps each preset name to its ModelSpec, in file order. The
    result is cached, so do not mutate it. Use `get_preset` to get a copy you can
    change. Rows are numbered from 1 like lines in an editor, so the header is
    row 1 and the first preset is row 2. Raises PresetError for an unknown
    column, a duplicate name, a wrong number of cells, an invalid value, a source
    that names no public document, or an as_of that is not an ISO date.
    """
    path = Path(path) if path is not None else DEFAULT_PRESETS_PATH
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        known = [*ModelSpec.model_fields, *EXTRA_COLUMNS]
        unknown = [name for name in reader.fieldnames or [] if name not in known]
        if unknown:
            raise PresetError(f"{path}: row 1 (header): unknown column {unknown[0]!r}")
        presets: dict[str, ModelSpec] = {}
        for row in reader:
            spec = _parse_row(path, reader.line_num, row)
            if spec.name in presets:
                where = _where(path, reader.line_num, spec.name)
                raise PresetError(f"{where}: field 'name': duplicate")
            presets[spec.name] = spec
    return presets


def get_preset(name: str) -> ModelSpec:
    """Return a copy of the preset called `name`. Raise KeyError naming close matches."""
    presets = load_presets()
    if name in presets:
        return presets[name].model_copy()
    close = difflib.get_close_matches(name, list(presets), n=5, cutoff=0.5)
    if close:
        hint = f"did you mean: {', '.join(close)}?"
    else:
        hint = f"known presets: {', '.join(presets)}"
    raise KeyError(f"unknown model preset {name!r}; {hint}")
