"""Peak GPU memory of one training step, phase by phase.

The peak is the maximum over the phases of a step (end of forward, the loss
gradient, the backward through the layers, the optimizer step), not a plain sum
of everything that ever exists. All sizes are bytes on one data-parallel GPU.

Sources:
- ZeRO: Rajbhandari et al. 2019, arXiv 1910.02054 (bytes per parameter, sharding).
- Activations: Korthikanti et al. 2022, arXiv 2205.05198 (Sec. 4, per-layer
  activations), adjusted to what PyTorch/Hugging Face code really saves for backward:
  separate autocast casts per linear, fp32 upcasts in RMSNorm and softmax, dropout
  masks as 1-byte bool tensors, fused (flash/SDPA) attention saving only its output
  and the log-sum-exp (Dao et al. 2022, arXiv 2205.14135).
- Logits and cross-entropy in fp32: b*s*V*4 bytes for the log-probabilities and
  the same again for each of their gradients.
- Fine-tuning: LoRA (Hu et al. 2021, arXiv 2106.09685) and QLoRA (Dettmers et al. 2023,
  arXiv 2305.14314), see calculators/workload/finetune.py; frozen layers save no activations
  (autograd records nothing before the first tensor that requires grad).
- CPU offload: ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) and ZeRO-Infinity
  (Rajbhandari et al. 2021, arXiv 2104.07857), as DeepSpeed implements them.
- Model parallelism: Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv 1909.08053)
  with sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2), and the 1F1B pipeline
  schedule (Narayanan et al. 2021, arXiv 2104.04473, Sec. 2.2).
- Training stacks, read from their source (each function cites its file and revision):
  torchtune's chunked cross-entropy, compiled loss, activation offloading and optimizer in
  backward; Liger-Kernel's RMSNorm, SwiGLU and fused linear cross-entropy; torchtitan's per-op
  selective checkpointing; bitsandbytes' paged optimizers and 4-bit matmul; DeepSpeed's
  whole-model move to the GPU before ZeRO-3 partitions it.
"""

from __future__ import annotations

from typing import NamedTuple

from calculators.memory.assumptions import images_note, memory_assumptions
from calculators.memory.encoder_decoder import encoder_decoder_activation_bytes, t5_attention_settings
from calculators.memory.layout import (
    StageLayout,
    decoder_layer_share,
    pipeline_stages,
    stage_layout,
    trainable_parameter_count,
)
from calculators.memory.mllama import (
    cross_attention_activation_bytes,
    cross_attention_shared_bytes,
    skipped_cross_attention_layers,
)
from calculators.memory.phases import (
    model_state_components,
    optimizer_step_phases,
    quantised_load_bytes,
    stage_phases,
    whole_model_load_bytes,
)
from calculators.memory.result import COMPONENTS, MemoryEstimate, PhaseMemory
from calculators.memory.states import ModelStates, model_state_bytes
from calculators.memory.vision import vision_tower_activation_bytes
from calculators.models.geometry import ParameterCount, parameter_count
from calculators.models.spec import ModelSpec
from calculators.units import GIB
from calculators.workload.support import check_supported
from calculators.workload.training import TrainingSettings, language_model_settings
from calculators.workload.vision import vision_cast_elements


class OutsideLayerBytes(NamedTuple):
    """What one micro-batch keeps beyond the self-attention layers the engine counts."""

    tower: float  # in the image encoder (vision_tower_activation_bytes)
    cross: float  # in Llama 3.2 Vision's cross-attention layers (cross_attention_activation_bytes)
    cross_shared: float  # of which the tensors they all share (cross_attention_shared_bytes)
    decoder: float  # in an encoder-decoder's decoder blocks (encoder_decoder_activation_bytes)

    def on_stage(self, spec: ModelSpec, settings: TrainingSettings, layout: StageLayout) -> tuple[float, float]:
        """(image encoder, layers) bytes on one stage: the encoder runs on the embedding's stage; the
        cross-attention layers spread with the layers, and every stage with one holds the tensors they
        share whole; the decoder blocks (and what they read) sit on the stages of the decoder layers."""
        tower = self.tower if layout.has_embedding else 0.0
        layers = (
            self.cross_shared
            + (self.cross - self.cross_shared) * layout.layers / spec.n_layers
            + self.decoder * decoder_layer_share(spec, settings, layout.stage)
        )
        return tower, layers


