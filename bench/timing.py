"""Timing helpers shared by the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def median_ms(function, repeats: int = 30) -> float:
    """Median wall time of `function()` over `repeats` calls, in milliseconds."""
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def page_rerun_ms(page: str, repeats: int, query: dict[str, str] | None = None) -> float:
    """Median rerun time of one page of the app under AppTest, after a warm-up run (imports
    and caches are paid once per server); `query`: the link's settings (?model=resnet50)."""
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=60)
    for key, value in (query or {}).items():
        app.query_params[key] = value
    app.switch_page(page)
    app.run()
    assert not app.exception, app.exception
    return median_ms(app.run, repeats)
