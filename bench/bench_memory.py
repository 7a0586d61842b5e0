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

from calculators.hardware.catalogue import load_gpu_catalogue  # noqa: E402
from calculators.memory.engine import estimate_memory  # noqa: E402
from calculators.memory.fit import check_fit, suggestions  # noqa: E402
from calculators.memory.vision_fit import check_vision_fit, vision_fit_matrix  # noqa: E402
from calculators.memory.vision_training import VisionTrainingInput, estimate_vision_memory  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.models.vision_library import vision_model  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402


def bench_calculators() -> None:
    spec = get_preset("llama-3.1-8b")
    settings = TrainingSettings(micro_batch=2, seq_len=4096, zero=3, gpus=8, checkpointing="selective")
    print(f"estimate_memory          {median_ms(lambda: estimate_memory(spec, settings), 2000):8.3f} ms (goal < 1 ms)")
    print(f"check_fit (with searches){median_ms(lambda: check_fit(spec, settings, 80.0), 200):8.3f} ms")
    print(f"suggestions              {median_ms(lambda: suggestions(spec, settings, 24.0), 50):8.3f} ms")


def bench_vision() -> None:
    """An image model of the vision library: ResNet-50, 256 images of 224 px, AMP, every block checkpointed."""
    run = VisionTrainingInput(
        model=vision_model("resnet50"), micro_batch=256, precision="amp-fp16", channels_last=True, checkpointing="full"
    )
    catalogue = list(load_gpu_catalogue())
    print(f"estimate_vision_memory   {median_ms(lambda: estimate_vision_memory(run), 2000):8.3f} ms (goal < 1 ms)")
    print(f"check_vision_fit         {median_ms(lambda: check_vision_fit(run, 80.0), 200):8.3f} ms")
    matrix_ms = median_ms(lambda: vision_fit_matrix(run, catalogue), 20)
    print(f"vision_fit_matrix ({len(catalogue)} GPUs){matrix_ms:8.3f} ms")


def bench_page(page: str, repeats: int = 20, query: dict[str, str] | None = None) -> None:
    shown = f"{page}?model={query['model']}" if query else page
    print(f"page rerun {shown:<44}{page_rerun_ms(page, repeats, query):8.1f} ms (goal < 150 ms)")


if __name__ == "__main__":
    bench_calculators()
    bench_vision()
    pages = ("plan", "memory", "compare", "cost", "calibration", "validation")
    for page_path in (f"app_pages/{name}.py" for name in pages):
        bench_page(page_path)
    for page_path in ("app_pages/memory.py", "app_pages/compare.py"):
        bench_page(page_path, query={"model": "resnet50", "img_mb": "256"})
    print(f"torch imported by the pages: {'torch' in sys.modules}")
