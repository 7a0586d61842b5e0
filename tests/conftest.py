import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _private_calibration_lock(tmp_path, monkeypatch):
    """Each test takes the per-host calibration lock in its own folder, so the suite never
    contends with (or leaves a lock file beside) a real calibration of this host."""
    monkeypatch.setenv("GPU_SIZING_CALIBRATION_LOCK", str(tmp_path / "calibration.lock"))
