"""Reading CSV tables of validated rows: the parts the GPU catalogue and the price sheet share.

Each function takes the error class to raise (a `ValueError` subclass such as
`CatalogueError` or `PriceCatalogueError`) and, where a message names a row, a label
function that gives the row's name (the GPU, or the provider and instance type), so each
catalogue keeps its own error type and wording. Every message is one short line that
names the file, the row (data rows count from 1), the row's label and the field.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

Model = TypeVar("Model", bound=BaseModel)
ErrorClass = type[ValueError]
Label = Callable[[Mapping[object, object]], str]


def shorten(value: object, limit: int = 40) -> str:
    """repr() of a bad value, cut to `limit` characters so a message stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def echo(value: object, limit: int = 120) -> str:
    """User text for a message: as typed when it prints on one line, else `shorten` (its repr, control
    characters escaped), so a newline or escape in a name or path never breaks the message's one line."""
    text = str(value)
    if control_character(text) is None and len(text) <= limit:
        return text
    return shorten(text, limit)


def one_line(message: str) -> str:
    """`message` with every control character escaped as repr writes it (a newline becomes \\n)."""
    return "".join(repr(char)[1:-1] if control_character(char) else char for char in message)


def where(origin: str, row_number: int, label: str = "") -> str:
    """Prefix for messages: 'gpus.csv row 7 (A100-SXM4-80GB)'. Rows count data rows from 1.

    White space in the label is folded, other control characters become '?' (a message
    must print cleanly), and the label is cut to 60 characters."""
    place = f"{origin} row {row_number}"
    label = " ".join(label.split())[:60]  # keep the message on one short line
    label = "".join("?" if control_character(char) else char for char in label)
    return f"{place} ({label})" if label else place


def row_where(row: object, origin: str, row_number: int, label: Label, error: ErrorClass) -> str:
    """`where` for a raw row, labelled by `label(row)`; raise `error` when the row is not a mapping."""
    if not isinstance(row, Mapping):
        raise error(f"{where(origin, row_number)}: expected a mapping of column to value")
    return where(origin, row_number, label(row))


def check_columns(
    columns: Iterable[object],
    place: str,
    error: ErrorClass,
    known: Sequence[str],
    required: Sequence[str],
    unknown_hint: str = "",
) -> None:
    """Raise `error` for the first column not in `known` (its message ends with `unknown_hint`)
    or, failing that, for the first column of `required` that is missing."""
    present = list(columns)
    unknown = [column for column in present if column not in known]
    if unknown:
        raise error(f"{place}: unknown column {shorten(unknown[0])}{unknown_hint}")
    missing = [column for column in required if column not in present]
    if missing:
        raise error(f"{place}: missing column {missing[0]!r}")


def control_character(text: str) -> str | None:
    """The first C0 control character or DEL in `text`, or None.

    Such characters are invisible in tables and break exports: openpyxl refuses them
    in Excel cells, so they are stopped when a file is read."""
    return next((char for char in text if ord(char) < 0x20 or ord(char) == 0x7F), None)


def check_text_cells(values: Mapping[object, object], place: str, error: ErrorClass) -> None:
    """Raise `error` naming the place and field for the first text cell holding a control character."""
    for field, value in values.items():
        char = control_character(value) if isinstance(value, str) else None
        if char is not None:
            code = f"U+{ord(char):04X}"
            raise error(f"{place}: {field}: control character {code} is not allowed (got {shorten(value)})")


# A public document: an https:// URL, or a repository path at a fixed revision
# (a commit of 7 to 40 hex digits, a version tag, or a date).
_URL = re.compile(r"https://[\w-]+(?:\.[\w-]+)+(?:[/?#][^\s|]*)?")
_REVISION = r"(?:[0-9a-f]{7,40}|v?\d+(?:\.\d+)+[\w.-]*|\d{4}-\d{2}-\d{2})"
_REPO_PATH = re.compile(rf"(?:github\.com|gitlab\.com|huggingface\.co)/[\w.-]+/[\w.-]+ [^\s|]+ @{_REVISION}")
SOURCE_FORM = "an https:// URL or a 'github.com/owner/repo path @revision' reference"


