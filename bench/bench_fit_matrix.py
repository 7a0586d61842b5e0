"""Times the fit matrix (the workload on every GPU of the catalogue) and the Compare page.

Goal (issue 4): under 50 ms for the 40+ GPUs of the catalogue. Run from the repository root:

    python bench/bench_fit_matrix.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from calculators.fit_matrix import fit_matrix  # noqa: E402
from calculators.gpu_catalogue import load_gpu_catalogue  # noqa: E402
from calculators.presets import get_preset  # noqa: E402
from calculators.training import TrainingSettings  # noqa: E402

WORKLOADS = {
    "llama-3.1-8b bf16-mixed, no ZeRO": ("llama-3.1-8b", TrainingSettings()),
    "llama-3.1-8b ZeRO-3 x8, full ckpt": (
        "llama-3.1-8b",
        TrainingSettings(zero=3, gpus=8, checkpointing="full", micro_batch=2, seq_len=4096),
    ),
    "llama-3.1-70b ZeRO-3 x64": ("llama-3.1-70b", TrainingSettings(zero=3, gpus=64, checkpointing="full")),
    "gpt2 fp32, batch 16": ("gpt2", TrainingSettings(precision="fp32", micro_batch=16, seq_len=1024)),
}


def median_ms(function, repeats: int = 30) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def bench_compare_page(repeats: int = 10) -> float:
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=60)
    app.run()
    app.switch_page("app_pages/compare.py").run()
    assert not app.exception, app.exception
    return median_ms(app.run, repeats)


if __name__ == "__main__":
    catalogue = load_gpu_catalogue()
    print(f"fit matrix over {len(catalogue)} GPUs (goal < 50 ms):")
    for label, (preset, settings) in WORKLOADS.items():
        spec = get_preset(preset)
        print(f"  {label:<36}{median_ms(lambda s=spec, w=settings: fit_matrix(s, w, catalogue)):8.2f} ms")
    print(f"Compare page rerun {bench_compare_page():8.1f} ms")
    print(f"torch imported by the pages: {'torch' in sys.modules}")
