"""Times the serving step model and the serving plan, and prints its accuracy on published serving runs.

Goals (issue 33): one serving estimate under 2 ms; a serving plan over the whole catalogue under 2 s;
on the published rows the median estimate / measured within 15% and 80% of rows within +-30%. Run
from the repository root:

    python bench/bench_serving.py
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import median_ms  # noqa: E402

from calculators.cost.prices import load_prices  # noqa: E402
from calculators.hardware.catalogue import find_gpu, load_gpu_catalogue  # noqa: E402
from calculators.models.library import resolve_model  # noqa: E402
from calculators.plan.serving import ServingPlanRequest, plan_serving  # noqa: E402
from calculators.timing.serving import LatencyLimits, ServingRequest, estimate_serving_speed  # noqa: E402
from calculators.validation.serving import serving_table, summary_by_source  # noqa: E402
from calculators.workload.serving import ServingSettings  # noqa: E402

CASES = (
    ("llama-3.1-8b, H100, bf16, concurrency 64", "llama-3.1-8b", "H100-SXM5-80GB", {}, 64),
    ("llama-3.1-70b, 4 x H100, fp8, best concurrency", "llama-3.1-70b", "H100-SXM5-80GB",
     {"tensor_parallel": 4, "weight_precision": "fp8", "kv_cache_precision": "fp8"}, 0),
    ("llama-3.1-405b, 4 x B200, fp4, best concurrency", "llama-3.1-405b", "B200-SXM-180GB",
     {"tensor_parallel": 4, "weight_precision": "fp4", "kv_cache_precision": "fp8"}, 0),
)  # fmt: skip


def bench_estimate() -> None:
    for label, model, gpu, overrides, concurrency in CASES:
        request = ServingRequest(input_len=1000, output_len=1000, concurrency=concurrency)
        one = functools.partial(estimate_serving_speed, resolve_model(model), ServingSettings(**overrides),
                                find_gpu(gpu), request)  # fmt: skip
        print(f"estimate_serving_speed {label:<50}{median_ms(one, 200):8.3f} ms (goal < 2 ms)")


def bench_plan() -> None:
    catalogue, prices = list(load_gpu_catalogue()), list(load_prices())
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        request = ServingPlanRequest(requests_per_s=10, input_len=1000, output_len=500,
                                     limits=LatencyLimits(ttft_s=2.0, tpot_s=0.05))  # fmt: skip
        started = time.perf_counter()
        result = plan_serving(resolve_model(model), ServingSettings(), request, catalogue, prices)
        seconds = time.perf_counter() - started
        cheapest = result.cheapest
        print(
            f"plan_serving {model:<16}{seconds:6.2f} s (goal < 2 s), {result.searched:,} configurations, "
            f"{len(result.plans)} on the front; cheapest {cheapest.replicas} x {cheapest.tensor_parallel} "
            f"{cheapest.gpu} ({cheapest.weight_precision}) ${cheapest.usd_per_hour:,.2f}/h"
        )


def print_accuracy() -> None:
    table = serving_table()
    print(f"\n{'row':<6}{'source':<14}{'system':<12}{'measured':>10}{'estimate':>10}{'ratio':>7}")
    for row in table:
        if row.ratio is None:
            print(f"{row.id:<6}{row.source_kind:<14}not estimated: {row.why_not}")
            continue
        print(f"{row.id:<6}{row.source_kind:<14}{row.system[:11]:<12}{row.measured:>10.0f}{row.estimate:>10.0f}"
              f"{row.ratio:>7.2f}")  # fmt: skip
    print(f"\n{'source':<16}{'rows':>6}{'estimated':>11}{'median ratio':>14}{'within 30%':>12}")
    for s in summary_by_source(table):
        median = "-" if s.median_ratio is None else f"{s.median_ratio:.3f}"
        share = "-" if s.within_30_percent is None else f"{s.within_30_percent:.0%}"
        print(f"{s.source_kind:<16}{s.rows:>6}{s.estimated:>11}{median:>14}{share:>12}")


if __name__ == "__main__":
    bench_estimate()
    bench_plan()
    print_accuracy()
