"""What to change when a training step does not fit: combinations of up to three changes, ranked
by what each costs the user.

The building blocks are calculators.memory.fit's single changes (`_candidate_changes`: each one
the engine models for this model and stack), plus smaller micro-batches with more accumulation
(the global batch kept). A ZeRO stage is taken over the current GPUs; more GPUs is the last step
of a combination that shards, at the fewest GPUs (up to MAX_GPUS_OFFERED) that fit.

The search, bounded so the Memory page can run it on every change of a widget:

1. each block's estimate (calculators.memory.engine.estimate_memory);
2. every pair of blocks that set different settings and that the settings and the engine accept;
3. every triple whose three pairs were tried, none fits and none is redundant (one change of the
   pair lowers no phase of the step below the other change alone: e.g. the fused AdamW kernel once
   an 8-bit optimizer replaced AdamW); a triple is only read if it fits, so one whose peak's floor
   from the model states alone is over the capacity (engine.peak_floor_gib) is not estimated further;
4. more GPUs for the current settings, each single change and each pair with a ZeRO stage that
   do not fit (fewer GPUs than any of its parts needs; a micro-batch smaller than one that fits with
   the same other changes is not tried), the fewest found from a guess checked on both sides.

Only minimal combinations are kept: one that contains a combination that already fits is left out,
so a single change that suffices is offered alone. What each costs is then read from the time model
(calculators.timing.estimate.estimate_time) on the chosen GPU, and from the memory result:

- `slowdown`: step time per token over the current step's (wall clock);
- `gpu_hours_factor`: GPU-seconds per token over the current (the slowdown times the GPU ratio: what
  a rented run pays);
- `host_memory_gib`: host RAM per GPU for what is offloaded (MemoryEstimate.host_memory_gib);
- `extra_gpus`, and whether the method changes (LoRA/QLoRA train adapters, not every weight).

Ranking (`rank_key`): every weight trained on the current GPUs first, then every weight on more
GPUs, then a change of method (LoRA/QLoRA change what is trained, so they come after whatever trains
the model asked for, whatever their speed); within each, the lowest GPU-hours per token, then the
least host RAM, then the fewest changes.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from calculators.hardware.catalogue import GpuSpec
from calculators.memory.engine import StepMemory, peak_floor_gib, step_memory, step_states
from calculators.memory.fit import _candidate_changes, largest_passing, supported_settings
from calculators.models.spec import ModelSpec
from calculators.timing.estimate import estimate_time
from calculators.timing.settings import TimeSettings
from calculators.workload.compatibility import training_stack_problem
from calculators.workload.training import TrainingSettings

MAX_CHANGES = 3
MAX_GPUS_OFFERED = 64  # data-parallel GPUs: 8 nodes of 8, as fit.py's ZeRO suggestion caps them
# Differences in GPU-hours under 1% are within what the time model can tell apart: fewer changes win.
RANK_DECIMALS = 2
# The ranking's dataset size is any: slowdowns are ratios of time per token.
RANKING_TIME_SETTINGS = TimeSettings(dataset_tokens=1e9)
_EPS_GIB = 1e-6

Block = tuple[str, dict[str, Any]]


class RankedChange(BaseModel):
    """One combination of changes that fits, with what it costs."""

    change: str = Field(description="the changes, short, joined by ' + '")
    steps: list[str] = Field(description="each change as a sentence")
    update: dict[str, Any] = Field(description="the settings it changes")
    peak_gib: float
    host_memory_gib: float = Field(description="host RAM per GPU for offloaded states and activations")
    gpus: int = Field(description="all GPUs of the new setup")
    extra_gpus: int
    slowdown: float | None = Field(description="step time per token / the current one; None without a time model")
    gpu_hours_factor: float | None = Field(description="GPU-seconds per token / the current ones")
    changes_method: bool = Field(description="True when it switches to LoRA/QLoRA: what is trained changes")

    def sentence(self) -> str:
        """'full checkpointing + optimizer offload: fits at 15.8 GiB, ~1.33x slower, needs 113 GiB host RAM'."""
        parts = [f"{self.change}: fits at {self.peak_gib:.1f} GiB"]
        if self.slowdown is not None:
            parts.append(slowdown_text(self.slowdown))
        if self.host_memory_gib > 0:
            parts.append(f"needs {self.host_memory_gib:.0f} GiB host RAM per GPU")
        if self.extra_gpus:
            parts.append(f"{self.gpus} GPUs ({self.extra_gpus} more)")
        if self.changes_method:
            parts.append("changes what is trained")
        return ", ".join(parts)


def slowdown_text(slowdown: float) -> str:
    """'~1.33x slower', 'about as fast' or '~2.5x faster' (wall clock per token)."""
    if slowdown >= 1.005:
        return f"~{slowdown:.2f}x slower"
    if slowdown > 1 / 1.005:
        return "about as fast"
    return f"~{1 / slowdown:.2f}x faster"


def rank_key(option: RankedChange) -> tuple:
    """Every weight on the current GPUs, then on more GPUs, then LoRA/QLoRA; cheapest GPU-hours first."""
    cost = math.inf if option.gpu_hours_factor is None else round(option.gpu_hours_factor, RANK_DECIMALS)
    tier = (option.changes_method, option.extra_gpus > 0)
    return (tier, cost, round(option.host_memory_gib), len(option.steps), option.peak_gib)


# --- labels -----------------------------------------------------------------------------------

_LABELS: dict[tuple[str, Any], str] = {
    ("checkpointing", "full"): "full checkpointing",
    ("checkpointing", "selective"): "selective checkpointing",
    ("checkpointing", "op-selective"): "per-op selective checkpointing",
    ("attention", "fused"): "fused attention",
    ("loss", "chunked"): "chunked cross-entropy",
    ("loss", "fused-linear"): "fused linear cross-entropy",
    ("activation_offload", True): "activation offload",
    ("optimizer_in_backward", True): "optimizer step in backward",
    ("optimizer", "adamw-8bit"): "8-bit AdamW",
    ("optimizer", "paged-adamw-8bit"): "paged 8-bit AdamW",
    ("optimizer_impl", "fused"): "fused AdamW",
    ("precision", "amp-bf16"): "BF16 autocast",
    ("precision", "bf16"): "pure BF16",
    ("offload_optimizer", True): "optimizer offload",
    ("offload_parameters", True): "parameter offload",
    ("method", "lora"): "LoRA",
    ("method", "qlora"): "QLoRA",
}


def short_label(update: dict[str, Any], fallback: str) -> str:
    """A few words for one block, e.g. 'full checkpointing', 'ZeRO-3', 'micro-batch 2 x accumulation 4'."""
    if "offload_parameters" in update and "zero" in update:
        return f"ZeRO-{update['zero']} with parameter offload"
    if "zero" in update:
        return f"ZeRO-{update['zero']}"
    if "micro_batch" in update:
        return f"micro-batch {update['micro_batch']} x accumulation {update['grad_accum']}"
    if "tensor_parallel" in update:
        return f"tensor parallel {update['tensor_parallel']} x data parallel {update['gpus']}"
    if len(update) == 1:
        return _LABELS.get(next(iter(update.items())), fallback)
    return fallback


# --- the building blocks ------------------------------------------------------------------------


def building_blocks(spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float) -> list[Block]:
    """fit.py's single changes, with a ZeRO stage over the current GPUs (more GPUs are found per
    combination) and every smaller power-of-two micro-batch that keeps the global batch."""
    blocks: list[Block] = []
    for description, update in _candidate_changes(spec, settings, gpu_memory_gib, more_gpus=False):
        if "micro_batch" in update:  # fit.py halves it once; every smaller one is below
            continue
        if update == {"precision": "bf16"}:
            # Pure BF16 drops the fp32 master weights, so updates below bf16's resolution are lost
            # (Zamirai et al. 2020, "Revisiting BFloat16 Training", arXiv 2010.06192, Sec. 1): it changes
            # what the run computes, and stays a single suggestion (fit.suggestions), not a combination's.
            continue
        blocks.append((description, update))
    if settings.zero < 3 and not settings.offload_parameters:
        blocks.append(
            (
                "Shard with ZeRO-3 and offload the parameters to the CPU (ZeRO-Infinity)",
                {"zero": 3, "offload_parameters": True},
            )
        )
    return blocks + _micro_batch_blocks(settings)


def _micro_batch_blocks(settings: TrainingSettings) -> list[Block]:
    """Halve the micro-batch and double the accumulation, again while the micro-batch divides:
    the global batch (micro-batch x accumulation x data-parallel GPUs) stays the same."""
    blocks: list[Block] = []
    micro_batch, grad_accum = settings.micro_batch, settings.grad_accum
    while micro_batch > 1 and micro_batch % 2 == 0:
        micro_batch, grad_accum = micro_batch // 2, grad_accum * 2
        blocks.append(
            (
                f"Micro-batch {micro_batch} with gradient accumulation x{grad_accum} (same global batch)",
                {"micro_batch": micro_batch, "grad_accum": grad_accum},
            )
        )
    return blocks


# --- the search ---------------------------------------------------------------------------------


class _Combination(NamedTuple):
    indices: tuple[int, ...]
    update: dict[str, Any]
    estimate: StepMemory  # the engine's numbers without its report (engine.step_memory)
    extra_gpus_to: int | None = None  # the data-parallel GPUs of the more-GPUs step, if any


class ChangeSearch:
    """The bounded search over combinations of building blocks for one workload and GPU capacity."""

    def __init__(self, spec: ModelSpec, settings: TrainingSettings, gpu_memory_gib: float, gpu: GpuSpec | None):
        self.spec, self.settings, self.capacity_gib, self.gpu = spec, settings, gpu_memory_gib, gpu
        self.blocks = building_blocks(spec, settings, gpu_memory_gib)
        micro_batches = [i for i, (_, update) in enumerate(self.blocks) if "micro_batch" in update]
        self._larger_micro_batch = dict(zip(micro_batches[1:], micro_batches, strict=False))
        self._fields = settings.model_dump()  # what each change is added to for fit's checks
        self.estimates = 0  # memory estimates made, for the bench and the tests of the bound
        self.ruled_out = 0  # settings left out by their peak's floor (engine.peak_floor_gib) before the estimate
        # each distinct settings' estimate: the bisection over GPU counts starts at the current count
        # (the combination itself, estimated already) and reaches the count it keeps twice
        self._estimated: dict[tuple, StepMemory] = {}
        self.base = self._estimate({}, settings)
        self._tried: dict[tuple[int, ...], _Combination | None] = {}

    def _estimate(
        self, update: dict[str, Any], settings: TrainingSettings | None = None, only_if_fits: bool = False
    ) -> StepMemory | None:
        """The engine's numbers for the current settings with `update` (`settings`, when the caller
        made them already). Keyed by what the update changes (blocks' values are strings, numbers and
        booleans): a value the current settings already hold, of the same type, changes nothing, so the
        settings and their estimate are the same. With `only_if_fits` (the caller reads the estimate
        only when it fits), None when the peak's floor from the model states alone
        (engine.peak_floor_gib) is over the capacity: then the peak is too, and the activations,
        most of an estimate's work, are not worked out."""
        key = tuple(sorted((name, value) for name, value in update.items() if not self._holds(name, value)))
        if key not in self._estimated:
            settings = self.settings.model_copy(update=update) if settings is None else settings
            before = step_states(self.spec, settings)
            if only_if_fits and peak_floor_gib(before) > self.capacity_gib:
                self.ruled_out += 1
                return None
            self.estimates += 1
            self._estimated[key] = step_memory(self.spec, settings, before)
        return self._estimated[key]

    def _holds(self, name: str, value: Any) -> bool:
        """Whether the current settings already have `value` (of the same type) for `name`."""
        current = self._fields.get(name)
        return type(current) is type(value) and current == value

    def _accepted(self, update: dict[str, Any]) -> TrainingSettings | None:
        """The current settings with `update` when the settings and the engine take them
        (fit.supported_settings) and the GPU's stack runs them; None otherwise."""
        settings = supported_settings(self.spec, self._fields | update)
        if settings is None or (self.gpu is not None and training_stack_problem(self.gpu, settings) is not None):
            return None
        return settings

    def _try(self, indices: tuple[int, ...], only_if_fits: bool = False) -> _Combination | None:
        """The combination of the blocks at `indices`, estimated; None when two of them change the
        same setting, when it is needlessly small, when the settings, the engine or the GPU's stack
        refuse it, and (`only_if_fits`: a triple, read only when it fits) when its peak's floor
        shows it cannot fit."""
        if indices not in self._tried:
            update: dict[str, Any] = {}
            for index in indices:
                if set(update) & set(self.blocks[index][1]):
                    self._tried[indices] = None  # two changes of the same setting
                    return None
                update |= self.blocks[index][1]
            combination = None
            settings = None if self._needlessly_small(indices) else self._accepted(update)
            if settings is not None:
                try:
                    estimate = self._estimate(update, settings, only_if_fits)
                except ValueError:  # a combination the engine refuses that check_supported let through
                    estimate = None
                combination = None if estimate is None else _Combination(indices, update, estimate)
            self._tried[indices] = combination
        return self._tried[indices]

    def _needlessly_small(self, indices: tuple[int, ...]) -> bool:
        """A micro-batch smaller than one that already fits with the same other changes: more
        accumulation steps of less work each, for memory not needed (the next larger micro-batch
        comes first in the blocks, so its combination was tried before)."""
        for position, index in enumerate(indices):
            larger = self._larger_micro_batch.get(index)
            if larger is not None and larger not in indices:
                with_larger = tuple(sorted((*indices[:position], larger, *indices[position + 1 :])))
                if self.fits(self._tried.get(with_larger)):
                    return True
        return False

    def fits(self, combination: _Combination | None) -> bool:
        return combination is not None and combination.estimate.peak_gib <= self.capacity_gib

    def _redundant(self, pair: _Combination) -> bool:
        """One change of the pair lowers no phase below what the other change alone leaves."""
        for index in pair.indices:
            other = self._tried.get((index,))
            if other is None:
                return True
            phases, alone = pair.estimate.phases_gib, other.estimate.phases_gib
            if not any(phases[name] < gib - _EPS_GIB for name, gib in alone.items() if name in phases):
                return True
        return False

    def search(self) -> list[_Combination]:
        """The minimal combinations that fit, more GPUs included."""
        singles = [self._try((i,)) for i in range(len(self.blocks))]
        fitting = [c for c in singles if self.fits(c)]
        open_sets = [c for c in singles if c is not None and not self.fits(c)]
        pairs = []
        for a, b in combinations([c.indices[0] for c in open_sets], 2):
            pair = self._try((a, b))
            if pair is not None and not self._redundant(pair):
                (fitting if self.fits(pair) else pairs).append(pair)
        fitting += self._triples(pairs)
        fitting += self._more_gpus([None, *open_sets, *pairs], fitting)
        return fitting

    def _triples(self, open_pairs: list[_Combination]) -> list[_Combination]:
        """Triples whose three pairs are all open (tried, not fitting, not redundant)."""
        open_keys = {pair.indices for pair in open_pairs}
        fitting = []
        for pair in open_pairs:
            a, b = pair.indices
            for c in range(b + 1, len(self.blocks)):
                if (a, c) in open_keys and (b, c) in open_keys:
                    triple = self._try((a, b, c), only_if_fits=True)  # a triple that does not fit is not read
                    if self.fits(triple):
                        fitting.append(triple)
        return fitting

    def _more_gpus(self, open_sets: list[_Combination | None], fitting: list[_Combination]) -> list[_Combination]:
        """The fewest data-parallel GPUs (up to MAX_GPUS_OFFERED) at which a sharding combination fits:
        the current settings, each single change, and each pair with a ZeRO stage (the stage is what
        makes more GPUs help). A combination is only kept on fewer GPUs than any of its parts needs."""
        found: list[_Combination] = []
        fitting_sets = [set(c.indices) for c in fitting]
        for combination in open_sets:
            indices = () if combination is None else combination.indices
            update = {} if combination is None else combination.update
            if "gpus" in update or max(self.settings.zero, update.get("zero", 0)) == 0:
                continue
            if len(indices) > 1 and "zero" not in update or any(other <= set(indices) for other in fitting_sets):
                continue
            parts_need = [c.extra_gpus_to for c in found if set(c.indices) < set(indices)]
            gpus = self._fewest_gpus(update, min(parts_need, default=MAX_GPUS_OFFERED + 1) - 1)
            if gpus is None:
                continue
            more_gpus = update | {"gpus": gpus}
            found.append(_Combination(indices, more_gpus, self._estimate(more_gpus), extra_gpus_to=gpus))
        return found

    def _fewest_gpus(self, update: dict[str, Any], most_gpus: int) -> int | None:
        """Fewest data-parallel GPUs above the current count, up to `most_gpus`, that fit; None when
        even `most_gpus` do not. Memory falls as ZeRO shards over more GPUs (from two on the peak never
        rises with them: tests/test_engine_properties.py), so the fewest is where the peak crosses the
        capacity: first guessed (crossing_gpus) and checked with its neighbour, then by bisection in what
        is left. A count whose peak's floor is over the capacity is not estimated further."""
        current = self.settings.gpus
        if most_gpus <= current:
            return None
        if self._accepted(update | {"gpus": most_gpus}) is None:
            return None
        fitting: dict[int, bool] = {}  # whether each count tried fits
        peaks: dict[int, float] = {}  # the peaks estimated (not left out by their floor), by count

        def fits(gpus: int) -> bool:
            if gpus not in fitting:
                estimate = self._estimate(update | {"gpus": gpus}, only_if_fits=True)
                if estimate is not None:
                    peaks[gpus] = estimate.peak_gib
                fitting[gpus] = estimate is not None and estimate.peak_gib <= self.capacity_gib
            return fitting[gpus]

        if not fits(most_gpus):
            return None
        if fits(current):
            return current + 1
        short, enough = current, most_gpus  # the most GPUs known short of memory, the fewest known to fit
        guess = crossing_gpus(peaks, short, enough, self.capacity_gib)
        if guess is not None:
            if fits(guess):
                enough = guess
                if guess - 1 == short or not fits(guess - 1):
                    return guess
                enough = guess - 1
            else:
                short = guess
                if guess + 1 == enough or fits(guess + 1):
                    return guess + 1
                short = guess + 1
        last_short = largest_passing(short, enough - 1, lambda gpus: not fits(gpus))
        return enough if last_short is None else last_short + 1  # `short` is short: never None

    def label(self, combination: _Combination) -> tuple[str, list[str]]:
        steps = [self.blocks[i][0] for i in combination.indices]
        words = [short_label(self.blocks[i][1], self.blocks[i][0]) for i in combination.indices]
        if combination.extra_gpus_to is not None:
            gpus = combination.extra_gpus_to
            steps.append(f"Shard over {gpus} data-parallel GPUs instead of {self.settings.gpus}")
            stage = f"ZeRO-{combination.update.get('zero', self.settings.zero)}"
            sharding = [i for i, word in enumerate(words) if stage in word]
            if sharding:  # 'ZeRO-3 over 13 GPUs', 'ZeRO-3 over 6 GPUs with parameter offload'
                words[sharding[0]] = words[sharding[0]].replace(stage, f"{stage} over {gpus} GPUs", 1)
            else:
                words.append(f"{stage} over {gpus} GPUs")
        return " + ".join(words), steps