def outside_layer_bytes(
    spec: ModelSpec, settings: TrainingSettings, attention_settings: TrainingSettings
) -> OutsideLayerBytes:
    """OutsideLayerBytes: the image encoder's from the settings as given (images per sample), the
    rest from `attention_settings`, with the attention the model runs (t5_attention_settings)."""
    return OutsideLayerBytes(
        tower=vision_tower_activation_bytes(spec, settings),
        cross=cross_attention_activation_bytes(spec, attention_settings),
        cross_shared=cross_attention_shared_bytes(spec, attention_settings),
        decoder=encoder_decoder_activation_bytes(spec, attention_settings),
    )


def stage_layouts(
    spec: ModelSpec, params: ParameterCount, settings: TrainingSettings, lm_settings: TrainingSettings
) -> list[StageLayout]:
    """The layout of each pipeline stage that can hold the peak, under the language model's
    settings; the image encoder's weight casts and the layers a step without images skips come
    from the settings as given, before the images became tokens."""
    vision_cast = vision_cast_elements(spec, settings)
    layouts = [stage_layout(spec, params, lm_settings, stage) for stage in pipeline_stages(lm_settings)]
    return [
        layout._replace(
            # the image encoder runs on the embedding's stage
            vision_cast_elements=vision_cast if layout.has_embedding else layout.vision_cast_elements,
            skipped_layers=skipped_cross_attention_layers(spec, settings, layout),
        )
        for layout in layouts
    ]


class StepStates(NamedTuple):
    """What step_memory works out before any activation: the settings as the language model sees
    them, each pipeline stage's layout and its model states. Enough for peak_floor_gib; step_memory
    goes on from it (one code path for both)."""

    lm_settings: TrainingSettings  # the settings as the language model sees them
    image_note: list[str]  # the assumption lines on a vision-language model's images
    outside: OutsideLayerBytes
    params: ParameterCount
    grads_persist: bool
    layouts: list[StageLayout]
    states: list[ModelStates]  # each layout's weights, master copies, gradients and optimizer states


def step_states(spec: ModelSpec, settings: TrainingSettings) -> StepStates:
    """Steps 1-3 of step_memory and each stage's model states (memory.states.model_state_bytes)."""
    check_supported(spec, settings)
    image_note = images_note(spec, settings)  # before the rest: its refusal names the images
    # T5 runs eager attention whatever the setting says; the language model then sees each
    # sample's images as tokens of its sequence
    attention_settings = t5_attention_settings(spec, settings)
    outside = outside_layer_bytes(spec, settings, attention_settings)
    lm_settings = language_model_settings(spec, attention_settings)
    params = parameter_count(spec)
    grads_persist = lm_settings.grad_accum > 1 or not lm_settings.grads_freed_after_step
    layouts = stage_layouts(spec, params, settings, lm_settings)
    states = [model_state_bytes(lm_settings, layout) for layout in layouts]
    return StepStates(lm_settings, image_note, outside, params, grads_persist, layouts, states)


class StepPhases(NamedTuple):
    """The phases of every stage, and what the engine reports beside them."""

    phases: list[PhaseMemory]
    stage_of_phase: dict[str, str]
    terms: dict[str, float]  # one layer's activation terms
    host_bytes: float  # the most host memory a stage takes (offload)
    outside_bytes: float  # the most memory outside torch's allocator a stage takes (paged states)


def step_phases(spec: ModelSpec, before: StepStates) -> StepPhases:
    """The phases of each stage of `before`, under the language model's settings."""
    settings = before.lm_settings
    phases: list[PhaseMemory] = []
    stage_of_phase: dict[str, str] = {}
    terms: dict[str, float] = {}
    host_bytes = 0.0
    for layout, states in zip(before.layouts, before.states, strict=True):
        tower_bytes, cross_bytes = before.outside.on_stage(spec, settings, layout)
        stage_phase_list, terms, offloaded_bytes = stage_phases(
            spec, settings, layout, states, before.grads_persist, tower_bytes, cross_bytes
        )
        phases += stage_phase_list
        stage_of_phase |= {phase.name: layout.stage for phase in stage_phase_list}
        host_bytes = max(host_bytes, states.host + offloaded_bytes)
    return StepPhases(phases, stage_of_phase, terms, host_bytes, outside_allocator_bytes(before.states))


