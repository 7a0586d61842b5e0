"""One calibration at a time per host, across processes: a second run fails at once, naming the
holder's pid, and a holder that dies leaves the host free."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from measure.calibration.host_lock import CalibrationBusyError, default_lock_path, exclusive_calibration
from measure.calibration.runner import run_calibration

ROOT = Path(__file__).resolve().parent.parent
HOLD_S = 30  # the holder lets go by itself after this, should a test fail to stop it

HOLDER = f"""
import sys, time
from pathlib import Path
from measure.calibration.host_lock import exclusive_calibration
with exclusive_calibration(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep({HOLD_S})
"""


@pytest.fixture
def lock_path(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "locks" / "calibration.lock"
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(path))
    return path


@pytest.fixture
def holder(lock_path):
    """Another process holding the host's calibration lock."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline() == "holding\n"
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)


def test_the_lock_lives_next_to_the_store_unless_configured():
    assert default_lock_path({"GPU_SIZING_CALIBRATION_DB": "/data/cal/c.sqlite3"}) == Path("/data/cal/calibration.lock")
    assert default_lock_path({"GPU_SIZING_CALIBRATION_LOCK": "/run/gpu.lock"}) == Path("/run/gpu.lock")
    assert default_lock_path({}) == Path.home() / ".cache" / "gpu-sizing" / "calibration.lock"


def test_a_run_while_another_process_holds_the_lock_fails_at_once_naming_its_pid(holder, lock_path):
    started_s = time.perf_counter()
    with pytest.raises(CalibrationBusyError) as caught:
        run_calibration(device="cpu", budget_s=5)
    assert time.perf_counter() - started_s < 5  # no waiting, no benchmark
    assert str(caught.value) == (
        f"another calibration is running on this host (pid {holder.pid}, lock {lock_path}); wait for it to finish"
    )


def test_a_holder_that_is_killed_leaves_the_host_free(holder, lock_path):
    holder.kill()
    holder.wait(timeout=10)
    with exclusive_calibration():  # the kernel released the dead process's flock
        assert (lock_path.parent / "calibration.lock.owner").read_text().strip().isdigit()
    assert not (lock_path.parent / "calibration.lock.owner").exists()


def test_a_lock_that_cannot_be_created_says_which_variable_to_set(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "a-file" / "sub" / "calibration.lock"))
    with pytest.raises(CalibrationBusyError) as caught:
        run_calibration(device="cpu", budget_s=5)
    assert str(caught.value) == (
        f"cannot take the calibration lock {tmp_path / 'a-file' / 'sub' / 'calibration.lock'} (Not a directory); "
        "set GPU_SIZING_CALIBRATION_LOCK to a file in a writable folder"
    )
