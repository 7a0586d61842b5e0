"""Answers built on the estimate: does it fit, the largest micro-batch, the fewest
GPUs, and which single change makes it fit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from calculators.memory.engine import step_memory
from calculators.models.spec import ModelSpec
from calculators.workload.support import check_supported
from calculators.workload.training import FSDP_NAME, TrainingSettings

Verdict = Literal["fits", "tight", "does not fit"]
MAX_MICRO_BATCH_SEARCHED = 1 << 16
MAX_GPUS_SEARCHED = 1 << 16


class FitResult(BaseModel):
    """The verdict for one GPU capacity."""

    gpu_memory_gib: float
    peak_gib: float
    headroom_gib: float
    headroom_fraction: float
    verdict: Verdict
    max_micro_batch: int | None = Field(description="largest micro-batch that fits; None if even 1 does not")
    min_gpus: int | None = Field(description="fewest data-parallel GPUs that fit; None if more GPUs do not help")


class Suggestion(BaseModel):
    change: str
    peak_gib: float
    fits: bool


def verdict(peak_gib: float, gpu_memory_gib: float, margin_fraction: float = 0.05) -> Verdict:
    """'fits' leaves at least `margin_fraction` free; 'tight' fits with less."""
    if peak_gib <= gpu_memory_gib * (1 - margin_fraction):
        return "fits"
    if peak_gib <= gpu_memory_gib:
        return "tight"
    return "does not fit"


def peak_gib(spec: ModelSpec, settings: TrainingSettings, **changes) -> float:
    """The estimate's peak with `changes` (engine.step_memory: the numbers without the report)."""
    return step_memory(spec, settings.model_copy(update=changes)).peak_gib


class PeakCurve:
    """The peak as a function of micro-batch and GPU count for one workload, with
    every estimate remembered, so that answers for many GPUs share their work."""

    def __init__(self, spec: ModelSpec, settings: TrainingSettings):
        self.spec, self.settings = spec, settings
        self._peaks: dict[tuple[int, int], float] = {}
        self._lines: dict[int, tuple[list[tuple[float, float]], float, float]] = {}

    def peak_gib(self, micro_batch: int | None = None, gpus: int | None = None) -> float:
        key = (micro_batch or self.settings.micro_batch, gpus or self.settings.gpus)
        if key not in self._peaks:
            self._peaks[key] = peak_gib(self.spec, self.settings, micro_batch=key[0], gpus=key[1])
        return self._peaks[key]

    def _phase_lines(self, gpus: int) -> tuple[list[tuple[float, float]], float, float]:
        """Every phase's allocated memory is affine in the micro-batch (all activations
        scale with b*s tokens): (intercept, slope) per phase from b = 1 and b = 2, plus
        the reserve fraction and the fixed framework overhead."""
        if gpus not in self._lines:
            update = {"gpus": gpus}
            one = step_memory(self.spec, self.settings.model_copy(update=update | {"micro_batch": 1}))
            two = step_memory(self.spec, self.settings.model_copy(update=update | {"micro_batch": 2}))
            lines = [
                (2 * one.phases_gib[p] - two.phases_gib[p], two.phases_gib[p] - one.phases_gib[p])
                for p in one.phases_gib
            ]
            reserve_fraction = self.settings.overheads.allocator_reserve_fraction
            fixed_gib = one.peak_gib - one.reserved_gib
            self._lines[gpus] = (lines, reserve_fraction, fixed_gib)
        return self._lines[gpus]

    def predicted_max_micro_batch(self, gpu_memory_gib: float, gpus: int) -> int:
        """Solve max over phases of (a + c*b) * (1 + reserve) + fixed <= capacity for b."""
        lines, reserve_fraction, fixed_gib = self._phase_lines(gpus)
        budget_gib = (gpu_memory_gib - fixed_gib) / (1 + reserve_fraction)
        limits = [(budget_gib - a) / c for a, c in lines if c > 1e-12]
        if any(a > budget_gib for a, c in lines if c <= 1e-12):
            return 0
        return int(min(limits, default=MAX_MICRO_BATCH_SEARCHED))


def largest_passing(lower: int, upper: int, passes: Callable[[int], bool]) -> int | None:
    """Largest x in [lower, upper] with passes(x) true, for a predicate that turns
    false once and stays false (memory grows with the micro-batch); None if passes(lower)
    is false. Binary search: log2(upper - lower) calls of passes."""
    if not passes(lower):
        return None
    while lower < upper:
        middle = (lower + upper + 1) // 2
        if passes(middle):
            lower = middle
        else:
            upper = middle - 1
    return lower