def outside_allocator_bytes(states: list[ModelStates]) -> float:
    """The most memory outside torch's allocator a stage takes (paged optimizer states)."""
    outside_bytes = 0.0
    for stage_states in states:
        outside_bytes = max(outside_bytes, stage_states.outside_allocator)
    return outside_bytes


def framework_overhead_bytes(settings: TrainingSettings) -> float:
    """The CUDA context, cuBLAS workspace and, with more than one GPU, NCCL buffers."""
    o = settings.overheads
    return (o.cuda_context_gib + o.cublas_workspace_gib + (o.nccl_gib if settings.total_gpus > 1 else 0.0)) * GIB


def device_view(phase: PhaseMemory, settings: TrainingSettings, overhead_bytes: float) -> dict[str, float]:
    """A phase's components in GiB as the device sees them, reserve and context included;
    `overhead_bytes`: framework_overhead_bytes(settings), worked out once for every phase."""
    view = {name: phase.components.get(name, 0.0) / GIB for name in COMPONENTS}
    view["allocator_reserve"] = phase.total * settings.overheads.allocator_reserve_fraction / GIB
    view["framework_overhead"] = overhead_bytes / GIB
    return view


class StepMemory(NamedTuple):
    """One step's numbers before they are reported: what the search over changes reads
    (calculators.plan.changes: the peak, each phase's total, the host memory), and what
    estimate_memory's report is built from. One code path for the numbers; the report's per-phase
    views and assumption lines are left to estimate_memory, which the search does not need."""

    lm_settings: TrainingSettings  # the settings as the language model sees them
    image_note: list[str]  # the assumption lines on a vision-language model's images
    params: ParameterCount
    grads_persist: bool
    step: StepPhases  # every stage's phases, loading first when it holds more than the step
    load_bytes: float
    peak: PhaseMemory
    reserve_bytes: float  # the caching allocator's reserve above the peak's allocated bytes
    peak_gib: float
    phases_gib: dict[str, float]

    @property
    def host_memory_gib(self) -> float:
        return self.step.host_bytes / GIB

    @property
    def reserved_gib(self) -> float:
        """What the caching allocator holds at the peak: the peak phase's bytes and the reserve."""
        return (self.peak.total + self.reserve_bytes) / GIB


def step_memory(spec: ModelSpec, settings: TrainingSettings, before: StepStates | None = None) -> StepMemory:
    """The phases and the peak of one training step on each GPU; with pipeline parallelism, on
    the most loaded of the first and the last stage. `before`: step_states(spec, settings), when
    the caller has it already (the search over changes reads its peak_floor_gib first)."""
    before = step_states(spec, settings) if before is None else before
    lm_settings, params, layouts = before.lm_settings, before.params, before.layouts
    step = step_phases(spec, before)
    load_bytes = max(
        whole_model_load_bytes(spec, params, lm_settings), quantised_load_bytes(spec, lm_settings, layouts[0])
    )
    if load_bytes:
        step.phases.insert(0, PhaseMemory(name="loading", components={"weights": load_bytes}))
        step.stage_of_phase["loading"] = layouts[0].stage
    totals = [phase.total for phase in step.phases]  # each summed once
    allocated = max(totals)
    peak = step.phases[totals.index(allocated)]  # the first phase at the peak
    return StepMemory(
        lm_settings=lm_settings,
        image_note=before.image_note,
        params=params,
        grads_persist=before.grads_persist,
        step=step,
        load_bytes=load_bytes,
        peak=peak,
        reserve_bytes=allocator_reserve_bytes(allocated, lm_settings),
        peak_gib=device_peak_gib(allocated, lm_settings, step.outside_bytes),
        phases_gib={phase.name: total / GIB for phase, total in zip(step.phases, totals, strict=True)},
    )


