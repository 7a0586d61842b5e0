"""Fit answers for an image model of the vision library: the verdict on a GPU, the largest
micro-batch (images), the fewest data-parallel GPUs, single changes that make it fit, and the
fit matrix over GPUs. The same verdict margin and searches as the transformer's (memory.fit),
on the device peak of memory.vision_training (allocated plus allocator reserve, CUDA context, NCCL)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.fit import (
    MAX_GPUS_SEARCHED,
    MAX_MICRO_BATCH_SEARCHED,
    FitResult,
    Suggestion,
    fewest_gpus_that_fit,
    largest_passing,
    verdict,
)
from calculators.memory.fit_matrix import GpuFit, gpu_fit, gpu_memory_gib
from calculators.memory.vision_training import (
    VisionInputError,
    VisionTrainingInput,
    checkpointing_api,
    checks_checkpointing,
    estimate_vision_memory,
)


def device_peak_gib(run: VisionTrainingInput, **changes) -> float:
    """The device peak of `run` with `changes` (field name -> value), validated again."""
    changed = run if not changes else VisionTrainingInput.model_validate(run.model_dump() | changes)
    return estimate_vision_memory(changed).device_peak_gib


def vision_max_micro_batch(run: VisionTrainingInput, capacity_gib: float) -> int | None:
    """Largest micro-batch (images per GPU) whose device peak fits; None if one image does not.
    Every phase grows with the micro-batch, so a bisection finds it."""
    return largest_passing(
        1, MAX_MICRO_BATCH_SEARCHED, lambda images: device_peak_gib(run, micro_batch=images) <= capacity_gib
    )


def vision_min_gpus(run: VisionTrainingInput, capacity_gib: float) -> int | None:
    """Fewest data-parallel GPUs whose per-GPU peak fits: 1, or, with ZeRO sharding the states,
    the smallest count found by doubling then bisecting; None when more GPUs do not help (no ZeRO,
    or activations alone exceed the GPU)."""

    def fits(gpus: int) -> bool:
        return device_peak_gib(run, gpus=gpus) <= capacity_gib

    if fits(1):
        return 1
    if run.zero == 0 or not fits(MAX_GPUS_SEARCHED):
        return None
    return fewest_gpus_that_fit(fits)


def check_vision_fit(run: VisionTrainingInput, capacity_gib: float, margin_fraction: float = 0.05) -> FitResult:
    """Verdict, headroom, largest micro-batch and fewest GPUs on one GPU capacity (GiB)."""
    peak = device_peak_gib(run)
    return FitResult(
        gpu_memory_gib=capacity_gib,
        peak_gib=peak,
        headroom_gib=capacity_gib - peak,
        headroom_fraction=(capacity_gib - peak) / capacity_gib,
        verdict=verdict(peak, capacity_gib, margin_fraction),
        max_micro_batch=vision_max_micro_batch(run, capacity_gib),
        min_gpus=vision_min_gpus(run, capacity_gib),
    )


def _candidate_changes(run: VisionTrainingInput) -> list[tuple[str, dict]]:
    """Single changes that lower an image model's memory, as a user would make them."""
    changes: list[tuple[str, dict]] = []
    if run.micro_batch > 1:
        half = run.micro_batch // 2
        changes.append((f"Halve the micro-batch to {half} images", {"micro_batch": half}))
    if run.checkpointing == "none" and checks_checkpointing(run.model) is None:
        changes.append((f"Checkpoint every block ({checkpointing_api(run.model)})", {"checkpointing": "full"}))
    if run.precision == "fp32":
        changes.append(("Train with AMP BF16 (torch.autocast)", {"precision": "amp-bf16"}))
    if run.optimizer != "sgd":
        changes.append(("Use SGD with momentum (one state per parameter)", {"optimizer": "sgd"}))
    gpus = max(run.gpus, 8)
    for stage in range(run.zero + 1, 4):
        changes.append((f"ZeRO-{stage} / FSDP over {gpus} GPUs", {"zero": stage, "gpus": gpus}))
    return changes


def _lowering_changes(run: VisionTrainingInput) -> list[tuple[str, dict, float]]:
    """Each single change with the device peak it leaves, kept only when that peak is lower than
    today's: a change that raises it (ZeRO over 8 GPUs adds NCCL buffers larger than what it shards
    of a small model) is no saving."""
    today = device_peak_gib(run)
    found = []
    for description, update in _candidate_changes(run):
        try:
            peak = device_peak_gib(run, **update)
        except (ValueError, VisionInputError):
            continue
        if peak < today:
            found.append((description, update, peak))
    return found


def vision_suggestions(run: VisionTrainingInput, capacity_gib: float) -> list[Suggestion]:
    """Each single change that lowers the device peak, with the peak it leaves, those that fit first."""
    found = [
        Suggestion(change=text, peak_gib=peak, fits=peak <= capacity_gib) for text, _, peak in _lowering_changes(run)
    ]
    return sorted(found, key=lambda s: (not s.fits, s.peak_gib))


class BatchGain(BaseModel):
    """A change that frees memory on a setup that already fits: the peak it leaves at today's
    micro-batch and the largest micro-batch (images per GPU) that fits with it."""

    change: str
    peak_gib: float
    freed_gib: float
    max_micro_batch: int


def vision_batch_gains(run: VisionTrainingInput, capacity_gib: float) -> list[BatchGain]:
    """On a setup that fits: the changes that let a larger micro-batch fit than today's largest,
    largest first. Halving the micro-batch is left out (it frees memory only by shrinking the batch)."""
    today_peak = device_peak_gib(run)
    today_largest = vision_max_micro_batch(run, capacity_gib) or 0
    gains = []
    for description, update, peak in _lowering_changes(run):
        if "micro_batch" in update:
            continue
        changed = VisionTrainingInput.model_validate(run.model_dump() | update)
        largest = vision_max_micro_batch(changed, capacity_gib) or 0
        if largest > today_largest:
            gains.append(
                BatchGain(change=description, peak_gib=peak, freed_gib=today_peak - peak, max_micro_batch=largest)
            )
    return sorted(gains, key=lambda gain: -gain.max_micro_batch)


def vision_fit_matrix(run: VisionTrainingInput, gpus: Iterable[GpuSpec]) -> list[GpuFit]:
    """Fit answers for every GPU, in the order given (the Compare page's columns)."""
    rows = []
    for gpu in gpus:
        fit = check_vision_fit(run, gpu_memory_gib(gpu))
        rows.append(gpu_fit(gpu, fit))
    return rows
