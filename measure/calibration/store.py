"""Calibration history in one database, SQLite by default or a server a whole fleet shares, and
JSON export/import of single results.

Where: `GPU_SIZING_CALIBRATION_DB` holds a SQLite file's path (default
~/.cache/gpu-sizing/calibrations.sqlite3) or a SQLAlchemy database URL
(docs.sqlalchemy.org/en/20/core/engines.html#database-urls) such as
`postgresql://user:password@db-host/calibrations`, so every host of a cluster writes to one
store and the Calibration page lists the fleet. `postgresql://` is read with psycopg 3
(`postgresql+psycopg`, docs.sqlalchemy.org/en/20/dialects/postgresql.html); a password never
appears in a message.

Atomicity and concurrent writers: each `save()` is one INSERT inside a transaction, so a crash,
a full disk or a lost connection leaves the store with or without the new row, never half of it
(SQLite's rollback journal, sqlite.org/atomiccommit.html; PostgreSQL's transactions). Writers
from many hosts lose nothing: PostgreSQL gives each INSERT its own row id from the table's
sequence, and SQLite makes a writer wait up to 10 s for another's lock. The table is created
with CREATE TABLE IF NOT EXISTS on first use; two hosts creating it at once on a server is
harmless (the loser finds the winner's table). Every call opens its own connection (no pool), so
the store can be used from Streamlit's script threads.

Damage (SQLite): the first use of a store runs `PRAGMA quick_check` (sqlite.org/pragma.html),
and every statement watches for SQLite's "file is not a database" and "database disk image is
malformed" errors. A damaged file is moved aside to `<name>.corrupt-<UTC time>` with its
journal, a new store is started, and the work is done on it, so a result being saved is
not lost. A stored row that is no longer a valid result (bad JSON, or a value this version
refuses) is skipped. Both leave a one-line message in `problems` for the caller to show.
Other failures (a folder that cannot be created, a database locked for too long, a server that
cannot be reached or refuses the login) raise `CalibrationStoreError` with one line.

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

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.pool import NullPool

from measure.calibration.result import CalibrationResult

MAX_IMPORT_BYTES = 5_000_000
DB_ENV_VAR = "GPU_SIZING_CALIBRATION_DB"
# Primary result codes that mean a damaged file (sqlite.org/rescode.html); extended codes
# keep them in their low byte.
SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26
SIDE_FILES = ("-journal", "-wal", "-shm")

# The same table the SQLite-only store created (INTEGER PRIMARY KEY AUTOINCREMENT), so old files
# open as they are; on PostgreSQL the id is a SERIAL column.
_METADATA = sa.MetaData()
CALIBRATIONS = sa.Table(
    "calibrations",
    _METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("gpu_name", sa.Text),
    sa.Column("created_at", sa.Text, nullable=False),
    sa.Column("result_json", sa.Text, nullable=False),
    sqlite_autoincrement=True,
)
DEFAULT_FOLDER = Path.home() / ".cache" / "gpu-sizing"
# Seconds to wait for a server to answer before saying it cannot be reached (libpq's connect_timeout,
# postgresql.org/docs/current/libpq-connect.html), and for another SQLite writer's lock.
CONNECT_TIMEOUT_S = 5
SQLITE_BUSY_TIMEOUT_S = 10

T = TypeVar("T")


class CalibrationImportError(ValueError):
    """An imported calibration file is unusable; the message is one line."""


class CalibrationStoreError(RuntimeError):
    """The store cannot be used (not damage, which is repaired); the message is one line."""


def is_database_url(location: str | Path) -> bool:
    """True for a SQLAlchemy URL (`postgresql://...`, `sqlite:///...`), False for a file path."""
    return isinstance(location, str) and "://" in location


def default_store_path(environ: Mapping[str, str] | None = None) -> str | Path:
    """$GPU_SIZING_CALIBRATION_DB (a path, or a database URL kept as text), else
    ~/.cache/gpu-sizing/calibrations.sqlite3."""
    environ = os.environ if environ is None else environ
    configured = environ.get(DB_ENV_VAR)
    if not configured:
        return DEFAULT_FOLDER / "calibrations.sqlite3"
    return configured if is_database_url(configured) else Path(configured)


def local_folder(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of a SQLite store, or ~/.cache/gpu-sizing when the store is a server (for the host lock)."""
    location = default_store_path(environ)
    return DEFAULT_FOLDER if is_database_url(location) else Path(location).parent


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