def max_micro_batch(
    spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, curve: PeakCurve | None = None
) -> int | None:
    """Largest micro-batch whose peak fits on the GPU.

    Solved from the affine phase lines, then checked against the estimator itself
    (b fits and b + 1 does not); a binary search takes over if the check fails."""
    curve = curve or PeakCurve(spec, settings)
    gpus = settings.gpus

    def fits(micro_batch: int) -> bool:
        return curve.peak_gib(micro_batch, gpus) <= gpu_memory_gib

    guess = max(1, min(curve.predicted_max_micro_batch(gpu_memory_gib, gpus), MAX_MICRO_BATCH_SEARCHED))
    for candidate in (guess, guess - 1, guess + 1):
        if 1 <= candidate <= MAX_MICRO_BATCH_SEARCHED and fits(candidate):
            if candidate == MAX_MICRO_BATCH_SEARCHED or not fits(candidate + 1):
                return candidate
    return largest_passing(1, MAX_MICRO_BATCH_SEARCHED, fits)


def min_gpus(
    spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, curve: PeakCurve | None = None
) -> int | None:
    """Fewest data-parallel GPUs whose per-GPU peak fits. Only ZeRO sharding lowers
    the per-GPU peak as GPUs are added, so without ZeRO the answer is 1 or None.
    Doubling then bisecting keeps the estimates few and shared between GPUs."""
    curve = curve or PeakCurve(spec, settings)

    def fits(gpus: int) -> bool:
        return curve.peak_gib(None, gpus) <= gpu_memory_gib

    if fits(1):
        return 1
    if settings.zero == 0:
        return None
    return fewest_gpus_that_fit(fits)


def fewest_gpus_that_fit(fits: Callable[[int], bool]) -> int | None:
    """The fewest GPUs from 2 for which `fits` holds (it holds for every count above one that does):
    doubling until it fits, then bisecting; None when it does not by MAX_GPUS_SEARCHED."""
    high = 2
    while not fits(high):
        if high >= MAX_GPUS_SEARCHED:
            return None
        high *= 2
    low = high // 2 + 1  # high // 2 did not fit
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def check_fit(
    spec: ModelSpec,
    settings: TrainingSettings,
    gpu_memory_gib: float,
    margin_fraction: float = 0.05,
    curve: PeakCurve | None = None,
) -> FitResult:
    """Verdict, headroom, largest micro-batch and fewest GPUs on one GPU capacity.
    Pass the same `curve` for many capacities to share the estimates."""
    curve = curve or PeakCurve(spec, settings)
    peak = curve.peak_gib()
    return FitResult(
        gpu_memory_gib=gpu_memory_gib,
        peak_gib=peak,
        headroom_gib=gpu_memory_gib - peak,
        headroom_fraction=(gpu_memory_gib - peak) / gpu_memory_gib,
        verdict=verdict(peak, gpu_memory_gib, margin_fraction),
        max_micro_batch=max_micro_batch(spec, settings, gpu_memory_gib, curve),
        min_gpus=min_gpus(spec, settings, gpu_memory_gib, curve),
    )


def _candidate_changes(
    spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, more_gpus: bool = True
) -> list[tuple[str, dict]]:
    """Single changes that lower memory, each described as a user would do it, leaving out those
    the engine does not model for this model and stack (fp8 with op-selective checkpointing or
    with adapters, a tensor-parallel degree that does not divide the heads: check_supported).
    With `more_gpus` False a ZeRO stage stays on the current GPUs and no change adds GPUs (a search
    that combines changes finds the GPU count per combination: calculators.plan.changes)."""
    return [
        (description, update)
        for description, update in _possible_changes(spec, settings, gpu_memory_gib, more_gpus)
        if _supported(spec, settings, update)
    ]


def _supported(spec: ModelSpec, settings: TrainingSettings, update: dict) -> bool:
    """Whether the settings with `update` are valid settings (TrainingSettings' own checks:
    model_copy skips them) that the engine models for this model."""
    return supported_settings(spec, settings.model_dump() | update) is not None


