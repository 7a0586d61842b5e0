"""The calibration store's two backends for tests: a SQLite file, and a fresh database on the
PostgreSQL server `.ci/run` starts (its URL in GPU_SIZING_TEST_POSTGRES_URL).

Under CI=true a missing server fails the test (the store tests must run against PostgreSQL there);
elsewhere it skips with the reason."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

POSTGRES_URL_VAR = "GPU_SIZING_TEST_POSTGRES_URL"
BACKENDS = ("sqlite", "postgresql")


def _server_url() -> str:
    url = os.environ.get(POSTGRES_URL_VAR)
    if url:
        return url
    reason = f"no PostgreSQL server: set {POSTGRES_URL_VAR} to one's URL (.ci/run starts one)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; under CI the PostgreSQL store tests must run")
    pytest.skip(reason)


def _admin_engine(url: str) -> sa.Engine:
    """Autocommit, as CREATE DATABASE and DROP DATABASE run outside a transaction."""
    driver_url = sa.make_url(url).set(drivername="postgresql+psycopg")
    return sa.create_engine(driver_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)


def _fresh_postgres_database() -> Iterator[str]:
    """A database of this test only (two xdist workers share the server), dropped afterwards."""
    url = _server_url()
    name = f"calibration_test_{uuid.uuid4().hex[:16]}"
    admin = _admin_engine(url)
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def store_location(backend: str, tmp_path: Path) -> Iterator[str | Path]:
    """What GPU_SIZING_CALIBRATION_DB would hold for `backend`: a file path or a database URL."""
    if backend == "sqlite":
        yield tmp_path / "store" / "calibrations.sqlite3"
    else:
        yield from _fresh_postgres_database()