def check_public_source(text: str) -> str:
    """`text` when every part of it (parts are separated by ' | ') names a public document.

    A source is there so that a reader can open the document and check the figure, so
    each part must be a URL or a repository path at a fixed revision; prose, a branch
    name, or a private tool ('search corpus') cannot be opened by anyone else. Raises
    ValueError with a one-line reason."""
    if "search corpus" in text.casefold():
        raise ValueError("mentions 'search corpus', which is not a public document; cite the document itself")
    parts = [part.strip() for part in text.split(" | ")]
    if not any(parts):
        raise ValueError(f"is empty; name a public document ({SOURCE_FORM})")
    for number, part in enumerate(parts, start=1):
        if not (_URL.fullmatch(part) or _REPO_PATH.fullmatch(part)):
            which = f"part {number} " if len(parts) > 1 else ""
            raise ValueError(f"{which}{shorten(part)} is not {SOURCE_FORM}")
    return text


def require_public_source(text: str, place: str, error: ErrorClass) -> None:
    """Raise `error` ('<place>: source: <reason>') when `check_public_source` refuses `text`."""
    try:
        check_public_source(text)
    except ValueError as exc:
        raise error(f"{place}: source: {exc}") from None


def describe_validation_error(exc: ValidationError, values: Mapping[str, object]) -> str:
    """'field: message (got value)' for the first problem pydantic found."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "row"
    if error["type"] == "missing":
        return f"{field}: required, but the cell is empty"
    message = error["msg"].removeprefix("Value error, ")
    got = f" (got {shorten(values[field])})" if field in values else ""
    return f"{field}: {message}{got}"


def validate_row(model: type[Model], values: Mapping[str, object], place: str, error: ErrorClass) -> Model:
    """`model` validated from `values`; a validation error becomes `error` naming the place and field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise error(f"{place}: {describe_validation_error(exc, values)}") from None


def decode_text(text: object, origin: str, error: ErrorClass, byte_types: tuple[type, ...] = (bytes, bytearray)) -> str:
    """CSV text from str, or from UTF-8 `byte_types`; a byte-order mark is dropped.

    Raises `error` for bytes that are not UTF-8 and for anything else that is not text."""
    if isinstance(text, byte_types):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise error(f"{origin}: not UTF-8 text") from None
    if not isinstance(text, str):
        raise error(f"{origin}: expected CSV text, got {type(text).__name__}")
    return text.lstrip("\ufeff")


def read_table(text: str, origin: str, error: ErrorClass) -> list[list[str]]:
    """Split CSV text into rows of stripped cells, leaving out blank lines."""
    try:
        table = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise error(f"{origin}: not a readable CSV file: {exc}") from None
    stripped = [[cell.strip() for cell in cells] for cells in table]
    return [cells for cells in stripped if any(cells)]


def rows_from_table(
    header: list[str], body: list[list[str]], origin: str, label: Label, error: ErrorClass
) -> list[dict[str, str]]:
    """Pair each data row with the header; a row with too few or too many cells is an `error`
    labelled from the cells it has."""
    rows = []
    for row_number, cells in enumerate(body, start=1):
        if len(cells) != len(header):
            place = where(origin, row_number, label(dict(zip(header, cells, strict=False))))
            raise error(f"{place}: {len(cells)} cells but the header has {len(header)} columns")
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def parse_table(
    text: object,
    origin: str,
    error: ErrorClass,
    *,
    rows_name: str,
    check_header: Callable[[list[str], str], None],
    label: Label,
    quote_column: Callable[[object], str] = repr,
    byte_types: tuple[type, ...] = (bytes, bytearray),
) -> list[dict[str, str]]:
    """The data rows (column -> stripped cell text) of CSV text with a header row.

    Raises `error` for text that cannot be read, an empty file, a header column that
    appears twice (shown with `quote_column`), a header that `check_header(header, f"{origin} header")`
    rejects, no data rows (`rows_name` says what they are, e.g. 'GPU rows'), and a row
    whose cell count differs from the header's."""
    table = read_table(decode_text(text, origin, error, byte_types), origin, error)
    if not table:
        raise error(f"{origin}: the file is empty (expected a header row and {rows_name})")
    header, body = table[0], table[1:]
    duplicates = sorted({column for column in header if header.count(column) > 1})
    if duplicates:
        raise error(f"{origin} header: column {quote_column(duplicates[0])} appears twice")
    check_header(header, f"{origin} header")
    if not body:
        raise error(f"{origin}: no {rows_name} below the header")
    return rows_from_table(header, body, origin, label, error)


def read_csv_file(path: Path, error: ErrorClass, what: str) -> str:
    """The text of a UTF-8 file (a byte-order mark is dropped); `error` names it as `what`
    ('GPU catalogue') when it is missing or cannot be read."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{what} {path} cannot be read: {exc}") from None


def csv_text(rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> str:
    """CSV text of `rows` under a header of `columns`, one line per row (cells of other
    columns are left out): the form `parse_table` reads."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