def supported_settings(spec: ModelSpec, fields: dict) -> TrainingSettings | None:
    """The settings made from `fields` when they are valid settings (TrainingSettings' own checks)
    that the engine models for this model; None otherwise. A search over changes dumps the current
    settings once and adds each change to the dump."""
    try:
        settings = TrainingSettings.model_validate(fields)
        check_supported(spec, settings)
    except ValueError:  # pydantic's ValidationError is a ValueError
        return None
    return settings


def _possible_changes(
    spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, more_gpus: bool = True
) -> list[tuple[str, dict]]:
    changes: list[tuple[str, dict]] = []
    if settings.checkpointing != "full":
        changes.append(("Turn on full activation checkpointing", {"checkpointing": "full"}))
    if settings.checkpointing == "none":
        changes.append(("Per-op selective checkpointing (torchtitan 'op')", {"checkpointing": "op-selective"}))
    if settings.attention == "eager":
        changes.append(("Use fused attention (SDPA/flash)", {"attention": "fused"}))
    changes += _stack_changes(spec, settings)
    changes += _optimizer_changes(settings)
    if settings.precision == "fp32":
        changes.append(("Train in BF16 mixed precision with autocast", {"precision": "amp-bf16"}))
    if settings.precision != "bf16":
        changes.append(("Train in pure BF16 (states in BF16)", {"precision": "bf16"}))
    if settings.micro_batch > 1:
        half = settings.micro_batch // 2
        changes.append(
            (
                f"Micro-batch {half} with gradient accumulation x{settings.grad_accum * 2} (same global batch)",
                {"micro_batch": half, "grad_accum": settings.grad_accum * 2},
            )
        )
    if settings.zero > 0 and more_gpus:
        needed = min_gpus(spec, settings, gpu_memory_gib)
        if needed is not None and needed > settings.gpus:
            changes.append(
                (f"Shard ZeRO-{settings.zero} over {needed} GPUs instead of {settings.gpus}", {"gpus": needed})
            )
    for stage in range(settings.zero + 1, 4):
        if more_gpus:
            changes.append(_zero_change(spec, settings, gpu_memory_gib, stage))
        else:
            changes.append((f"ZeRO-{stage} ({FSDP_NAME[stage]}) over the {settings.gpus} GPUs", {"zero": stage}))
    changes += _offload_changes(settings)
    tensor_parallel = _tensor_parallel_change(spec, settings, gpu_memory_gib)
    if tensor_parallel is not None:
        changes.append(tensor_parallel)
    return changes + _method_changes(settings)


def _stack_changes(spec: ModelSpec, settings: TrainingSettings) -> list[tuple[str, dict]]:
    """What the training stack can change: the loss, activation offloading, the step in backward."""
    changes: list[tuple[str, dict]] = []
    if settings.loss == "full" and spec.head == "lm":
        changes.append(("Chunked cross-entropy (torchtune CEWithChunkedOutputLoss)", {"loss": "chunked"}))
        changes.append(("Fused linear cross-entropy (Liger, Cut Cross-Entropy)", {"loss": "fused-linear"}))
    if not settings.activation_offload:
        changes.append(("Offload saved activations to pinned CPU memory", {"activation_offload": True}))
    stepped_on_gpu = not settings.offload_optimizer and settings.optimizer != "none"
    if not settings.optimizer_in_backward and settings.grad_accum == 1 and stepped_on_gpu:
        changes.append(("Step the optimizer in backward (gradients freed at once)", {"optimizer_in_backward": True}))
    return changes


def _optimizer_changes(settings: TrainingSettings) -> list[tuple[str, dict]]:
    """8-bit AdamW (paged for adapters, as QLoRA trains) and the fused AdamW kernel."""
    changes: list[tuple[str, dict]] = []
    if settings.optimizer in ("adamw", "sgd"):
        if settings.method == "full":
            changes.append(("Use an 8-bit AdamW optimizer (bitsandbytes)", {"optimizer": "adamw-8bit"}))
        else:
            changes.append(("Use paged 8-bit AdamW (bitsandbytes, as QLoRA)", {"optimizer": "paged-adamw-8bit"}))
    if settings.optimizer == "adamw" and settings.optimizer_impl == "foreach":
        changes.append(("Use the fused AdamW implementation (fused=True)", {"optimizer_impl": "fused"}))
    return changes


