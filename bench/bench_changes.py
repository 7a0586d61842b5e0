"""Times 'What to change': the ranked search over combinations of up to three changes
(calculators.plan.changes.ranked_changes) that the Memory page runs on every widget change.

Goal: under 300 ms on a 2-core machine. Run from the repository root:

    python bench/bench_changes.py

Before -> after the engine's speed-up (2026-11-27, the same 2-core machine, the same session,
medians of this script's 5 runs; the search reads engine.step_memory, the numbers without the
report, estimates each distinct settings once, and shape facts are remembered per model):

    llama-2-7b full, RTX 4090                    39 -> 26 ms   219 -> 207 estimates
    llama-3.1-8b mb 4 x 4096, amp-bf16, H100     66 -> 46 ms   349 -> 343 estimates
    llama-3.1-70b ZeRO-3 x 8, H100               43 -> 30 ms   229 -> 221 estimates
    mixtral-8x7b full, A100 80GB                 44 -> 30 ms   244 -> 234 estimates
    llama-3.1-8b LoRA mb 64, fp32, eager, 4090  149 -> 102 ms  722 -> 722 estimates

The Memory page's case of issue 36 (llama-2-7b, micro-batch 3 to 8, H100 80GB), CPU time of the
fastest of 9 calls: 33, 46, 38, 46, 48, 73 -> 22, 32, 24, 33, 33, 49 ms. The results are the same
to the bit (bench/engine_equivalence.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms  # noqa: E402

from calculators.hardware.catalogue import find_gpu  # noqa: E402
from calculators.memory.fit_matrix import gpu_memory_gib  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.plan.changes import ChangeSearch, ranked_changes  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402

ASKS = {
    "llama-2-7b full, RTX 4090": ("llama-2-7b", "RTX-4090-24GB", {}),
    "llama-3.1-8b mb 4 x 4096, amp-bf16, H100": (
        "llama-3.1-8b",
        "H100-SXM5-80GB",
        {"micro_batch": 4, "seq_len": 4096, "precision": "amp-bf16"},
    ),
    "llama-3.1-70b ZeRO-3 x 8, H100": ("llama-3.1-70b", "H100-SXM5-80GB", {"zero": 3, "gpus": 8}),
    "mixtral-8x7b full, A100 80GB": ("mixtral-8x7b", "A100-SXM4-80GB", {}),
    "llama-3.1-8b LoRA mb 64, fp32, eager, 4090": (
        "llama-3.1-8b",
        "RTX-4090-24GB",
        {"method": "lora", "micro_batch": 64, "precision": "fp32", "attention": "eager"},
    ),
}


if __name__ == "__main__":
    print("ranked_changes (goal < 300 ms):")
    for label, (preset, gpu_name, update) in ASKS.items():
        spec, gpu, settings = get_preset(preset), find_gpu(gpu_name), TrainingSettings(**update)
        capacity_gib = gpu_memory_gib(gpu)
        search = ChangeSearch(spec, settings, capacity_gib, gpu)
        found = search.search()
        ms = median_ms(lambda a=(spec, settings, capacity_gib, gpu): ranked_changes(*a), repeats=5)
        print(
            f"  {label:<46}{ms:8.0f} ms  {len(search.blocks):>3} changes  {search.estimates:>4} memory estimates"
            f"  {len(found):>3} fit"
        )
