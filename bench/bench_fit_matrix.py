"""Times the fit matrix (the workload on every GPU of the catalogue) and the Compare page.

Goal: under 50 ms for the 40+ GPUs of the catalogue. Run from the repository root:

    python bench/bench_fit_matrix.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms, page_rerun_ms  # noqa: E402

from calculators.hardware.catalogue import load_gpu_catalogue  # noqa: E402
from calculators.memory.fit_matrix import fit_matrix  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402

WORKLOADS = {
    "llama-3.1-8b bf16-mixed, no ZeRO": ("llama-3.1-8b", TrainingSettings()),
    "llama-3.1-8b ZeRO-3 x8, full ckpt": (
        "llama-3.1-8b",
        TrainingSettings(zero=3, gpus=8, checkpointing="full", micro_batch=2, seq_len=4096),
    ),
    "llama-3.1-70b ZeRO-3 x64": ("llama-3.1-70b", TrainingSettings(zero=3, gpus=64, checkpointing="full")),
    "gpt2 fp32, batch 16": ("gpt2", TrainingSettings(precision="fp32", micro_batch=16, seq_len=1024)),
}


if __name__ == "__main__":
    catalogue = load_gpu_catalogue()
    print(f"fit matrix over {len(catalogue)} GPUs (goal < 50 ms):")
    for label, (preset, settings) in WORKLOADS.items():
        spec = get_preset(preset)
        print(f"  {label:<36}{median_ms(lambda s=spec, w=settings: fit_matrix(s, w, catalogue)):8.2f} ms")
    print(f"Compare page rerun {page_rerun_ms('app_pages/compare.py', 10):8.1f} ms")
    print(f"torch imported by the pages: {'torch' in sys.modules}")
