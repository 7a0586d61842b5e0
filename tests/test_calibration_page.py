"""AppTest of the Calibration page: nothing runs on load, runs only when allowed, import, apply,
and bad input (malformed files, a damaged store, a busy host) shown as messages, never exceptions."""

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from measure.calibration.result import CalibratedOverheads, CalibrationResult, utc_now
from measure.calibration.store import CalibrationStore, export_json
from tests.apptest_helpers import open_app

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def private_store(tmp_path, monkeypatch):
    """The store and the host lock (its folder's calibration.lock) of this test only."""
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "calibration.sqlite3"))
    monkeypatch.delenv("GPU_SIZING_CALIBRATION_LOCK", raising=False)
    monkeypatch.delenv("GPU_SIZING_ALLOW_CALIBRATION", raising=False)
    return tmp_path / "calibration.sqlite3"


def a_result(context_gib: float = 1.25) -> CalibrationResult:
    return CalibrationResult(
        host="lab-node",
        device="cuda",
        gpu_name="NVIDIA H100 80GB HBM3",
        created_at=utc_now(),
        budget_s=100,
        overheads=CalibratedOverheads(cuda_context_gib=context_gib, allocator_reserve_fraction=0.05),
        utilisation={"bf16": 0.75},
        training_mfu=0.42,
    )


def run_button(app: AppTest):
    return next(button for button in app.button if button.label == "Run benchmarks")


def test_nothing_runs_on_load_and_the_button_needs_the_operators_permission():
    app = open_calibration()
    assert run_button(app).disabled
    assert any("GPU_SIZING_ALLOW_CALIBRATION=1" in element.value for element in app.info)
    assert any("No calibration yet" in element.value for element in app.info)


def test_a_cpu_run_is_stored_and_shown(monkeypatch):
    monkeypatch.setenv("GPU_SIZING_ALLOW_CALIBRATION", "1")
    app = open_calibration()
    app.selectbox(key="cal_device").set_value("cpu")
    app.number_input(key="cal_budget_s").set_value(5)
    run_button(app).click().run(timeout=120)
    assert not app.exception
    table = app.dataframe[-1].value if len(app.dataframe) == 1 else app.dataframe[0].value
    assert "matmul" in " ".join(table["benchmark"].astype(str))


def test_importing_a_result_and_switching_it_on_changes_the_memory_estimate():
    app = open_calibration()
    app.file_uploader[0].set_value(("calibration.json", export_json(a_result()).encode(), "application/json")).run()
    assert not app.exception
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/memory.py").run()
    assert any("measured on lab-node" in element.value for element in app.info)


def test_a_malformed_import_gets_a_clear_message():
    app = open_calibration()
    app.file_uploader[0].set_value(("calibration.json", b"{not json", "application/json")).run()
    assert not app.exception
    assert any(element.value.startswith("Not imported:") for element in app.error)


def test_the_cost_page_uses_the_calibrated_utilisation_of_the_measured_gpu():
    result = a_result().model_copy(update={"catalogue_gpu": "H100-SXM5-80GB"})
    app = open_calibration()
    app.file_uploader[0].set_value(("c.json", export_json(result).encode(), "application/json")).run()
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/cost.py").run()
    assert not app.exception
    # the measured bf16 matmul fraction, 75% of peak, goes into the GEMMs' roofline
    assert any("Calibrated matmul fraction: H100-SXM5-80GB 75%" in element.value for element in app.caption)


def upload(app: AppTest, content: bytes, name: str = "calibration.json") -> AppTest:
    return app.file_uploader[0].set_value((name, content, "application/json")).run()


def exported(**changes) -> bytes:
    data = json.loads(export_json(a_result().model_copy(update={"catalogue_gpu": "H100-SXM5-80GB"})))
    return json.dumps(data | changes).encode()


BAD_FILES = [
    (b"{not json", "not valid JSON: Expecting property name enclosed in double quotes"),
    (b'{"host": "x"}', "not a calibration result: device: Field required"),
    (exported(utilisation={"bf16": 0}), "not a calibration result: utilisation.bf16: 0 of dense peak is not a"),
    (exported(utilisation={"bf16": 5.0}), "not a calibration result: utilisation.bf16: 5 of dense peak is not a"),
    (
        exported(utilisation={"bf16": 5e-324}),
        "not a calibration result: utilisation.bf16: 4.941e-324 of dense peak is not a measurement: a GPU's "
        "matmuls reach between 0.30% (the smallest GEMM in XLA's performance table) and 100%",
    ),
    (exported(schema_version=99), "not a calibration result: schema_version: version 99 is not one this app reads"),
    (exported().replace(b'"training_mfu": 0.42', b'"training_mfu": NaN'), "not a calibration result: training_mfu:"),
    (exported(budget_s=1e400), "not a calibration result: budget_s: Input should be a finite number"),
    (exported().replace(b'"budget_s": 100.0', b'"budget_s": ' + b"9" * 5000), "not valid JSON: Exceeds the limit"),
]


