"""Bad input to the calibration: imported results, a damaged store, a bad request. Each gets
one line naming what is wrong, never a traceback, and a damaged store never loses a result."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import sqlite3
from pathlib import Path

import pytest

from measure.calibration import __main__ as calibration_cli
from measure.calibration import runner
from measure.calibration.result import (
    MIN_FRACTION_OF_PEAK,
    BenchmarkRecord,
    CalibratedOverheads,
    CalibrationResult,
    physical_ceilings,
)
from measure.calibration.runner import (
    CalibrationRequestError,
    check_calibration_request,
    run_calibration,
)
from measure.calibration.store import (
    CalibrationImportError,
    CalibrationStore,
    CalibrationStoreError,
    export_json,
    import_json,
)


@pytest.fixture(autouse=True)
def private_lock_and_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "store" / "calibrations.sqlite3"))
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))


def a_result(minutes: int = 0) -> CalibrationResult:
    return CalibrationResult(
        host="box",
        device="cuda:0",
        gpu_name="NVIDIA H100 80GB HBM3",
        created_at=dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes),
        budget_s=110,
        records=[
            BenchmarkRecord(name="matmul_bf16", value=790.0, unit="TFLOPS", datasheet_value=989.4),
            BenchmarkRecord(name="memory_bandwidth", value=2900.0, unit="GB/s"),
        ],
        overheads=CalibratedOverheads(cuda_context_gib=0.52),
        utilisation={"bf16": 0.8},
        training_mfu=0.42,
    )


def exported(**changes) -> dict:
    """The exported JSON of `a_result()` as a dict, with top-level fields replaced."""
    return json.loads(export_json(a_result())) | changes


# --- Imported results -----------------------------------------------------------------------


# XLA's smallest GEMM on a B200: 6.77 of 2,250 dense TFLOPS (measure/calibration/result.py).
FRACTION_RANGE = "of dense peak is not a measurement: a GPU's matmuls reach between 0.30% (the smallest GEMM"


def test_the_ceilings_are_the_catalogues_fastest_datasheet_figures():
    """MI355X: 5,033.2 dense fp8 TFLOPS and 8 TB/s HBM3e (amd.com, data/gpus.csv); GB200's HBM is 8 TB/s too."""
    assert physical_ceilings()["TFLOPS"][0] == 5033.2
    assert physical_ceilings()["GB/s"][0] == 8000.0
    at_the_ceiling = with_record(value=8000.0)
    assert import_json(json.dumps(at_the_ceiling)).records[1].value == 8000.0


def test_the_plausible_range_of_a_fraction_is_the_sourced_one():
    assert MIN_FRACTION_OF_PEAK == pytest.approx(0.003009, abs=1e-6)
    ok = import_json(json.dumps(exported(utilisation={"bf16": 0.0031, "fp8": 1.0}, training_mfu=0.0031)))
    assert ok.utilisation == {"bf16": 0.0031, "fp8": 1.0} and ok.training_mfu == 0.0031


