"""AppTest of the Calibration page: nothing runs on load, runs only when allowed, import, apply."""

import pytest
from streamlit.testing.v1 import AppTest

from measure.calibration.result import CalibratedOverheads, CalibrationResult, utc_now
from measure.calibration.store import export_json
from tests.apptest_helpers import open_app


@pytest.fixture(autouse=True)
def private_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "calibration.sqlite3"))
    monkeypatch.delenv("GPU_SIZING_ALLOW_CALIBRATION", raising=False)


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
    # measured bf16 matmul 75% of peak x end-to-end factor 0.6 = 45%
    assert any("Calibrated utilisation: H100-SXM5-80GB 45%" in element.value for element in app.caption)


def open_calibration():
    return open_app("app_pages/calibration.py", timeout_s=60)
