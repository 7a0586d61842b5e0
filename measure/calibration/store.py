"""Calibration history in one SQLite file, and JSON export/import of single results.

Atomicity: each `save()` is one INSERT inside a transaction (`with connection:`), so a
crash or a full disk leaves the database with or without the new row, never half of it
(SQLite's rollback journal; sqlite.org/atomiccommit.html). The file itself is created by
SQLite on first use, and the table with CREATE TABLE IF NOT EXISTS in the same kind of
transaction, so no temporary file and rename are needed. Every call opens its own
connection, so the store can be used from Streamlit's script threads.

Damage: the first use of a store runs `PRAGMA quick_check` (sqlite.org/pragma.html), and
every statement watches for SQLite's "file is not a database" and "database disk image is
malformed" errors. A damaged file is moved aside to `<name>.corrupt-<UTC time>` with its
journal, a new store is started, and the work is done on it, so a result being saved is
not lost. A stored row that is no longer a valid result (bad JSON, or a value this version
refuses) is skipped. Both leave a one-line message in `problems` for the caller to show.
Other failures (a folder that cannot be created, a database locked for too long) raise
`CalibrationStoreError` with one line.

`import_json()` accepts text or bytes of at most 5 MB and raises `CalibrationImportError`
with one line saying what is wrong (too large, not JSON, not a calibration result).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from measure.calibration.result import CalibrationResult

MAX_IMPORT_BYTES = 5_000_000
DB_ENV_VAR = "GPU_SIZING_CALIBRATION_DB"
# Primary result codes that mean a damaged file (sqlite.org/rescode.html); extended codes
# keep them in their low byte.
SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26
SIDE_FILES = ("-journal", "-wal", "-shm")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calibrations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    gpu_name TEXT,
    created_at TEXT NOT NULL,
    result_json TEXT NOT NULL
)
"""

T = TypeVar("T")


class CalibrationImportError(ValueError):
    """An imported calibration file is unusable; the message is one line."""