def with_record(**changes) -> dict:
    data = exported()
    data["records"][1].update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (exported(utilisation={"bf16": 0}), f"utilisation.bf16: 0 {FRACTION_RANGE}"),
        (exported(utilisation={"bf16": 5e-324}), f"utilisation.bf16: 4.941e-324 {FRACTION_RANGE}"),
        (exported(utilisation={"bf16": 0.0029}), f"utilisation.bf16: 0.0029 {FRACTION_RANGE}"),
        (exported(utilisation={"bf16": 5.0}), f"utilisation.bf16: 5 {FRACTION_RANGE}"),
        (exported(training_mfu=0.0), f"training_mfu: 0 {FRACTION_RANGE}"),
        (exported(training_mfu=1e-300), f"training_mfu: 1e-300 {FRACTION_RANGE}"),
        (exported(training_mfu=1.5), f"training_mfu: 1.5 {FRACTION_RANGE}"),
        (exported(schema_version=99), "schema_version: version 99 is not one this app reads (1)"),
        (exported(schema_version=0), "schema_version: version 0 is not one this app reads (1)"),
        (with_record(value=0.0), "records.1: value must be above 0 GB/s, got 0.0"),
        (with_record(value=-3.0), "records.1.value: Input should be greater than or equal to 0"),
        (with_record(datasheet_value=-1.0), "records.1.datasheet_value: Input should be greater than 0"),
        (with_record(percent_of_datasheet=0.0), "records.1.percent_of_datasheet: Input should be greater than 0"),
        (exported(overheads={"cuda_context_gib": 1e300}), "overheads.cuda_context_gib: Input should be less than"),
        (
            with_record(value=8001.0),
            "records.1: value 8001 GB/s is above the fastest memory or link in the GPU catalogue, MI355X-288GB's",
        ),
        (
            exported(records=[{"name": "matmul_fp8", "value": 6000.0, "unit": "TFLOPS"}]),
            "records.0: value 6000 TFLOPS is above the fastest dense peak in the GPU catalogue, MI355X-288GB's (5,033",
        ),
        (
            exported(records=[{"name": "matmul_bf16", "value": 700.0, "unit": "TFLOPS", "datasheet_value": 1e9}]),
            "records.0: datasheet_value 1e+09 TFLOPS is above the fastest dense peak in the GPU catalogue",
        ),
    ],
)
def test_import_refuses_values_no_measurement_gives_and_names_the_field(data, message):
    with pytest.raises(CalibrationImportError) as caught:
        import_json(json.dumps(data))
    assert str(caught.value).startswith(f"not a calibration result: {message}")
    assert "\n" not in str(caught.value)


def bandwidth_written_as(number: str) -> str:
    return export_json(a_result()).replace("2900.0", number)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Python's json reads NaN and Infinity, and 1e400 overflows to infinity.
        (json.dumps(exported(training_mfu=math.nan)), "training_mfu: Input should be a finite number"),
        (json.dumps(exported(budget_s=math.inf)), "budget_s: Input should be a finite number"),
        (bandwidth_written_as("1e400"), "records.1.value: Input should be a finite number"),
    ],
)
def test_import_refuses_nan_and_infinite_numbers(text, message):
    with pytest.raises(CalibrationImportError) as caught:
        import_json(text)
    assert str(caught.value).startswith(f"not a calibration result: {message}")


def test_import_refuses_an_integer_too_long_for_python_with_one_line():
    """json raises a plain ValueError for more than 4300 digits (sys.get_int_max_str_digits)."""
    with pytest.raises(CalibrationImportError) as caught:
        import_json(bandwidth_written_as("9" * 5000))
    assert str(caught.value).startswith("not valid JSON: Exceeds the limit (4300 digits)")


def test_a_measurement_above_the_datasheet_is_capped_at_one_with_a_note(monkeypatch):
    """A matmul at 104% of a conservative datasheet figure is stored as 1.0, so the result stays valid."""
    instant_benchmarks(monkeypatch)

    def matmul(device, precision, **_):
        fast = dict(value=1.04, unit="TFLOPS", datasheet_value=1.0, percent_of_datasheet=104.0)
        return BenchmarkRecord(name=f"matmul_{precision}", **fast)

    monkeypatch.setattr(runner.benchmarks, "matmul_tflops", matmul)
    step = runner.benchmarks.training_step_benchmark().model_copy(update={"percent_of_datasheet": 50.0})
    monkeypatch.setattr(runner.benchmarks, "training_step_benchmark", lambda *_, **__: step)
    result = run_calibration(device="cpu", budget_s=2)
    assert result.utilisation == {"fp32": 1.0} and result.training_mfu == 0.5
    assert result.record("matmul_fp32").percent_of_datasheet == 104.0
    assert "matmul_fp32 reached 104% of the datasheet figure; used as 100%" in result.notes


