"""Downloads of the cost options: CSV, and an Excel workbook with the assumptions beside them.

The workbook has two sheets, both plain tables that pandas reads back:

- "options": one row per CostOption, columns in CostOption field order (`options_excel_bytes`); the
  page's download (`table_excel_bytes`) writes its own table here instead (one row per option and
  pricing, in the page's order, with the page's columns) and the CostOption fields, in the same
  order, on "option details".
- "assumptions": columns kind, name, value; kind is "assumption", "catalogue date" or
  "formula" (formulas are numbered from 1 in `name`).

Text cells lose the control characters XML 1.0 cannot hold (everything below U+0020 but tab,
line feed and carriage return; https://www.w3.org/TR/xml/#charsets), which openpyxl refuses
with IllegalCharacterError.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence

import pandas as pd
from pydantic import BaseModel

from calculators.cost.options import CostOption

OPTIONS_SHEET = "options"
ASSUMPTIONS_SHEET = "assumptions"
DETAILS_SHEET = "option details"
ASSUMPTION_COLUMNS: tuple[str, ...] = ("kind", "name", "value")
OPTION_COLUMNS: tuple[str, ...] = tuple(CostOption.model_fields)
XML_ILLEGAL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def models_frame(models: Sequence[BaseModel], columns: Sequence[str]) -> pd.DataFrame:
    """One row per model, `columns` (its fields) as columns (an empty table keeps the columns). A
    [low, high] range is written as in `--json` ("[67.8, 82.7]"), a list of notes joined by "; "."""
    rows = [{name: _cell(value) for name, value in model.model_dump().items()} for model in models]
    return pd.DataFrame(rows, columns=list(columns))


def _cell(value: object) -> object:
    """A field's value as one table cell: a range as "[low, high]", notes as one text, else as is."""
    if isinstance(value, tuple):
        return json.dumps(list(value))
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "; ".join(value)
    return value


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV (header row, ISO dates, empty for None)."""
    return frame.to_csv(index=False).encode("utf-8")


def options_frame(options: Sequence[CostOption]) -> pd.DataFrame:
    """One row per option, CostOption fields as columns (an empty table keeps the columns)."""
    return models_frame(options, OPTION_COLUMNS)


def assumptions_frame(
    assumptions: Mapping[str, str], catalogue_dates: Mapping[str, str], formulas: Sequence[str]
) -> pd.DataFrame:
    """The assumptions, catalogue dates and formulas as rows of (kind, name, value)."""
    rows = [("assumption", str(name), str(value)) for name, value in assumptions.items()]
    rows += [("catalogue date", str(name), str(value)) for name, value in catalogue_dates.items()]
    rows += [("formula", str(number), str(formula)) for number, formula in enumerate(formulas, start=1)]
    return pd.DataFrame(rows, columns=list(ASSUMPTION_COLUMNS))


def options_csv_bytes(options: Sequence[CostOption]) -> bytes:
    """The options as UTF-8 CSV (header row, one row per option, ISO dates, empty for None)."""
    return csv_bytes(options_frame(options))


def options_excel_bytes(
    options: Sequence[CostOption],
    assumptions: Mapping[str, str],
    catalogue_dates: Mapping[str, str],
    formulas: Sequence[str],
) -> bytes:
    """An .xlsx workbook with sheets "options" and "assumptions" (needs openpyxl).

    Text that starts with "=" (an uploaded provider name, say) is stored as text, not as a formula.
    """
    sheets = {
        OPTIONS_SHEET: options_frame(options),
        ASSUMPTIONS_SHEET: assumptions_frame(assumptions, catalogue_dates, formulas),
    }
    return workbook_bytes(sheets)


def page_order(options: Sequence[CostOption], table: pd.DataFrame) -> list[CostOption]:
    """`options` in the order a page's table first lists them (by gpu, provider, instance and
    region); options the table does not list are left out."""
    keys = [(option.gpu, option.provider, option.instance_type, option.region) for option in options]
    listed = table[["gpu", "provider", "instance", "region"]].itertuples(index=False, name=None) if len(table) else []
    order = list(dict.fromkeys(tuple(row) for row in listed))
    return [options[keys.index(key)] for key in order if key in keys]


def table_excel_bytes(
    table: pd.DataFrame,
    options: Sequence[CostOption],
    assumptions: Mapping[str, str],
    catalogue_dates: Mapping[str, str],
    formulas: Sequence[str],
) -> bytes:
    """The page's download: sheet "options" is the page's table (its rows in its order, its columns:
    one row per option and pricing), "option details" every CostOption field in the same order,
    and "assumptions" as options_excel_bytes writes it."""
    return workbook_bytes(
        {
            OPTIONS_SHEET: table,
            DETAILS_SHEET: options_frame(page_order(options, table)),
            ASSUMPTIONS_SHEET: assumptions_frame(assumptions, catalogue_dates, formulas),
        }
    )


def workbook_bytes(sheets: Mapping[str, pd.DataFrame]) -> bytes:
    """An .xlsx workbook with one sheet per frame: control characters XML cannot hold are
    dropped, and text that starts with "=" is stored as text, never run as a formula."""
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        for name, frame in sheets.items():
            without_control_characters(frame).to_excel(writer, sheet_name=name, index=False)
        for sheet in writer.sheets.values():
            _store_formulas_as_text(sheet)
    return buffer.getvalue()


def without_control_characters(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with the XML-illegal control characters removed from every text cell."""
    return frame.map(lambda value: XML_ILLEGAL_CHARACTERS.sub("", value) if isinstance(value, str) else value)


def _store_formulas_as_text(sheet) -> None:
    """openpyxl turns any string starting with '=' into a formula; keep such cells as text."""
    for row in sheet.iter_rows():
        for cell in row:
            if cell.data_type == "f":
                cell.data_type = "s"