class CalibrationStoreError(RuntimeError):
    """The store cannot be used (not damage, which is repaired); the message is one line."""


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
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
    except RecursionError:
        raise CalibrationImportError("not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of over 4300 digits
        raise CalibrationImportError(f"not valid JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise CalibrationImportError(f"not a calibration result: expected a JSON object, got {type(data).__name__}")
    try:
        return CalibrationResult.model_validate(data)
    except ValidationError as exc:
        raise CalibrationImportError(f"not a calibration result: {_first_problem(exc)}") from None


def _is_damage(exc: sqlite3.Error) -> bool:
    """True for SQLite's 'not a database' and 'malformed' errors, not for 'locked' and the like."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _aside_path(path: Path) -> Path:
    """<name>.corrupt-<UTC time>, with -2, -3 ... if a file of that name exists already."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, number = path.with_name(f"{path.name}.corrupt-{stamp}"), 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
    return candidate


class CalibrationStore:
    """Calibration results kept in the SQLite file at `path` (created on first use).

    `problems` collects one line per damaged file moved aside and per stored row skipped.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.problems: list[str] = []
        self._checked = False

    def _note(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)

    def _move_aside(self, reason: str) -> None:
        """Rename the damaged file (and its journal files) so the next connection starts afresh."""
        aside = _aside_path(self.path)
        try:
            self.path.replace(aside)
            for suffix in SIDE_FILES:
                side = self.path.with_name(self.path.name + suffix)
                if side.exists():
                    side.replace(aside.with_name(aside.name + suffix))
        except OSError as exc:
            raise CalibrationStoreError(
                f"the calibration store {self.path} is damaged ({reason}) and cannot be moved aside ({exc.strerror})"
            ) from None
        self._note(
            f"The calibration store {self.path} was damaged ({reason}); it was moved to {aside.name} "
            "and a new, empty store was started."
        )

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

    def _quick_check(self) -> str | None:
        """None when the file is sound (a missing one is created), else what SQLite found wrong."""
        with self._connect() as connection:
            rows = connection.execute("PRAGMA quick_check").fetchall()
        return None if rows == [("ok",)] else str(rows[0][0])

    @contextlib.contextmanager
    def _unusable_as_one_line(self) -> Iterator[None]:
        """Turn file-system and SQLite errors into CalibrationStoreError with one line."""
        try:
            yield
        except (OSError, sqlite3.Error) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
            raise CalibrationStoreError(f"cannot use the calibration store {self.path}: {detail}") from None

    def _check_once(self) -> None:
        """Run quick_check on the first use of this store object and move a damaged file aside."""
        if self._checked:
            return
        try:
            damage = self._quick_check()
        except sqlite3.Error as exc:
            if not _is_damage(exc):
                raise
            damage = _one_line(exc)
        if damage:
            self._move_aside(damage)
        self._checked = True

    def _attempt(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._connect() as connection:
            return work(connection)

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """work(connection) in one transaction, on a new file if this one turns out to be damaged."""
        with self._unusable_as_one_line():
            self._check_once()
            try:
                return self._attempt(work)
            except sqlite3.Error as exc:
                if not _is_damage(exc):
                    raise
                self._move_aside(_one_line(exc))
                return self._attempt(work)

    def check(self) -> list[str]:
        """Check the file (once per store object), moving a damaged one aside; returns `problems`.

        Callers that are about to spend minutes on a result call it first, so a store that
        cannot be used is reported before the work, not after."""
        with self._unusable_as_one_line():
            self._check_once()
        return self.problems

    def save(self, result: CalibrationResult) -> int:
        """Store `result` in one transaction; returns its row id."""
        row = (result.host, result.gpu_name, _sortable_utc(result.created_at), result.model_dump_json())
        insert = "INSERT INTO calibrations (host, gpu_name, created_at, result_json) VALUES (?, ?, ?, ?)"
        return self._run(lambda connection: int(connection.execute(insert, row).lastrowid))

    def find(self, result: CalibrationResult) -> int | None:
        """The row id of a stored result with the same content as `result`, or None.

        Content, not a file name, identifies an import: two files called calibration.json from
        two hosts are two results, and one result exported twice is one. `save` stores
        `model_dump_json()`, so equal results are equal text."""
        query = "SELECT id FROM calibrations WHERE result_json = ? ORDER BY id LIMIT 1"
        text = result.model_dump_json()
        row = self._run(lambda connection: connection.execute(query, (text,)).fetchone())
        return None if row is None else int(row[0])

    def _parse_row(self, row_id: int, created_at: str, text: str | bytes) -> CalibrationResult | None:
        """The stored result, or None with a line in `problems` saying why it is skipped.

        The column has TEXT affinity, so SQLite stores any number written to it as text, and a
        blob comes back as bytes: both are what `import_json` reads."""
        try:
            return import_json(text)
        except CalibrationImportError as exc:
            self._note(f"Skipped stored calibration {row_id} of {created_at[:19]}: {exc}")
            return None

    def history(
        self, host: str | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[CalibrationResult]:
        """Stored results, newest first, optionally for one host and/or GPU name; unreadable rows skipped."""
        query = "SELECT id, created_at, result_json FROM calibrations"
        query += " WHERE (? IS NULL OR host = ?) AND (? IS NULL OR gpu_name = ?) ORDER BY created_at DESC, id DESC"
        rows = self._run(lambda connection: connection.execute(query, (host, host, gpu, gpu)).fetchall())
        results = [result for row in rows if (result := self._parse_row(*row)) is not None]
        return results if limit is None else results[:limit]

    def latest(self, host: str | None = None, gpu: str | None = None) -> CalibrationResult | None:
        """The newest readable stored result (for `host`/`gpu` when given), or None."""
        newest = self.history(host, gpu, limit=1)
        return newest[0] if newest else None

    export_json = staticmethod(export_json)
    import_json = staticmethod(import_json)
