"""Times the step-time estimator and prints its accuracy on the published throughput runs.

Goal: under 2 ms per estimate_time (issue 15), on the largest layouts the planner searches.
Accuracy targets: every published run within +-20%, median within +-10%. Run from the
repository root:

    python bench/bench_time.py

Before -> after the workload's facts were cached (calculators.timing.memo) and the spot spread
indexed (this 2-core machine, best of 3 runs alternated with the base commit 671386e; the
results are the same, bench/time_equivalence.py):

    estimate_time llama-3.1-8b, FSDP 8, op-selective      0.140 -> 0.055 ms  (2.5x)
    estimate_time llama-3.1-70b, DP 8 x TP 8 x PP 4       0.143 -> 0.065 ms  (2.2x)
    estimate_time mixtral-8x7b, DP 8, full recompute      0.159 -> 0.054 ms  (2.9x)
    estimate_time llama-2-7b, page defaults, H100         0.117 -> 0.047 ms  (2.5x)
    cost_options llama-2-7b, page defaults                15.21 -> 6.33 ms   (2.4x)
    cost_options llama-2-7b, an unseen micro-batch        15.49 -> 9.14 ms   (1.7x: each GPU's step
                                                          compute is worked out anew, ~36 GPUs)
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms  # noqa: E402

from calculators.cost.options import cost_options  # noqa: E402
from calculators.cost.prices import load_prices  # noqa: E402
from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue  # noqa: E402
from calculators.memory.engine import estimate_memory  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.timing.estimate import estimate_time  # noqa: E402
from calculators.timing.settings import TimeSettings  # noqa: E402
from calculators.validation.error_band import time_band_for  # noqa: E402
from calculators.validation.throughput import summary, throughput_table  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402

CASES = (
    ("llama-3.1-8b, FSDP 8, op-selective", "llama-3.1-8b", {"gpus": 8, "zero": 3, "checkpointing": "op-selective"}),
    (
        "llama-3.1-70b, DP 8 x TP 8 x PP 4 (v2)",
        "llama-3.1-70b",
        {"gpus": 8, "tensor_parallel": 8, "pipeline_parallel": 4, "grad_accum": 16},
    ),
    ("mixtral-8x7b, DP 8, full recompute", "mixtral-8x7b", {"gpus": 8, "zero": 1, "checkpointing": "full"}),
)


def bench_estimate_time() -> None:
    gpu = find_gpu("H100-SXM5-80GB")
    time_settings = TimeSettings(dataset_tokens=1e9, virtual_stages=2)
    for label, preset, overrides in CASES:
        spec = get_preset(preset)
        settings = TrainingSettings(seq_len=4096, **overrides)
        one_estimate = functools.partial(estimate_time, spec, settings, gpu, time_settings)
        milliseconds = median_ms(one_estimate, 300)
        print(f"estimate_time {label:<40}{milliseconds:8.3f} ms (goal < 2 ms)")


def bench_page_estimate_and_options(repeats: int = 30) -> None:
    """The Time and cost page's work for llama-2-7b at the sidebar's defaults: one estimate_time
    (H100) and cost_options over every price row and catalogue GPU, with the page's inputs (its
    default TimeSettings, the price sheet, 3 and 15 minute checkpoint write and restart, the time
    band); then cost_options for micro-batches the process has not seen (the sidebar changed)."""
    spec, gpu = get_preset("llama-2-7b"), find_gpu("H100-SXM5-80GB")
    time_settings = TimeSettings(dataset_tokens=1e9)
    prices, catalogue = list(load_prices()), list(load_gpu_catalogue())

    def options(settings: TrainingSettings, peak_gib: float) -> list:
        return cost_options(
            spec, settings, time_settings, prices, catalogue, checkpoint_write_h=0.05, restart_h=0.25,
            measured_matmul_fraction={}, peak_gib=peak_gib, time_band=time_band_for,
        )  # fmt: skip

    settings = TrainingSettings()
    one_estimate = functools.partial(estimate_time, spec, settings, gpu, time_settings)
    print(f"estimate_time llama-2-7b, page defaults, H100{'':<14}{median_ms(one_estimate, 300):8.3f} ms")
    same = functools.partial(options, settings, estimate_memory(spec, settings).peak_gib)
    print(f"cost_options llama-2-7b, page defaults{'':<21}{median_ms(same, repeats):8.2f} ms")
    unseen = [TrainingSettings(micro_batch=batch) for batch in range(2, 2 + repeats)]
    runs = iter([functools.partial(options, one, estimate_memory(spec, one).peak_gib) for one in unseen])
    fresh_ms = median_ms(lambda: next(runs)(), repeats)
    print(f"cost_options llama-2-7b, a micro-batch not seen before{'':<5}{fresh_ms:8.2f} ms")


def print_accuracy() -> None:
    table = throughput_table()
    print(f"\n{'run':<24}{'measured':>10}{'estimate':>10}{'ratio':>7}")
    for row in table:
        print(f"{row.id:<24}{row.measured_tokens_s_gpu:>10.0f}{row.estimate_tokens_s_gpu:>10.0f}{row.ratio:>7.2f}")
    figures = summary(table)
    within = sum(abs(row.ratio - 1) <= 0.2 for row in table)
    print(
        f"median ratio {figures['median_ratio']:.3f} (target 0.90-1.10), worst {figures['worst_ratio']:.2f}, "
        f"{within} of {len(table)} within +-20% (target all)"
    )


if __name__ == "__main__":
    bench_estimate_time()
    bench_page_estimate_and_options()
    print_accuracy()