def test_a_measurement_below_the_least_any_gemm_reaches_is_not_applied_with_a_note(monkeypatch):
    """A run matched to the wrong datasheet (or a throttled GPU) gives a fraction no GEMM gives: the
    result is kept, valid, without that fraction, and says why."""
    instant_benchmarks(monkeypatch)

    def matmul(device, precision, **_):
        slow = dict(value=0.001, unit="TFLOPS", datasheet_value=1.0, percent_of_datasheet=0.1)
        return BenchmarkRecord(name=f"matmul_{precision}", **slow)

    monkeypatch.setattr(runner.benchmarks, "matmul_tflops", matmul)
    step = runner.benchmarks.training_step_benchmark().model_copy(update={"percent_of_datasheet": 0.2})
    monkeypatch.setattr(runner.benchmarks, "training_step_benchmark", lambda *_, **__: step)
    result = run_calibration(device="cpu", budget_s=2)
    assert result.utilisation == {} and result.training_mfu is None
    assert result.record("matmul_fp32").percent_of_datasheet == 0.1
    assert (
        "matmul_fp32 reached 0.001 of the datasheet figure, below the 0.30% the smallest GEMM reaches; not applied"
        in result.notes
    )
    assert (
        "training_step reached 0.002 of the datasheet figure, below the 0.30% the smallest GEMM reaches; not applied"
        in result.notes
    )


# --- A damaged store ------------------------------------------------------------------------


def random_bytes(size: int) -> bytes:
    return random.Random(7).randbytes(size)


def test_a_store_of_random_bytes_is_moved_aside_and_a_new_one_started(tmp_path):
    path = tmp_path / "calibrations.sqlite3"
    path.write_bytes(random_bytes(8192))
    store = CalibrationStore(path)
    assert store.history() == []
    [problem] = store.problems
    assert problem.startswith(f"The calibration store {path} was damaged (file is not a database); it was moved to ")
    assert problem.endswith(" and a new, empty store was started.")
    [aside] = tmp_path.glob("calibrations.sqlite3.corrupt-*")
    assert aside.read_bytes() == random_bytes(8192)  # kept for whoever wants to recover it
    assert aside.name in problem
    store.save(a_result())
    assert CalibrationStore(path).history() == [a_result()]


def test_a_truncated_store_is_moved_aside(tmp_path):
    path = tmp_path / "calibrations.sqlite3"
    full = CalibrationStore(path)
    for minutes in range(3):
        full.save(a_result(minutes).model_copy(update={"notes": ["x" * 5000]}))  # rows over several 4 KiB pages
    path.write_bytes(path.read_bytes()[:4096])
    store = CalibrationStore(path)
    assert store.history() == []
    assert "was damaged (database disk image is malformed)" in store.problems[0]


def test_saving_onto_a_damaged_store_still_keeps_the_result(tmp_path):
    path = tmp_path / "calibrations.sqlite3"
    path.write_bytes(random_bytes(100))
    store = CalibrationStore(path)
    assert store.save(a_result()) == 1
    assert "was damaged" in store.problems[0]
    assert CalibrationStore(path).latest() == a_result()


def insert_raw_row(path: Path, created_at: str, result_json: object) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO calibrations (host, gpu_name, created_at, result_json) VALUES ('box', NULL, ?, ?)",
            (created_at, result_json),
        )
    connection.close()


