"""Times `python -m calculators mlperf --json` over every result and prints the time model's
accuracy on MLPerf Training (predicted / published time-to-train).

Goal: under 2 s for all 448 results (issue 34), the whole command in a fresh process. Accuracy
targets: every Llama 2 70B LoRA result on 8 H100, H200, B200, MI300X or MI325X within +-30%,
their median |ratio - 1| within 15%; at least 80% of the Llama 3.1 8B, 405B and GPT-3 results
on catalogue GPUs predicted. Run from the repository root:

    python bench/bench_mlperf.py [--rows]

--rows also prints every Llama 3.1 8B, Llama 3.1 405B and GPT-3 result with its ratio.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from calculators.validation.mlperf import BENCHMARK_LABEL, mlperf_table, ratio_groups  # noqa: E402

EIGHT_GPU_TARGETS = ("H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "MI300X-192GB", "MI325X-256GB")


def command_seconds(runs: int = 3) -> float:
    """Median wall time of the whole command in a fresh interpreter (imports included)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "calculators", "mlperf", "--json"],
            cwd=REPO_ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    print(f"python -m calculators mlperf --json (all results): {command_seconds():.2f} s (goal: under 2 s)")
    rows = mlperf_table()
    lora = [
        row
        for row in rows
        if row.benchmark == "llama2_70b_lora" and row.accelerators == 8 and row.accelerator in EIGHT_GPU_TARGETS
    ]
    scored = [row for row in lora if row.minutes_published is not None]
    ratios = [row.ratio for row in scored if row.ratio is not None]
    off = [abs(ratio - 1) for ratio in ratios]
    print(
        f"Llama 2 70B LoRA on 8 x {', '.join(EIGHT_GPU_TARGETS)}: {len(ratios)} of {len(scored)} predicted; "
        f"median |ratio - 1| {statistics.median(off):.1%} (goal 15%); {sum(x <= 0.3 for x in off)} within +-30%"
    )
    for row in scored:
        if row.ratio is not None and abs(row.ratio - 1) > 0.3:
            print(f"  outside +-30%: {row.id} {row.round} {row.submitter} {row.system}: {row.ratio:.2f}")
    for benchmark in ("llama31_8b", "llama31_405b", "gpt3"):
        on_catalogue = [row for row in rows if row.benchmark == benchmark and row.accelerator is not None]
        predicted = [row for row in on_catalogue if row.ratio is not None]
        print(f"{BENCHMARK_LABEL[benchmark]}: {len(predicted)} of {len(on_catalogue)} on catalogue GPUs predicted")
    print(f"\n{'benchmark':<18}{'accelerator':<36}{'results':>8}{'predicted':>10}{'median':>8}{'low':>7}{'high':>7}")
    for group in ratio_groups(rows):
        if group.predicted:
            print(
                f"{group.benchmark:<18}{group.accelerator:<36}{group.results:>8}{group.predicted:>10}"
                f"{group.median_ratio:>8.2f}{group.low_ratio:>7.2f}{group.high_ratio:>7.2f}"
            )
    if "--rows" in sys.argv:
        print(
            f"\n{'id':<6}{'benchmark':<14}{'round':<6}{'accelerator':<22}{'GPUs':>6}{'published':>11}{'predicted':>11}{'ratio':>7}"
        )
        for row in rows:
            if row.benchmark in ("llama31_8b", "llama31_405b", "gpt3") and row.accelerator is not None:
                predicted = "-" if row.minutes_predicted is None else f"{row.minutes_predicted:.1f}"
                ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
                print(
                    f"{row.id:<6}{row.benchmark:<14}{row.round:<6}{row.accelerator[:21]:<22}{row.accelerators:>6}"
                    f"{row.minutes_published:>11.1f}{predicted:>11}{ratio:>7}"
                )


if __name__ == "__main__":
    main()
