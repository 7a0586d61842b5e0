"""Times the memory estimator and a full rerun of the Memory page.

Goals: under 1 ms per estimate, under 150 ms per page rerun, and torch
never imported by the pages. Run from the repository root:

    python bench/bench_memory.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms, page_rerun_ms  # noqa: E402

from calculators.memory.engine import estimate_memory  # noqa: E402
from calculators.memory.fit import check_fit, suggestions  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402


def bench_calculators() -> None:
    spec = get_preset("llama-3.1-8b")
    settings = TrainingSettings(micro_batch=2, seq_len=4096, zero=3, gpus=8, checkpointing="selective")
    print(f"estimate_memory          {median_ms(lambda: estimate_memory(spec, settings), 2000):8.3f} ms (goal < 1 ms)")
    print(f"check_fit (with searches){median_ms(lambda: check_fit(spec, settings, 80.0), 200):8.3f} ms")
    print(f"suggestions              {median_ms(lambda: suggestions(spec, settings, 24.0), 50):8.3f} ms")


def bench_page(page: str, repeats: int = 20) -> None:
    print(f"page rerun {page:<28}{page_rerun_ms(page, repeats):8.1f} ms (goal < 150 ms)")


if __name__ == "__main__":
    bench_calculators()
    pages = ("plan", "memory", "compare", "cost", "calibration", "validation")
    for page_path in (f"app_pages/{name}.py" for name in pages):
        bench_page(page_path)
    print(f"torch imported by the pages: {'torch' in sys.modules}")