def test_stored_rows_that_are_not_valid_results_are_skipped_with_the_reason(tmp_path):
    path = tmp_path / "calibrations.sqlite3"
    store = CalibrationStore(path)
    store.save(a_result())  # row 1, 12:00
    insert_raw_row(path, "2026-01-01T13:00:00.000000+00:00", "{not json")  # row 2
    insert_raw_row(path, "2026-01-01T14:00:00.000000+00:00", json.dumps(exported(utilisation={"bf16": 0})))  # row 3
    insert_raw_row(path, "2026-01-01T15:00:00.000000+00:00", 42)  # row 4
    assert store.latest() == a_result()  # the three newer rows are unreadable
    assert store.problems == [
        "Skipped stored calibration 4 of 2026-01-01T15:00:00: not a calibration result: "
        "expected a JSON object, got int",  # SQLite stored 42 as the text '42'
        "Skipped stored calibration 3 of 2026-01-01T14:00:00: not a calibration result: "
        f"utilisation.bf16: 0 {FRACTION_RANGE} in XLA's performance table) and 100%",
        "Skipped stored calibration 2 of 2026-01-01T13:00:00: not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    ]
    store.history()
    assert len(store.problems) == 3  # each reason once, however often the history is read


def test_a_store_that_cannot_be_created_raises_one_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    store = CalibrationStore(tmp_path / "a-file" / "sub" / "calibrations.sqlite3")
    with pytest.raises(CalibrationStoreError, match=r"^cannot use the calibration store .*: Not a directory$"):
        store.history()


# --- The request, checked before the run ------------------------------------------------------


def test_a_good_request_has_no_warnings_and_an_existing_out_one(tmp_path):
    out = tmp_path / "result.json"
    assert check_calibration_request(out, None, 110) == []
    assert check_calibration_request(out, 0.0, 1) == []  # free hardware and the shortest budget
    out.write_text("{}")
    assert check_calibration_request(out, 2.5, 3600) == [f"--out {out} exists and will be replaced"]
    assert out.read_text() == "{}"  # checking writes nothing
    assert sorted(path.name for path in tmp_path.iterdir()) == ["result.json"]  # the probe file is gone


@pytest.mark.parametrize(
    ("usd_per_hour", "budget_s", "message"),
    [
        (-5.0, 110, "--usd-per-hour must be a price of 0 or more, got -5.0"),
        (math.nan, 110, "--usd-per-hour must be a price of 0 or more, got nan"),
        (math.inf, 110, "--usd-per-hour must be a price of 0 or more, got inf"),
        (None, 0.5, "--budget-s must be between 1 and 3600 seconds, got 0.5"),
        (None, 3601, "--budget-s must be between 1 and 3600 seconds, got 3601"),
        (None, math.nan, "--budget-s must be between 1 and 3600 seconds, got nan"),
        (None, -math.inf, "--budget-s must be between 1 and 3600 seconds, got -inf"),
    ],
)
def test_a_bad_price_or_budget_is_refused_naming_the_flag(tmp_path, usd_per_hour, budget_s, message):
    with pytest.raises(CalibrationRequestError) as caught:
        check_calibration_request(tmp_path / "x.json", usd_per_hour, budget_s)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_an_out_in_a_missing_folder_or_on_a_folder_or_a_device_is_refused(tmp_path):
    missing = Path("/nonexistent/dir/x.json")
    with pytest.raises(CalibrationRequestError) as caught:
        check_calibration_request(missing, None, 110)
    assert str(caught.value) == "--out /nonexistent/dir/x.json: the folder /nonexistent/dir does not exist"
    with pytest.raises(CalibrationRequestError) as caught:
        check_calibration_request(tmp_path, None, 110)
    assert str(caught.value) == f"--out {tmp_path} is a folder; give a file name"
    with pytest.raises(CalibrationRequestError) as caught:
        check_calibration_request(Path("/dev/null"), None, 110)
    assert str(caught.value) == "--out /dev/null is not a regular file; give a file name"


def test_an_out_in_a_folder_without_write_permission_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):  # root writes anyway: make the probe fail as a read-only mount would
        folder.chmod(0o700)

        def refuse(**_):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(runner.tempfile, "NamedTemporaryFile", refuse)
    try:
        with pytest.raises(CalibrationRequestError) as caught:
            check_calibration_request(folder / "x.json", None, 110)
    finally:
        folder.chmod(0o700)
    assert str(caught.value) == f"--out {folder / 'x.json'}: cannot write in {folder} (Permission denied)"


@pytest.mark.parametrize(("usd_per_hour", "budget_s"), [(-5.0, 10.0), (math.nan, 10.0), (None, math.nan), (None, 0.0)])
def test_run_calibration_refuses_a_bad_price_or_budget_before_any_benchmark(monkeypatch, usd_per_hour, budget_s):
    monkeypatch.setattr(runner, "_calibrate", lambda *_: pytest.fail("a benchmark ran"))
    with pytest.raises(CalibrationRequestError):
        run_calibration(device="cpu", budget_s=budget_s, usd_per_hour=usd_per_hour)


