"""Times 'What to change': the ranked search over combinations of up to three changes
(calculators.plan.changes.ranked_changes) that the Memory page runs on every widget change.

Goal: under 300 ms on a 2-core machine. Run from the repository root (`--repo` times another
checkout's code with the same cases, e.g. a git worktree of the commit before a change):

    python bench/bench_changes.py [--repo /tmp/base]

Before -> after the engine's speed-up (2026-11-27, the same 2-core machine, the same session,
medians of this script's 5 runs; the search reads engine.step_memory, the numbers without the
report, estimates each distinct settings once, and shape facts are remembered per model):

    llama-2-7b full, RTX 4090                    39 -> 26 ms   219 -> 207 estimates
    llama-3.1-8b mb 4 x 4096, amp-bf16, H100     66 -> 46 ms   349 -> 343 estimates
    llama-3.1-70b ZeRO-3 x 8, H100               43 -> 30 ms   229 -> 221 estimates
    mixtral-8x7b full, A100 80GB                 44 -> 30 ms   244 -> 234 estimates
    llama-3.1-8b LoRA mb 64, fp32, eager, 4090  149 -> 102 ms  722 -> 722 estimates

Before -> after the peak's floor (2026-11-27, f64652f -> this script's commit, CPU time since then;
the two checkouts run alternately 9 times in the same minutes on the shared 2-core machine, median
and fastest of the 9 medians). A triple, or a GPU count of the more-GPUs search, whose floor from
the model states alone (engine.peak_floor_gib) is over the capacity is not estimated further; the
fewest GPUs are guessed from the line through two peaks and checked on both sides; PhaseMemory is
a NamedTuple; the validated settings are the ones estimated; the time model's offloaded activations
read engine.step_memory, not estimate_memory's report:

                                                 median          fastest       memory estimates
    llama-2-7b full, RTX 4090                    26 -> 19 ms     25 -> 18      207 -> 138 + 68 floors
    llama-3.1-8b mb 4 x 4096, amp-bf16, H100     45 -> 34 ms     44 -> 33      343 -> 234 + 99 floors
    llama-3.1-70b ZeRO-3 x 8, H100               29 -> 20 ms     27 -> 19      221 -> 115 + 94 floors
    mixtral-8x7b full, A100 80GB                 30 -> 19 ms     29 -> 18      234 -> 115 + 118 floors
    llama-3.1-8b LoRA mb 64, fp32, eager, 4090  103 -> 79 ms    100 -> 77      722 -> 507 + 215 floors
    the page's case (below), a search           40.3 -> 29.5    39.8 -> 27.8   274 -> 183 + 81 floors

The page's case is issue 36's: llama-2-7b full fine-tuning on an H100 80GB, the micro-batch moved
from 3 to 18, one search per move. The results are the same to the bit (bench/engine_equivalence.py
--exact, the page's case included).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

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
# The Memory page's case of issue 36: llama-2-7b full fine-tuning on an H100, the micro-batch moved
# from 3 to 18 in the sidebar, one search per move.
PAGE_CASE = ("llama-2-7b", "H100-SXM5-80GB", range(3, 19))


def median_cpu_ms(function, repeats: int) -> float:
    """Median CPU time of `function()` over `repeats` calls after one to warm the caches, in ms
    (CPU time: the cores are shared, and wall time counts the others' work)."""
    function()
    timings = []
    for _ in range(repeats):
        started = time.process_time()
        function()
        timings.append((time.process_time() - started) * 1000)
    return statistics.median(timings)


def page_case_ms(repeats: int = 5) -> float:
    """Median over `repeats` rounds of the CPU time of one search, averaged over PAGE_CASE's
    micro-batches."""
    from calculators.hardware.catalogue import find_gpu
    from calculators.memory.fit_matrix import gpu_memory_gib
    from calculators.models.presets import get_preset
    from calculators.plan.changes import ranked_changes
    from calculators.workload.training import TrainingSettings

    preset, gpu_name, micro_batches = PAGE_CASE
    spec, gpu = get_preset(preset), find_gpu(gpu_name)
    capacity_gib = gpu_memory_gib(gpu)

    def one_round() -> None:
        for micro_batch in micro_batches:
            ranked_changes(spec, TrainingSettings(micro_batch=micro_batch), capacity_gib, gpu)

    return median_cpu_ms(one_round, repeats) / len(micro_batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="the checkout whose code is timed")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    from calculators.hardware.catalogue import find_gpu
    from calculators.memory.fit_matrix import gpu_memory_gib
    from calculators.models.presets import get_preset
    from calculators.plan.changes import ChangeSearch, ranked_changes
    from calculators.workload.training import TrainingSettings

    print(f"ranked_changes, CPU time (goal < 300 ms), code of {args.repo}:")
    for label, (preset, gpu_name, update) in ASKS.items():
        spec, gpu, settings = get_preset(preset), find_gpu(gpu_name), TrainingSettings(**update)
        capacity_gib = gpu_memory_gib(gpu)
        search = ChangeSearch(spec, settings, capacity_gib, gpu)
        found = search.search()
        ms = median_cpu_ms(lambda a=(spec, settings, capacity_gib, gpu): ranked_changes(*a), repeats=5)
        ruled_out = getattr(search, "ruled_out", 0)  # an older checkout has no floor
        print(
            f"  {label:<46}{ms:8.0f} ms  {len(search.blocks):>3} changes  {search.estimates:>4} memory estimates"
            f"  {ruled_out:>4} left out by their floor  {len(found):>3} fit"
        )
    preset, gpu_name, micro_batches = PAGE_CASE
    print(
        f"  the page's case, {preset} on {gpu_name}, micro-batch {micro_batches.start}-{micro_batches.stop - 1}:"
        f" {page_case_ms():.1f} ms a search"
    )


if __name__ == "__main__":
    main()