def crossing_gpus(peaks_gib: dict[int, float], short: int, enough: int, capacity_gib: float) -> int | None:
    """Where the line through the peaks at `short` and `enough` GPUs, on 1/GPUs (ZeRO divides the
    sharded states by the GPUs), reaches the capacity: the first count at or above it, strictly
    between the two; None without both peaks or a count between them."""
    if short not in peaks_gib or enough not in peaks_gib or enough - short < 2:
        return None
    slope = (peaks_gib[short] - peaks_gib[enough]) / (1 / short - 1 / enough)  # GiB per 1/GPU
    if slope <= 0:
        return None
    gpus = slope / (capacity_gib - peaks_gib[enough] + slope / enough)
    return min(max(math.ceil(gpus), short + 1), enough - 1)


# --- the ranking --------------------------------------------------------------------------------


def _seconds_per_token(
    spec: ModelSpec, settings: TrainingSettings, gpu: GpuSpec | None, time_settings: TimeSettings
) -> float | None:
    """Wall-clock seconds per token of one step, or None when the time model has no rate for it."""
    if gpu is None:
        return None
    try:
        estimate = estimate_time(spec, settings, gpu, time_settings)
    except ValueError:
        return None
    return estimate.step_s / estimate.tokens_per_step


def ranked_changes(
    spec: ModelSpec,
    settings: TrainingSettings,
    gpu_memory_gib: float,
    gpu: GpuSpec | None = None,
    time_settings: TimeSettings | None = None,
) -> list[RankedChange]:
    """Every minimal combination of up to three changes that fits, ranked by rank_key. Empty when the
    current settings fit. Without `gpu` (or a rate for it) the slowdowns are None."""
    if step_memory(spec, settings).peak_gib <= gpu_memory_gib:
        return []
    time_settings = time_settings or RANKING_TIME_SETTINGS
    search = ChangeSearch(spec, settings, gpu_memory_gib, gpu)
    current_s = _seconds_per_token(spec, settings, gpu, time_settings)
    options = []
    for combination in search.search():
        new_settings = settings.model_copy(update=combination.update)
        change, steps = search.label(combination)
        new_s = _seconds_per_token(spec, new_settings, gpu, time_settings) if current_s else None
        slowdown = None if new_s is None else new_s / current_s
        gpu_ratio = new_settings.total_gpus / settings.total_gpus
        options.append(
            RankedChange(
                change=change,
                steps=steps,
                update=combination.update,
                peak_gib=combination.estimate.peak_gib,
                host_memory_gib=combination.estimate.host_memory_gib,
                gpus=new_settings.total_gpus,
                extra_gpus=max(0, new_settings.total_gpus - settings.total_gpus),
                slowdown=slowdown,
                gpu_hours_factor=None if slowdown is None else slowdown * gpu_ratio,
                changes_method=new_settings.method != settings.method,
            )
        )
    return sorted(options, key=rank_key)


def best_few(options: list[RankedChange], first_tier: int = 3, other_tiers: int = 1) -> list[RankedChange]:
    """The few to show: up to `first_tier` of the best tier present, then the best `other_tiers` of each
    later tier (more GPUs; LoRA/QLoRA), so a change of method or of hardware is offered too."""
    shown: list[RankedChange] = []
    counts: dict[tuple, int] = {}
    for option in options:  # already ranked: the first option's tier is the best present
        tier = rank_key(option)[0]
        limit = first_tier if tier == rank_key(options[0])[0] else other_tiers
        if counts.get(tier, 0) < limit:
            counts[tier] = counts.get(tier, 0) + 1
            shown.append(option)
    return shown
