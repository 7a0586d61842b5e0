"""Times the planner: a full search over the catalogue and the price sheet for one model.

Goal: under 2 s on a 2-core machine. Run from the repository root:

    python bench/bench_planner.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms  # noqa: E402

from calculators.cost.prices import load_prices  # noqa: E402
from calculators.hardware.catalogue import load_gpu_catalogue  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.plan.search import PlanRequest, plan_run  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402

ASKS = {
    "llama-3.1-8b train, 2e10 tokens, 72 h": ("llama-3.1-8b", PlanRequest(dataset_tokens=2e10, deadline_hours=72)),
    "llama-3.1-8b QLoRA, 1e8 tokens": ("llama-3.1-8b", PlanRequest(mode="finetune-qlora", dataset_tokens=1e8)),
    "llama-3.1-70b train, 1e11 tokens, owned too": (
        "llama-3.1-70b",
        PlanRequest(dataset_tokens=1e11, include_owned=True),
    ),
    "gpt2 train, 1e9 tokens": ("gpt2", PlanRequest(dataset_tokens=1e9)),
}


if __name__ == "__main__":
    catalogue, prices = load_gpu_catalogue(), load_prices()
    print(f"planner over {len(catalogue)} GPUs and {len(prices)} price rows (goal < 2000 ms):")
    for label, (preset, request) in ASKS.items():
        spec = get_preset(preset)
        result = plan_run(spec, TrainingSettings(), request, catalogue, prices)
        ms = median_ms(lambda s=spec, r=request: plan_run(s, TrainingSettings(), r, catalogue, prices), repeats=5)
        print(f"  {label:<46}{ms:8.0f} ms  {result.searched:>6,} configurations  {len(result.plans):>3} on the front")
