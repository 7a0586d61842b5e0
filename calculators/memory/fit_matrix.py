"""The fit matrix: the current workload on every GPU of the catalogue.

One `PeakCurve` is shared by all GPUs, so the estimates behind the verdicts, the
largest micro-batches and the fewest GPUs are computed once per workload.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit import FitResult, PeakCurve, Verdict, check_fit
from calculators.models.spec import ModelSpec
from calculators.workload.compatibility import training_stack_problem
from calculators.workload.training import TrainingSettings


class GpuFit(BaseModel):
    """One row of the fit matrix."""

    gpu: str
    gpu_memory_gib: float
    fits: bool
    verdict: Verdict
    peak_gib: float
    headroom_gib: float
    max_micro_batch: int | None
    min_gpus: int | None
    stack_problem: str | None = None  # why the GPU's software cannot run the workload (compatibility)


def gpu_memory_gib(gpu: GpuSpec) -> float:
    """Usable capacity of a GPU in GiB.

    Vendors' "GB" of HBM/GDDR are binary in practice: an A100 80GB reports 81,920 MiB
    and an RTX 4090 24,564 MiB in nvidia-smi (an H100 80GB 81,559 MiB, 0.4% less).
    The nominal figure is therefore read as GiB; the CUDA context is counted in the
    estimate, not here."""
    return float(gpu.memory_gb)


def fit_matrix(spec: ModelSpec, settings: TrainingSettings, gpus: Iterable[GpuSpec]) -> list[GpuFit]:
    """Fit answers for every GPU, in the order given."""
    curve = PeakCurve(spec, settings)
    rows = []
    for gpu in gpus:
        fit = check_fit(spec, settings, gpu_memory_gib(gpu), curve=curve)
        rows.append(gpu_fit(gpu, fit, stack_problem=training_stack_problem(gpu, settings)))
    return rows


def gpu_fit(gpu: GpuSpec, fit: FitResult, stack_problem: str | None = None) -> GpuFit:
    """One GPU's row of the fit matrix from its fit answers."""
    return GpuFit(
        gpu=gpu.name,
        gpu_memory_gib=fit.gpu_memory_gib,
        fits=fit.verdict != "does not fit",
        verdict=fit.verdict,
        peak_gib=fit.peak_gib,
        headroom_gib=fit.headroom_gib,
        max_micro_batch=fit.max_micro_batch,
        min_gpus=fit.min_gpus,
        stack_problem=stack_problem,
    )
