"""Calibration history in one SQLite file, and JSON export/import of single results.

Atomicity: each `save()` is one INSERT inside a transaction (`with connection:`), so a
crash or a full disk leaves the database with or without the new row, never half of it
(SQLite's rollback journal; sqlite.org/atomiccommit.html). The file itself is created by
SQLite on first use, and the table with CREATE TABLE IF NOT EXISTS in the same kind of
transaction, so no temporary file and rename are needed. Every call opens its own
connection, so the store can be used from Streamlit's script threads.

`import_json()` accepts text or bytes of at most 5 MB and raises `CalibrationImportError`
with one line saying what is wrong (too large, not JSON, not a calibration result).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from measure.calibration.result import CalibrationResult

MAX_IMPORT_BYTES = 5_000_000
DB_ENV_VAR = "GPU_SIZING_CALIBRATION_DB"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calibrations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    gpu_name TEXT,
    created_at TEXT NOT NULL,
    result_json TEXT NOT NULL
)
"""


class CalibrationImportError(ValueError):
    """An imported calibration file is unusable; the message is one line."""


def default_store_path(environ: dict[str, str] | None = None) -> Path:
    """$GPU_SIZING_CALIBRATION_DB, else ~/.cache/gpu-sizing/calibrations.sqlite3."""
    environ = os.environ if environ is None else environ
    configured = environ.get(DB_ENV_VAR)
    return Path(configured) if configured else Path.home() / ".cache" / "gpu-sizing" / "calibrations.sqlite3"


def _sortable_utc(moment: dt.datetime) -> str:
    """Fixed-width UTC ISO text, so history sorts correctly as text (naive times taken as UTC)."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    return aware.astimezone(dt.UTC).isoformat(timespec="microseconds")


def export_json(result: CalibrationResult) -> str:
    """The result as indented JSON (what `import_json` reads back)."""
    return result.model_dump_json(indent=2)


def _first_problem(exc: ValidationError) -> str:
    """'records.0.value: Input should be a valid number' for the first error pydantic found."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "top level"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {error['msg']}{more}"


def import_json(text: str | bytes) -> CalibrationResult:
    """Parse an exported result; CalibrationImportError for huge, malformed or foreign files."""
    size = len(text.encode("utf-8") if isinstance(text, str) else text)
    if size > MAX_IMPORT_BYTES:
        raise CalibrationImportError(f"file too large: {size / 1e6:.1f} MB (limit {MAX_IMPORT_BYTES / 1e6:.0f} MB)")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CalibrationImportError(f"not valid JSON: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise CalibrationImportError("not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise CalibrationImportError(f"not a calibration result: expected a JSON object, got {type(data).__name__}")
    try:
        return CalibrationResult.model_validate(data)
    except ValidationError as exc:
        raise CalibrationImportError(f"not a calibration result: {_first_problem(exc)}") from None


class CalibrationStore:
    """Calibration results kept in the SQLite file at `path` (created on first save)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose `with` block is one transaction (commit, or rollback on error)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=10)
        try:
            with connection:
                connection.execute(_SCHEMA)
                yield connection
        finally:
            connection.close()

    def save(self, result: CalibrationResult) -> int:
        """Store `result` in one transaction; returns its row id."""
        with self._connect() as connection:
            cursor = connection.execute(
                "INSERT INTO calibrations (host, gpu_name, created_at, result_json) VALUES (?, ?, ?, ?)",
                (result.host, result.gpu_name, _sortable_utc(result.created_at), result.model_dump_json()),
            )
            return int(cursor.lastrowid)

    def history(
        self, host: str | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[CalibrationResult]:
        """Stored results, newest first, optionally for one host and/or GPU name."""
        query = "SELECT result_json FROM calibrations WHERE (? IS NULL OR host = ?) AND (? IS NULL OR gpu_name = ?)"
        query += " ORDER BY created_at DESC, id DESC"
        params: list[object] = [host, host, gpu, gpu]
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        with self._connect() as connection:
            rows = connection.execute(query, params).fetchall()
        return [CalibrationResult.model_validate_json(row[0]) for row in rows]

    def latest(self, host: str | None = None, gpu: str | None = None) -> CalibrationResult | None:
        """The newest stored result (for `host`/`gpu` when given), or None."""
        newest = self.history(host, gpu, limit=1)
        return newest[0] if newest else None

    export_json = staticmethod(export_json)
    import_json = staticmethod(import_json)