@pytest.mark.parametrize(
    ("content", "message"),
    BAD_FILES,
    ids=[
        "not-json",
        "wrong-schema",
        "utilisation-0",
        "utilisation-5",
        "utilisation-5e-324",
        "schema-99",
        "nan",
        "infinite",
        "huge-int",
    ],
)
def test_a_bad_file_is_not_imported_and_the_good_calibration_stays_in_use(content, message):
    """An imported utilisation of 0 once made the Cost page divide by zero: now it never gets in."""
    app = open_calibration()
    upload(app, exported(), "good.json")
    upload(app, content, "bad.json")
    assert not app.exception
    [error] = [element.value for element in app.error]
    assert error.startswith(f"Not imported: {message}")
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/cost.py").run()
    assert not app.exception
    # the good file's bf16 matmul fraction, 75% of peak
    assert any("Calibrated matmul fraction: H100-SXM5-80GB 75%" in element.value for element in app.caption)


def test_a_damaged_store_is_moved_aside_with_a_warning_that_stays(private_store):
    private_store.write_bytes(random.Random(3).randbytes(4096))
    app = open_calibration()
    assert not app.exception
    [warning] = [element.value for element in app.warning]
    assert warning.startswith(f"The calibration store {private_store} was damaged (file is not a database)")
    app.run()  # the next click: the file is sound now, the message is kept for the session
    assert [element.value for element in app.warning] == [warning]
    assert len(list(private_store.parent.glob("calibration.sqlite3.corrupt-*"))) == 1
    upload(app, exported())
    assert not app.exception and CalibrationStore(private_store).latest().host == "lab-node"


def test_a_stored_row_that_is_not_a_result_is_skipped_with_a_warning(private_store):
    CalibrationStore(private_store).save(a_result())
    with sqlite3.connect(private_store) as connection:
        connection.execute(
            "INSERT INTO calibrations (host, created_at, result_json) VALUES ('x', '2099-01-01T00:00:00', '[]')"
        )
    connection.close()
    app = open_calibration()
    assert not app.exception
    assert [element.value for element in app.warning] == [
        "Skipped stored calibration 2 of 2099-01-01T00:00:00: not a calibration result: "
        "expected a JSON object, got list"
    ]
    assert any(element.value.startswith("lab-node, NVIDIA H100 80GB HBM3") for element in app.caption)


def test_a_store_that_cannot_be_used_gets_an_error_not_an_exception(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "a-file" / "calibration.sqlite3"))
    app = open_calibration()
    assert any(element.value.startswith("History not shown: cannot use the calibration store") for element in app.error)
    upload(app, exported())
    assert not app.exception
    assert any(element.value.startswith("Not kept in the history: ") for element in app.error)
    assert any(element.value.startswith("lab-node, ") for element in app.caption)  # imported and in use all the same


