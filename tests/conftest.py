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


@pytest.fixture
def hub_never_asked(monkeypatch):
    """The app's Hub look-up fails the test: a page reached by a library or bundled name must answer
    offline, without asking the Hugging Face Hub."""
    import ui.workload

    def asked(repo, revision):
        raise AssertionError(f"asked the Hub for {repo}")

    monkeypatch.setattr(ui.workload, "fetch_hub_config", asked)
