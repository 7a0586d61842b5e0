"""The calibration store against both backends, a SQLite file and a PostgreSQL server (`store_backends`):
saving and reading back, order, filters, the fleet's newest result per host and GPU, rows that no
longer read, writers on several hosts at once, and a store that cannot be reached."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from calculators.interface import cli
from measure.calibration.result import BenchmarkRecord, CalibrationResult
from measure.calibration.store import CALIBRATIONS, CalibrationStore, CalibrationStoreError, default_store_path
from tests.store_backends import BACKENDS, store_location

ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(params=BACKENDS)
def location(request, tmp_path):
    yield from store_location(request.param, tmp_path)


def a_result(host: str = "box", gpu: str | None = H100, minutes: int = 0) -> CalibrationResult:
    created = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes)
    return CalibrationResult(
        host=host,
        device="cuda:0" if gpu else "cpu",
        gpu_name=gpu,
        created_at=created,
        budget_s=110,
        records=[BenchmarkRecord(name="matmul_bf16", value=790.0, unit="TFLOPS", percent_of_datasheet=79.9)],
        utilisation={"bf16": 0.799},
    )


def test_saves_reloads_and_lists_newest_first(location):
    store = CalibrationStore(location)
    assert store.latest() is None and store.history() == []
    older, newest, other_host = a_result(minutes=0), a_result(minutes=30), a_result(host="other", minutes=10)
    assert [store.save(result) for result in (older, newest, other_host)] == [1, 2, 3]
    assert store.history() == [newest, other_host, older]
    assert store.history(host="box") == [newest, older]
    assert store.history(gpu=H100, host="other") == [other_host]
    assert store.history(gpu="no such GPU") == []
    assert CalibrationStore(location).latest(host="box") == newest


def test_orders_times_given_in_other_time_zones(location):
    store = CalibrationStore(location)
    early_utc = a_result(minutes=60)  # 13:00 UTC
    tokyo = dt.timezone(dt.timedelta(hours=9))
    later_tokyo = a_result().model_copy(
        update={"created_at": dt.datetime(2026, 1, 1, 23, 30, tzinfo=tokyo)}
    )  # 14:30 UTC
    store.save(later_tokyo)
    store.save(early_utc)
    assert store.latest() == later_tokyo


def test_find_names_a_stored_result_by_content(location):
    store = CalibrationStore(location)
    store.save(a_result(minutes=1))
    store.save(a_result(minutes=2))
    assert store.find(a_result(minutes=2)) == 2
    assert store.find(a_result(minutes=3)) is None


def test_the_fleet_is_each_hosts_newest_result_per_gpu(location):
    store = CalibrationStore(location)
    for host, gpu, minutes in [("node-a", H100, 0), ("node-a", H100, 20), ("node-b", H100, 10),
                               ("node-a", None, 30), ("node-c", "NVIDIA A100-SXM4-80GB", 5)]:  # fmt: skip
        store.save(a_result(host, gpu, minutes))
    fleet = [(result.host, result.gpu_name, result.created_at.minute) for result in store.fleet()]
    assert fleet == [("node-a", None, 30), ("node-a", H100, 20), ("node-b", H100, 10),
                     ("node-c", "NVIDIA A100-SXM4-80GB", 5)]  # fmt: skip


def test_rows_that_are_not_results_are_skipped_with_the_reason(location):
    store = CalibrationStore(location)
    store.save(a_result())
    engine = sa.create_engine(store._engine().url)
    with engine.begin() as connection:
        connection.execute(
            CALIBRATIONS.insert().values(
                host="box", gpu_name=None, created_at="2026-01-01T13:00:00.000000+00:00", result_json="{not json"
            )
        )
    engine.dispose()
    assert store.history() == [a_result()]
    assert store.problems == [
        "Skipped stored calibration 2 of 2026-01-01T13:00:00: not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    ]


WRITER = """
import sys
from tests.test_calibration_store import a_result
from measure.calibration.store import CalibrationStore
store = CalibrationStore(sys.argv[1])
for minute in range(int(sys.argv[3])):
    store.save(a_result(host=sys.argv[2], minutes=minute))
"""


def test_writers_on_several_hosts_at_once_lose_nothing(location):
    """On a new store: the writers also race to create the table."""
    hosts, saves = ("node-a", "node-b", "node-c"), 8
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(location), host, str(saves)], cwd=ROOT, env=os.environ)
        for host in hosts
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0]
    store = CalibrationStore(location)
    assert sorted((r.host, r.created_at.minute) for r in store.history()) == [
        (host, minute) for host in hosts for minute in range(saves)
    ]


def test_a_server_that_cannot_be_reached_is_one_line_without_the_password():
    store = CalibrationStore("postgresql://fleet:s3cret@127.0.0.1:1/calibrations")
    with pytest.raises(CalibrationStoreError) as caught:
        store.history()
    message = str(caught.value)
    assert message.startswith("cannot use the calibration store postgresql://fleet:***@127.0.0.1:1/calibrations: ")
    assert "Connection refused" in message and "s3cret" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("postgresql://db-host:port/calibrations", "GPU_SIZING_CALIBRATION_DB is not a database URL or a file path"),
        ("nosuchdb://db-host/calibrations", "cannot use the calibration store nosuchdb://db-host/calibrations: "),
    ],
)
def test_a_url_that_names_no_database_is_one_line(location, message):
    with pytest.raises(CalibrationStoreError, match=f"^{message}"):
        CalibrationStore(location).check()


def test_the_variable_takes_a_url_or_a_path():
    url = "postgresql://fleet@db-host/calibrations"
    assert default_store_path({"GPU_SIZING_CALIBRATION_DB": url}) == url
    assert default_store_path({"GPU_SIZING_CALIBRATION_DB": "/data/c.sqlite3"}) == Path("/data/c.sqlite3")


def instant_calibration(monkeypatch):
    """run_calibration returning a fixed result at once (the store, not the benchmarks, is tested)."""
    from measure.calibration import runner

    monkeypatch.setattr(runner, "run_calibration", lambda **_: a_result(host="this-host"))


def test_the_cli_keeps_the_result_in_the_fleets_store(location, tmp_path, monkeypatch, capsys):
    instant_calibration(monkeypatch)
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(location))
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))
    assert cli.main(["calibrate", "--device", "cpu", "--out", str(tmp_path / "result.json")]) == 0
    assert CalibrationStore(location).latest() == a_result(host="this-host")


def test_a_store_the_cli_cannot_reach_is_one_line_and_the_result_is_still_written(tmp_path, monkeypatch, capsys):
    instant_calibration(monkeypatch)
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", "postgresql://fleet:s3cret@127.0.0.1:1/calibrations")
    out = tmp_path / "result.json"
    assert cli.main(["calibrate", "--device", "cpu", "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: cannot use the calibration store postgresql://fleet:***@127.0.0.1:1/calibrations")
    assert line.endswith(f"; the result is in {out}") and "s3cret" not in line
    assert CalibrationResult.model_validate(json.loads(out.read_text())) == a_result(host="this-host")
