"""The time model's measured error as a band on hours and costs, from the Validation page's rows.

Each published run of data/measured_throughput.csv is estimated as the Validation page does it
(calculators.validation.throughput.throughput_table) and becomes a
calculators.cost.ranges.ThroughputError: its GPU's family (calculators.timing.operations.gpu_family),
its training stack (from the run's source: torchtitan, llm-foundry, Megatron, llm.c) and
estimate / measured. `time_band_for` is the `BandFor` the command line and the pages give to
calculators.cost.options.cost_options and calculators.plan.search.plan_run.
"""

from __future__ import annotations

from functools import lru_cache

from calculators.cost.ranges import ThroughputError, TimeBand, select_band
from calculators.hardware.catalogue import GpuSpec, find_gpu
from calculators.timing.operations import gpu_family
from calculators.validation.throughput import throughput_table
from calculators.workload.training import TrainingSettings

# A run's source -> the workload framework name of its stack (calculators.workload.frameworks);
# stacks the app has no framework for keep their own name, so no workload matches them.
STACK_OF_SOURCE: tuple[tuple[str, str], ...] = (
    ("pytorch/torchtitan", "torchtitan"),
    ("mosaicml/llm-foundry", "llm-foundry"),
    ("NVIDIA/Megatron-LM", "megatron"),
    ("NVIDIA-NeMo/Megatron-Bridge", "megatron"),
    ("karpathy/llm.c", "llm.c"),
)


def run_stack(source: str) -> str:
    """The training stack of a published run, named from its source."""
    return next((stack for repo, stack in STACK_OF_SOURCE if repo in source), "other")


@lru_cache(maxsize=1)
def throughput_errors() -> tuple[ThroughputError, ...]:
    """Every published run's estimate / measured, as the Validation page shows it (computed once)."""
    return tuple(
        ThroughputError(
            id=row.id,
            gpu=row.gpu,
            gpu_family=gpu_family(find_gpu(row.gpu)),
            stack=run_stack(row.source),
            ratio=row.ratio,
        )
        for row in throughput_table()
    )


def time_band_for(gpu: GpuSpec, settings: TrainingSettings) -> TimeBand:
    """The band for a run on `gpu` with `settings.framework` (calculators.cost.ranges.select_band)."""
    return select_band(throughput_errors(), gpu_family(gpu), settings.framework)