def allocator_reserve_bytes(allocated_bytes: float, settings: TrainingSettings) -> float:
    """What PyTorch's caching allocator reserves above the bytes allocated: a fraction of them
    (Overheads.allocator_reserve_fraction)."""
    return allocated_bytes * settings.overheads.allocator_reserve_fraction


def device_peak_gib(allocated_bytes: float, settings: TrainingSettings, outside_bytes: float) -> float:
    """What the device holds when torch has `allocated_bytes` allocated: those, the allocator's
    reserve, the framework overhead and `outside_bytes` outside the allocator; in GiB. It never
    falls when `allocated_bytes` grows (every term grows with it or stays)."""
    reserve = allocator_reserve_bytes(allocated_bytes, settings)
    return (allocated_bytes + reserve + framework_overhead_bytes(settings) + outside_bytes) / GIB


def peak_floor_gib(before: StepStates) -> float:
    """A lower bound of step_memory's peak_gib from the model states alone, without the
    activations (about two thirds of an estimate's work): what the search over changes reads to
    leave out a combination that cannot fit.

    Proof. Each stage's phases (phases.stage_phases) all start from base =
    model_state_components(states, grads_persist). Its "end of forward" phase
    (phases.forward_phases) is `base | {"activations": a, "logits_and_loss": l}`, whose keys base
    has not: its total sums base's values first, in the order sum(base.values()) sums them here,
    then adds a >= 0 and l >= 0 (byte counts of tensors alive). Adding a number >= 0 never lowers a
    float sum (rounding to nearest is monotone), so that total is at least sum(base.values()), to
    the bit. Its optimizer step (phases.optimizer_step_phases) needs no activation: the same
    PhaseMemory, so the same total. stage_phases keeps both phases of every stage, so step_memory's
    `allocated`, the largest total of every phase, is at least the `allocated` here. device_peak_gib
    never falls as its allocated bytes grow, and the outside bytes are step_phases' own
    (outside_allocator_bytes of the same states). So peak_floor_gib(step_states(spec, s)) <=
    step_memory(spec, s).peak_gib for all settings s (tests/test_peak_floor.py checks it
    over a grid)."""
    settings = before.lm_settings
    allocated = max(states_floor_bytes(settings, states, before.grads_persist) for states in before.states)
    return device_peak_gib(allocated, settings, outside_allocator_bytes(before.states))


def states_floor_bytes(settings: TrainingSettings, states: ModelStates, grads_persist: bool) -> float:
    """The most a stage's phases allocate as far as the model states alone tell (peak_floor_gib):
    the model states every phase holds, and the optimizer step's phase."""
    base = model_state_components(states, grads_persist)
    totals = [sum(base.values())] + [phase.total for phase in optimizer_step_phases(settings, base, states)]
    return max(totals)


def estimate_memory(spec: ModelSpec, settings: TrainingSettings) -> MemoryEstimate:
    """Peak memory of one training step on each GPU, phase by phase (step_memory), with each
    phase's components as the device sees them and the assumptions behind the numbers."""
    memory = step_memory(spec, settings)
    lm_settings, step, peak = memory.lm_settings, memory.step, memory.peak
    allocated = peak.total
    overhead_bytes = framework_overhead_bytes(lm_settings)
    return MemoryEstimate(
        peak_gib=memory.peak_gib,
        allocated_gib=allocated / GIB,
        reserved_gib=memory.reserved_gib,
        peak_phase=peak.name,
        components_gib=device_view(peak, lm_settings, overhead_bytes),
        phases_gib=memory.phases_gib,
        phase_components_gib={phase.name: device_view(phase, lm_settings, overhead_bytes) for phase in step.phases},
        activations_per_layer_gib={k: v / GIB for k, v in step.terms.items()},
        parameters=memory.params.total,
        trainable_parameters=trainable_parameter_count(spec, memory.params, lm_settings),
        tokens_per_micro_batch=lm_settings.tokens,
        assumptions=memory.image_note + memory_assumptions(spec, lm_settings, memory.grads_persist),
        host_memory_gib=memory.host_memory_gib,
        load_peak_gib=memory.load_bytes / GIB,
        outside_allocator_gib=step.outside_bytes / GIB,
        pipeline_stage=step.stage_of_phase[peak.name],
    )
