"""AppTest of the Calibration page's fleet: every host and GPU in one store (SQLite or PostgreSQL),
a chosen host's figures applied to the other pages, and a store that cannot be used as one message."""

from __future__ import annotations

import datetime as dt

import pytest

from measure.calibration.result import CalibratedOverheads, CalibrationResult, CollectivePoint
from measure.calibration.store import CalibrationStore
from tests.apptest_helpers import open_app
from tests.store_backends import BACKENDS, store_location

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"


@pytest.fixture(params=BACKENDS)
def fleet_store(request, tmp_path, monkeypatch):
    """This test's store, named by GPU_SIZING_CALIBRATION_DB as on every host of a fleet."""
    for location in store_location(request.param, tmp_path):
        monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(location))
        monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))
        monkeypatch.delenv("GPU_SIZING_ALLOW_CALIBRATION", raising=False)
        yield CalibrationStore(location)


def a_result(host: str, gpu: str | None, minutes: int, context_gib: float = 1.0, **update) -> CalibrationResult:
    return CalibrationResult(
        host=host,
        device="cuda" if gpu else "cpu",
        gpu_name=gpu,
        created_at=dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes),
        budget_s=100,
        overheads=CalibratedOverheads(cuda_context_gib=context_gib),
        **update,
    )


def a_fleet(store: CalibrationStore) -> None:
    store.save(a_result("node-a", H100, 0, utilisation={"bf16": 0.7}))
    store.save(a_result("node-a", H100, 30, utilisation={"bf16": 0.75}, training_mfu=0.42))
    curve = [CollectivePoint(bytes=2**20, algbw_gbytes_per_s=10.0, busbw_gbytes_per_s=15.0, time_s=1e-4)]
    store.save(a_result("node-b", A100, 10, context_gib=2.5, all_reduce=curve))
    store.save(a_result("node-c", None, 20))


def fleet_table(app):
    return next(frame.value for frame in app.dataframe if "calibrations" in frame.value.columns)


def test_the_fleet_lists_each_hosts_newest_calibration_by_gpu(fleet_store):
    a_fleet(fleet_store)
    app = open_app("app_pages/calibration.py", timeout_s=60)
    table = fleet_table(app)
    assert list(zip(table["host"], table["GPU"], table["calibrations"], strict=True)) == [
        ("node-a", H100, 2),
        ("node-c", "CPU only", 1),
        ("node-b", A100, 1),
    ]
    node_a = table.iloc[0]
    assert node_a["bf16 matmul (% of dense peak)"] == "75%" and node_a["training-step MFU (%)"] == "42%"
    assert table.iloc[2]["all-reduce bus bandwidth (GB/s)"] == "15.0"
    assert "None" not in table.astype(str).to_numpy().ravel().tolist()
    assert any(fleet_store.name in element.value for element in app.caption)


def test_applying_a_chosen_hosts_figures_changes_the_memory_estimate(fleet_store):
    a_fleet(fleet_store)
    app = open_app("app_pages/calibration.py", timeout_s=60)
    app.selectbox(key="_calibration_fleet_choice").set_value(f"node-b · {A100}").run()
    next(button for button in app.button if button.label == "Apply this host's figures").click().run()
    assert not app.exception
    assert app.toggle(key="use_calibration").value is True
    assert any(element.value.startswith(f"node-b, {A100}") for element in app.caption)
    app.switch_page("app_pages/memory.py").run()
    assert any("measured on node-b" in element.value for element in app.info)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        (
            "postgresql://fleet:s3cret@127.0.0.1:1/calibrations",
            "History not shown: cannot use the calibration store postgresql://fleet:***@127.0.0.1:1/calibrations: ",
        ),
        ("postgresql://db-host:port/db", "History not shown: GPU_SIZING_CALIBRATION_DB is not a database URL"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_message_on_the_page(monkeypatch, tmp_path, location, message):
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", location)
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))
    app = open_app("app_pages/calibration.py", timeout_s=60)
    [error] = [element.value for element in app.error]
    assert error.startswith(message) and "s3cret" not in error and "\n" not in error
    assert any("No calibration yet" in element.value for element in app.info)


def test_the_swept_curves_are_drawn_with_units_and_nothing_without_them(tmp_path, monkeypatch):
    from ui.collective_chart import collective_figure

    monkeypatch.setenv("GPU_SIZING_CALIBRATION_DB", str(tmp_path / "calibrations.sqlite3"))

    curve = [
        CollectivePoint(bytes=2**k, algbw_gbytes_per_s=k / 10, busbw_gbytes_per_s=k / 20, time_s=1e-3)
        for k in range(10, 21)
    ]
    swept = a_result("node-b", None, 0, all_reduce=curve, all_gather=curve, reduce_scatter=curve)
    figure = collective_figure(swept)
    assert [trace.name for trace in figure.data] == ["all-reduce", "all-gather", "reduce-scatter"]
    assert list(figure.data[0].x) == [2**k for k in range(10, 21)] and figure.data[0].y[-1] == 1.0
    assert figure.layout.xaxis.title.text == "message size (bytes)" and figure.layout.xaxis.type == "log"
    assert figure.layout.yaxis.title.text == "bus bandwidth (GB/s)"
    assert collective_figure(a_result("node-a", H100, 0)) is None
    CalibrationStore(tmp_path / "calibrations.sqlite3").save(swept)
    app = open_app("app_pages/calibration.py", timeout_s=60)
    assert len(app.get("plotly_chart")) == 1