def _is_damage(exc: BaseException) -> bool:
    """True for SQLite's 'not a database' and 'malformed' errors, not for 'locked' and the like
    (SQLAlchemy keeps the driver's own exception as `orig`)."""
    code = getattr(getattr(exc, "orig", exc), "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)


def _one_line(exc: BaseException) -> str:
    """The driver's own first line (SQLAlchemy adds the statement and a link after it)."""
    driver = getattr(exc, "orig", None) or exc
    return (str(driver).strip().splitlines() or [type(driver).__name__])[0]


def _aside_path(path: Path) -> Path:
    """<name>.corrupt-<UTC time>, with -2, -3 ... if a file of that name exists already."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, number = path.with_name(f"{path.name}.corrupt-{stamp}"), 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
    return candidate


def _database_url(location: str) -> sa.URL:
    """The SQLAlchemy URL of `location`, or CalibrationStoreError naming the variable."""
    try:
        return sa.make_url(location)
    except (sa.exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
        shown = location.split("://")[0]
        raise CalibrationStoreError(f"{DB_ENV_VAR} is not a database URL or a file path ({shown}://...)") from None


def _with_driver(url: sa.URL) -> sa.URL:
    """Plain `postgresql://` read with psycopg 3, the driver requirements.txt installs (SQLAlchemy's
    default for it is psycopg2)."""
    return url.set(drivername="postgresql+psycopg") if url.drivername == "postgresql" else url


def newest_per_host_and_gpu(history: list[CalibrationResult]) -> list[CalibrationResult]:
    """From a history listed newest first, the first result of each (host, GPU name) pair, in that
    order: what every machine of a fleet measured last (a CPU run is its host's GPU-less entry)."""
    newest: dict[tuple[str, str | None], CalibrationResult] = {}
    for result in history:
        newest.setdefault((result.host, result.gpu_name), result)
    return list(newest.values())


class CalibrationStore:
    """Calibration results kept in the SQLite file at `path`, or in the database at a SQLAlchemy URL.

    `problems` collects one line per damaged file moved aside and per stored row skipped.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        location = path if path is not None else default_store_path()
        self.url: sa.URL | None = None
        self.path: Path | None = None  # the SQLite file, created on first use; None for a server
        self._unusable: CalibrationStoreError | None = None  # raised on first use, as every other failure
        if not is_database_url(location):
            self.path = Path(location)
            self.name = str(self.path)
        else:
            try:
                self.url = _database_url(location)
                self.name = self.url.render_as_string(hide_password=True)
            except CalibrationStoreError as error:
                self._unusable, self.name = error, location.split("://")[0] + "://..."
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

    def _engine(self) -> sa.Engine:
        """An engine that opens a new connection for every use (NullPool): a moved-aside SQLite file
        is never reused, and threads share nothing."""
        if self.url is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            url = sa.URL.create("sqlite", database=str(self.path))
            return sa.create_engine(url, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        connect_args = {"connect_timeout": CONNECT_TIMEOUT_S} if self.url.get_backend_name() == "postgresql" else {}
        return sa.create_engine(_with_driver(self.url), poolclass=NullPool, connect_args=connect_args)

    def _create_table(self, engine: sa.Engine) -> None:
        """CREATE TABLE IF NOT EXISTS; another writer creating it at the same moment is fine (the loser of
        the race, told the table or its type exists, finds it there)."""
        try:
            _METADATA.create_all(engine, checkfirst=True)
        except sa.exc.DBAPIError:
            if not sa.inspect(engine).has_table(CALIBRATIONS.name):
                raise

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sa.Connection]:
        """A connection whose `with` block is one transaction (commit, or rollback on error)."""
        engine = self._engine()
        try:
            self._create_table(engine)
            with engine.begin() as connection:
                yield connection
        finally:
            engine.dispose()

    def _quick_check(self) -> str | None:
        """None when the file is sound (a missing one is created), else what SQLite found wrong."""
        with self._connect() as connection:
            rows = connection.exec_driver_sql("PRAGMA quick_check").fetchall()
        return None if [tuple(row) for row in rows] == [("ok",)] else str(rows[0][0])

    @contextlib.contextmanager
    def _unusable_as_one_line(self) -> Iterator[None]:
        """Turn file-system, driver and database errors into CalibrationStoreError with one line."""
        try:
            yield
        except (OSError, sqlite3.Error, sa.exc.SQLAlchemyError, ImportError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
            if isinstance(exc, ImportError):
                detail = f"its database driver is not installed ({detail}); pip install -r requirements.txt"
            raise CalibrationStoreError(f"cannot use the calibration store {self.name}: {detail}") from None

    def _check_once(self) -> None:
        """On the first use of this store object: check a SQLite file and move a damaged one aside,
        or connect to a server (so one that cannot be reached is reported before any work)."""
        if self._checked:
            return
        if self._unusable is not None:
            raise self._unusable
        if self.url is not None:
            with self._connect():
                pass
            self._checked = True
            return
        try:
            damage = self._quick_check()
        except sa.exc.DBAPIError as exc:
            if not _is_damage(exc):
                raise
            damage = _one_line(exc)
        if damage:
            self._move_aside(damage)
        self._checked = True

    def _attempt(self, work: Callable[[sa.Connection], T]) -> T:
        with self._connect() as connection:
            return work(connection)

    def _run(self, work: Callable[[sa.Connection], T]) -> T:
        """work(connection) in one transaction, on a new file if a SQLite one turns out to be damaged."""
        with self._unusable_as_one_line():
            self._check_once()
            try:
                return self._attempt(work)
            except sa.exc.DBAPIError as exc:
                if self.url is not None or not _is_damage(exc):
                    raise
                self._move_aside(_one_line(exc))
                return self._attempt(work)

    def check(self) -> list[str]:
        """Check the store (once per store object), moving a damaged file aside; returns `problems`.

        Callers that are about to spend minutes on a result call it first, so a store that
        cannot be used is reported before the work, not after."""
        with self._unusable_as_one_line():
            self._check_once()
        return self.problems

    def save(self, result: CalibrationResult) -> int:
        """Store `result` in one transaction; returns its row id."""
        row = {
            "host": result.host,
            "gpu_name": result.gpu_name,
            "created_at": _sortable_utc(result.created_at),
            "result_json": result.model_dump_json(),
        }
        insert = CALIBRATIONS.insert().values(**row)
        return self._run(lambda connection: int(connection.execute(insert).inserted_primary_key[0]))

    def find(self, result: CalibrationResult) -> int | None:
        """The row id of a stored result with the same content as `result`, or None.

        Content, not a file name, identifies an import: two files called calibration.json from
        two hosts are two results, and one result exported twice is one. `save` stores
        `model_dump_json()`, so equal results are equal text."""
        text = result.model_dump_json()
        query = sa.select(CALIBRATIONS.c.id).where(CALIBRATIONS.c.result_json == text).order_by(CALIBRATIONS.c.id)
        found = self._run(lambda connection: connection.execute(query.limit(1)).scalar())
        return None if found is None else int(found)

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
        table = CALIBRATIONS.c
        query = sa.select(table.id, table.created_at, table.result_json)
        if host is not None:
            query = query.where(table.host == host)
        if gpu is not None:
            query = query.where(table.gpu_name == gpu)
        query = query.order_by(table.created_at.desc(), table.id.desc())
        rows = self._run(lambda connection: connection.execute(query).all())
        results = [result for row in rows if (result := self._parse_row(*row)) is not None]
        return results if limit is None else results[:limit]

    def latest(self, host: str | None = None, gpu: str | None = None) -> CalibrationResult | None:
        """The newest readable stored result (for `host`/`gpu` when given), or None."""
        newest = self.history(host, gpu, limit=1)
        return newest[0] if newest else None

    def fleet(self) -> list[CalibrationResult]:
        """The newest readable result of each host and GPU, newest first (`newest_per_host_and_gpu`)."""
        return newest_per_host_and_gpu(self.history())

    export_json = staticmethod(export_json)
    import_json = staticmethod(import_json)