def test_run_while_another_process_calibrates_says_who(private_store, monkeypatch):
    monkeypatch.setenv("GPU_SIZING_ALLOW_CALIBRATION", "1")
    lock_path = private_store.parent / "calibration.lock"
    holder_code = (
        "import sys, time; from pathlib import Path; from measure.calibration.host_lock import exclusive_calibration\n"
        "with exclusive_calibration(Path(sys.argv[1])):\n    print('holding', flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen([sys.executable, "-c", holder_code, str(lock_path)], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"holding\n"
        app = open_calibration()
        app.selectbox(key="cal_device").set_value("cpu")
        run_button(app).click().run()
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert not app.exception
    assert app.status[0].label == (
        f"Not started: another calibration is running on this host (pid {holder.pid}, lock {lock_path}); "
        "wait for it to finish"
    )


def open_calibration():
    return open_app("app_pages/calibration.py", timeout_s=60)


def raw_texts(app: AppTest) -> list[str]:
    """Every message, caption and markdown on the page, to look for pydantic's raw text in."""
    elements = [*app.error, *app.warning, *app.info, *app.caption, *app.markdown, *app.success]
    return [str(element.value) for element in elements]


def assert_no_raw_error(app: AppTest) -> None:
    assert not app.exception
    texts = raw_texts(app)
    assert not any("validation error for" in text or "errors.pydantic.dev" in text for text in texts)
    assert not any("got nan" in text for text in texts)


def test_a_stored_utilisation_no_gemm_gives_is_skipped_and_cost_and_plan_show_no_raw_error(private_store):
    """Issue 37: a utilisation of 5e-324 made the Cost page's hours NaN and the Plan page show
    '7 validation errors for Plan'. A row written before the bound (bypassing the model) is now
    skipped with the reason, and the pages use the good calibration."""
    CalibrationStore(private_store).save(a_result().model_copy(update={"catalogue_gpu": "H100-SXM5-80GB"}))
    bad = json.loads(exported())
    bad["utilisation"] = {"bf16": 5e-324}
    with sqlite3.connect(private_store) as connection:
        connection.execute(
            "INSERT INTO calibrations (host, created_at, result_json) VALUES ('x', '2099-01-01T00:00:00', ?)",
            (json.dumps(bad),),
        )
    connection.close()
    app = open_calibration()
    assert not app.exception
    [warning] = [element.value for element in app.warning]
    assert warning.startswith(
        "Skipped stored calibration 2 of 2099-01-01T00:00:00: not a calibration result: utilisation.bf16: 4.941e-324"
    )
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/cost.py").run()
    assert_no_raw_error(app)
    assert any("Calibrated matmul fraction: H100-SXM5-80GB 75%" in element.value for element in app.caption)
    app.switch_page("app_pages/plan.py").run()
    assert_no_raw_error(app)


def test_the_least_plausible_utilisation_gives_finite_costs_and_plans():
    """At the bound (0.31% of peak) the hours are long but finite: no NaN, no raw pydantic text."""
    app = open_calibration()
    upload(app, exported(utilisation={"bf16": 0.0031}, training_mfu=0.0031))
    assert not app.exception and not app.error
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/cost.py").run()
    assert_no_raw_error(app)
    assert any("Calibrated matmul fraction: H100-SXM5-80GB 0%" in element.value for element in app.caption)
    app.switch_page("app_pages/plan.py").run()
    assert_no_raw_error(app)


def test_two_results_sharing_a_file_name_are_both_kept_and_the_same_one_twice_is_said_to_be_there(private_store):
    """Issue 37: the second of two different calibration.json files was dropped without a word, as
    imports were keyed by file name. Now by content: both are kept, and a repeat is named as stored."""
    first = a_result().model_copy(update={"host": "node-a"})
    second = a_result().model_copy(update={"host": "node-b", "utilisation": {"bf16": 0.6}})
    app = open_calibration()
    upload(app, export_json(first).encode())
    assert not app.exception
    assert [element.value for element in app.info if "calibration of" in element.value] == [
        f"Imported the calibration of node-a, NVIDIA H100 80GB HBM3, {first.created_at:%Y-%m-%d %H:%M} UTC into "
        "the history."
    ]
    upload(app, export_json(second).encode())
    assert not app.exception
    assert any(element.value.startswith("Imported the calibration of node-b") for element in app.info)
    assert {result.host for result in CalibrationStore(private_store).history()} == {"node-a", "node-b"}
    assert any(element.value.startswith("node-b, ") for element in app.caption)  # the second is in use
    app.run()  # a rerun with the same file in the uploader stores nothing more and says the same
    assert any(element.value.startswith("Imported the calibration of node-b") for element in app.info)
    # The first again, indented differently under another name: the same content, already there.
    upload(app, json.dumps(json.loads(export_json(first))).encode(), "copy of calibration.json")
    assert not app.exception
    assert any(
        element.value.startswith("Already in the history: the calibration of node-a") and "number 1" in element.value
        for element in app.info
    )
    assert len(CalibrationStore(private_store).history()) == 2
    assert any(element.value.startswith("node-a, ") for element in app.caption)  # and in use again


def test_the_cost_page_times_the_measured_gpus_collectives_on_the_swept_curves():
    # a sweep of the measured GPU (H100-SXM5-80GB) that found 1 GB/s of bus bandwidth at every size;
    # tests/test_collectives.py checks what a measured curve does to a step's time
    slow = [{"bytes": size, "algbw_gbytes_per_s": 0.57, "busbw_gbytes_per_s": 1.0, "time_s": size / 0.57e9}
            for size in (1 << 20, 1 << 26, 1 << 30)]  # fmt: skip
    one_rank = [{"bytes": 1 << 20, "algbw_gbytes_per_s": 5.0, "busbw_gbytes_per_s": 0.0, "time_s": 2e-4}]
    app = open_calibration()
    upload(app, exported(all_reduce=slow, all_gather=one_rank))
    app.toggle(key="use_calibration").set_value(True).run()
    app.switch_page("app_pages/cost.py").run()
    assert not app.exception
    (caption,) = [c.value for c in app.caption if "curves measured on this host" in c.value]
    # the one-rank all-gather moved nothing over a link and is not used
    assert "(all-reduce)" in caption and "all-gather" not in caption