def _offload_changes(settings: TrainingSettings) -> list[tuple[str, dict]]:
    """CPU offload: ZeRO-Offload for the optimizer (worth it when all weights train),
    ZeRO-Infinity for the parameters (ZeRO-3)."""
    changes: list[tuple[str, dict]] = []
    if not settings.offload_optimizer and settings.method == "full":
        changes.append(("Offload the optimizer states and step to the CPU (ZeRO-Offload)", {"offload_optimizer": True}))
    if settings.zero == 3 and not settings.offload_parameters:
        changes.append(("Offload the parameters to the CPU too (ZeRO-Infinity)", {"offload_parameters": True}))
    return changes


def _method_changes(settings: TrainingSettings) -> list[tuple[str, dict]]:
    """Fine-tune adapters instead of every weight (changes what is trained)."""
    if settings.method == "full":
        return [
            ("Fine-tune LoRA adapters instead of all weights (rank 16, all linears)", {"method": "lora"}),
            ("Fine-tune with QLoRA (4-bit base, rank 16 adapters)", {"method": "qlora"}),
        ]
    if settings.method == "lora":
        return [("Quantise the frozen base to 4-bit NF4 (QLoRA)", {"method": "qlora"})]
    return []


def _tensor_parallel_change(
    spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float
) -> tuple[str, dict] | None:
    """Trade data parallelism for tensor parallelism on the same GPUs: the smallest degree
    of 2, 4 or 8 (within a node) that fits, or the largest one possible."""
    best = None
    for factor in (2, 4, 8):
        tensor_parallel = settings.tensor_parallel * factor
        if settings.gpus % factor or spec.n_heads % tensor_parallel or tensor_parallel > 8:
            continue
        data_parallel = settings.gpus // factor
        best = (
            f"Tensor parallel {tensor_parallel} x data parallel {data_parallel} (same {settings.total_gpus} GPUs)",
            {"tensor_parallel": tensor_parallel, "gpus": data_parallel},
        )
        if peak_gib(spec, settings, **best[1]) <= gpu_memory_gib:
            break
    return best


def _zero_change(spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, stage: int) -> tuple[str, dict]:
    """ZeRO stage `stage` over the current GPUs, or over the fewest GPUs that fit
    (capped at 64) when the current count is not enough."""
    name = f"ZeRO-{stage} ({FSDP_NAME[stage]})"
    sharded = settings.model_copy(update={"zero": stage})
    needed = min_gpus(spec, sharded, gpu_memory_gib)
    if needed is not None and settings.gpus < needed <= 64:
        return f"{name} over {needed} GPUs", {"zero": stage, "gpus": needed}
    if settings.gpus == 1:
        return f"{name} over 8 GPUs", {"zero": stage, "gpus": 8}
    return f"{name} over the {settings.gpus} GPUs", {"zero": stage}


def suggestions(spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float) -> list[Suggestion]:
    """Each single change that lowers the peak, with its new peak: the ones that
    fit first, lowest peak first. When none fits alone, a combination is added."""
    current = peak_gib(spec, settings)
    found = []
    for description, update in _candidate_changes(spec, settings, gpu_memory_gib):
        peak = peak_gib(spec, settings, **update)
        if peak < current - 1e-6:
            found.append(Suggestion(change=description, peak_gib=peak, fits=peak <= gpu_memory_gib))
    found.sort(key=lambda s: (not s.fits, s.peak_gib))
    if current > gpu_memory_gib and not any(s.fits for s in found):
        combined = combined_suggestion(spec, settings, gpu_memory_gib)
        if combined is not None:
            found.insert(0, combined)
    return found


def combined_suggestion(
    spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, max_changes: int = 5
) -> Suggestion | None:
    """Greedy: apply the change that lowers the peak most, again and again, until
    the step fits or nothing helps. Returns the combination when it has 2+ steps.
    Switching to LoRA/QLoRA is left out: it changes what is trained, not how."""
    steps: list[str] = []
    current_settings, current_peak = settings, peak_gib(spec, settings)
    while current_peak > gpu_memory_gib and len(steps) < max_changes:
        options = [
            (peak_gib(spec, current_settings, **update), description, update)
            for description, update in _candidate_changes(spec, current_settings, gpu_memory_gib)
            if "method" not in update
        ]
        if not options:
            break
        best_peak, description, update = min(options, key=lambda option: option[0])
        if best_peak >= current_peak - 1e-6:
            break
        steps.append(description)
        current_settings = current_settings.model_copy(update=update)
        current_peak = best_peak
    if len(steps) < 2:
        return None
    return Suggestion(
        change="Together: " + "; ".join(steps), peak_gib=current_peak, fits=current_peak <= gpu_memory_gib
    )
