"""Times a traced training step of Llama-2-7B and reports the tracing process's memory.

Issue 3 targets: the trace of Llama-2-7B (bf16-mixed, micro-batch 1, sequence 2048, fused
attention, fused AdamW) in its subprocess in under 15 s of wall time and under 1.5 GB of
RAM. Each trace runs in a fresh worker process (`measure.trace.run_trace`), so the wall
time includes starting Python and importing torch; the RSS is the largest of the worker
processes (`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`). Run from the repository root:

    python bench/bench_trace.py
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from calculators.memory.engine import estimate_memory  # noqa: E402
from calculators.models.presets import get_preset  # noqa: E402
from calculators.workload.training import TrainingSettings  # noqa: E402
from measure.trace import run_trace  # noqa: E402

SETTINGS = TrainingSettings(
    micro_batch=1, seq_len=2048, precision="bf16-mixed", attention="fused", optimizer="adamw", optimizer_impl="fused"
)


def children_max_rss_mib() -> float:
    """Largest resident set of any finished child process (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def bench(label: str, extrapolate: bool) -> None:
    spec = get_preset("llama-2-7b")
    start = time.perf_counter()
    result = run_trace(spec, SETTINGS, timeout_s=300, extrapolate=extrapolate)
    wall_s = time.perf_counter() - start
    estimate = estimate_memory(spec, SETTINGS)
    print(f"{label}: wall {wall_s:.1f} s (goal < 15 s), trace itself {result.seconds:.1f} s, ", end="")
    print(f"max RSS of the tracing processes {children_max_rss_mib():.0f} MiB (goal < 1.5 GB)")
    print(f"  traced layers {result.traced_layers}; peak {result.peak_gib:.3f} GiB at '{result.peak_phase}' ", end="")
    print(f"({result.peak_op}); engine allocated {estimate.allocated_gib:.3f} GiB at '{estimate.peak_phase}'")
    print(f"  saved activations {result.saved_activations_gib:.3f} GiB, {result.flops_per_token / 1e9:.2f} GFLOP/token")


def main() -> None:
    bench("Llama-2-7B, all 32 layers traced", extrapolate=False)
    bench("Llama-2-7B, 3/4/5 layers traced and extended", extrapolate=True)


if __name__ == "__main__":
    main()