# --- python -m measure.calibration ------------------------------------------------------------


def instant_benchmarks(monkeypatch):
    """CPU benchmarks replaced by instant records (the runner still needs torch to pick the device)."""
    pytest.importorskip("torch")
    bench = runner.benchmarks
    monkeypatch.setattr(bench, "matmul_tflops", lambda device, p, **_: BenchmarkRecord(name=f"matmul_{p}", value=1.0))
    monkeypatch.setattr(bench, "memory_bandwidth_gbps", lambda *_: BenchmarkRecord(name="memory_bandwidth", value=1.0))
    step = BenchmarkRecord(name="training_step", value=0.1, unit="s", details={"micro_batch": 4, "precision": "fp32"})
    monkeypatch.setattr(bench, "training_step_benchmark", lambda *_, **__: step)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--usd-per-hour", "-5"], "error: --usd-per-hour must be a price of 0 or more, got -5.0\n"),
        (["--usd-per-hour", "nan"], "error: --usd-per-hour must be a price of 0 or more, got nan\n"),
        (["--budget-s", "0"], "error: --budget-s must be between 1 and 3600 seconds, got 0.0\n"),
    ],
)
def test_the_cli_refuses_a_bad_request_before_running(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(runner, "_calibrate", lambda *_: pytest.fail("a benchmark ran"))
    assert calibration_cli.main(["--device", "cpu", *argv]) == 2
    assert capsys.readouterr().err == message


def test_the_cli_saves_onto_a_damaged_store_and_says_so_before_the_run(tmp_path, monkeypatch, capsys):
    instant_benchmarks(monkeypatch)
    path = tmp_path / "calibrations.sqlite3"
    path.write_bytes(random_bytes(4096))
    assert calibration_cli.main(["--device", "cpu", "--budget-s", "1", "--save", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    first_line = captured.err.splitlines()[0]
    assert first_line.startswith(f"warning: The calibration store {path} was damaged (file is not a database)")
    assert CalibrationStore(path).latest() == import_json(captured.out)


def test_the_cli_reports_a_store_it_cannot_use_before_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "_calibrate", lambda *_: pytest.fail("a benchmark ran"))
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "sub" / "calibrations.sqlite3"
    assert calibration_cli.main(["--device", "cpu", "--save", str(path)]) == 2
    assert capsys.readouterr().err == f"error: cannot use the calibration store {path}: Not a directory\n"


def test_find_names_a_stored_result_by_content_not_by_file(tmp_path):
    """Imports are keyed by content (issue 37): the same result, read back from its export, is found;
    one that differs in a single figure is not."""
    store = CalibrationStore(tmp_path / "calibrations.sqlite3")
    assert store.find(a_result()) is None
    store.save(a_result(minutes=5))
    row = store.save(a_result())
    assert store.find(import_json(export_json(a_result()))) == row
    assert store.find(a_result().model_copy(update={"utilisation": {"bf16": 0.79}})) is None


def test_a_benchmark_reading_above_every_datasheet_becomes_its_error_in_one_line(monkeypatch):
    """A timer glitch (a matmul 'faster' than any GPU) fails that benchmark with a one-line reason,
    not pydantic's text, and the run goes on."""
    instant_benchmarks(monkeypatch)

    def matmul(device, precision, **_):
        return BenchmarkRecord(name=f"matmul_{precision}", value=1e7, unit="TFLOPS")

    monkeypatch.setattr(runner.benchmarks, "matmul_tflops", matmul)
    result = run_calibration(device="cpu", budget_s=2)
    assert result.record("matmul_fp32").error == (
        "not a measurement: value 1e+07 TFLOPS is above the fastest dense peak in the GPU catalogue, "
        "MI355X-288GB's (5,033 TFLOPS)"
    )
    assert result.utilisation == {}
